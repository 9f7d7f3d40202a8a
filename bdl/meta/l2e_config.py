"""The configuration of L2E and Kinetic-L2E meta-training (:mod:`bdl.meta.l2e_training`): every
key of ``bdl/meta/configs/{l2e,l2e-paper,kinetic-l2e}.toml`` with its type, default and range."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Literal

from bdl.meta.config import at_least, check_types, require
from bdl.meta.tasks import FAMILIES, HELD_OUT, TRAINING_FAMILIES


@dataclasses.dataclass(frozen=True)
class L2EConfig:
    """The settings of a run, documented in docs/meta-learning.md (``compare=False``: may change
    when a run is resumed)."""

    kernel: Literal["l2e", "kinetic-l2e"]
    form: Literal["residual", "paper"] = "residual"  # L2E's output form (bdl.kernels.l2e)
    seed: int = 0
    iterations: int = field(default=120, compare=False)
    num_pairs: int = 4
    sigma: float = 0.01
    learning_rate: float = 0.003
    adam_b1: float = 0.9
    adam_b2: float = 0.99
    clip_norm: float = 1.0
    num_steps: int = 2000
    burn_in: int = 1500
    thin: int = 50
    loss_cap: float = 10.0
    init_momentum: Literal["zero", "sample"] = "sample"
    init_seed: int = 0
    init_final_scale: float = 0.0
    families: tuple[str, ...] = TRAINING_FAMILIES
    held_out: str = HELD_OUT  # "": none
    checkpoint_every: int = field(default=10, compare=False)
    eval_repeats: int = field(default=2, compare=False)

    def __post_init__(self) -> None:
        check_types(self)
        at_least(self, 0, "seed", "init_seed", "burn_in", "eval_repeats", "init_final_scale")
        at_least(self, 1, "iterations", "num_pairs", "num_steps", "thin", "checkpoint_every")
        at_least(self, 0, "sigma", "learning_rate", "clip_norm", "loss_cap", strict=True)
        for key in ("adam_b1", "adam_b2"):
            require(self, key, 0 <= getattr(self, key) < 1, "in [0, 1)")
        require(
            self,
            "burn_in",
            self.burn_in < self.num_steps and self.num_steps - self.burn_in >= self.thin,
            f"< num_steps ({self.num_steps}) and leave at least one kept state (thin {self.thin})",
        )
        unknown = [f for f in self.families if f not in FAMILIES]
        require(self, "families", self.families and not unknown, f"names in {sorted(FAMILIES)}")
        require(self, "held_out", self.held_out in ("", *FAMILIES), "a family name or ''")
        require(self, "held_out", self.held_out not in self.families, "not in 'families'")
        require(
            self,
            "form",
            self.form == "residual" or self.kernel == "l2e",
            "'residual' unless kernel = 'l2e' (only L2E has output forms)",
        )

    @property
    def meta_params_name(self) -> str:
        """The name of the trained parameters' file: ``<kernel>.npz``, ``l2e-paper.npz`` for
        L2E's paper form (the file ``bdl.kernels.l2e(form=...)`` ships)."""
        return "l2e-paper" if self.form == "paper" else self.kernel
