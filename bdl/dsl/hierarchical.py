"""Hierarchical priors: a Normal prior on weights whose location and scale are random.

    w_i | μ, σ ~ N(μ, σ²),   μ ~ p(μ),   σ ~ p(σ)   (or λ = 1/σ² ~ p(λ))

The hyper-parameters (μ, σ or λ) are sampled jointly with the weights: they live in
``position["hyper"][name]`` as ``{"loc": …, "scale": …}`` (or ``"precision"``), each stored
unconstrained through ``biject_to`` of its prior's support, with the log-Jacobian in the prior
density. One set of hyper-parameters is shared by every leaf the prior resolves to
(``per="group"``), or each leaf gets its own (``per="leaf"``: per-layer scales), or each input unit
of each leaf (``per="input"``: automatic relevance determination, MacKay 1994; Neal 1996, §2.2).

Two parameterisations of the same model (Papaspiliopoulos, Roberts & Sköld 2007):

* **centred** (``centred=True``): the position holds w and log p(w | μ, σ) = Σ log N(w_i; μ, σ²);
* **non-centred** (``centred=False``): the position holds z with w = μ + σ·z and
  log p(z) = Σ log N(z_i; 0, 1). The network sees w; the map z ↦ w is part of ``constrain``.

Centred is efficient when the data pin the weights down, non-centred when they do not (the
funnel of the eight-schools model, Betancourt & Girolami 2015). With a Gamma precision and a
centred form, the conditional of λ is Gamma and :func:`bdl.kernels.gibbs` can draw it exactly.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.transforms import biject_to

from bdl.dsl.conditional import ConditionalLeafPrior
from bdl.dsl.priors import LeafInfo, LeafPrior, Prior
from bdl.utils import arguments
from bdl.utils.arguments import shown

PER = ("group", "leaf", "input")
PyTree = Any


def _positive(support: constraints.Constraint) -> bool:
    from bdl.dsl.likelihoods import positive_support  # judged by bounds, as learned scales

    return positive_support(support)


def _hyper_prior(value: Any, what: str, positive: bool) -> float | dist.Distribution | None:
    """A fixed number, a scalar NumPyro distribution (a hyper-prior), or ``None``."""
    if value is None:
        return None
    if isinstance(value, dist.Distribution):
        if value.batch_shape != () or value.event_shape != ():
            raise ValueError(
                f"HierarchicalNormal({what}=...) must be a scalar distribution (batch_shape and "
                f"event_shape ()); got {type(value).__name__} of shape {value.shape()}. Use "
                "per='leaf' or per='input' for one hyper-parameter per leaf or input unit."
            )
        if positive and not _positive(value.support):
            raise ValueError(
                f"HierarchicalNormal({what}=...) must be a distribution on a subset of (0, ∞) "
                f"(e.g. dist.HalfCauchy(1.0), dist.Gamma(1.0, 1.0)); got "
                f"{type(value).__name__} with support {value.support}."
            )
        return value
    if positive:
        return arguments.number(value, f"HierarchicalNormal({what}=...)", above=0.0)
    return arguments.number(value, f"HierarchicalNormal({what}=...)")


class HierarchicalNormal(Prior):
    """w ~ N(loc, scale²) elementwise, with loc and scale (or precision 1/scale²) random.

    Args:
        scale: σ > 0 — a float (fixed) or a scalar NumPyro distribution on (0, ∞) (its hyper-prior,
            e.g. ``dist.HalfCauchy(1.0)``). Give ``scale`` or ``precision``, not both.
        precision: λ = 1/σ² — a float or a distribution on (0, ∞); a ``dist.Gamma(a, b)`` with the
            centred form makes the conditional of λ conjugate (:func:`bdl.kernels.gibbs`).
        loc: μ — a float (default 0) or a scalar NumPyro distribution (e.g. ``dist.Normal(0, 5)``).
        per: ``"group"`` (default: one set of hyper-parameters for every leaf this prior
            applies to), ``"leaf"`` (one per leaf: per-layer scales) or ``"input"`` (one per input
            unit of each leaf: ARD; a dense weight's input axis, or each entry of a vector).
        centred: the centred form (the position holds w) or the non-centred one (it holds z,
            w = μ + σz).
        name: the hyper-parameters' key in ``position["hyper"]`` (with ``per="leaf"`` or
            ``"input"``, ``position["hyper"][name]`` maps each leaf path, without ``net/``, to
            its own).
    """

    def __init__(
        self,
        scale: float | dist.Distribution | None = None,
        *,
        precision: float | dist.Distribution | None = None,
        loc: float | dist.Distribution = 0.0,
        per: str = "group",
        centred: bool = True,
        name: str,
    ):
        if scale is not None and precision is not None:
            raise ValueError(
                "HierarchicalNormal: give scale=... or precision=..., not both (precision is "
                "1/scale²)."
            )
        if scale is None and precision is None:
            raise ValueError(
                "HierarchicalNormal: give scale=... (σ) or precision=... (λ = 1/σ²), a number or "
                "a distribution, e.g. scale=dist.HalfCauchy(1.0)."
            )
        self.scale = _hyper_prior(scale, "scale", positive=True)
        self.precision = _hyper_prior(precision, "precision", positive=True)
        self.loc = _hyper_prior(loc, "loc", positive=False)
        if not any(isinstance(v, dist.Distribution) for v in self.hyper_priors_or_values.values()):
            raise ValueError(
                "HierarchicalNormal: loc, scale and precision are all fixed numbers; give at least "
                "one a distribution (its hyper-prior), or use bdl.Normal(scale, loc)."
            )
        if per not in PER:
            raise ValueError(
                f"HierarchicalNormal(per=...) must be one of {', '.join(map(repr, PER))}; got "
                f"{shown(per)}.{arguments.suggestion(per, PER)}"
            )
        self.per = per
        self.centred = arguments.flag(centred, "HierarchicalNormal(centred=...)")
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"HierarchicalNormal(name=...) must be a non-empty string; got {shown(name)}."
            )
        self.name = name

    @property
    def hyper_priors_or_values(self) -> dict[str, float | dist.Distribution]:
        """``{"loc": …, "scale" or "precision": …}``: each a fixed number or a hyper-prior."""
        second = "scale" if self.scale is not None else "precision"
        return {"loc": self.loc, second: getattr(self, second)}

    @property
    def hyper_priors(self) -> dict[str, dist.Distribution]:
        """The random hyper-parameters and their priors."""
        return {
            k: v for k, v in self.hyper_priors_or_values.items() if isinstance(v, dist.Distribution)
        }

    @property
    def gibbs_conjugate(self) -> bool:
        """Whether λ | w is Gamma: centred, with a Gamma prior on the precision."""
        return self.centred and type(self.precision) is dist.Gamma

    def resolve(self, info: LeafInfo) -> HierarchicalLeaf:
        if self.per == "group":
            return HierarchicalLeaf(self, None, ())
        leaf = info.path.removeprefix("net/")
        if self.per == "leaf":
            return HierarchicalLeaf(self, leaf, ())
        if len(info.shape) not in (1, 2):
            raise ValueError(
                f"HierarchicalNormal(per='input') gives one hyper-parameter per input unit of a "
                f"dense weight (2 axes) or per entry of a vector; parameter {info.path!r} has "
                f"shape {info.shape}. Select the dense weights with bdl.ByPath."
            )
        axis = 0 if len(info.shape) == 1 else info.input_axis
        return HierarchicalLeaf(self, leaf, (info.shape[axis],), axis)

    def __repr__(self) -> str:
        parts = [f"{k}={_show(v)}" for k, v in self.hyper_priors_or_values.items()]
        form = "centred" if self.centred else "non-centred"
        return (
            f"HierarchicalNormal({', '.join(parts)}, per={self.per!r}, {form}, name={self.name!r})"
        )


def _show(v: Any) -> str:
    return type(v).__name__ if isinstance(v, dist.Distribution) else f"{v:g}"


@dataclasses.dataclass(frozen=True, eq=False)
class HierarchicalLeaf(ConditionalLeafPrior):
    """A leaf under a :class:`HierarchicalNormal` prior: its group of hyper-parameters (``leaf``
    is ``None`` for ``per="group"``), their shape, and the leaf axis they run along."""

    spec: HierarchicalNormal
    leaf: str | None
    shape: tuple[int, ...]
    axis: int = 0

    @property
    def group(self) -> tuple[str, str | None]:
        """The key of the hyper-parameter group: (name, leaf path or None)."""
        return (self.spec.name, self.leaf)

    def _expand(self, value: jax.Array, info: LeafInfo) -> jax.Array:
        """A per-input hyper-parameter (n_in,) broadcast along the leaf's input axis."""
        if not self.shape:
            return value
        shape = [1] * len(info.shape)
        shape[self.axis] = self.shape[0]
        return jnp.reshape(value, shape)

    def loc_scale(self, hyper: dict[str, jax.Array], info: LeafInfo) -> tuple[Any, Any]:
        """(μ, σ) broadcastable to the leaf, from the constrained hyper-parameter values."""
        given = self.spec.hyper_priors_or_values
        loc = self._expand(hyper["loc"], info) if "loc" in self.spec.hyper_priors else given["loc"]
        if "scale" in given:
            scale = (
                self._expand(hyper["scale"], info)
                if "scale" in self.spec.hyper_priors
                else given["scale"]
            )
        elif "precision" in self.spec.hyper_priors:
            scale = jax.lax.rsqrt(self._expand(hyper["precision"], info))
        else:
            scale = given["precision"] ** -0.5
        return loc, scale

    def constrain_given(self, u: jax.Array, hyper: dict, info: LeafInfo) -> jax.Array:
        """The weights w from the sampled u (w = u centred, w = μ + σu non-centred)."""
        if self.spec.centred:
            return u
        loc, scale = self.loc_scale(hyper, info)
        return loc + scale * u

    def unconstrain_given(self, w: jax.Array, hyper: dict, info: LeafInfo) -> jax.Array:
        if self.spec.centred:
            return w
        loc, scale = self.loc_scale(hyper, info)
        return (w - loc) / scale

    def log_prob_given(self, u: jax.Array, hyper: dict, info: LeafInfo) -> jax.Array:
        """Σ log p(u | hyper): N(w; μ, σ²) centred, N(z; 0, 1) non-centred."""
        if not self.spec.centred:
            return jnp.sum(dist.Normal(0.0, 1.0).log_prob(u))
        loc, scale = self.loc_scale(hyper, info)
        return jnp.sum(jnp.broadcast_to(dist.Normal(loc, scale).log_prob(u), jnp.shape(u)))

    def sample_given(self, key: jax.Array, hyper: dict, info: LeafInfo) -> jax.Array:
        """A draw of the weights w | hyper (constrained space)."""
        loc, scale = self.loc_scale(hyper, info)
        return loc + scale * jax.random.normal(key, info.shape)

    def __repr__(self) -> str:
        return repr(self.spec) if self.leaf is None else f"{self.spec!r}[{self.leaf}]"


