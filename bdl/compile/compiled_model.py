"""The compiled form of a :class:`bdl.Model` on a dataset: pure, jittable JAX functions.

Positions are pytrees ``{"net": network weights}`` plus ``{"lik": {...}}`` when the likelihood has
learned parameters and ``{"hyper": {...}}`` when a hierarchical prior has random
hyper-parameters. Weights whose prior has a constrained support, and likelihood parameters
such as σ > 0, are stored unconstrained; :meth:`CompiledModel.constrain` maps them back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions.transforms import biject_to

from bdl.augment.base import Augmentation, augment_batch
from bdl.compile import leaves, starts
from bdl.compile.batching import BatchState, init_batch_state, next_indices
from bdl.compile.data_fields import check_fields_given
from bdl.compile.positions import broadcast_position
from bdl.compile.prediction_inputs import check_targets, flatten_draws
from bdl.compile.predictive import predictive
from bdl.compile.target import Target
from bdl.dsl import hierarchical
from bdl.dsl.hierarchical import HyperGroup
from bdl.dsl.model import Model
from bdl.dsl.network import NetworkAdapter
from bdl.dsl.priors import LeafInfo, LeafPrior
from bdl.utils import dtypes
from bdl.utils.owner_jit import owner_jit

PyTree = Any


class CompiledModel(Target):
    """U(θ) = −Σ_i log p(y_i | x_i, θ) − log p(θ) on n training examples, tempered at T(t).

    Built by :func:`bdl.compile`, not by hand.

    Attributes:
        x_train, y_train, x_test, y_test, fields_train, fields_test: the data.
        initial_position, n, batch_size, name, num_classes: as :func:`bdl.compile` set them.
        model: the declaration; adapter, leaf_infos, leaf_priors, hyper_groups: its parts.
    """

    x_train: jax.Array
    y_train: jax.Array
    x_test: jax.Array | None
    y_test: jax.Array | None
    initial_position: PyTree
    n: int = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    name: str = eqx.field(static=True)
    num_classes: int | None = eqx.field(static=True)
    model: Model = eqx.field(static=True)
    adapter: NetworkAdapter = eqx.field(static=True)
    leaf_infos: tuple[LeafInfo, ...] = eqx.field(static=True)
    leaf_priors: tuple[LeafPrior, ...] = eqx.field(static=True)
    net_treedef: Any = eqx.field(static=True)
    temperature_schedule: Callable[[jax.Array], jax.Array] = eqx.field(static=True)
    augment: Augmentation | None = eqx.field(static=True, default=None)
    #: per-example data fields the likelihood reads (e.g. ``{"sigma": σ}``), train and test
    fields_train: dict[str, jax.Array] = eqx.field(default_factory=dict)
    fields_test: dict[str, jax.Array] | None = None
    #: the hyper-parameter groups of hierarchical priors (bdl.dsl.hierarchical), in leaf order
    hyper_groups: tuple[HyperGroup, ...] = eqx.field(static=True, default=())

    #: the named starts of :meth:`init_positions`
    INITS: ClassVar[tuple[str, ...]] = ("auto", "network", "perturbed", "map", "prior", "fixed")
    OWNER: ClassVar[str] = "model"

    # ---------------------------------------------------------------- parameters and priors
    @property
    def likelihood(self) -> Any:
        return self.model.likelihood

    @property
    def num_batches(self) -> int:
        """Minibatches per epoch, n // batch_size."""
        return self.n // self.batch_size

    @property
    def dim(self) -> int:
        """Number of sampled scalars (the dimension of θ)."""
        return sum(int(np.size(x)) for x in jax.tree.leaves(self.initial_position))

    def constrain(self, position: PyTree) -> tuple[PyTree, dict[str, jax.Array]]:
        """Network weights and likelihood parameters in their constrained spaces.

        Args:
            position: a position in the sampled space.

        Returns:
            ``(net, lik)``: the weights and the likelihood's learned parameters by name.
        """
        lik = {
            name: biject_to(prior.support)(position["lik"][name])
            for name, prior in self.likelihood.param_priors.items()
        }
        net = leaves.constrain(self, position["net"], self.constrain_hyper(position), lik)
        return self.net_treedef.unflatten(net), lik

    def constrain_hyper(self, position: PyTree) -> PyTree:
        """The hierarchical priors' hyper-parameters in their constrained spaces, by name:
        ``{name: {"loc": μ, "scale": σ}}`` (``{name: {leaf: {...}}}`` per leaf or input);
        ``{}`` when the model has none.

        Args:
            position: a position in the sampled space.

        Returns:
            The hyper-parameters by name.
        """
        if not self.hyper_groups:
            return {}
        return hierarchical.constrain_hyper(self.hyper_groups, position["hyper"])

    def unconstrain(
        self, net: PyTree, lik: dict[str, Any] | None = None, hyper: PyTree | None = None
    ) -> PyTree:
        """Inverse of :meth:`constrain`: a position from constrained weights/parameters (and
        hyper-parameters, by default their starting values, :func:`~bdl.dsl.hierarchical.
        initial_hyper`).

        Args:
            net: the weights; lik: the likelihood's parameters; hyper: the hyper-parameters.

        Returns:
            The position in the sampled space.
        """
        if self.hyper_groups and hyper is None:
            hyper = hierarchical.initial_hyper(self.hyper_groups)
        priors = self.likelihood.param_priors
        values = self.likelihood.param_init if lik is None else lik
        unconstrained = leaves.unconstrain(self, net, hyper, values)
        position = {"net": self.net_treedef.unflatten(unconstrained)}
        if priors:
            position["lik"] = {
                k: biject_to(priors[k].support).inv(jnp.asarray(values[k], jnp.float32))
                for k in priors
            }
        if self.hyper_groups:
            position["hyper"] = hierarchical.unconstrain_hyper(self.hyper_groups, hyper)
        return position

    def log_prior(self, position: PyTree) -> jax.Array:
        """log p(θ) in the sampled (unconstrained) space, log-Jacobians included.

        Args:
            position: a position in the sampled space.

        Returns:
            The scalar log-density.
        """
        total = jnp.zeros(())
        hyper = self.constrain_hyper(position)
        if self.hyper_groups:
            total = hierarchical.log_prior_hyper(self.hyper_groups, position["hyper"])
        total = total + leaves.log_prior(self, position, hyper)
        for name, prior in self.likelihood.param_priors.items():
            u = position["lik"][name]
            t = biject_to(prior.support)
            v = t(u)
            total = total + jnp.sum(prior.log_prob(v)) + jnp.sum(t.log_abs_det_jacobian(u, v))
        return total

    # ---------------------------------------------------------------- likelihood and energy
    def forward(self, position: PyTree, x: jax.Array) -> jax.Array:
        """Network outputs f(x; θ) for a batch.

        Args:
            position: a position in the sampled space.
            x: a batch of inputs.

        Returns:
            The network's outputs.
        """
        net, _ = self.constrain(position)
        return self.adapter.apply(net, x)

    def log_likelihood(
        self,
        position: PyTree,
        x: jax.Array,
        y: jax.Array,
        fields: dict[str, jax.Array] | None = None,
    ) -> jax.Array:
        """Per-example log p(y_i | x_i, θ), shape ``(batch,)``; ``fields`` holds the batch's
        per-example data fields when the likelihood reads any.

        Args:
            position: a position pytree (no chain axis).
            x: a batch of inputs.
            y: their targets.
            fields: the batch's data fields by name (``None`` when the likelihood reads none).

        Returns:
            log p(y_i | x_i, θ) for each example.
        """
        net, lik = self.constrain(position)
        params = {**lik, **check_fields_given(self.likelihood, fields)}
        return self.likelihood.log_prob(self.adapter.apply(net, x), y, params)

    def energy(self, position: PyTree) -> jax.Array:
        """U(θ) = −(N/n) Σ_i log p(y_i | x_i, θ) − w(T) log p(θ)
        ([Tempering](../dsl.md#tempering-the-whole-posterior-or-the-likelihood-only))."""
        return self._energy(position, self._prior_weight(None))

    def _energy(self, position: PyTree, prior_weight: Any) -> jax.Array:
        ll = jnp.sum(self.log_likelihood(position, self.x_train, self.y_train, self.fields_train))
        return -(self.likelihood_weight * ll + prior_weight * self.log_prior(position))

    def stochastic_energy(self, position: PyTree, batch: tuple[jax.Array, ...]) -> jax.Array:
        """Ũ(θ) = −(N/|B|) Σ_{i∈B} log p(y_i | x_i, θ) − w(T) log p(θ), N = n unless an
        effective data-set size is declared, w(T) = 1 unless the likelihood alone is tempered.

        Args:
            position: a position; batch: a minibatch (inputs, targets, fields).

        Returns:
            The scalar Ũ(θ).
        """
        x, y, *rest = batch
        scale = self.likelihood_weight * self.n / x.shape[0]
        ll = jnp.sum(self.log_likelihood(position, x, y, rest[0] if rest else None))
        return -(scale * ll + self._prior_weight(None) * self.log_prior(position))

    def stochastic_energy_and_grad(
        self, position: PyTree, batch: tuple[jax.Array, jax.Array]
    ) -> tuple[jax.Array, PyTree]:
        return _stochastic_energy_and_grad(self, position, batch)

    # ---------------------------------------------------------------- minibatches
    def init_batches(self, key: jax.Array) -> BatchState:
        return init_batch_state(key, self.n)

    def next_batch(
        self, stream: BatchState, step: jax.Array
    ) -> tuple[tuple[jax.Array, ...], BatchState]:
        """``(x, y)`` for global step ``step``, or ``(x, y, fields)`` when the likelihood reads
        per-example data fields; ``x`` augmented when the model declares an augmentation (with
        the chain's augmentation keys, :func:`bdl.augment.augment_batch`): every gradient of one
        step sees the same augmented examples."""
        if self.batch_size == self.n:  # full batch: the data as they are, no shuffle, no gather
            batch = self._batch(None)
        else:
            idx, stream = next_indices(stream, step, self.n, self.batch_size)
            batch = self._batch(idx)
        if self.augment is not None:
            batch = (augment_batch(self.augment, stream.key, step, batch[0]), *batch[1:])
        return batch, stream

    def epoch_batches(self, key: jax.Array) -> tuple[jax.Array, ...]:
        """All n // B minibatches of one epoch, stacked: shapes (n // B, B, ...), augmented
        when the model declares an augmentation.

        Args:
            key: a JAX random key (the epoch's permutation, the augmentation).

        Returns:
            The stacked inputs, targets and data fields.
        """
        perm = jax.random.permutation(key, self.n)[: self.num_batches * self.batch_size]
        idx = perm.reshape(self.num_batches, self.batch_size)
        batch = self._batch(idx)
        if self.augment is not None:
            x = jax.vmap(lambda b, xb: augment_batch(self.augment, key, b, xb))(
                jnp.arange(self.num_batches), batch[0]
            )
            batch = (x, *batch[1:])
        return batch

    def _batch(self, idx: jax.Array | None) -> tuple[jax.Array, ...]:
        take = (lambda a: a) if idx is None else (lambda a: a[idx])
        batch = (take(self.x_train), take(self.y_train))
        if self.likelihood.fields:
            batch += ({k: take(v) for k, v in self.fields_train.items()},)
        return batch

    # ---------------------------------------------------------------- tempering
    @property
    def likelihood_weight(self) -> float:
        """N/n: the effective data-set size N over the n training examples (1 by default)."""
        n_eff = self.model.effective_size
        return 1.0 if n_eff is None else float(n_eff) / self.n

    def _prior_weight(self, temperature: float | None) -> Any:
        """w(T) = 1 (whole posterior tempered), or T (likelihood only: the prior stays at T = 1)."""
        if self.model.tempering == "posterior":
            return 1.0
        return self.constant_temperature() if temperature is None else temperature

    def potential_fn(self, temperature: float | None = None) -> Callable[[PyTree], jax.Array]:
        """NumPyro ``potential_fn`` θ ↦ U(θ)/T at a constant T > 0 (the model's by default), U
        tempered as declared (likelihood only: U/T = −(N/(nT)) Σ_i log p(y_i | x_i, θ) − log p(θ))
        """
        base = super().potential_fn(temperature)
        if self.model.tempering == "posterior":
            return base
        t = self.constant_temperature() if temperature is None else float(temperature)
        return lambda position: self._energy(position, t) / t

    # ---------------------------------------------------------------- temperature
    def temperature(self, step: jax.Array) -> jax.Array:
        return jnp.asarray(self.temperature_schedule(step))

    def constant_temperature(self) -> float | None:
        t = self.model.temperature
        return None if callable(t) else float(t)

    # ---------------------------------------------------------------- predictions
    def predict(
        self, positions: Any, x: jax.Array, fields: dict[str, jax.Array] | None = None
    ) -> jax.Array:
        """Bayesian model average E_θ[E[y | x, θ]] over draws: a :class:`bdl.Samples` (its
        valid draws) or positions with leading draw axes, checked against the model first.

        Classifiers return averaged class probabilities (n, K); regressors the predictive mean,
        shaped like the targets (a (n, 1) network output is squeezed for (n,) targets).

        Args:
            positions: a :class:`bdl.Samples` or positions with leading draw axes.
            x: the inputs.
            fields: the data fields at ``x`` (``None`` when the likelihood reads none).

        Returns:
            The BMA: class probabilities ``(n, K)`` or the predictive mean.
        """
        flat = flatten_draws(self, positions, "positions", x)
        given = check_fields_given(self.likelihood, fields) if fields is not None else {}
        return jnp.mean(jax.lax.map(lambda p: self.predictive_mean(p, x, given), flat), axis=0)

    def predictive_mean(
        self, position: PyTree, x: jax.Array, fields: dict[str, jax.Array] | None = None
    ) -> jax.Array:
        """E[y | x, θ] at one position: class probabilities (n, K) for classifiers, the mean in
        the targets' shape for regressors; ``fields``: the likelihood's per-example data fields
        at ``x`` (checked), when it reads any.

        Args:
            position: one position; x: the inputs; fields: their data fields.

        Returns:
            The predictive mean.
        """
        net, lik = self.constrain(position)
        out = self.adapter.apply(net, x)
        if (
            self.likelihood.task == "regression"
            and out.ndim == self.y_train.ndim + 1
            and out.shape[-1] == 1
        ):
            out = out[..., 0]  # (n, 1) outputs for (n,) targets: predict in y's shape
        return self.likelihood.mean(out, {**lik, **(fields or {})})

    def predictive(
        self,
        positions: Any,
        x: jax.Array,
        *,
        fields: dict[str, jax.Array] | None = None,
        quantiles: tuple[float, ...] = (0.025, 0.5, 0.975),
    ) -> Any:
        """The BMA predictive distribution at ``x``: mean, sd, quantiles and the
        aleatoric/epistemic split for regressors; probabilities, predictive entropy and mutual
        information for classifiers (:func:`bdl.compile.predictive.predictive`).

        Args:
            positions: draws, as :meth:`predict` takes them; x: the inputs.
            fields: their data fields; quantiles: the regressors' quantile levels.

        Returns:
            A ``RegressionPredictive`` or ``ClassificationPredictive``.
        """
        return predictive(self, positions, x, fields=fields, quantiles=quantiles)

    def log_predictive(
        self,
        positions: Any,
        x: jax.Array,
        y: jax.Array,
        fields: dict[str, jax.Array] | None = None,
    ) -> jax.Array:
        """Per-example log of the BMA predictive density, log (1/K) Σ_k p(y_i | x_i, θ_k), over
        draws as :meth:`predict` takes them.

        Args:
            positions: draws (a :class:`bdl.Samples` or a pytree with leading draw axes).
            x: inputs; y: their targets; fields: their data fields, when the likelihood reads any.

        Returns:
            One log-density per example.
        """
        flat = flatten_draws(self, positions, "positions", x)
        check_targets(self, x, y)
        lls = jax.lax.map(lambda p: self.log_likelihood(p, x, y, fields), flat)
        return jax.nn.logsumexp(lls, axis=0) - jnp.log(lls.shape[0])

    # ---------------------------------------------------------------- initial positions
    def init_positions(self, key: jax.Array, num_chains: int, init: Any = "auto") -> PyTree:
        """Initial positions with a leading chain axis of size ``num_chains``.

        ``init``:

        * ``"network"``: the network's own initialiser with a key per chain (Flax linen modules
          and plain functions given ``params=key -> params``);
        * ``"perturbed"``: the declared initial parameters (a built nnx or Equinox instance's, a
          plain function's ``params``) plus independent noise per chain, N(0, s²) per leaf with
          s = 10 % of the leaf's RMS (0.01 for an all-zero leaf), in the sampled space;
        * ``"map"``: the ``"auto"`` start, then :data:`MAP_STEPS` Adam steps (learning rate
          :data:`MAP_LEARNING_RATE`) on the mean minibatch loss Ũ/n, per chain;
        * ``"prior"``: a draw from the prior per chain (proper priors only);
        * ``"fixed"``: the declared initial parameters for every chain;
        * ``"auto"`` (default): ``"network"`` when the network initialises from a key, else
          ``"prior"`` when every prior is proper, else ``"perturbed"``. Starts that differ as
          much as the prior says are what R̂ needs to tell chains that have not mixed; the
          declared parameters plus a little noise start every chain in one place (and at a
          non-centred hierarchical model's zeros, where a scale has no curvature at all);
        * a position pytree (shared, or with a leading chain axis).
        """
        if isinstance(init, str) and init in self.INITS:
            # in the initial position's floating-point type, whatever the draws' own
            return dtypes.like(
                starts.named_start(self, key, num_chains, init), self.initial_position
            )
        if isinstance(init, str):
            self.check_init(init, num_chains)  # an unknown name
        return broadcast_position(init, self.initial_position, num_chains, self.OWNER)

    def check_init(self, init: Any, num_chains: int | None) -> None:
        """As :meth:`Target.check_init`; also a start from the declared parameters (``"fixed"``,
        ``"perturbed"``, ``"auto"`` or ``"map"`` without a network initialiser) that is not
        finite in the sampled space: parameters outside their prior's support.

        Args:
            init: the start, as :meth:`init_positions` takes it; num_chains: the run's chains.

        Raises:
            ValueError: an unknown name, a start that cannot be made, or declared parameters
                outside their prior's support.
        """
        super().check_init(init, num_chains)
        starts.check_declared_start(self, init)


#: the named starts of :meth:`CompiledModel.init_positions`
INITS = CompiledModel.INITS
#: Adam steps and learning rate of ``init="map"``
MAP_STEPS = starts.MAP_STEPS
MAP_LEARNING_RATE = starts.MAP_LEARNING_RATE


@owner_jit
def _stochastic_energy_and_grad(
    model: CompiledModel, position: PyTree, batch: tuple[jax.Array, ...]
) -> tuple[jax.Array, PyTree]:
    """(Ũ, ∇Ũ) as a nested ``jit``: a sampling loop traces its step several times (the bare
    step, the recorded step, their shapes), and each trace of the step meets this call with the
    same model and shapes, so the network's gradient is traced once and its jaxpr reused. Inside
    a compiled program XLA inlines the call. :func:`owner_jit`: what it keeps is let go with the
    models it was traced for."""
    return jax.value_and_grad(model.stochastic_energy)(position, batch)
