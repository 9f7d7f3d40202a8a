"""A Bayesian model average over a test set, kept as running sums and updated draw by draw.

The BMA predictive of the draws θ_{c,1..k} of the chains c ∈ H is (Kim et al. 2024, Eq. 3)

    p(y | x, D) ≈ 1/(|H|·k) Σ_{c∈H} Σ_{j≤k} p(y | x, θ_{c,j}),

an average of predictive **probabilities** (never of logits). It is kept without the draws: per
chain c and test input i, the running sum S_c(i) = Σ_{j≤k} E[y | x_i, θ_{c,j}] (class
probabilities for a classifier, the predictive mean for a regressor) and, for a regressor, the
running log Σ_j p(y_i | x_i, θ_{c,j}) (a log-sum-exp: a shifted sum under a running maximum).
Sums are compensated (Kahan 1965), so the rounding error does not grow with the number of
draws. Keeping one sum per chain lets the average drop a chain that diverges after some of its
draws were added: the BMA over any set of chains is a sum over their S_c.

Each new draw is scored on the test set in batches of ``batch_size`` inputs, all chains at once,
inside one jitted call per chunk of draws: the draws never leave the device.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl import metrics
from bdl.compile.prediction_inputs import check_inputs, check_targets, report_nonfinite
from bdl.compile.support import check_observed
from bdl.metrics.classification import ECE_BINS
from bdl.utils import labels as label_rules
from bdl.utils.owner_jit import owner_jit

PyTree = Any

#: the columns of a curve row before its metrics: draws per chain, chains averaged, step
ROW_HEAD = ("draws", "chains", "step")
CLASSIFICATION_METRICS = ("accuracy", "nll", "ece", "brier")
REGRESSION_METRICS = ("rmse", "nll")


@dataclasses.dataclass(frozen=True)
class RunningBMA:
    """What ``bdl.sample(..., evaluate=RunningBMA(...))`` scores as the draws are produced.

    ``x`` and ``y`` are checked as ``bdl.compile`` checks a test split, before anything is
    compiled (here what needs no model; against the model in :meth:`bind`, which
    ``bdl.sample`` calls before the run starts): numeric, one target per input, no NaN or ±inf
    in either (one NaN prediction or target makes every metric NaN), and for a classifier
    integral labels among its classes (JAX would read a label −1 as the last class).

    Args:
        x: the inputs to score on; default the compiled model's test inputs.
        y: the targets of ``x``; default the compiled model's test targets.
        batch_size: test inputs scored at once per chain (memory: ``batch_size`` forward passes
            per chain at a time).
        num_bins: equal-width confidence bins of the ECE (Guo et al. 2017; default 15).
    """

    x: Any = None
    y: Any = None
    batch_size: int = 500
    num_bins: int = ECE_BINS

    def __post_init__(self) -> None:
        for name in ("batch_size", "num_bins"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"RunningBMA({name}=...) must be an integer >= 1; got {value!r}.")
        if (self.x is None) != (self.y is None):
            raise ValueError(
                "RunningBMA: give both x and y (inputs and targets to score on), or neither to "
                "use the compiled model's test split."
            )
        if self.x is not None:
            _check_test_data(self.x, self.y)

    def bind(self, target: Any, num_chains: int) -> Accumulator:
        """The accumulator of this evaluation on ``target`` for ``num_chains`` chains; checked
        before anything is compiled.

        Args:
            target: the compiled model the run samples.
            num_chains: the run's chains.

        Returns:
            The accumulator the sampling loop updates with every draw.

        Raises:
            TypeError: ``target`` is not a compiled model (a potential has no predictions).
            ValueError: no test data, or test data that do not fit the model: inputs of other
                features, targets of another shape, labels outside the model's classes or not
                integral, targets outside the likelihood's support.
        """
        from bdl.compile.compiled_model import CompiledModel

        if not isinstance(target, CompiledModel):
            raise TypeError(
                "evaluate= scores a model's predictions, so it needs a compiled bdl.Model; "
                f"{getattr(target, 'name', type(target).__name__)!r} is a "
                f"{type(target).__name__} (a potential has no predictive)."
            )
        if self.x is None:
            if target.x_test is None:
                raise ValueError(
                    f"evaluate=True: {target.name} has no test split; compile it with "
                    "(x, y, x_test, y_test), or pass evaluate=bdl.evaluation.RunningBMA(x=..., "
                    "y=...)."
                )
            x, y = target.x_test, target.y_test
        else:
            x, y = self._checked(target)
        n = int(np.shape(x)[0])
        size = min(self.batch_size, n)
        batches = -(-n // size)
        pad = batches * size - n

        def batched(a: jax.Array) -> jax.Array:  # padded with copies of the first row
            a = jnp.concatenate([a, jnp.repeat(a[:1], pad, axis=0)]) if pad else a
            return a.reshape(batches, size, *a.shape[1:])

        return Accumulator(
            x=batched(jnp.asarray(x)),
            y=batched(jnp.asarray(y)),
            target=target,
            n=n,
            num_chains=num_chains,
            num_bins=self.num_bins,
            classification=target.likelihood.task == "classification",
        )

    def _checked(self, target: Any) -> tuple[Any, np.ndarray]:
        """``x`` and ``y`` checked against ``target`` as ``bdl.compile`` checks ``y_test``; the
        targets in the dtype the model scores (int32 labels for a classifier)."""
        x_shape, y_shape = np.shape(self.x), np.shape(self.y)
        if x_shape[1:] != target.x_train.shape[1:] or y_shape[1:] != target.y_train.shape[1:]:
            raise ValueError(
                f"RunningBMA(x, y): inputs {x_shape} and targets {y_shape} do not match the "
                f"training data's {target.x_train.shape} and {target.y_train.shape} beyond "
                "the first axis."
            )
        check_inputs(target, self.x, "RunningBMA(x=...)", nonfinite="raise")
        y = check_targets(target, self.x, self.y, "RunningBMA(y=...)")
        probe = jax.ShapeDtypeStruct((min(len(y), 2), *x_shape[1:]), target.x_train.dtype)
        out = jax.eval_shape(target.forward, target.initial_position, probe)
        check_observed(target.likelihood, out, y, "RunningBMA(y=...)")
        return self.x, np.asarray(y, target.y_train.dtype)


def _check_test_data(x: Any, y: Any) -> None:
    """What :class:`RunningBMA` can check of its ``x`` and ``y`` without the model: numeric,
    as many targets as inputs (at least one), neither with NaN or ±inf."""
    for name, values in (("RunningBMA(x=...)", x), ("RunningBMA(y=...)", y)):
        if isinstance(values, jax.core.Tracer):
            raise TypeError(f"{name} must be an array, not a value traced under jax.jit.")
        dtype = values.dtype if hasattr(values, "dtype") else np.asarray(values).dtype
        label_rules.check_numeric(name, np.empty(0, dtype))
        if np.ndim(values) == 0:
            raise ValueError(f"{name} must have a leading axis of examples; got a scalar.")
    if np.shape(x)[0] != np.shape(y)[0] or np.shape(x)[0] == 0:
        raise ValueError(
            f"RunningBMA(x, y): x has {np.shape(x)[0]} inputs and y {np.shape(y)[0]} targets; "
            "give the same number, at least one."
        )
    rows = label_rules.nonfinite_rows(np.asarray(x))
    report_nonfinite("RunningBMA(x=...)", rows, np.shape(x)[0], "raise")
    label_rules.check_finite(
        "RunningBMA(y=...)",
        np.asarray(y),
        "drop those rows first, e.g. keep = np.isfinite(y); x[keep], y[keep].",
    )


class BMAState(NamedTuple):
    """Per chain: the valid draws added (``count``), the compensated sums of the predictive
    means (``mean``, ``mean_error``) and, for a regressor, the running log Σ_j p(y_i | θ_j) as
    a maximum and a compensated sum of exp(ℓ − maximum) (``log_max``, ``like``,
    ``like_error``; empty for a classifier). Arrays are ``(chains, batches, batch_size, ...)``."""

    count: jax.Array
    mean: jax.Array
    mean_error: jax.Array
    log_max: Any = ()
    like: Any = ()
    like_error: Any = ()


def _kahan(total: jax.Array, error: jax.Array, value: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One compensated addition (Kahan 1965): ``error`` carries what rounding lost."""
    y = value - error
    t = total + y
    return t, (t - total) - y


