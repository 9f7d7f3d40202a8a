r"""Kinetic and configurational temperatures: is the SDE simulated at the right temperature?

Wenzel et al. (2020), "How good is the Bayes posterior in deep neural networks really?",
ICML, App. I, after Leimkuhler & Matthews (2016). In bdl's convention (docs/design.md,
*Temperature*) the sampler targets exp(−H(θ, r)/T) with H = U(θ) + ½ rᵀM⁻¹r and M diagonal,
so at stationarity θ ~ π_T ∝ exp(−U/T) and, independently, r ~ N(0, T·M). (Wenzel et al. write
H = U/T + ½ mᵀM⁻¹m; the estimators and their laws below are the same once T is placed as here.)

Both diagnostics come from one identity (their Proposition 1, eq. 36): for a smooth vector field
B with suitable decay, integration by parts against exp(−H/T) gives
E[⟨B, ∇H⟩] = T·E[∇·B].

**Kinetic temperature** (B = (0, r_G) for a group G of d coordinates; eq. 40):

    T̂_K = (1/d) Σ_{i∈G} r_i² / m_i ,      E[T̂_K] = T.

Its exact law is known: M^{−1/2} r / √T ~ N(0, I_d), so d·T̂_K / T ~ χ²(d) (eq. 41), and

    P( T̂_K ∈ [T·F⁻¹_{χ²(d)}((1−c)/2)/d,  T·F⁻¹_{χ²(d)}((1+c)/2)/d] ) = c        (eq. 42),

e.g. c = 0.99: under an accurate simulation about 99 % of groups lie in their band.

**Configurational temperature** (B = (θ_G, 0); eq. 43):

    T̂_C = (1/d) Σ_{i∈G} θ_i ∂_iU(θ) ,      E_{π_T}[T̂_C] = T      (eq. 44).

As in Wenzel et al.'s SG-MCMC experiments it is evaluated at a sampled state with the
*stochastic* gradient the kernel consumed, T̂_C = ⟨θ_t, ∇Ũ(θ_t)⟩/d with ∇Ũ the unbiased
minibatch estimate at full-data scale (prior included; not ∇U/T, not the mean loss). Since
E[∇Ũ(θ) | θ] = ∇U(θ) the estimator stays unbiased; minibatch noise only adds variance. Its
sampling law depends on U, so there is no exact band: average it over states (Wenzel et al.
report its mean over end-of-cycle samples, ideal value T) and judge it with a standard error.

**Groups.** Both identities hold for any subset of coordinates. A group is one leaf of the
parameter pytree (the default; named by its path ``"net/Dense_0/kernel"``) or, with
``groups={"name": regex}``, every leaf whose path ``re.search``-matches the pattern (as
:class:`bdl.ByPath` matches priors). Groups may overlap (e.g. ``{"all": ".*", "bias": "bias"}``).

**Batches.** ``batch_ndim`` leading axes of every leaf are not parameter axes (e.g. chains and
draws); the statistics are computed for each batch entry. :func:`kinetic_temperature` and
:func:`configurational_temperature` are pure ``jax.numpy`` and jittable (close over ``groups``);
:func:`kinetic_temperature_band` and :func:`temperature_report` run on the host (scipy's χ²
quantiles).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.utils.trees import leaf_paths

PyTree = Any
Groups = Mapping[str, str] | None

__all__ = [
    "GroupTemperature",
    "TemperatureReport",
    "configurational_temperature",
    "group_sizes",
    "kinetic_temperature",
    "kinetic_temperature_band",
    "kinetic_temperature_from_energy",
    "parameter_groups",
    "temperature_report",
]

_ROOT = "root"  # the name of the single leaf of a bare-array tree


def _paths(tree: PyTree) -> list[str]:
    return [p or _ROOT for p in leaf_paths(tree)]


def _group_indices(tree: PyTree, groups: Groups) -> dict[str, list[int]]:
    paths = _paths(tree)
    if not paths:
        raise ValueError("the parameter pytree has no leaves.")
    if groups is None:
        return {p: [i] for i, p in enumerate(paths)}
    out: dict[str, list[int]] = {}
    for name, pattern in groups.items():
        regex = re.compile(pattern)
        idx = [i for i, p in enumerate(paths) if regex.search(p)]
        if not idx:
            raise ValueError(
                f"temperature group {name!r}: pattern {pattern!r} matches no parameter; "
                f"the parameter paths are {paths}."
            )
        out[name] = idx
    return out


def parameter_groups(tree: PyTree, groups: Groups = None) -> dict[str, list[str]]:
    """The leaf paths of every group: one group per leaf, or per ``{name: regex}`` pattern.

    Args:
        tree: a position pytree.
        groups: ``None`` (one group per leaf) or ``{name: regex}`` on the leaf paths.

    Returns:
        The leaf paths of each group, by name.
    """
    paths = _paths(tree)
    return {name: [paths[i] for i in idx] for name, idx in _group_indices(tree, groups).items()}


def _param_size(leaf: Any, batch_ndim: int) -> int:
    shape = jnp.shape(leaf)
    if len(shape) < batch_ndim:
        raise ValueError(f"a leaf of shape {shape} has fewer axes than batch_ndim={batch_ndim}.")
    return math.prod(shape[batch_ndim:])


def group_sizes(tree: PyTree, groups: Groups = None, batch_ndim: int = 0) -> dict[str, int]:
    """d per group: the number of parameter entries (axes after the ``batch_ndim`` leading ones).

    Args:
        tree: a position pytree (or a batch of them).
        groups: ``None`` (one group per leaf) or ``{name: regex}`` on the leaf paths.
        batch_ndim: leading batch axes of the leaves, not counted.

    Returns:
        The number of entries of each group, by name.
    """
    leaves = jax.tree.leaves(tree)
    sizes = [_param_size(x, batch_ndim) for x in leaves]
    return {name: sum(sizes[i] for i in idx) for name, idx in _group_indices(tree, groups).items()}


def _grouped_mean(
    per_leaf_sums: list[jax.Array], sizes: list[int], index: dict[str, list[int]]
) -> dict[str, jax.Array]:
    out = {}
    for name, idx in index.items():
        total = sum(per_leaf_sums[i] for i in idx)
        out[name] = total / sum(sizes[i] for i in idx)
    return out


def _sum_params(x: jax.Array, batch_ndim: int) -> jax.Array:
    return jnp.sum(x, axis=tuple(range(batch_ndim, x.ndim)))


def _mass_leaves(momentum: PyTree, mass: PyTree) -> list[Any]:
    leaves = jax.tree.leaves(momentum)
    if jax.tree_util.treedef_is_leaf(jax.tree.structure(mass)):
        return [mass] * len(leaves)
    if jax.tree.structure(mass) != jax.tree.structure(momentum):
        raise ValueError(
            "mass must be a scalar, an array broadcastable to every momentum leaf, or a pytree "
            f"with the momentum's structure; got {jax.tree.structure(mass)} for momentum "
            f"{jax.tree.structure(momentum)}."
        )
    return jax.tree.leaves(mass)


def _align_mass(mass: Any, momentum: jax.Array, batch_ndim: int) -> jax.Array:
    """A mass leaf that broadcasts against its momentum leaf: one value per batch entry (a
    layerwise mass collected with each draw, shaped ``batch``) gains the parameter axes."""
    m = jnp.asarray(mass, dtype=jnp.result_type(momentum))
    batch = momentum.shape[:batch_ndim]
    trailing = momentum.shape[momentum.ndim - m.ndim :] if m.ndim else ()
    if batch_ndim and m.shape == batch and momentum.ndim > batch_ndim and m.shape != trailing:
        m = m.reshape(m.shape + (1,) * (momentum.ndim - batch_ndim))
    return m


def kinetic_temperature(
    momentum: PyTree, mass: PyTree = 1.0, *, groups: Groups = None, batch_ndim: int = 0
) -> dict[str, jax.Array]:
    """Kinetic temperature T̂_K = (1/d) Σ_{i∈G} r_i²/m_i per group (Wenzel et al. 2020, eq. 40).

    Args:
        momentum: the momentum r, a pytree (leaves shaped ``(*batch, *param_shape)``).
        mass: the diagonal mass M: a scalar, or a pytree like ``momentum`` whose leaves broadcast
            against the momentum's (scalars per leaf for a layerwise preconditioner, θ-shaped
            arrays for an elementwise one), or one value per leaf and batch entry (shaped
            ``batch``, as a layerwise mass collected with each draw).
        groups: ``None`` (one group per leaf, named by path) or ``{name: regex}``.
        batch_ndim: leading axes that index states rather than parameters.

    Returns:
        ``{group: T̂_K}`` with values shaped ``batch``. Under r ~ N(0, T·M), d·T̂_K/T ~ χ²(d).
    """
    r_leaves = jax.tree.leaves(momentum)
    m_leaves = _mass_leaves(momentum, mass)
    sums = [
        _sum_params(jnp.square(r) / _align_mass(m, r, batch_ndim), batch_ndim)
        for r, m in zip(r_leaves, m_leaves, strict=True)
    ]
    sizes = [_param_size(r, batch_ndim) for r in r_leaves]
    return _grouped_mean(sums, sizes, _group_indices(momentum, groups))


def configurational_temperature(
    position: PyTree, grad: PyTree, *, groups: Groups = None, batch_ndim: int = 0
) -> dict[str, jax.Array]:
    """Configurational temperature T̂_C = (1/d) Σ_{i∈G} θ_i ∂_iŨ(θ) per group (Wenzel eq. 43).

    Args:
        position: θ, a pytree (leaves shaped ``(*batch, *param_shape)``).
        grad: ∇Ũ(θ) with the structure of ``position``: the gradient of the *energy* U (negative
            log posterior, prior included, full-data scale) — the exact ∇U or the unbiased
            minibatch estimate the kernel consumed at θ. Not ∇U/T.
        groups: ``None`` (one group per leaf, named by path) or ``{name: regex}``.
        batch_ndim: leading axes that index states rather than parameters.

    Returns:
        ``{group: T̂_C}`` with values shaped ``batch``; E_{π_T}[T̂_C] = T (eq. 44).
    """
    if jax.tree.structure(position) != jax.tree.structure(grad):
        raise ValueError(
            "grad must have the structure of position; got "
            f"{jax.tree.structure(grad)} and {jax.tree.structure(position)}."
        )
    th_leaves, g_leaves = jax.tree.leaves(position), jax.tree.leaves(grad)
    sums = [_sum_params(th * g, batch_ndim) for th, g in zip(th_leaves, g_leaves, strict=True)]
    sizes = [_param_size(th, batch_ndim) for th in th_leaves]
    return _grouped_mean(sums, sizes, _group_indices(position, groups))


def kinetic_temperature_from_energy(
    kinetic_energy: jax.typing.ArrayLike, num_params: int
) -> jax.Array:
    """T̂_K = 2·K/d from a kinetic energy K = ½ rᵀM⁻¹r over all d parameters.

    For :class:`bdl.kernels.base.Info`'s ``kinetic_energy`` (``samples.info["kinetic_energy"]``,
    shaped ``(chains, draws)``) with d = :func:`bdl.utils.trees.tree_size` of θ: the global
    kinetic temperature of every draw, to compare with ``kinetic_temperature_band(d, T)``.
    Meaningless for first-order kernels (SGLD), which have no momentum.

    Args:
        kinetic_energy: K, of any shape (e.g. ``(chains, draws)``).
        num_params: d, the number of parameters.

    Returns:
        T̂_K, shaped like ``kinetic_energy``.
    """
    return 2.0 * jnp.asarray(kinetic_energy) / num_params


def kinetic_temperature_band(
    num_params: int | np.ndarray, temperature: float | np.ndarray = 1.0, level: float = 0.99
) -> tuple[np.ndarray, np.ndarray]:
    """The central ``level`` interval of T̂_K under r ~ N(0, T·M) (Wenzel et al. 2020, eq. 42).

        [ T·F⁻¹_{χ²(d)}((1 − c)/2) / d ,  T·F⁻¹_{χ²(d)}((1 + c)/2) / d ],   c = level.

    Args:
        num_params: d, the group size (array-like for several groups).
        temperature: T (array-like broadcasts, e.g. a per-draw temperature from a ramp).
        level: c ∈ (0, 1).

    Returns:
        (low, high) as NumPy arrays (host computation with scipy; not jittable).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1); got {level}.")
    d = np.asarray(num_params, dtype=np.float64)
    if np.any(d < 1):
        raise ValueError(f"num_params must be ≥ 1; got {num_params}.")
    t = np.asarray(temperature, dtype=np.float64)
    if np.any(t < 0):
        raise ValueError(f"temperature must be ≥ 0; got {temperature}.")
    from scipy import stats

    low = t * stats.chi2.ppf((1.0 - level) / 2.0, d) / d
    high = t * stats.chi2.ppf((1.0 + level) / 2.0, d) / d
    return low, high


