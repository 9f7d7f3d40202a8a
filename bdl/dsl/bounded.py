"""``bdl.Bounded``: a parameter between bounds that may depend on other parameters.

Stan declares such a parameter with bounds that are expressions of parameters declared before
it, e.g. the GARCH(1, 1) model's stationarity constraint α₁ + β₁ < 1:

    real<lower=0, upper=1> alpha1;
    real<lower=0, upper=(1 - alpha1)> beta1;

In bdl the bound is a function of the model's other parameters, in their constrained values,
given as the prior of the network parameter (``prior=`` or :class:`bdl.ByPath`):

    bdl.ByPath({"alpha1": bdl.Bounded(low=0.0, high=1.0),
                "beta1": bdl.Bounded(low=0.0, high=lambda p: 1.0 - p["alpha1"])})

The sampler's coordinate u is unconstrained and the parameter is, with a = low, b = high read at
the other parameters' current values (Stan's transforms, Stan Reference Manual, *Constraint
transforms*):

    x = a + (b − a)·σ(u),   log |dx/du| = log(b − a) + log σ(u) + log σ(−u)     (both bounds),
    x = a + e^u,            log |dx/du| = u                                      (low only),
    x = b − e^u,            log |dx/du| = u                                      (high only),

with σ the logistic function. The prior density is the given prior's log-density at x (a flat
density, 0, without one) plus this log-Jacobian — Stan's target for ``beta1 ~ uniform(0, 1 -
alpha1);`` or any other statement on the constrained value. Like Stan, bdl does not normalise
the prior over the bounds: a prior whose support is wider than (a, b) is truncated there without
the factor 1/(F(b) − F(a)), which matters when a or b depend on parameters; write that term into
the prior (a callable prior) when the model needs it.

Because x is a function of u and of parameters constrained before it, the map from all sampled
coordinates to all parameters is triangular and its log-determinant is the sum of the terms
above; the compiler orders the bounded parameters so that each bound reads values already
constrained (:mod:`bdl.compile.bounds`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from bdl.dsl.conditional import ConditionalLeafPrior
from bdl.dsl.priors import Distribution, LeafInfo, LeafPrior, Prior
from bdl.utils.arguments import finite_array, shown, suggestion

#: where a bounded draw of ``sample_given`` may come no closer to a finite bound (in units of
#: b − a), so that its unconstrained coordinate stays finite in float32
EDGE = 1e-6


class Pending(Exception):  # noqa: N818 (not an error: a value not constrained yet)
    """A bound read a parameter whose own bounds are not resolved yet (the compiler retries)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class UnknownParameterError(KeyError):
    """A bound read a name that is no parameter of the model."""

    def __str__(self) -> str:
        return str(self.args[0])


class Parameters(Mapping):
    """The model's parameters in their constrained values, by name: what a bound reads.

    Names are those of ``samples.named(compiled)``: ``"net/<path>"`` for the network's
    parameters, ``"lik/<name>"`` for the likelihood's learned ones; the name without its
    ``net/`` or ``lik/`` (``p["alpha1"]``) reads the same value when no other parameter has it.

    Args:
        values: the constrained values by full name.
        pending: names of parameters whose values are not known yet.
        owner: the name of the parameter whose bound reads these (it may not read itself).
    """

    def __init__(
        self, values: Mapping[str, Any], pending: frozenset[str] = frozenset(), owner: str = ""
    ):
        self._values = dict(values)
        self._pending = frozenset(pending)
        self._owner = owner

    def _names(self) -> list[str]:
        return sorted({*self._values, *self._pending})

    def _full(self, key: Any) -> str:
        names = self._names()
        if key in names:
            return key
        short = [n for n in names if n.split("/", 1)[-1] == key]
        if len(short) == 1:
            return short[0]
        if short:
            raise UnknownParameterError(
                f"{key!r} names several parameters ({', '.join(short)}); give the full name."
            )
        raise UnknownParameterError(
            f"{key!r} is no parameter of the model; its parameters are {', '.join(names)} "
            f"(read as p['net/w'], or p['w'] where the short name is unique)."
            f"{suggestion(key, names)}"
        )

    def __getitem__(self, key: str) -> Any:
        name = self._full(key)
        if name == self._owner:
            raise ValueError(f"the bound of {name} reads {name} itself; a bound must read others.")
        if name in self._pending:
            raise Pending(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


def _function_text(fn: Callable) -> str:
    """A stable description of a bound or prior function: its qualified name and a digest of its
    code, constants and simple captured values, so that two different lambdas differ."""
    name = getattr(fn, "__qualname__", type(fn).__name__)
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"<function {name}>"
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, int | float | str | bool | np.ndarray | jax.Array):
            cells.append(np.asarray(value).tolist())
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr((code.co_consts, code.co_names, cells)))
    digest = hashlib.sha256(code.co_code + text.encode()).hexdigest()[:12]
    return f"<function {name} #{digest}>"


