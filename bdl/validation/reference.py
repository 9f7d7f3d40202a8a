"""Gold-standard references: NumPyro NUTS on the compiled full-data potential U/T, in float64.

A reference is trusted only when its own diagnostics pass (docs/design.md, *Validation against
NUTS*):
split rank-normalised R̂ < 1.01 and bulk ESS ≥ 400 on every monitored quantity. For identifiable
models the monitored quantities are the parameters; for networks they are function-space
summaries (predictive probabilities or means and per-example log-likelihoods on held-out inputs),
because weight-space R̂ is meaningless under the permutation symmetries of hidden units.
References are cached on disk, keyed by the model, its data, the temperature and the NUTS
settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.auto_start import from_prior_draws, redrawn_where_far
from bdl.compile.fingerprint import describe
from bdl.compile.target import Target
from bdl.diagnostics import ess_bulk, rank_rhat
from bdl.sampling.verdict.monitored import (  # noqa: F401 (re-exported: the validation's names for them)
    default_space,
    evaluation_fields,
    evaluation_inputs,
    function_summaries,
    parameter_summaries,
)
from bdl.utils.cache import cache_dir

PyTree = Any
Space = Literal["parameter", "function"]

RHAT_MAX = 1.01
ESS_MIN = 400.0


class UntrustedReferenceError(RuntimeError):
    """NUTS did not converge well enough for its draws to serve as a reference."""


@dataclasses.dataclass(frozen=True, eq=False)
class Reference:
    """NUTS draws (chain, draw, ...) with their diagnostics.

    Attributes:
        positions: the draws, ``(chain, draw, ...)`` per leaf, in the sampled space.
        space: where they were judged, ``"parameter"`` or ``"function"``.
        monitored: the quantities the trust gate was applied to, ``(chain, draw, k)``.
        max_rhat: the largest R̂ of the monitored quantities.
        min_ess: their smallest bulk ESS.
        settings: the NUTS run's settings (chains, warm-up, draws, seed, space).
    """

    positions: PyTree
    space: Space
    monitored: np.ndarray  # (chain, draw, k): the quantities the gate was applied to
    max_rhat: float
    min_ess: float
    settings: dict[str, Any]

    @property
    def trusted(self) -> bool:
        return self.max_rhat < RHAT_MAX and self.min_ess >= ESS_MIN


def gate(monitored: np.ndarray) -> tuple[float, float]:
    """(max split rank-normalised R̂, min bulk ESS) over the monitored columns."""
    values = np.asarray(monitored, np.float64)
    values = values[..., values.reshape(-1, values.shape[-1]).std(axis=0) > 0]
    rhat = rank_rhat(values)
    ess = ess_bulk(values)
    return float(np.nanmax(rhat)), float(np.nanmin(ess))


def cache_key(target: Target, temperature: float, settings: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(target.name.encode())
    # every parameter of the declaration, priors' included (a repr may drop them: StudentT(3)
    # and StudentT(5) priors must not share a reference), without memory addresses
    declaration = describe(getattr(target, "model", getattr(target, "potential", None)))
    digest.update(declaration.encode())
    for leaf in jax.tree.leaves(target):
        if isinstance(leaf, jax.Array | np.ndarray):
            digest.update(np.asarray(leaf).tobytes())
    digest.update(json.dumps({"T": temperature, **settings}, sort_keys=True).encode())
    return digest.hexdigest()[:24]


def nuts_reference(
    target: Target,
    *,
    temperature: float | None = None,
    num_chains: int = 4,
    num_warmup: int = 1_000,
    num_samples: int = 1_000,
    seed: int = 0,
    space: Space | None = None,
    use_cache: bool = True,
    require_trusted: bool = True,
) -> Reference:
    """Run (or load) NUTS on ``target.potential_fn(temperature)`` in float64.

    Args:
        target: a compiled model or potential.
        temperature: a constant T > 0 to run at (default the target's).
        num_chains: chains, ≥ 4 (vectorised).
        num_warmup: warm-up steps per chain.
        num_samples: draws kept per chain.
        seed: the seed of the starts and of NUTS.
        space: where the trust gate is applied, ``"parameter"`` or ``"function"`` (default: the
            function space for a network, the parameter space otherwise).
        use_cache: load the draws from bdl's cache directory when a run with the same target,
            temperature and settings is there (and write them there otherwise).
        require_trusted: raise when the gate fails.

    Returns:
        The :class:`Reference`: the draws with their R̂ and ESS.

    Raises:
        UntrustedReferenceError: (with what to change) R̂ ≥ 1.01 or bulk ESS < 400, and
            ``require_trusted``.
        ValueError: fewer than 4 chains.
    """
    from numpyro.infer import MCMC, NUTS

    if num_chains < 4:
        raise ValueError(f"num_chains must be >= 4 for a trusted reference; got {num_chains}.")
    t = target.constant_temperature() if temperature is None else float(temperature)
    space = space or default_space(target)
    settings = {
        "chains": num_chains,
        "warmup": num_warmup,
        "samples": num_samples,
        "seed": seed,
        "space": space,
    }
    path = cache_dir() / "references" / f"{cache_key(target, t, settings)}.npz"
    if use_cache and path.is_file():
        reference = _load(path, target)
    else:
        with jax.enable_x64(True):
            potential = target.potential_fn(t)
            init = target.init_positions(jax.random.key(seed), num_chains)
            init = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), init)
            if from_prior_draws(target):
                # the sampler's default start: Stan's where a prior draw cannot start
                init = redrawn_where_far(target, init, jax.random.key(seed))[0]
            mcmc = MCMC(
                NUTS(potential_fn=potential),
                num_warmup=num_warmup,
                num_samples=num_samples,
                num_chains=num_chains,
                chain_method="vectorized",
                progress_bar=False,
            )
            mcmc.run(jax.random.key(seed + 1), init_params=init)
            positions = jax.tree.map(np.asarray, mcmc.get_samples(group_by_chain=True))
            monitored = (
                function_summaries(target, positions)
                if space == "function"
                else parameter_summaries(positions)
            )
            max_rhat, min_ess = gate(monitored)
        reference = Reference(
            positions, space, monitored, max_rhat, min_ess, {**settings, "temperature": t}
        )
        if use_cache:
            _save(path, reference)
    if require_trusted and not reference.trusted:
        raise UntrustedReferenceError(
            f"the NUTS reference for {target.name} did not converge (max R̂ "
            f"{reference.max_rhat:.3f}, needs < {RHAT_MAX}; min bulk ESS {reference.min_ess:.0f}, "
            f"needs >= {ESS_MIN:.0f} in {reference.space} space). Run more warm-up and samples "
            f"(num_warmup={2 * num_warmup}, num_samples={2 * num_samples}) or more chains, or "
            "reparameterise the model."
        )
    return reference


def _save(path: Path, reference: Reference) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    leaves, _ = jax.tree.flatten(reference.positions)
    np.savez(
        path,
        monitored=reference.monitored,
        max_rhat=reference.max_rhat,
        min_ess=reference.min_ess,
        settings=json.dumps(reference.settings),
        space=reference.space,
        **{f"leaf{i}": leaf for i, leaf in enumerate(leaves)},
    )


def _load(path: Path, target: Target) -> Reference:
    data = np.load(path)
    treedef = jax.tree.structure(target.initial_position)
    leaves = [data[f"leaf{i}"] for i in range(treedef.num_leaves)]
    return Reference(
        jax.tree.unflatten(treedef, leaves),
        str(data["space"]),
        data["monitored"],
        float(data["max_rhat"]),
        float(data["min_ess"]),
        json.loads(str(data["settings"])),
    )
