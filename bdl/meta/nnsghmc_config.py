"""The configuration of NNSGHMC meta-training (:mod:`bdl.meta.nnsghmc_training`): every key of
``bdl/meta/configs/nnsghmc.toml`` with its type, default and range."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any, Literal

from bdl.kernels.elementwise_mlp import ACTIVATIONS
from bdl.meta.config import at_least, check_types, require


@dataclasses.dataclass(frozen=True)
class NNSGHMCConfig:
    """The settings of a run (the shipped bdl/meta/configs/nnsghmc.toml sets them all), documented
    in docs/meta-learning-nnsghmc.md; ``compare=False``: may change when a run is resumed."""

    kernel: Literal["nnsghmc"] = "nnsghmc"
    seed: int = 0
    # schedule
    iterations: int = field(default=400, compare=False)
    iterations_per_epoch: int = 4
    checkpoint_every: int = field(default=50, compare=False)
    log_every: int = field(default=10, compare=False)
    # tasks
    dim: int = 10
    num_tasks: int = 4
    variance_range: tuple[float, float] = (0.05, 2.0)
    grad_noise: float = 1.0
    init_range: float = 3.0
    # sampler (kernel hyper-parameters used in training, and recommended at test time)
    step_size: float = 0.025
    alpha: float = 1.0
    beta0: float = 1.0
    c: float = 0.01
    d_scale: float = 1.0
    q_bound: float | None = 4.0
    hidden: tuple[int, ...] = (10,)
    activation: str = "tanh"
    init_final_scale: float = 0.1
    # input normalisation: statistics of a pilot run of the randomly initialised sampler
    pilot_steps: int = 100
    # unrolling
    num_chains: int = 50
    window: int = 20
    windows_per_iteration: int = 5
    # losses
    cross_chain_weight: float = 1.0
    cross_chain_every: int = 2
    in_chain_weight: float = 1.0
    in_chain_chains: int = 5
    in_chain_burn_in: int = 50
    in_chain_thin: int = 3
    stein_eta: float = 0.01
    stein_bandwidth_scale: float = 1.0
    # replay
    replay_prob: float = 0.5
    replay_size: int = 500
    # optimiser
    learning_rate: float = 2e-3
    clip_norm: float = 1.0

    def __post_init__(self) -> None:
        check_types(self)
        at_least(self, 0, "seed", "in_chain_burn_in", "alpha", "d_scale", "grad_noise")
        at_least(self, 0, "init_final_scale", "cross_chain_weight", "in_chain_weight")
        at_least(self, 1, "iterations", "iterations_per_epoch", "checkpoint_every", "log_every")
        at_least(self, 1, "dim", "num_tasks", "window", "windows_per_iteration", "replay_size")
        at_least(self, 1, "cross_chain_every", "in_chain_chains", "in_chain_thin")
        at_least(self, 2, "num_chains")
        at_least(self, 1, "pilot_steps")
        at_least(self, 0, "step_size", "c", "learning_rate", "clip_norm", "init_range", strict=True)
        at_least(self, 0, "stein_bandwidth_scale", "stein_eta", strict=True)
        require(self, "replay_prob", 0 <= self.replay_prob <= 1, "in [0, 1]")
        require(self, "q_bound", self.q_bound is None or self.q_bound > 0, "> 0 or None")
        low, high = self.variance_range
        require(self, "variance_range", 0 < low <= high, "[low, high] with 0 < low <= high")
        ok = bool(self.hidden) and min(self.hidden) >= 1
        require(self, "hidden", ok, "a non-empty list of positive integers")
        require(self, "activation", self.activation in ACTIVATIONS, f"in {sorted(ACTIVATIONS)}")
        ok = self.in_chain_chains <= self.num_chains
        require(self, "in_chain_chains", ok, f"<= num_chains ({self.num_chains})")
        steps = self.window * self.windows_per_iteration
        ok = self.cross_chain_every <= steps
        require(self, "cross_chain_every", ok, f"<= the steps per iteration ({steps})")
        ok = len(range(self.in_chain_burn_in, steps, self.in_chain_thin)) >= 2
        what = f"small enough to leave >= 2 thinned in-chain samples of {steps}"
        require(self, "in_chain_burn_in", ok, what)
        ok = self.cross_chain_weight > 0 or self.in_chain_weight > 0
        require(self, "cross_chain_weight", ok, "> 0 when in_chain_weight is 0")


def kernel_hyper(cfg: NNSGHMCConfig) -> dict[str, Any]:
    """The NNSGHMC hyper-parameters of training (the input statistics travel with the
    meta-parameters, not here)."""
    return {
        "step_size": cfg.step_size,
        "alpha": cfg.alpha,
        "beta0": cfg.beta0,
        "c": cfg.c,
        "d_scale": cfg.d_scale,
        "q_bound": cfg.q_bound,
    }