# ------------------------------------------------------------------- the hyper-parameter groups
@dataclasses.dataclass(frozen=True, eq=False)
class HyperGroup:
    """One set of hyper-parameters: ``position["hyper"][name]`` (``[leaf]`` when per leaf)."""

    spec: HierarchicalNormal
    leaf: str | None
    shape: tuple[int, ...]

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.spec.name, self.leaf)

    def get(self, tree: PyTree) -> dict[str, jax.Array]:
        return tree[self.spec.name] if self.leaf is None else tree[self.spec.name][self.leaf]


def hyper_groups(priors: tuple[LeafPrior, ...]) -> tuple[HyperGroup, ...]:
    """The distinct hyper-parameter groups of resolved leaf priors, in leaf order; one name
    belongs to one :class:`HierarchicalNormal` (else ``ValueError``)."""
    groups: dict[tuple[str, str | None], HyperGroup] = {}
    owner: dict[str, HierarchicalNormal] = {}
    for p in priors:
        if not isinstance(p, HierarchicalLeaf):
            continue
        name = p.spec.name
        if owner.setdefault(name, p.spec) is not p.spec:
            raise ValueError(
                f"two HierarchicalNormal priors are both named {name!r}; give each its own "
                "name=..., or use one prior object for leaves that share hyper-parameters."
            )
        groups.setdefault(p.group, HyperGroup(p.spec, p.leaf, p.shape))
    return tuple(groups.values())


