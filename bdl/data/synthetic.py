"""Synthetic datasets with a known generating process, for checks against ground truth.

Every generator is a pure function of its arguments: the same ``seed`` gives bit-identical arrays.
Randomness comes from ``np.random.SeedSequence(seed)``, split into independent child streams
(one for the generating parameters, one for the data), so the generating parameters returned by
:func:`mlp_prior_network` / :func:`linear_regression_weights` for a seed are exactly those used
by :func:`mlp_prior_data` / :func:`linear_regression` with that seed, whatever the data sizes.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from bdl.data.dataset import Dataset
from bdl.utils.arguments import integer, number

__all__ = [
    "GAP_CLUSTERS",
    "GAP_TEST_RANGE",
    "MLP_PRIOR_BIAS_SD",
    "MLPNetwork",
    "linear_regression",
    "linear_regression_posterior",
    "linear_regression_weights",
    "mlp_prior_data",
    "mlp_prior_network",
    "regression_1d_gap",
]


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent generators for (generating parameters, data) derived from ``seed``."""
    integer(seed, "seed", 0)
    params_ss, data_ss = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(params_ss), np.random.default_rng(data_ss)


# --------------------------------------------------------------------------------------------
# 1-D regression with a gap
# --------------------------------------------------------------------------------------------

GAP_CLUSTERS: tuple[tuple[float, float], tuple[float, float]] = ((-4.0, -1.5), (1.5, 4.0))
"""The two intervals the training inputs of :func:`regression_1d_gap` are drawn from; the open
interval (−1.5, 1.5) between them contains no training input."""

GAP_TEST_RANGE: tuple[float, float] = (-6.0, 6.0)
"""The interval covered by the test grid of :func:`regression_1d_gap`."""


def regression_1d_gap(
    n: int = 100, *, noise_sd: float = 0.1, n_test: int = 500, seed: int = 0
) -> Dataset:
    """1-D regression whose inputs form two clusters with an empty gap between them.

    Setting of Foong, Li, Hernández-Lobato & Turner (2019), "'In-Between' Uncertainty in Bayesian
    Neural Networks" (arXiv:1906.11537): a good posterior predictive is confident near the data
    and uncertain in the gap (epistemic uncertainty). The generating process is

        x_i ~ U(GAP_CLUSTERS[0]) for the first ⌈n/2⌉ inputs, U(GAP_CLUSTERS[1]) for the rest,
        y_i = sin(x_i) + ε_i,   ε_i ~ N(0, noise_sd²)   (noise sd 0.1 by default),

    with clusters [−4, −1.5] and [1.5, 4]. The test inputs are an evenly spaced grid of
    ``n_test`` points on ``GAP_TEST_RANGE`` = [−6, 6] (both clusters, the gap, and some
    extrapolation), with targets drawn from the same observation model; the noise-free truth is
    ``np.sin(x_test)``. Inputs have shape ``(n, 1)``, targets ``(n,)``, both ``float32``.

    Args:
        n: training examples.
        noise_sd: the noise's standard deviation.
        n_test: test inputs on the grid.
        seed: the seed of the inputs and the noise.

    Returns:
        A regression :class:`Dataset`.
    """
    integer(n, "regression_1d_gap(n=...)", 2)
    integer(n_test, "regression_1d_gap(n_test=...)", 1)
    number(noise_sd, "regression_1d_gap(noise_sd=...)", at_least=0.0)
    _, rng = _streams(seed)
    n_left = (n + 1) // 2
    (a0, b0), (a1, b1) = GAP_CLUSTERS
    x = np.concatenate([rng.uniform(a0, b0, n_left), rng.uniform(a1, b1, n - n_left)])
    y = np.sin(x) + noise_sd * rng.standard_normal(n)
    x_test = np.linspace(*GAP_TEST_RANGE, n_test)
    y_test = np.sin(x_test) + noise_sd * rng.standard_normal(n_test)
    return Dataset(
        "regression_1d_gap",
        x[:, None].astype(np.float32),
        y.astype(np.float32),
        x_test[:, None].astype(np.float32),
        y_test.astype(np.float32),
    )


# --------------------------------------------------------------------------------------------
# Classification data drawn from an MLP prior
# --------------------------------------------------------------------------------------------

MLP_PRIOR_BIAS_SD = 0.05
"""Standard deviation of the biases of the generating network in :func:`mlp_prior_network`."""


