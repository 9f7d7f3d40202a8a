"""``bdl.reference``: the trusted NUTS draws of a model, in its own named, constrained parameters.

The draws come from :func:`bdl.validation.nuts_reference` — NumPyro NUTS on the compiled
potential U/T in float64 (U tempered as the model declares), refused by the same gate as
``bdl.validate`` (split R̂ < 1.01 and bulk ESS ≥ 400 on the monitored quantities) and cached on
disk — and are mapped back through the model's bijectors: a learned noise scale appears as σ,
not log σ.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from bdl.compile.named_draws import named_draws
from bdl.compile.target import Target
from bdl.sampling.samples import Samples
from bdl.utils.arguments import suggestion
from bdl.validation.reference import Reference, nuts_reference
from bdl.validation.summary import parameter_space_lines

PyTree = Any


@dataclasses.dataclass(frozen=True, eq=False)
class ReferenceSamples(Samples):
    """NUTS draws as :class:`bdl.Samples` (``positions`` in the sampled space, so that
    ``compiled.predictive(ref, x)`` and every tool taking samples accept them) plus the
    constrained draws by name.

    Attributes:
        draws: parameter name (``net/w``, ``lik/scale``) → constrained draws
            ``(chains, draws, ...)``.
        reference: the NUTS run and its gate (:class:`bdl.validation.Reference`).
    """

    draws: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    reference: Reference | None = None

    @property
    def trusted(self) -> bool:
        return bool(self.reference is not None and self.reference.trusted)

    @property
    def max_rhat(self) -> float:
        return float(self.reference.max_rhat) if self.reference is not None else float("nan")

    @property
    def min_ess(self) -> float:
        return float(self.reference.min_ess) if self.reference is not None else float("nan")

    def names(self) -> list[str]:
        """The parameter names, in the model's order."""
        return list(self.draws)

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.draws[name]
        except KeyError:
            raise KeyError(
                f"no parameter {name!r};{suggestion(name, self.names())} parameters: "
                f"{', '.join(self.names())}."
            ) from None

    def mean(self) -> dict[str, np.ndarray]:
        """Posterior mean of every named parameter (over chains and draws)."""
        return {k: v.mean(axis=(0, 1)) for k, v in self.draws.items()}

    def sd(self) -> dict[str, np.ndarray]:
        """Posterior standard deviation of every named parameter."""
        return {k: v.std(axis=(0, 1)) for k, v in self.draws.items()}

    def to_arviz(self) -> Any:
        """An ArviZ ``InferenceData`` of the constrained draws, one variable per parameter
        (``/`` in a name becomes ``.``)."""
        import arviz as az

        return az.from_dict(posterior={k.replace("/", "."): v for k, v in self.draws.items()})

    def summary(self) -> str:
        """Mean, sd, bulk ESS and R̂ of every scalar parameter (the first dozen), and the gate."""
        lines = parameter_space_lines(self.draws)
        verdict = "trusted" if self.trusted else "NOT trusted"
        lines.append(
            f"NUTS gate ({self.reference.space} space): max R̂ {self.max_rhat:.3f}, min bulk "
            f"ESS {self.min_ess:.0f} -> {verdict}"
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"ReferenceSamples(chains={self.num_chains}, draws={self.num_draws}, "
            f"parameters={self.names()}, trusted={self.trusted})"
        )


def named_parameters(target: Target, positions: PyTree) -> dict[str, np.ndarray]:
    """Constrained draws by parameter name (:func:`bdl.compile.named_draws.named_draws`)."""
    return named_draws(target, positions)