def assemble_hyper(groups: tuple[HyperGroup, ...], values: list[dict[str, jax.Array]]) -> PyTree:
    """The hyper-parameter tree of per-group values.

    Args:
        groups: the model's hyper-parameter groups.
        values: each group's hyper-parameters by name, in the order of ``groups``.

    Returns:
        The hyper-parameters, by group name (and by leaf for a per-leaf group).
    """
    tree: dict[str, Any] = {}
    for g, v in zip(groups, values, strict=True):
        if g.leaf is None:
            tree[g.spec.name] = v
        else:
            tree.setdefault(g.spec.name, {})[g.leaf] = v
    return tree


def _init_value(prior: dist.Distribution) -> float:
    from bdl.dsl.likelihoods import scale_init

    if _positive(prior.support):
        return scale_init(prior)  # 1 when inside the support, as a learned scale starts
    return float(biject_to(prior.support)(jnp.zeros(())))


def initial_hyper(groups: tuple[HyperGroup, ...]) -> PyTree:
    """Constrained starting values: 1 for a scale or precision whose support holds it (as
    learned likelihood scales), else the image of u = 0."""
    return assemble_hyper(
        groups,
        [
            {
                k: jnp.full(g.shape, _init_value(p), jnp.float32)
                for k, p in g.spec.hyper_priors.items()
            }
            for g in groups
        ],
    )