@dataclasses.dataclass(frozen=True, eq=False)
class MLPNetwork:
    """The parameters of a ReLU MLP: ``weights[l]`` has shape ``(fan_in, fan_out)``.

    Attributes:
        weights: the weight matrices, ``(fan_in, fan_out)`` each, input layer first.
        biases: the bias vectors, one per layer.
    """

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]

    def logits(self, x: np.ndarray) -> np.ndarray:
        """f(x): ReLU after every layer but the last; computed in float64.

        Args:
            x: inputs ``(n, input_dim)``.

        Returns:
            The logits ``(n, num_classes)``, float64.
        """
        h = np.asarray(x, dtype=np.float64)
        last = len(self.weights) - 1
        for layer, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if layer < last:
                h = np.maximum(h, 0.0)
        return h

    def probs(self, x: np.ndarray) -> np.ndarray:
        """softmax(f(x)), row-wise.

        Args:
            x: inputs ``(n, input_dim)``.

        Returns:
            The class probabilities ``(n, num_classes)``, float64.
        """
        z = self.logits(x)
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)


def mlp_prior_network(
    depth: int = 2, width: int = 10, num_classes: int = 3, input_dim: int = 5, seed: int = 0
) -> MLPNetwork:
    """The generating network of :func:`mlp_prior_data` for the same arguments and ``seed``.

    ``depth`` hidden ReLU layers of ``width`` units, then a linear output layer of
    ``num_classes`` logits. Weights W ~ N(0, 2/fan_in) (He-normal), biases b ~ N(0, 0.05²).

    Args:
        depth: hidden layers.
        width: units per hidden layer.
        num_classes: output logits.
        input_dim: input dimension.
        seed: the seed, as given to :func:`mlp_prior_data`.

    Returns:
        The network's parameters, an :class:`MLPNetwork`.
    """
    for name, value, low in (
        ("depth", depth, 1),
        ("width", width, 1),
        ("num_classes", num_classes, 2),
        ("input_dim", input_dim, 1),
    ):
        integer(value, f"mlp_prior_network({name}=...)", low)
    rng, _ = _streams(seed)
    sizes = [input_dim] + [width] * depth + [num_classes]
    weights, biases = [], []
    for fan_in, fan_out in itertools.pairwise(sizes):
        weights.append(rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_in, fan_out)))
        biases.append(rng.normal(0.0, MLP_PRIOR_BIAS_SD, size=(fan_out,)))
    return MLPNetwork(tuple(weights), tuple(biases))


def mlp_prior_data(
    depth: int = 2,
    width: int = 10,
    num_classes: int = 3,
    input_dim: int = 5,
    n_train: int = 100,
    n_test: int = 10_000,
    seed: int = 0,
) -> Dataset:
    """Classification data whose labels come from a network drawn from the prior.

    Wenzel et al. (2020), "How Good is the Bayes Posterior in Deep Neural Networks Really?",
    ICML, App. N: with f = :func:`mlp_prior_network` (``depth`` hidden ReLU layers of ``width``
    units, W ~ N(0, 2/fan_in), b ~ N(0, 0.05²)),

        x ~ N(0, I_input_dim),   y | x ~ Categorical(softmax(f(x))).

    The prior is thus correctly specified by construction; Wenzel et al. use such data to ask
    whether the cold-posterior effect is caused by prior misspecification. Inputs are
    ``float32``, labels ``int32``. Retrieve f with
    ``mlp_prior_network(depth, width, num_classes, input_dim, seed)``.

    Args:
        depth: hidden layers of the generating network.
        width: units per hidden layer.
        num_classes: classes (output logits).
        input_dim: input dimension.
        n_train: training examples.
        n_test: test examples.
        seed: the seed of the network and the data.

    Returns:
        A :class:`Dataset` with ``num_classes`` classes.
    """
    integer(n_train, "mlp_prior_data(n_train=...)", 1)
    integer(n_test, "mlp_prior_data(n_test=...)", 1)
    network = mlp_prior_network(depth, width, num_classes, input_dim, seed)
    _, rng = _streams(seed)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((n, input_dim)).astype(np.float32)
        p = network.probs(x)
        # Inverse-CDF sampling of one categorical draw per row.
        u = rng.uniform(size=(n, 1))
        y = (u > np.cumsum(p, axis=1)).sum(axis=1)
        return x, np.minimum(y, num_classes - 1).astype(np.int32)

    x_train, y_train = draw(n_train)
    x_test, y_test = draw(n_test)
    return Dataset("mlp_prior_data", x_train, y_train, x_test, y_test, num_classes=num_classes)


# --------------------------------------------------------------------------------------------
# Bayesian linear regression with known noise
# --------------------------------------------------------------------------------------------


