"""``bdl.Ordered``: an ordered vector with a density on its entries (Stan's ``ordered[K] mu``).

Two forms, told apart by whether the length K is given:

* **iid entries**, ``Ordered(base, K)``: the K order statistics x_(1) < … < x_(K) of K iid
  draws from a univariate density p, with the density (David & Nagaraja 2003, Eq. 2.2.3)

      p(x_1, …, x_K) = K! · Π_k p(x_k)      on x_1 < … < x_K,   0 elsewhere.

  It is the prior Stan writes ``ordered[K] mu; mu ~ normal(0, 2);`` (the product of iid
  densities on the ordered cone; K! normalises it), the usual prior of mixture locations once
  the ordering has removed label switching.
* **one density per entry**, ``Ordered(base)`` with a base that has one univariate density per
  entry on its last batch axis (``dist.Normal(jnp.array([a, b]), 1.0)``), a vector density of
  event shape (K,) (``….to_event(1)``, ``dist.MultivariateNormal``), or a list of K univariate
  densities: Stan's ``ordered[2] mu; mu[1] ~ normal(a, 1); mu[2] ~ normal(b, 1);``. The
  log-density is the base's at the ordered values,

      log p(x) = Σ_k log p_k(x_k)      (a vector base: log p_base(x))   on x_1 < … < x_K,

  as Stan's target. It is not normalised over the cone: the missing constant
  −log P(X_1 < … < X_K) under independent X_k ~ p_k has no closed form, does not depend on any
  parameter and changes no posterior, and Stan leaves it out too.

Either is *not* the cut-points pattern
``TransformedDistribution(Normal(0, s).to_event(1), OrderedTransform())``, which puts the Normal
density on the unconstrained coordinates (x_1, log(x_2 − x_1), …) and so a log-normal prior on
each gap. All are sampled through the same bijector ``biject_to(ordered_vector)``
(``positive_ordered_vector`` for bases on (0, ∞): NumPyro's ``OrderedTransform`` followed by
``ExpTransform``), whose log-Jacobian the sampler adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import gammaln
from numpyro.distributions import constraints

from bdl.utils.arguments import shown

#: rounds of independent proposals :meth:`Ordered.sample` makes for a base with one density
#: per entry before it gives up on a row (rejection sampling on the ordered cone)
SAMPLE_ROUNDS = 1_000


def _ordered_support(support: constraints.Constraint, what: str) -> constraints.Constraint:
    """ordered_vector for a support ℝ, positive_ordered_vector for (0, ∞)."""
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    if support is constraints.real or support is constraints.real_vector:
        return constraints.ordered_vector
    lower = getattr(support, "lower_bound", None)
    upper = getattr(support, "upper_bound", None)
    positive = support is constraints.positive or (
        isinstance(support, constraints.greater_than) and upper is None and _is_zero(lower)
    )
    if positive:
        return constraints.positive_ordered_vector
    raise ValueError(
        f"bdl.Ordered(base=...) needs densities on ℝ or on (0, ∞) (NumPyro has a bijector onto "
        f"ordered vectors of those only); got {what} with support {support}. Use e.g. "
        "dist.Normal, dist.StudentT, dist.HalfNormal, dist.Gamma."
    )


def _is_zero(value: Any) -> bool:
    try:
        return float(jnp.max(jnp.abs(jnp.asarray(value)))) == 0.0
    except (TypeError, ValueError):
        return False


def _check_distribution(base: Any, what: str) -> None:
    if not isinstance(base, dist.Distribution):
        raise TypeError(
            f"bdl.Ordered({what}) must be a NumPyro distribution such as dist.Normal(0.0, 2.0), "
            f"or a list of them, one per entry; got {shown(base)}."
        )


def _form(base: Any, size: int | None) -> tuple[str, Any, int, tuple[int, ...]]:
    """(form, base as stored, K, batch shape) of ``Ordered(base, size)``, or a clear error."""
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"bdl.Ordered(size=...) must be an integer K ≥ 1; got {shown(size)}.")
    if isinstance(base, Sequence) and not isinstance(base, str):
        entries = tuple(base)
        if not entries:
            raise ValueError("bdl.Ordered(base=[...]) needs one distribution per entry; got [].")
        for k, d in enumerate(entries):
            _check_distribution(d, f"base[{k}]")
            if d.event_shape != ():
                raise ValueError(
                    f"bdl.Ordered(base=[...]): entry {k} must be univariate (event shape ()); "
                    f"got {type(d).__name__} with event shape {d.event_shape}."
                )
        _same_length(size, len(entries), "a list of")
        try:
            batch = jnp.broadcast_shapes(*(d.batch_shape for d in entries))
        except ValueError:
            shapes = [d.batch_shape for d in entries]
            raise ValueError(
                f"bdl.Ordered(base=[...]): the entries' batch shapes {shapes} do not broadcast."
            ) from None
        return "list", entries, len(entries), tuple(batch)
    _check_distribution(base, "base")
    event, batch = tuple(base.event_shape), tuple(base.batch_shape)
    if len(event) == 1:
        _same_length(size, event[0], "a vector base of event shape")
        return "vector", base, event[0], batch
    if event:
        raise ValueError(
            f"bdl.Ordered(base=...) must be univariate (event shape ()) or a vector density "
            f"(event shape (K,)); got {type(base).__name__} with event shape {event}."
        )
    if size is None:
        if not batch:
            raise ValueError(
                f"bdl.Ordered(base=...): {type(base).__name__} has one density for every entry; "
                "give the length, bdl.Ordered(base, K), for K iid entries, or a base with one "
                "density per entry on its last batch axis (e.g. dist.Normal(jnp.array([a, b]), "
                "1.0)) or a list of K distributions."
            )
        return "entries", base, batch[-1], batch[:-1]
    if batch and batch[-1] == size:
        raise ValueError(
            f"bdl.Ordered(base, {size}): the base's batch shape {batch} ends in the vector's "
            f"length {size}, which reads two ways. For one density per entry write "
            f"bdl.Ordered(base) (the length is read off the base); for ordered vectors of "
            f"{size} iid entries write bdl.Ordered(scalar_base, {size}).expand([...])."
        )
    return "iid", base, size, batch


def _same_length(size: int | None, k: int, what: str) -> None:
    if size is not None and size != k:
        raise ValueError(
            f"bdl.Ordered(base, size={size}): {what} {k} entries gives vectors of length {k}; "
            f"leave size out or give {k}."
        )


class Ordered(dist.Distribution):
    """An ordered vector x_1 < … < x_K with iid entries (``Ordered(base, K)``, the order
    statistics: log p(x) = log K! + Σ_k log p_base(x_k)) or one density per entry
    (``Ordered(base)``: log p(x) = Σ_k log p_k(x_k), as Stan's ``ordered[K] mu; mu[k] ~ …``).

    Args:
        base: a NumPyro distribution on ℝ or on (0, ∞): univariate with ``size`` given (iid
            entries; a batched base, batch shape ``b``, gives a batch ``b`` of ordered vectors);
            univariate without ``size``, one density per entry on its last batch axis
            (``dist.Normal(jnp.array([a, b]), 1.0)``); a vector density of event shape (K,)
            (``….to_event(1)``, ``dist.MultivariateNormal``); or a list of K univariate
            distributions, one per entry (any families, one support).
        size: K ≥ 1 for iid entries; leave it out (or give the base's K) for one density per
            entry.

    The support is ``constraints.ordered_vector`` (``positive_ordered_vector`` for bases on
    (0, ∞)), so NumPyro and bdl sample it through ``biject_to(support)`` with its log-Jacobian.
    Examples: ``bdl.Ordered(dist.Normal(0.0, 2.0), 2)`` is Stan's ``ordered[2] mu ~ normal(0,
    2)``; ``bdl.Ordered(dist.Normal(jnp.array([a, b]), 1.0))`` is ``mu[1] ~ normal(a, 1);
    mu[2] ~ normal(b, 1)``. With one density per entry the density is not normalised over the
    ordered cone (a constant, as in Stan).

    Raises:
        TypeError: ``base`` is not a NumPyro distribution (or a list of them).
        ValueError: ``size`` is not an integer ≥ 1 or does not match the base, the base is
            neither univariate nor a vector density, its support is neither ℝ nor (0, ∞), or a
            base batched along the vector's length was given with ``size`` (ambiguous).
    """

    arg_constraints: ClassVar[dict] = {}
    pytree_data_fields = ("base",)
    pytree_aux_fields = ("size", "form", "_support")

    def __init__(
        self,
        base: dist.Distribution | Sequence[dist.Distribution],
        size: int | None = None,
        *,
        validate_args: bool | None = None,
    ):
        form, stored, k, batch = _form(base, size)
        if form == "list":
            supports = [_ordered_support(d.support, type(d).__name__) for d in stored]
            if any(s is not supports[0] for s in supports):
                raise ValueError(
                    "bdl.Ordered(base=[...]): the entries must share one support, all on ℝ or all "
                    f"on (0, ∞); got {[str(d.support) for d in stored]}."
                )
            support = supports[0]
        else:
            support = _ordered_support(stored.support, type(stored).__name__)
        self.base = stored
        self.size = k
        self.form = form
        self._support = support
        super().__init__(batch, (k,), validate_args=validate_args)

    @property
    def support(self) -> constraints.Constraint:  # type: ignore[override]
        return self._support

    @property
    def iid(self) -> bool:
        """Whether the entries are iid (``Ordered(base, K)``), the order statistics."""
        return self.form == "iid"

    def _independent(self, key: jax.Array, sample_shape: tuple[int, ...]) -> jax.Array:
        """Independent draws of the K entries, unsorted: ``sample_shape + batch + (K,)``."""
        if self.form == "iid":
            draws = self.base.sample(key, (self.size, *sample_shape))  # (K, *sample, *batch)
            return jnp.moveaxis(draws, 0, -1)
        if self.form == "list":
            keys = jax.random.split(key, self.size)
            draws = [
                d.expand(self.batch_shape).sample(k, sample_shape)
                for k, d in zip(keys, self.base, strict=True)
            ]
            return jnp.stack(draws, axis=-1)
        return self.base.sample(key, sample_shape)

    def sample(self, key: jax.Array, sample_shape: tuple[int, ...] = ()) -> jax.Array:
        """Draws of the ordered vector.

        iid entries: K iid draws of the base, sorted (exact). One density per entry: rejection
        on the ordered cone, independent draws of the entries until they come out ordered (exact,
        at 1/P(ordered) proposals per draw); a draw not accepted within
        :data:`SAMPLE_ROUNDS` rounds (bases that make the order improbable, P(ordered) ≲ 1e-3)
        is its last proposal sorted, a valid ordered vector for a start but not a draw of this
        density.

        Args:
            key: a JAX random key.
            sample_shape: the shape of independent draws.

        Returns:
            An array of shape ``sample_shape + batch_shape + (K,)``, increasing along its last
                axis.
        """
        key, first = jax.random.split(key)
        proposal = self._independent(first, tuple(sample_shape))
        if self.form == "iid":
            return jnp.sort(proposal, axis=-1)

        def ordered(x: jax.Array) -> jax.Array:
            return jnp.all(jnp.diff(x, axis=-1) > 0, axis=-1)

        def more(state: tuple) -> jax.Array:
            i, done, _, _ = state
            return (i < SAMPLE_ROUNDS) & ~jnp.all(done)

        def round_(state: tuple) -> tuple:
            i, done, out, k = state
            k, sub = jax.random.split(k)
            x = self._independent(sub, tuple(sample_shape))
            take = ~done & ordered(x)
            return i + 1, done | take, jnp.where(take[..., None], x, out), k

        done = ordered(proposal)
        state = (jnp.asarray(1), done, proposal, key)
        _, done, out, _ = jax.lax.while_loop(more, round_, state)
        return jnp.where(done[..., None], out, jnp.sort(out, axis=-1))

    def log_prob(self, value: jax.Array) -> jax.Array:
        """The log-density at ordered vectors: log K! + Σ_k log p_base(x_k) for iid entries,
        Σ_k log p_k(x_k) (or log p_base(x) for a vector base) for one density per entry. The
        entries are assumed ordered (NumPyro's ``validate_args`` checks the support).

        Args:
            value: ordered vectors, the last axis of size K.

        Returns:
            The log-density of each vector.
        """
        value = jnp.asarray(value)
        if self.form == "iid":
            lp = self.base.log_prob(jnp.moveaxis(value, -1, 0))
            return jnp.sum(lp, axis=0) + gammaln(self.size + 1.0)
        if self.form == "entries":
            return jnp.sum(self.base.log_prob(value), axis=-1)
        if self.form == "list":
            return sum(d.log_prob(value[..., k]) for k, d in enumerate(self.base))
        return self.base.log_prob(value)

    def __repr__(self) -> str:
        if self.form == "list":
            return f"Ordered([{', '.join(_shown_distribution(d) for d in self.base)}])"
        size = f", size={self.size}" if self.form == "iid" else ""
        return f"Ordered({_shown_distribution(self.base)}{size})"


def _shown_distribution(d: dist.Distribution) -> str:
    args = ", ".join(
        f"{k}={jnp.asarray(getattr(d, k)).tolist()}"
        for k in d.arg_constraints
        if hasattr(d, k) and not isinstance(getattr(d, k), jax.core.Tracer)
    )
    return f"{type(d).__name__}({args})"