def constrain_hyper(groups: tuple[HyperGroup, ...], u: PyTree) -> PyTree:
    return assemble_hyper(
        groups,
        [
            {k: biject_to(p.support)(g.get(u)[k]) for k, p in g.spec.hyper_priors.items()}
            for g in groups
        ],
    )


def unconstrain_hyper(groups: tuple[HyperGroup, ...], v: PyTree) -> PyTree:
    return assemble_hyper(
        groups,
        [
            {
                k: biject_to(p.support).inv(jnp.asarray(g.get(v)[k], jnp.float32))
                for k, p in g.spec.hyper_priors.items()
            }
            for g in groups
        ],
    )


def log_prior_hyper(groups: tuple[HyperGroup, ...], u: PyTree) -> jax.Array:
    """Σ log p(t(u)) + log |t′(u)| over every hyper-parameter (sampled coordinates)."""
    total = jnp.zeros(())
    for g in groups:
        for k, p in g.spec.hyper_priors.items():
            x = g.get(u)[k]
            t = biject_to(p.support)
            v = t(x)
            lp = jnp.broadcast_to(p.log_prob(v), jnp.shape(x))
            total = total + jnp.sum(lp) + jnp.sum(t.log_abs_det_jacobian(x, v))
    return total


def sample_hyper(groups: tuple[HyperGroup, ...], key: jax.Array) -> PyTree:
    """A draw of every hyper-parameter from its prior (constrained space)."""
    values = []
    for i, g in enumerate(groups):
        keys = jax.random.split(jax.random.fold_in(key, i), len(g.spec.hyper_priors))
        values.append(
            {
                k: p.expand(g.shape).sample(kk) if g.shape else p.sample(kk)
                for kk, (k, p) in zip(keys, g.spec.hyper_priors.items(), strict=True)
            }
        )
    return assemble_hyper(groups, values)