def linear_regression_weights(dim: int = 5, prior_sd: float = 1.0, seed: int = 0) -> np.ndarray:
    """The true weights of :func:`linear_regression` for the same ``dim``, ``prior_sd``, ``seed``.

    w ~ N(0, prior_sd² I_dim), i.e. a draw from the conjugate prior (float64, shape ``(dim,)``).

    Args:
        dim: the number of weights.
        prior_sd: the prior's standard deviation.
        seed: the seed, as given to :func:`linear_regression`.

    Returns:
        The weights, float64, shape ``(dim,)``.
    """
    integer(dim, "linear_regression(dim=...)", 1)
    number(prior_sd, "linear_regression(prior_sd=...)", above=0.0)
    rng, _ = _streams(seed)
    return prior_sd * rng.standard_normal(dim)


def linear_regression(
    n: int = 100,
    dim: int = 5,
    noise_sd: float = 0.5,
    seed: int = 0,
    *,
    prior_sd: float = 1.0,
    n_test: int = 1_000,
) -> Dataset:
    """Data for Bayesian linear regression with known noise and a conjugate Gaussian prior.

    Model (no intercept; e.g. Bishop 2006, PRML §3.3):

        w ~ N(0, prior_sd² I),   x_i ~ N(0, I_dim),   y_i = x_iᵀ w + ε_i,   ε_i ~ N(0, noise_sd²).

    The true weights are :func:`linear_regression_weights` ``(dim, prior_sd, seed)``; the exact
    posterior is :func:`linear_regression_posterior`. Inputs ``(n, dim)``, targets ``(n,)``, both
    ``float32``.

    Args:
        n: training examples.
        dim: input dimension (the number of weights).
        noise_sd: the noise's standard deviation.
        seed: the seed of the weights and the data.
        prior_sd: the prior's standard deviation, from which the true weights are drawn.
        n_test: test examples.

    Returns:
        A regression :class:`Dataset` named ``"linear_regression"``.
    """
    integer(n, "linear_regression(n=...)", 1)
    integer(n_test, "linear_regression(n_test=...)", 1)
    number(noise_sd, "linear_regression(noise_sd=...)", at_least=0.0)
    w = linear_regression_weights(dim, prior_sd, seed)
    _, rng = _streams(seed)

    def draw(m: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((m, dim))
        y = x @ w + noise_sd * rng.standard_normal(m)
        return x.astype(np.float32), y.astype(np.float32)

    x_train, y_train = draw(n)
    x_test, y_test = draw(n_test)
    return Dataset("linear_regression", x_train, y_train, x_test, y_test)


def linear_regression_posterior(
    x: np.ndarray,
    y: np.ndarray,
    noise_sd: float,
    prior_sd: float = 1.0,
    *,
    temperature: float = 1.0,
    tempering: str = "posterior",
    effective_size: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact (tempered) posterior N(μ, Σ) of w for the model of :func:`linear_regression`.

    At T = 1 with N = n (Bishop 2006, §3.3):

        Σ = (I / prior_sd² + XᵀX / noise_sd²)⁻¹,   μ = Σ Xᵀ y / noise_sd².

    With the likelihood counted as N = ``effective_size`` examples (weight c = N/n) and tempered
    at T ([Tempering](../dsl.md#tempering-the-whole-posterior-or-the-likelihood-only)), with
    ``tempering="posterior"`` (π ∝ exp(−U/T))

        P = I / prior_sd² + c XᵀX / noise_sd²,   Σ = T P⁻¹,   μ = P⁻¹ c Xᵀy / noise_sd²,

    and with ``tempering="likelihood"`` (π ∝ p(w) p(D | w)^(c/T))

        Σ = (I / prior_sd² + (c/T) XᵀX / noise_sd²)⁻¹,   μ = Σ (c/T) Xᵀy / noise_sd².

    Returns ``(mu, sigma)`` in float64.

    Args:
        x: the training inputs ``(n, dim)``.
        y: the training targets ``(n,)``.
        noise_sd: the noise's standard deviation.
        prior_sd: the prior's standard deviation.
        temperature: T > 0.
        tempering: ``"posterior"`` or ``"likelihood"``, as ``bdl.Model(tempering=...)``.
        effective_size: N, the number of examples the likelihood counts as (``None``: n).

    Returns:
        ``(mu, sigma)``: the posterior mean ``(dim,)`` and covariance ``(dim, dim)``, float64.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    t = number(temperature, "linear_regression_posterior(temperature=...)", above=0.0)
    c = 1.0 if effective_size is None else float(effective_size) / x.shape[0]
    if tempering == "posterior":
        weight, scale = c, t
    elif tempering == "likelihood":
        weight, scale = c / t, 1.0
    else:
        raise ValueError(f"tempering must be 'posterior' or 'likelihood'; got {tempering!r}.")
    precision = np.eye(x.shape[1]) / prior_sd**2 + weight * x.T @ x / noise_sd**2
    inverse = np.linalg.inv(precision)
    inverse = 0.5 * (inverse + inverse.T)
    mu = inverse @ (weight * x.T @ y) / noise_sd**2
    return mu, scale * inverse
