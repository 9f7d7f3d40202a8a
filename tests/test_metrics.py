"""bdl.metrics: hand-computed values on tiny inputs, sklearn/scipy/brute-force cross-checks."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bad_input import case, check
from scipy import stats
from sklearn.metrics import roc_auc_score

from bdl import metrics

RNG = np.random.default_rng(0)


def _dirichlet(*shape: int, alpha: float = 1.0) -> np.ndarray:
    """Random probability vectors of shape ``shape`` (last axis = classes), float32."""
    return RNG.dirichlet(np.full(shape[-1], alpha), size=shape[:-1]).astype(np.float32)


# --- classification --------------------------------------------------------------------------

PROBS = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]], np.float32)
LABELS = np.array([0, 2, 2, 1])


def test_accuracy_by_hand():
    # argmax = 0, 1, 2, 0 against labels 0, 2, 2, 1: right, wrong, right, wrong -> 2/4.
    assert float(metrics.accuracy(PROBS, LABELS)) == pytest.approx(0.5)


def test_nll_by_hand_and_clip():
    # p_y = 0.7, 0.3, 0.4, 0.25.
    expected = -(math.log(0.7) + math.log(0.3) + math.log(0.4) + math.log(0.25)) / 4
    assert float(metrics.nll(PROBS, LABELS)) == pytest.approx(expected, rel=1e-6)
    # A zero probability on the true class costs -log(1e-12), not inf.
    value = float(metrics.nll(np.array([[1.0, 0.0]]), np.array([1])))
    assert value == pytest.approx(-math.log(1e-12), rel=1e-6)


def test_brier_by_hand_not_divided_by_k():
    # Row sums of (p - onehot)^2:
    #   y=0: 0.3^2 + 0.2^2 + 0.1^2     = 0.09 + 0.04 + 0.01   = 0.14
    #   y=2: 0.1^2 + 0.6^2 + 0.7^2     = 0.01 + 0.36 + 0.49   = 0.86
    #   y=2: 0.3^2 + 0.3^2 + 0.6^2     = 0.09 + 0.09 + 0.36   = 0.54
    #   y=1: 0.5^2 + 0.75^2 + 0.25^2   = 0.25 + 0.5625 + 0.0625 = 0.875
    # mean = 2.415 / 4 = 0.60375 (no division by K = 3).
    assert float(metrics.brier_score(PROBS, LABELS)) == pytest.approx(0.60375, rel=1e-6)
    # Confident and right -> 0; confident and wrong -> 2.
    assert float(metrics.brier_score(np.eye(3), np.array([0, 1, 2]))) == pytest.approx(0.0)
    assert float(metrics.brier_score(np.eye(3), np.array([1, 2, 0]))) == pytest.approx(2.0)


def test_ece_by_hand():
    # Confidences 0.9, 0.9, 0.55, 0.7 (none on a multiple of 1/15); correct: T, F, T, T.
    #   bin (13/15, 14/15]: 2 inputs, acc 0.5, conf 0.9  -> 2/4 * 0.40 = 0.2
    #   bin ( 8/15,  9/15]: 1 input,  acc 1.0, conf 0.55 -> 1/4 * 0.45 = 0.1125
    #   bin (10/15, 11/15]: 1 input,  acc 1.0, conf 0.7  -> 1/4 * 0.30 = 0.075
    # ECE = 0.3875.
    probs = np.array([[0.9, 0.1], [0.1, 0.9], [0.55, 0.45], [0.3, 0.7]], np.float32)
    labels = np.array([0, 0, 0, 1])
    ece = metrics.expected_calibration_error(probs, labels)
    assert float(ece) == pytest.approx(0.3875, rel=1e-5)
    counts, acc, conf = metrics.calibration_bins(probs, labels)
    assert counts.shape == (15,)
    np.testing.assert_allclose(np.nonzero(np.asarray(counts))[0], [8, 10, 13])
    np.testing.assert_allclose(np.asarray(counts)[[8, 10, 13]], [1, 1, 2])
    np.testing.assert_allclose(np.asarray(acc)[[8, 10, 13]], [1.0, 1.0, 0.5])
    np.testing.assert_allclose(np.asarray(conf)[[8, 10, 13]], [0.55, 0.7, 0.9], rtol=1e-6)


def test_ece_bins_are_right_closed():
    # Two bins (0, 0.5], (0.5, 1]: confidence 0.5 goes to the lower bin, 1.0 to the upper.
    counts, _, _ = metrics.calibration_bins(
        np.array([[0.5, 0.5], [1.0, 0.0]]), np.array([0, 0]), num_bins=2
    )
    np.testing.assert_array_equal(np.asarray(counts), [1.0, 1.0])


def test_ece_zero_when_calibrated():
    # Confidence 0.8 and 8/10 right; confidence 0.6 (on class 1) and 3/5 right.
    probs = np.array([[0.8, 0.2]] * 10 + [[0.4, 0.6]] * 5, np.float32)
    labels = np.array([0] * 8 + [1] * 2 + [1] * 3 + [0] * 2)
    assert float(metrics.expected_calibration_error(probs, labels)) == pytest.approx(0, abs=1e-6)


def test_ece_matches_reference_loop():
    # Guo et al.'s reference: for each (lo, hi] of linspace(0, 1, 16), |acc - conf| * fraction.
    probs = _dirichlet(200, 4, alpha=0.5)
    labels = RNG.integers(0, 4, size=200)
    conf, pred = probs.max(-1), probs.argmax(-1)
    edges = np.linspace(0, 1, 16)
    expected = 0.0
    for lo, hi in itertools.pairwise(edges):
        in_bin = (conf > lo) & (conf <= hi)
        if in_bin.any():
            expected += in_bin.mean() * abs((pred == labels)[in_bin].mean() - conf[in_bin].mean())
    ece = metrics.expected_calibration_error(probs, labels)
    assert float(ece) == pytest.approx(expected, abs=1e-6)


# Labels are checked as bdl.compile checks y_train, on the host, before anything compiles
# (tests/bad_input.py counts the compilations). Unchecked, -1 read the last class, 1.5 was
# scored as 1, and a label >= K gave NLL NaN beside a finite accuracy, ECE and Brier score.

LABELLED = {
    "accuracy": metrics.accuracy,
    "nll": metrics.nll,
    "ece": metrics.expected_calibration_error,
    "brier": metrics.brier_score,
    "bins": metrics.calibration_bins,
}


def _last(value):
    labels = LABELS.astype(np.float64 if isinstance(value, float) else np.int64)
    labels[-1] = value
    return labels


BAD_LABELS = [
    (
        "negative",
        _last(-1),
        ValueError,
        "labels holds label -1 but probs has 3 classes (labels 0, …, 2): map the labels to 0, "
        "…, K−1",
    ),
    (
        "beyond the classes",
        _last(3),
        ValueError,
        "labels holds label 3 but probs has 3 classes (labels 0, …, 2): fix the labels, or "
        "pass probs with 4 columns",
    ),
    ("fractional", _last(1.5), ValueError, "labels has non-integer values (1.5)"),
    ("NaN", _last(np.nan), ValueError, "labels contains 1 NaN or infinite value(s), in row 3"),
    ("infinite", _last(np.inf), ValueError, "labels contains 1 NaN or infinite value(s)"),
    (
        "one short",
        LABELS[:3],
        ValueError,
        "labels of shape (3,) do not match probs of shape (4, 3); expected labels.shape == "
        "probs.shape[:-1] = (4,)",
    ),
    ("one-hot", np.eye(3)[LABELS], ValueError, "labels of shape (4, 3) do not match probs"),
    ("text", np.array(["0", "2", "2", "1"]), TypeError, "labels must be numeric"),
]


@pytest.mark.parametrize("metric", LABELLED.values(), ids=LABELLED.keys())
@pytest.mark.parametrize(
    ("labels", "error", "fragment"),
    [
        pytest.param(labels, error, fragment, id=name)
        for name, labels, error, fragment in BAD_LABELS
    ],
)
def test_bad_labels_are_refused_before_compiling(metric, labels, error, fragment):
    check(lambda _: metric(PROBS, labels), error, fragment, None)


@pytest.mark.parametrize("metric", LABELLED.values(), ids=LABELLED.keys())
def test_integral_float_and_boolean_labels_are_read_as_integers(metric):
    """As bdl.compile reads y_train: 2.0 is the label 2, True the label 1."""
    want = jax.tree.leaves(metric(PROBS, LABELS))
    for labels in (LABELS.astype(np.float32), jnp.asarray(LABELS, jnp.float32)):
        for a, b in zip(jax.tree.leaves(metric(PROBS, labels)), want, strict=True):
            np.testing.assert_array_equal(a, b)
    binary = np.array([[0.2, 0.8], [0.9, 0.1], [0.4, 0.6]], np.float32)
    flags = np.array([True, False, False])
    for a, b in zip(
        jax.tree.leaves(metric(binary, flags)),
        jax.tree.leaves(metric(binary, flags.astype(np.int32))),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


def test_metrics_stay_jittable_and_traced_labels_must_be_integers():
    """Under jit the labels' values are unknown: integer labels are scored as they are (as
    the running BMA does inside its compiled update), float ones are refused."""
    jitted = jax.jit(lambda p, y: metrics.nll(p, y) + metrics.expected_calibration_error(p, y))
    direct = metrics.nll(PROBS, LABELS) + metrics.expected_calibration_error(PROBS, LABELS)
    assert float(jitted(PROBS, LABELS)) == pytest.approx(float(direct), rel=1e-6)
    with pytest.raises(TypeError, match=r"labels traced under jax\.jit must have an integer dtype"):
        jitted(PROBS, LABELS.astype(np.float32))


def test_rmse_by_hand():
    # errors 0, 2, -4 -> squares 0, 4, 16 -> mean 20/3 -> sqrt = 2.5820; (3, 1) vs (3,).
    value = metrics.rmse(np.array([[1.0], [2.0], [3.0]]), np.array([1.0, 0.0, 7.0]))
    assert float(value) == pytest.approx(math.sqrt(20 / 3), rel=1e-6)
    assert float(jax.jit(metrics.rmse)(np.zeros(3), np.full(3, 2.0))) == pytest.approx(2.0)


BAD_TARGETS = [
    case(
        "NaN target",
        lambda _: metrics.rmse(np.zeros(3), np.array([1.0, np.nan, 0.0])),
        ValueError,
        "targets contains 1 NaN or infinite value(s), in row 1; drop those rows",
    ),
    case(
        "infinite targets",
        lambda _: metrics.rmse(np.zeros((3, 1)), np.array([[np.inf], [0.0], [-np.inf]])),
        ValueError,
        "targets contains 2 NaN or infinite value(s), in rows 0, 2 (2 of 3)",
    ),
    case(
        "one target short",
        lambda _: metrics.rmse(np.zeros(3), np.zeros(2)),
        ValueError,
        "predictions (3,) and targets (2,) differ in size",
    ),
    case(
        "text targets",
        lambda _: metrics.rmse(np.zeros(2), np.array(["a", "b"])),
        TypeError,
        "targets must be numeric",
    ),
]


@pytest.mark.parametrize(("call", "error", "fragment"), BAD_TARGETS)
def test_bad_regression_targets_are_refused_before_compiling(call, error, fragment):
    check(call, error, fragment, None)


# --- divergences, agreement, diversity -------------------------------------------------------

# KL([.5, .5] || [.25, .75]) = .5 log(.5/.25) + .5 log(.5/.75) = .5 log(4/3)
KL_PQ = 0.5 * math.log(4 / 3)
# KL([.25, .75] || [.5, .5]) = .25 log(.25/.5) + .75 log(.75/.5) = .25 log .5 + .75 log 1.5
KL_QP = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)


def test_kl_and_entropy_by_hand():
    p, q = np.array([0.5, 0.5]), np.array([0.25, 0.75])
    assert float(metrics.kl_divergence(p, q)) == pytest.approx(KL_PQ, rel=1e-6)
    assert float(metrics.kl_divergence(q, p)) == pytest.approx(KL_QP, rel=1e-6)
    # q_k = 0 < p_k: log q clipped at 1e-12 -> .5 log(.5) + .5 (log .5 - log 1e-12).
    clipped = float(metrics.kl_divergence(q[::-1] * 0 + p, np.array([1.0, 0.0])))
    assert clipped == pytest.approx(0.5 * math.log(0.5) + 0.5 * (math.log(0.5) + 12 * math.log(10)))
    # 0 log 0 = 0: KL([1, 0] || [.5, .5]) = log 2.
    assert float(metrics.kl_divergence(np.array([1.0, 0.0]), p)) == pytest.approx(math.log(2))
    assert float(metrics.entropy(np.full(4, 0.25))) == pytest.approx(math.log(4), rel=1e-6)
    assert float(metrics.entropy(np.array([1.0, 0.0, 0.0]))) == 0.0


def test_agreement_tv_symkl_by_hand():
    p = np.array([[0.5, 0.5], [1.0, 0.0], [0.2, 0.8]], np.float32)
    q = np.array([[0.25, 0.75], [0.0, 1.0], [0.4, 0.6]], np.float32)
    # argmax p = 0 (tie -> lowest), 0, 1; argmax q = 1, 1, 1 -> agree on 1 of 3.
    assert float(metrics.top1_agreement(p, q)) == pytest.approx(1 / 3)
    # TV per input: .5(.25+.25) = .25, .5(1+1) = 1, .5(.2+.2) = .2 -> mean 1.45/3.
    assert float(metrics.total_variation(p, q)) == pytest.approx(1.45 / 3, rel=1e-6)
    # Symmetrised KL = mean of the two directions (not their sum) on the first input.
    assert float(metrics.symmetrised_kl(p[:1], q[:1])) == pytest.approx(
        0.5 * (KL_PQ + KL_QP), rel=1e-6
    )


def test_agreement_properties():
    p, q = _dirichlet(50, 5), _dirichlet(50, 5)
    assert float(metrics.top1_agreement(p, p)) == 1.0
    assert float(metrics.total_variation(p, p)) == 0.0
    assert float(metrics.symmetrised_kl(p, p)) == 0.0
    assert float(metrics.total_variation(p, q)) == pytest.approx(
        float(metrics.total_variation(q, p)), rel=1e-6
    )
    assert float(metrics.symmetrised_kl(p, q)) == pytest.approx(
        float(metrics.symmetrised_kl(q, p)), rel=1e-6
    )
    # With two samples, the ordered-pair average is exactly the symmetrised KL.
    assert float(metrics.mean_pairwise_kl(np.stack([p, q]))) == pytest.approx(
        float(metrics.symmetrised_kl(p, q)), rel=1e-5
    )
    kl_pq, kl_qp = metrics.kl_divergence(p, q), metrics.kl_divergence(q, p)
    assert bool(jnp.all(kl_pq >= 0)) and bool(jnp.all(kl_qp >= 0))
    assert not np.allclose(kl_pq, kl_qp)  # KL itself is not symmetric
    # Pinsker per input: TV <= sqrt(KL / 2).
    tv = 0.5 * np.abs(p - q).sum(-1)
    assert np.all(tv <= np.sqrt(np.asarray(kl_pq) / 2) + 1e-6)
    with pytest.raises(ValueError, match="same shape"):
        metrics.total_variation(p, q[:10])


def test_mean_pairwise_kl_by_hand_and_brute_force():
    # Samples [.5,.5], [.25,.75], [.5,.5] on one input; ordered pairs:
    #   KL12 = KL_PQ, KL21 = KL_QP, KL13 = KL31 = 0, KL23 = KL_QP, KL32 = KL_PQ
    # -> (2 KL_PQ + 2 KL_QP) / (3 * 2).
    samples = np.array([[[0.5, 0.5]], [[0.25, 0.75]], [[0.5, 0.5]]], np.float32)
    expected = (2 * KL_PQ + 2 * KL_QP) / 6
    assert float(metrics.mean_pairwise_kl(samples)) == pytest.approx(expected, rel=1e-6)

    samples = _dirichlet(4, 5, 3)
    brute = np.mean(
        [
            np.mean(np.sum(samples[i] * np.log(samples[i] / samples[j]), -1))
            for i in range(4)
            for j in range(4)
            if i != j
        ]
    )
    assert float(metrics.mean_pairwise_kl(samples)) == pytest.approx(brute, rel=1e-5)
    same = np.broadcast_to(samples[0], samples.shape)
    assert float(metrics.mean_pairwise_kl(same)) == 0.0
    with pytest.raises(ValueError, match="2 samples"):
        metrics.mean_pairwise_kl(samples[:1])


# --- OOD AUROC -------------------------------------------------------------------------------


def test_auroc_by_hand():
    # pos .9 beats both negatives (2); .5 ties .5 (1/2) and beats .1 (1); .3 beats .1 (1).
    # U = 2 + 1.5 + 1 = 4.5 over 3 * 2 pairs -> 0.75.
    value = metrics.auroc(np.array([0.9, 0.5, 0.3]), np.array([0.5, 0.1]))
    assert float(value) == pytest.approx(0.75)
    assert float(metrics.auroc(np.ones(3), np.ones(4))) == pytest.approx(0.5)


@pytest.mark.parametrize("rounding", [None, 1])
def test_auroc_matches_sklearn(rounding):
    pos, neg = RNG.normal(0.5, 1, 70), RNG.normal(0, 1, 50)
    if rounding is not None:  # many ties
        pos, neg = pos.round(rounding), neg.round(rounding)
    labels = np.r_[np.ones(70), np.zeros(50)]
    expected = roc_auc_score(labels, np.r_[pos, neg])
    assert float(metrics.auroc(pos, neg)) == pytest.approx(expected, abs=1e-6)


def test_ood_auroc_by_hand_and_sklearn():
    probs_in = np.array([[0.9, 0.1], [0.6, 0.4]], np.float32)
    probs_out = np.array([[0.5, 0.5], [0.7, 0.3]], np.float32)
    # max prob ID .9, .6 vs OOD .5, .7: (.9>.5) (.9>.7) (.6>.5) (.6<.7) -> 3/4. For K = 2 the
    # entropy is decreasing in the max probability, so the entropy AUROC is also 3/4.
    assert float(metrics.ood_auroc(probs_in, probs_out, "max_prob")) == pytest.approx(0.75)
    assert float(metrics.ood_auroc(probs_in, probs_out, "entropy")) == pytest.approx(0.75)
    assert float(metrics.ood_auroc(probs_out, probs_in, "max_prob")) == pytest.approx(0.25)

    probs_in, probs_out = _dirichlet(60, 4, alpha=0.3), _dirichlet(40, 4, alpha=2.0)
    is_ood = np.r_[np.zeros(60), np.ones(40)]
    pooled = np.r_[probs_in, probs_out]
    entropy = -np.sum(pooled * np.log(pooled), -1)
    assert float(metrics.ood_auroc(probs_in, probs_out, "entropy")) == pytest.approx(
        roc_auc_score(is_ood, entropy), abs=1e-6
    )
    assert float(metrics.ood_auroc(probs_in, probs_out, "max_prob")) == pytest.approx(
        roc_auc_score(is_ood, -pooled.max(-1)), abs=1e-6
    )
    with pytest.raises(ValueError, match="score"):
        metrics.ood_auroc(probs_in, probs_out, "margin")


# --- energy distance -------------------------------------------------------------------------


def test_energy_distance_by_hand():
    # x = [0, 1], y = [2, 4]: cross |0-2|,|0-4|,|1-2|,|1-4| = 2,4,1,3 -> mean 2.5 -> 2*2.5 = 5.
    # U within: x 2*1/(2*1) = 1, y 2*2/(2*1) = 2 -> 5 - 1 - 2 = 2.
    # V within: x 2/4 = 0.5,    y 4/4 = 1        -> 5 - 0.5 - 1 = 3.5 = scipy's value squared.
    x, y = np.array([0.0, 1.0]), np.array([2.0, 4.0])
    assert float(metrics.energy_distance(x, y)) == pytest.approx(2.0)
    assert float(metrics.energy_distance(x, y, unbiased=False)) == pytest.approx(3.5)
    assert stats.energy_distance(x, y) ** 2 == pytest.approx(3.5)


def test_energy_distance_cross_checks():
    # float32: the O(1) terms cancel, so the tolerance is a few float32 ulps of those terms
    # (absolute), not relative to the small difference (which depends on the reduction order).
    tol = 32 * float(np.finfo(np.float32).eps) * 4.0
    x, y = RNG.normal(size=(9, 3)), RNG.normal(0.3, 1.0, size=(7, 3))
    assert float(metrics.energy_distance(x, y)) == pytest.approx(_np_energy(x, y), abs=tol)
    u, v = RNG.normal(size=20), RNG.normal(0.5, 2.0, size=15)
    assert float(metrics.energy_distance(u, v, unbiased=False)) == pytest.approx(
        stats.energy_distance(u, v) ** 2, abs=tol
    )


def _np_energy(x: np.ndarray, y: np.ndarray) -> float:
    """Brute-force unbiased energy distance in numpy (float64)."""
    m, n = len(x), len(y)
    dxx = np.linalg.norm(x[:, None] - x[None], axis=-1)
    dyy = np.linalg.norm(y[:, None] - y[None], axis=-1)
    dxy = np.linalg.norm(x[:, None] - y[None], axis=-1)
    return 2 * dxy.mean() - dxx.sum() / (m * (m - 1)) - dyy.sum() / (n * (n - 1))


def _replicates(shift: float, d: int, size: int, reps: int = 200):
    """U- and V-statistic energy distances of ``reps`` independent pairs N(0, I) vs N(shift, I)."""
    x = RNG.normal(size=(reps, size, d)).astype(np.float32)
    y = (shift + RNG.normal(size=(reps, size, d))).astype(np.float32)

    def one(x, y):
        return metrics.energy_distance(x, y), metrics.energy_distance(x, y, unbiased=False)

    u, v = jax.jit(jax.vmap(one))(x, y)
    return np.asarray(u, np.float64), np.asarray(v, np.float64)


def test_energy_distance_unbiased_under_identical_distributions():
    # F = G = N(0, I_2), m = n = 16: E[U] = 0 exactly; check |mean| < 4 standard errors over 200
    # replicates. Both signs occur. The V-statistic is U + W_x/m + W_y/n, biased up by
    # E||X - X'|| (1/m + 1/n) = sqrt(pi) * (2/16) for 2-D standard normals (E||X - X'|| =
    # sqrt(2) E||Z|| = sqrt(2) sqrt(pi/2)).
    u, v = _replicates(0.0, d=2, size=16)
    se = u.std(ddof=1) / np.sqrt(u.size)
    assert abs(u.mean()) < 4 * se
    assert (u < 0).any() and (u > 0).any()
    assert (v >= 0).all()
    bias = v - u
    assert bias.mean() == pytest.approx(math.sqrt(math.pi) * 2 / 16, abs=4 * bias.std() / 14)
    # Scale: the U-statistic is degenerate under F = G, sd = O(1/n), well below the bias scale.
    assert u.std() < 0.5 * math.sqrt(math.pi) * 2 / 16 * 4


def test_energy_distance_shifted_matches_closed_form():
    # 1-D N(0,1) vs N(mu,1): X - Y ~ N(-mu, 2), E|N(mu, s^2)| = s sqrt(2/pi) exp(-mu^2/2s^2)
    # + mu (1 - 2 Phi(-mu/s)); E|X - X'| = 2/sqrt(pi). D^2 = 2 E|X - Y| - 2 * 2/sqrt(pi).
    mu, s = 1.0, math.sqrt(2.0)
    e_xy = s * math.sqrt(2 / math.pi) * math.exp(-(mu**2) / (2 * s**2)) + mu * (
        1 - 2 * stats.norm.cdf(-mu / s)
    )
    d2 = 2 * e_xy - 4 / math.sqrt(math.pi)  # = 0.5418
    u, _ = _replicates(mu, d=1, size=16)
    se = u.std(ddof=1) / np.sqrt(u.size)
    assert u.mean() == pytest.approx(d2, abs=4 * se)
    assert u.mean() > 10 * se  # clearly positive
    x = RNG.normal(size=(300, 1))
    assert float(metrics.energy_distance(x, x + 1.0)) > 0.3


def test_energy_distance_subsample_and_grad():
    x, y = RNG.normal(size=(40, 2)), RNG.normal(size=(30, 2))
    # Deterministic even thinning: indices round(linspace(0, m-1, 10)).
    thinned = metrics.energy_distance(x, y, max_samples=10)
    idx_x = np.round(np.linspace(0, 39, 10)).astype(int)
    idx_y = np.round(np.linspace(0, 29, 10)).astype(int)
    # float32 against float64: the error is relative to the terms, not to their difference
    scale = 2 * np.linalg.norm(x[idx_x][:, None] - y[idx_y][None], axis=-1).mean()
    expected = _np_energy(x[idx_x], y[idx_y])
    assert float(thinned) == pytest.approx(expected, rel=1e-5, abs=1e-5 * scale)
    random = metrics.energy_distance(x, y, max_samples=10, key=jax.random.key(0))
    assert np.isfinite(float(random)) and float(random) != pytest.approx(float(thinned))
    # Finite gradients even with coincident points (zero distances).
    grad = jax.grad(lambda a: metrics.energy_distance(a, a[::-1]))(x[:5])
    assert np.all(np.isfinite(np.asarray(grad)))
    with pytest.raises(ValueError, match="dimension"):
        metrics.energy_distance(x, y[:, :1])


def test_energy_distance_blocked_rows():
    # Force the row-blocked lax.map path (blocks of 2 rows of a 5 x 4 x 3 difference array).
    from bdl.metrics.energy import distance_sum

    a, b = RNG.normal(size=(5, 3)), RNG.normal(size=(4, 3))
    expected = np.linalg.norm(a[:, None] - b[None], axis=-1).sum()
    value = distance_sum(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32), 2 * 4 * 3)
    assert float(value) == pytest.approx(expected, rel=1e-5)