def _bound(value: Any, name: str) -> Any:
    """A bound as declared: ``None``, a function of the parameters, or a finite number/array."""
    if value is None or callable(value):
        return value
    not_numeric = (
        f"bdl.Bounded({name}=...) must be a number, an array, a function of the other "
        f"parameters (e.g. lambda p: 1.0 - p['alpha1']) or None; got {shown(value)}."
    )
    if isinstance(value, str | bytes | bool | np.bool_):
        raise TypeError(not_numeric)
    not_finite = (
        f"bdl.Bounded({name}=...) has NaN or infinite entries; leave {name} out (None) for "
        "no bound on that side."
    )
    array = finite_array(value, not_numeric, not_finite)
    return array if array.ndim else float(array)


def _constrain(u: jax.Array, low: Any, high: Any) -> jax.Array:
    """x from u: low + (high − low)·sigmoid(u) between two bounds, low + eᵘ or high − eᵘ below or
    above one."""
    if low is not None and high is not None:
        return low + (high - low) * jax.nn.sigmoid(u)
    return low + jnp.exp(u) if low is not None else high - jnp.exp(u)


def _prior(prior: Any) -> Any:
    """The prior as declared: ``None`` (flat), a univariate distribution, a bdl leaf prior, or a
    function of the other parameters returning a distribution."""
    if prior is None:
        return None
    if isinstance(prior, dist.Distribution):
        prior = Distribution(prior)
    if isinstance(prior, LeafPrior) and not isinstance(prior, Bounded):
        if isinstance(prior, Distribution) and prior.d.event_shape != ():
            raise ValueError(
                f"bdl.Bounded(prior=...) must be univariate (event shape ()); got "
                f"{type(prior.d).__name__} with event shape {prior.d.event_shape}."
            )
        return prior
    if isinstance(prior, Prior):
        raise TypeError(
            f"bdl.Bounded(prior=...) must be a density of each entry (a NumPyro distribution, "
            f"bdl.Normal, bdl.Laplace, bdl.HeNormal); got {type(prior).__name__}."
        )
    if callable(prior):
        return prior
    raise TypeError(
        "bdl.Bounded(prior=...) must be a NumPyro distribution, a bdl leaf prior (bdl.Normal, …), "
        "a function of the other parameters returning a distribution (e.g. lambda p: "
        f"dist.Uniform(0.0, 1.0 - p['alpha1'])), or None for a flat prior; got {shown(prior)}."
    )