class Accumulator(eqx.Module):
    """A :class:`RunningBMA` bound to a target: the padded test batches and the update, jittable
    (the target and the test data are traced arguments, never constants)."""

    x: jax.Array
    y: jax.Array
    target: Any
    n: int = eqx.field(static=True)
    num_chains: int = eqx.field(static=True)
    num_bins: int = eqx.field(static=True)
    classification: bool = eqx.field(static=True)

    @property
    def names(self) -> tuple[str, ...]:
        return CLASSIFICATION_METRICS if self.classification else REGRESSION_METRICS

    def init(self) -> BMAState:
        c = self.num_chains
        mean = jax.eval_shape(self.target.predictive_mean, self.target.initial_position, self.x[0])
        zeros = jnp.zeros((c, *self.x.shape[:2], *mean.shape[1:]), mean.dtype)
        state = BMAState(jnp.zeros((c,), jnp.int32), zeros, zeros)
        if self.classification:
            return state
        like = jnp.zeros((c, *self.x.shape[:2]), jnp.float32)
        return state._replace(log_max=jnp.full_like(like, -jnp.inf), like=like, like_error=like)

    def fingerprint(self) -> str:
        """A digest of the test data and settings: a resumed run must score the same."""
        digest = hashlib.sha256(repr((self.n, self.num_bins, self.x.shape)).encode())
        for a in (self.x, self.y):
            digest.update(np.ascontiguousarray(np.asarray(a)).tobytes())
        return digest.hexdigest()[:16]

    # ------------------------------------------------------------------ one draw
    def add(self, state: BMAState, positions: PyTree, valid: jax.Array) -> BMAState:
        """``state`` with one draw per chain (``positions`` with a leading chain axis) added where
        ``valid``; invalid chains' sums are left bit for bit as they were."""

        def batch(b: jax.Array, s: BMAState) -> BMAState:
            xb, yb = self.x[b], self.y[b]
            mean = jax.vmap(lambda p: self.target.predictive_mean(p, xb))(positions)
            total, error = _kahan(s.mean[:, b], s.mean_error[:, b], mean)
            keep = valid.reshape(-1, *([1] * (mean.ndim - 1)))
            s = s._replace(
                mean=s.mean.at[:, b].set(jnp.where(keep, total, s.mean[:, b])),
                mean_error=s.mean_error.at[:, b].set(jnp.where(keep, error, s.mean_error[:, b])),
            )
            if self.classification:
                return s
            ll = jax.vmap(lambda p: self.target.log_likelihood(p, xb, yb))(positions)
            old = s.log_max[:, b]
            top = jnp.maximum(old, ll)
            shrink = jnp.where(jnp.isfinite(old), jnp.exp(old - top), 0.0)
            like, like_error = _kahan(
                s.like[:, b] * shrink, s.like_error[:, b] * shrink, jnp.exp(ll - top)
            )
            keep = valid[:, None]
            return s._replace(
                log_max=s.log_max.at[:, b].set(jnp.where(keep, top, old)),
                like=s.like.at[:, b].set(jnp.where(keep, like, s.like[:, b])),
                like_error=s.like_error.at[:, b].set(
                    jnp.where(keep, like_error, s.like_error[:, b])
                ),
            )

        state = jax.lax.fori_loop(0, self.x.shape[0], batch, state)
        return state._replace(count=state.count + valid.astype(jnp.int32))

    # ------------------------------------------------------------------ metrics
    def predictive(self, state: BMAState, chains: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The BMA over the ``chains`` (a boolean mask): the mean predictive (n, ...) and, for a
        regressor, log p(y_i | x_i, D) (n,) (``()`` for a classifier)."""
        draws = jnp.sum(jnp.where(chains, state.count, 0)).astype(state.mean.dtype)
        keep = chains.reshape(-1, *([1] * (state.mean.ndim - 1)))
        total = jnp.sum(jnp.where(keep, state.mean, 0.0), axis=0)
        mean = (total / draws).reshape(-1, *total.shape[2:])[: self.n]
        if self.classification:
            return mean, ()
        log_sums = jnp.where(chains[:, None, None], state.log_max + jnp.log(state.like), -jnp.inf)
        log_density = jax.nn.logsumexp(log_sums, axis=0) - jnp.log(draws)
        return mean, log_density.reshape(-1)[: self.n]

    def metrics(self, state: BMAState, chains: jax.Array) -> jax.Array:
        """The metrics (:attr:`names`, in order) of the BMA over ``chains``; NaN without any."""
        mean, log_density = self.predictive(state, chains)
        y = self.y.reshape(-1, *self.y.shape[2:])[: self.n]
        if self.classification:
            values = (
                metrics.accuracy(mean, y),
                metrics.nll(mean, y),
                metrics.expected_calibration_error(mean, y, self.num_bins),
                metrics.brier_score(mean, y),
            )
        else:
            values = (metrics.rmse(mean, y), -jnp.mean(log_density))
        out = jnp.stack([jnp.asarray(v, jnp.float32) for v in values])
        return jnp.where(jnp.any(chains), out, jnp.nan)

    # ------------------------------------------------------------------ a chunk of draws
    def update(
        self,
        state: BMAState,
        positions: PyTree,
        valid: jax.Array,
        num_draws: jax.Array,
    ) -> tuple[BMAState, jax.Array]:
        """Add the first ``num_draws`` draws of a buffer (``positions`` ``(chains, draws, ...)``,
        ``valid`` ``(draws, chains)``) in order; returns the state and one curve row per draw:
        (draws per chain, chains averaged, metrics...) of the BMA over the chains valid at
        that draw (NaN where none is)."""
        rows = jnp.full((valid.shape[0], 2 + len(self.names)), jnp.nan, jnp.float32)

        def one(d: jax.Array, carry: tuple[BMAState, jax.Array]) -> tuple[BMAState, jax.Array]:
            state, rows = carry
            ok = valid[d]
            state = self.add(state, jax.tree.map(lambda a: a[:, d], positions), ok)
            k = jnp.max(jnp.where(ok, state.count, 0)).astype(jnp.float32)
            head = jnp.stack([k, jnp.sum(ok).astype(jnp.float32)])
            return state, rows.at[d].set(jnp.concatenate([head, self.metrics(state, ok)]))

        return jax.lax.fori_loop(0, num_draws, one, (state, rows))


@owner_jit
def update_chunk(
    accumulator: Accumulator,
    state: BMAState,
    positions: PyTree,
    mask: jax.Array,
    steps: jax.Array,
    diverged: jax.Array,
    divergence_step: jax.Array,
    num_draws: jax.Array,
) -> tuple[BMAState, jax.Array]:
    """:meth:`Accumulator.update` on a sampling buffer: a draw of chain c counts when its step
    was a sample (``mask``) and comes before the chain's divergence step, as
    :attr:`bdl.Samples.valid` says."""
    stop = jnp.where(diverged, divergence_step, jnp.iinfo(jnp.int32).max)
    valid = mask[:, None] & (steps[:, None] < stop[None, :])
    return accumulator.update(state, positions, valid, num_draws)


@owner_jit
def final_metrics(accumulator: Accumulator, state: BMAState, healthy: jax.Array) -> jax.Array:
    return accumulator.metrics(state, healthy)
