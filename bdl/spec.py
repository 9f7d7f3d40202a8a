"""``bdl.ModelSpec``: a declared model with its data and sensible run defaults.

The shipped model files (``bdl/models/``), a user's ``./models/NAME.py`` and any file given to the
``bdl`` command by path define ``build(**options) -> ModelSpec``; the command line runs them by
name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bdl.compile import compile as compile_model
from bdl.compile.target import Target
from bdl.data.dataset import Dataset
from bdl.dsl.model import Model
from bdl.dsl.potential import Potential


@dataclasses.dataclass(frozen=True, eq=False)
class ModelSpec:
    """What ``bdl sample MODEL`` needs to run a model end to end.

    Attributes:
        model: the declaration (a :class:`bdl.Model` or :class:`bdl.Potential`).
        data: its dataset (``None`` for a potential).
        batch_size: minibatch size used by :meth:`compile` (``None``: full batch).
        kernels: suggested hyper-parameters per kernel name, e.g. ``{"sghmc": {...}}``; an
            entry may also hold the kernel's own run lengths (``num_steps``, ``burn_in``,
            ``thin``), which the command line's ``--tuned`` uses in place of the defaults below
            (e.g. ``{"sgld": {"step_size": 3e-3, "num_steps": 200_000, "thin": 50}}``).
        num_steps, burn_in, thin: default run lengths.
        description: one line for listings.
        reference: optional exact posterior summary (e.g. the conjugate closed form).
        init: the chains' start (``bdl.sample``'s ``init``: ``"auto"``, ``"network"``,
            ``"prior"``, ``"map"``, ``"fixed"`` or a position).
        parameter_labels: names for the entries along the first axis of some position leaves,
            by path, e.g. ``{"net/w": data.feature_names}``; summaries and validation tables then
            name ``net/w[0]`` as ``net/w[mean radius]`` (:func:`bdl.utils.trees.parameter_names`).
        nuts: the NUTS settings its reference needs where the defaults (1,000 warm-up steps and
            1,000 draws per chain) do not pass the trust gate, e.g. ``{"num_warmup": 2_000,
            "num_samples": 5_000}``; ``bdl validate`` and ``bdl reference`` use them unless
            given flags of their own.
    """

    model: Model | Potential
    data: Dataset | None = None
    batch_size: int | None = None
    kernels: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    num_steps: int = 5_000
    burn_in: int = 1_000
    thin: int = 10
    description: str = ""
    reference: dict[str, Any] | None = None
    init: Any = "auto"
    parameter_labels: dict[str, Sequence[str]] | None = None
    nuts: dict[str, int] | None = None

    def compile(self) -> Target:
        """The model compiled on its data with its batch size (:func:`bdl.compile`).

        Returns:
            The compiled model or potential.
        """
        return compile_model(self.model, self.data, batch_size=self.batch_size)

    def kernel_hyper(self, name: str) -> dict[str, Any]:
        """Suggested hyper-parameters for kernel ``name`` (empty: the kernel's defaults).

        Args:
            name: a registered kernel's name.

        Returns:
            A copy of the suggested hyper-parameters, without the run lengths
                (:meth:`kernel_lengths`).
        """
        return {k: v for k, v in self.kernels.get(name, {}).items() if k not in RUN_LENGTHS}

    def kernel_lengths(self, name: str) -> dict[str, int]:
        """The run lengths the model file suggests for kernel ``name`` where they differ from
        its defaults (``num_steps``, ``burn_in``, ``thin``); empty when it suggests none.

        Args:
            name: a registered kernel's name.

        Returns:
            The suggested run lengths, by name.
        """
        return {k: v for k, v in self.kernels.get(name, {}).items() if k in RUN_LENGTHS}

    def nuts_settings(self, warmup: int | None = None, samples: int | None = None) -> dict:
        """The NUTS reference's warm-up and draws per chain: the given values, else the model
        file's (``nuts``), else 1,000 each.

        Args:
            warmup: warm-up steps per chain given on the command line, or ``None``.
            samples: draws per chain given on the command line, or ``None``.

        Returns:
            ``{"num_warmup": …, "num_samples": …}``.
        """
        settings = {"num_warmup": 1_000, "num_samples": 1_000, **(self.nuts or {})}
        if warmup is not None:
            settings["num_warmup"] = warmup
        if samples is not None:
            settings["num_samples"] = samples
        return settings


#: the keys of a ``ModelSpec.kernels`` entry that are run lengths, not hyper-parameters
RUN_LENGTHS = ("num_steps", "burn_in", "thin")