class Bounded(ConditionalLeafPrior):
    """A parameter in (low, high), each bound a number or a function of the other parameters
    (Stan's ``real<lower=L, upper=U> x;`` with L, U expressions of parameters).

    Sampled in the unconstrained u: x = low + (high − low)·σ(u) between two bounds, x = low + e^u
    or x = high − e^u with one; the prior density is ``prior``'s log-density at x plus the
    log-Jacobian, not normalised over the bounds (as in Stan).

    Args:
        prior: the density of each entry at the constrained value: a univariate NumPyro
            distribution (``dist.Beta(2.0, 2.0)``), a bdl leaf prior (``bdl.Normal(1.0)``), a
            function ``p -> distribution`` of the other parameters (``lambda p:
            dist.Uniform(0.0, 1.0 - p["alpha1"])``, Stan's ``beta1 ~ uniform(0, 1 - alpha1)``),
            or ``None`` (default) for a flat density, as a Stan parameter without a statement.
        low: the lower bound: a number, an array that broadcasts to the parameter, a function
            ``p -> value`` of the other parameters, or ``None`` for none.
        high: the upper bound, likewise.

    A function reads ``p``, the model's parameters in their constrained values by name
    (:class:`Parameters`: ``p["net/alpha1"]``, or ``p["alpha1"]`` when the short name is
    unique), and returns a value that broadcasts to the parameter's shape.

    Raises:
        TypeError: a bound or the prior of an unsupported kind.
        ValueError: no bound, a bound with NaN or infinite entries, constant bounds with
            low ≥ high, or a multivariate prior.
    """

    def __init__(self, prior: Any = None, *, low: Any = None, high: Any = None):
        self.prior = _prior(prior)
        self.low = _bound(low, "low")
        self.high = _bound(high, "high")
        if self.low is None and self.high is None:
            raise ValueError(
                "bdl.Bounded needs low=, high= or both (a number or a function of the other "
                "parameters); for an unbounded parameter give its prior directly."
            )
        fixed = not callable(self.low) and not callable(self.high) and self.low is not None
        if fixed and self.high is not None and not np.all(np.less(self.low, self.high)):
            raise ValueError(
                f"bdl.Bounded(low={self.low!r}, high={self.high!r}): low must be below high."
            )

    # ------------------------------------------------------------------ declared checks
    def resolve(self, info: LeafInfo) -> LeafPrior:
        """The prior itself, once its constant bounds and fixed prior fit the parameter.

        Args:
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            ``self``.

        Raises:
            ValueError: a constant bound or the fixed prior does not broadcast to the parameter.
        """
        for name, value in (("low", self.low), ("high", self.high)):
            if value is not None and not callable(value):
                _fits(np.shape(value), info, f"bdl.Bounded({name}=...)")
        if isinstance(self.prior, LeafPrior):
            self.prior.resolve(info)
        return self

    # ------------------------------------------------------------------ given the others
    def bounds(self, values: Parameters, info: LeafInfo) -> tuple[Any, Any]:
        """(low, high) at the other parameters' values, each ``None`` or broadcast to the leaf.

        Args:
            values: the other parameters' constrained values.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            The two bounds, ``None`` where there is none.

        Raises:
            ValueError: a bound function fails (an unknown name, a wrong shape).
        """
        return (
            self._evaluate(self.low, "low", values, info),
            self._evaluate(self.high, "high", values, info),
        )

    def _evaluate(self, bound: Any, name: str, values: Parameters, info: LeafInfo) -> Any:
        if bound is None:
            return None
        if callable(bound):
            try:
                bound = bound(values)
            except (Pending, UnknownParameterError, ValueError) as err:
                if isinstance(err, Pending):
                    raise
                raise ValueError(f"bdl.Bounded({name}=...) of {info.path}: {err}") from None
        value = jnp.asarray(bound)
        _fits(jnp.shape(value), info, f"bdl.Bounded({name}=...)")
        return jnp.broadcast_to(value, info.shape)

    def base(self, values: Parameters, info: LeafInfo) -> dist.Distribution | None:
        """The prior density of each entry at the other parameters' values (``None``: flat).

        Args:
            values: the other parameters' constrained values.
            info: the parameter's path, shape, fan-in and input axis.

        Returns:
            A univariate NumPyro distribution, or ``None``.

        Raises:
            ValueError: a prior function that fails or returns no univariate distribution.
        """
        if self.prior is None:
            return None
        if isinstance(self.prior, LeafPrior):
            return self.prior.distribution(info)
        try:
            d = self.prior(values)
        except (UnknownParameterError, ValueError) as err:
            raise ValueError(f"bdl.Bounded(prior=...) of {info.path}: {err}") from None
        if not isinstance(d, dist.Distribution) or d.event_shape != ():
            raise ValueError(
                f"bdl.Bounded(prior=...) of {info.path} must return a univariate NumPyro "
                f"distribution; got {shown(d)}."
            )
        return d

    def constrain_given(self, u: jax.Array, values: Parameters, info: LeafInfo) -> jax.Array:
        """x from the sampled u, between the bounds read at ``values``."""
        return _constrain(u, *self.bounds(values, info))

    def unconstrain_given(self, x: jax.Array, values: Parameters, info: LeafInfo) -> jax.Array:
        """u from the constrained x (not finite where x is outside the bounds)."""
        low, high = self.bounds(values, info)
        if low is not None and high is not None:
            p = (x - low) / (high - low)
            return jnp.log(p) - jnp.log1p(-p)
        return jnp.log(x - low) if low is not None else jnp.log(high - x)

    def log_prob_given(self, u: jax.Array, values: Parameters, info: LeafInfo) -> jax.Array:
        """Σ [log p(x) + log |dx/du|] over the leaf's entries, at the bounds read at ``values``."""
        low, high = self.bounds(values, info)
        x = _constrain(u, low, high)
        if low is not None and high is not None:
            log_jacobian = jnp.log(high - low) - jax.nn.softplus(-u) - jax.nn.softplus(u)
        else:
            log_jacobian = u
        d = self.base(values, info)
        total = jnp.sum(jnp.broadcast_to(log_jacobian, info.shape))
        if d is None:
            return total
        return total + jnp.sum(jnp.broadcast_to(d.log_prob(x), info.shape))

    def sample_given(self, key: jax.Array, values: Parameters, info: LeafInfo) -> jax.Array:
        """A start drawn from the prior truncated to the bounds read at ``values`` (by the
        inverse CDF; uniform between two bounds for a flat prior or one without a CDF): a
        constrained value strictly inside the bounds.

        Raises:
            NotImplementedError: one bound and a flat prior or one without an inverse CDF (an
                improper or undrawable prior: the start falls back, as for other improper
                priors).
        """
        low, high = self.bounds(values, info)
        d = self.base(values, info)
        uniform = jax.random.uniform(key, info.shape, minval=EDGE, maxval=1.0 - EDGE)
        both = low is not None and high is not None
        if d is not None:
            try:
                lo = 0.0 if low is None else d.cdf(low)
                hi = 1.0 if high is None else d.cdf(high)
                x = jnp.broadcast_to(d.icdf(lo + (hi - lo) * uniform), info.shape)
            except NotImplementedError:
                if not both:
                    raise
            else:
                inside = jnp.isfinite(x)
                inside &= True if low is None else x > low
                inside &= True if high is None else x < high
                if both:
                    return jnp.where(inside, x, low + (high - low) * uniform)
                fallback = low + 1.0 if low is not None else high - 1.0
                return jnp.where(inside, x, fallback)
        if not both:
            raise NotImplementedError(f"{self!r} with one bound and a flat prior is improper.")
        return low + (high - low) * uniform

    def __repr__(self) -> str:
        def text(value: Any) -> str:
            if isinstance(value, Distribution):
                d = value.d
                args = ", ".join(
                    f"{k}={np.asarray(getattr(d, k)).tolist()}"
                    for k in d.arg_constraints
                    if k in vars(d)
                )
                return f"{type(d).__name__}({args})"
            if callable(value) and not isinstance(value, LeafPrior):
                return _function_text(value)
            return repr(value.tolist() if isinstance(value, np.ndarray) else value)

        return f"Bounded({text(self.prior)}, low={text(self.low)}, high={text(self.high)})"


def _fits(shape: tuple[int, ...], info: LeafInfo, what: str) -> None:
    try:
        fits = tuple(np.broadcast_shapes(tuple(shape), info.shape)) == tuple(info.shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"{what} has shape {tuple(shape)}, which does not broadcast to parameter "
            f"{info.path!r} of shape {info.shape}; give a scalar or an array of that shape."
        )