@dataclasses.dataclass(frozen=True)
class GroupTemperature:
    """Temperatures of one parameter group.

    Attributes:
        name: the group's name (a leaf path, a pattern's name, or ``"all"``).
        leaves: the leaf paths in the group.
        size: d, the number of parameter entries.
        kinetic: T̂_K per batch entry (``None`` without momentum).
        band: (low, high) of the ``level`` χ² interval of T̂_K (``None`` without momentum).
        inside: whether T̂_K lies in the band, per batch entry (``None`` without momentum).
        configurational: T̂_C per batch entry (``None`` without position and gradient).
    """

    name: str
    leaves: tuple[str, ...]
    size: int
    kinetic: np.ndarray | None = None
    band: tuple[np.ndarray, np.ndarray] | None = None
    inside: np.ndarray | None = None
    configurational: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class TemperatureReport:
    """Kinetic/configurational temperatures per group and over all parameters.

    Attributes:
        temperature: the target temperature T.
        level: the band's coverage c.
        groups: per-group results.
        overall: the same over every parameter entry at once (group ``"all"``).
    """

    temperature: np.ndarray
    level: float
    groups: dict[str, GroupTemperature]
    overall: GroupTemperature

    @property
    def fraction_inside(self) -> float | None:
        """Share of (group, batch entry) kinetic temperatures inside their band.

        Wenzel et al.'s Ê[T̂_K ∈ R_99] (Tables 1–2); ideally ≈ ``level``.
        """
        flags = [g.inside for g in self.groups.values() if g.inside is not None]
        if not flags:
            return None
        return float(np.mean(np.concatenate([np.ravel(f) for f in flags])))

    @property
    def mean_configurational(self) -> float | None:
        """T̂_C over all parameters, averaged over the batch entries (ideally ≈ T)."""
        c = self.overall.configurational
        return None if c is None else float(np.mean(c))

    def __str__(self) -> str:
        t = np.asarray(self.temperature)
        head = f"temperatures (target T = {t if t.ndim else float(t):g}, band {self.level:.0%})"
        rows = [head, f"{'group':<32} {'d':>9} {'T_kin':>10} {'band':>21} {'in':>6} {'T_conf':>10}"]
        for g in [*self.groups.values(), self.overall]:
            kin = band = inside = conf = "-"
            if g.kinetic is not None and g.band is not None and g.inside is not None:
                kin = f"{np.mean(g.kinetic):.4g}"
                band = f"[{np.mean(g.band[0]):.4g}, {np.mean(g.band[1]):.4g}]"
                inside = f"{np.mean(g.inside):.0%}"
            if g.configurational is not None:
                conf = f"{np.mean(g.configurational):.4g}"
            rows.append(f"{g.name:<32} {g.size:>9} {kin:>10} {band:>21} {inside:>6} {conf:>10}")
        if self.fraction_inside is not None:
            rows.append(f"kinetic temperatures inside their band: {self.fraction_inside:.1%}")
        return "\n".join(rows)