def reference(
    model: Any,
    data: Any = None,
    *,
    temperature: float | None = None,
    num_chains: int = 4,
    num_warmup: int = 1_000,
    num_samples: int = 1_000,
    seed: int = 0,
    space: str | None = None,
    use_cache: bool = True,
    require_trusted: bool = True,
) -> ReferenceSamples:
    """NUTS draws of a model in its own constrained, named parameters.

    Args:
        model: a compiled model or potential (``bdl.compile``), a :class:`bdl.ModelSpec`, a
            :class:`bdl.Model` with ``data``, or the name of a model in models/ (or a path to a
            model file).
        data: the data of a :class:`bdl.Model` (otherwise ``None``).
        temperature: a constant T > 0 to run at (default the model's).
        num_chains: chains to run, ≥ 4 (as :func:`bdl.validation.nuts_reference`).
        num_warmup: NUTS warm-up steps per chain.
        num_samples: draws kept per chain.
        seed: the seed of the NUTS run.
        space: where NUTS runs, as :func:`bdl.validation.nuts_reference` (default its choice).
        use_cache: reuse the draws cached on disk by model, data, temperature and settings.
        require_trusted: raise :class:`bdl.validation.UntrustedReferenceError` (with what to
            change) when the gate fails; ``False`` returns the draws with ``trusted`` False.

    Returns:
        :class:`ReferenceSamples`: ``ref["net/w"]`` is ``(chains, draws, ...)``; ``ref.positions``
            are in the sampled space, like :func:`bdl.sample`'s.

    Raises:
        UntrustedReferenceError: the draws fail the trust gate (R̂ ≥ 1.01 or bulk ESS < 400)
            and ``require_trusted``.
        ValueError: fewer than 4 chains, or a model that cannot be read or compiled.

    Examples:
        >>> import jax.numpy as jnp
        >>> import bdl
        >>> from bdl.data import linear_regression
        >>> model = bdl.Model(
        ...     network=lambda params, x: x @ params["w"],
        ...     params={"w": jnp.zeros(2)},
        ...     likelihood=bdl.Gaussian(scale=0.5),
        ...     prior=bdl.Normal(1.0),
        ... )
        >>> data = linear_regression(n=50, dim=2, n_test=10)
        >>> compiled = bdl.compile(model, data, batch_size=10)
        >>> ref = bdl.reference(compiled, num_warmup=200, num_samples=200)
        >>> ref.trusted, ref["net/w"].shape  # (chains, draws, *leaf)
        (True, (4, 200, 2))
    """
    target = _as_target(model, data)
    ref = nuts_reference(
        target,
        temperature=temperature,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        seed=seed,
        space=space,  # type: ignore[arg-type]
        use_cache=use_cache,
        require_trusted=require_trusted,
    )
    positions = jax.tree.map(np.asarray, ref.positions)
    draws = int(jax.tree.leaves(positions)[0].shape[1])
    return ReferenceSamples(
        positions=positions,
        extra={},
        info={},
        steps=np.arange(draws),
        kernel="nuts",
        steps_done=int(ref.settings["warmup"]) + draws,
        meta={"model": target.name, "kernel": {"name": "nuts"}, "reference": ref.settings},
        draws=named_parameters(target, positions),
        reference=ref,
    )


def _as_target(model: Any, data: Any) -> Target:
    from bdl.compile.compiler import compile as compile_model
    from bdl.dsl.model import Model
    from bdl.spec import ModelSpec

    if isinstance(model, Target):
        if data is not None:
            raise ValueError("reference(compiled, data=...): a compiled model has its data.")
        return model
    if isinstance(model, str):
        from bdl.model_files import load_spec

        model = load_spec(model)
    if isinstance(model, ModelSpec):
        if data is not None:
            raise ValueError("reference(spec, data=...): a ModelSpec has its data.")
        return model.compile()
    if isinstance(model, Model):
        if data is None:
            raise ValueError("reference(model, data): a bdl.Model needs its data to be compiled.")
        return compile_model(model, data)
    raise TypeError(
        "reference() needs a compiled model (bdl.compile), a bdl.ModelSpec, a bdl.Model with "
        f"data, or a model name; got {type(model).__name__}."
    )