def temperature_report(
    *,
    momentum: PyTree | None = None,
    mass: PyTree = 1.0,
    position: PyTree | None = None,
    grad: PyTree | None = None,
    temperature: float | np.ndarray = 1.0,
    groups: Groups = None,
    batch_ndim: int = 0,
    level: float = 0.99,
) -> TemperatureReport:
    """Kinetic temperatures with their χ² bands and configurational temperatures, per group.

    Give ``momentum`` (and ``mass``) for the kinetic part, ``position`` and ``grad`` for the
    configurational part, or all. Values are host NumPy arrays shaped like the batch. Averages
    in the printed table are over batch entries.

    Args:
        momentum: the momenta r (a pytree like the position).
        mass: the mass M, a scalar or a pytree like the position.
        position: the positions θ.
        grad: ∇U(θ) at ``position``.
        temperature: T, the target's temperature.
        groups: ``None`` (one group per leaf) or ``{name: regex}`` on the leaf paths.
        batch_ndim: leading batch axes of the leaves (chains, draws).
        level: the probability of each kinetic temperature's band.

    Returns:
        A :class:`TemperatureReport`; ``report.fraction_inside`` is the share of kinetic
            temperatures in their ``level`` band (ideally ≈ level), ``report.mean_configurational``
            the mean T̂_C over all parameters (ideally ≈ T).
    """
    if momentum is None and (position is None or grad is None):
        raise ValueError(
            "give momentum (kinetic temperature) and/or position and grad "
            "(configurational temperature)."
        )
    tree = momentum if momentum is not None else position
    if (
        momentum is not None
        and position is not None
        and (jax.tree.structure(momentum) != jax.tree.structure(position))
    ):
        raise ValueError("momentum and position must have the same pytree structure.")
    temperature = np.asarray(temperature, dtype=np.float64)
    names = parameter_groups(tree, groups)
    sizes = group_sizes(tree, groups, batch_ndim)
    all_groups = {"all": ".*"}
    all_names = parameter_groups(tree, all_groups)["all"]
    all_size = group_sizes(tree, all_groups, batch_ndim)["all"]

    def kinetic_part(gs: Groups) -> dict[str, Any]:
        if momentum is None:
            return {}
        values = kinetic_temperature(momentum, mass, groups=gs, batch_ndim=batch_ndim)
        return {k: np.asarray(v) for k, v in values.items()}

    def conf_part(gs: Groups) -> dict[str, Any]:
        if position is None or grad is None:
            return {}
        values = configurational_temperature(position, grad, groups=gs, batch_ndim=batch_ndim)
        return {k: np.asarray(v) for k, v in values.items()}

    def entry(name: str, leaves: list[str], size: int, kin: Any, conf: Any) -> GroupTemperature:
        band = inside = None
        if kin is not None:
            band = kinetic_temperature_band(size, temperature, level)
            inside = (band[0] <= kin) & (kin <= band[1])
        return GroupTemperature(name, tuple(leaves), size, kin, band, inside, conf)

    kin, conf = kinetic_part(groups), conf_part(groups)
    per_group = {
        name: entry(name, leaves, sizes[name], kin.get(name), conf.get(name))
        for name, leaves in names.items()
    }
    kin_all, conf_all = kinetic_part(all_groups), conf_part(all_groups)
    overall = entry("all", all_names, all_size, kin_all.get("all"), conf_all.get("all"))
    return TemperatureReport(temperature, level, per_group, overall)
