"""Evaluation that streams: the running test-set BMA of ``bdl.sample(evaluate=...)`` equals the
BMA of the kept draws, a diverged chain leaves it as ``Samples.flat(healthy=True)`` says, draws
streamed to disk are bitwise the in-memory ones, a checkpointed run resumes to the same results,
and without kept draws the run's memory does not grow with the number of draws."""

import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bdl
from bdl.evaluation import RunningBMA, bma_curve
from bdl.sampling import FixedChunks, LoopOptions
from bdl.sampling.checkpoints import state as checkpoint_io
from bdl.sampling.kept import stream as stream_io

RUN = dict(num_steps=300, burn_in=100, thin=5, num_chains=3, seed=0, progress=False)
CLASSES = ("accuracy", "nll", "ece", "brier")


def classifier(cliff: bool = False, features: int = 3) -> bdl.CompiledModel:
    """A 3-class linear classifier with 100 training and 60 test inputs. With ``cliff``, the
    network returns NaN once its parameter ``z``, which the data do not see, passes 2: a chain
    that wanders there diverges."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(160, features)).astype(np.float32)
    logits = x @ rng.normal(size=(features, 3)) + rng.gumbel(size=(160, 3))
    y = np.argmax(logits, -1).astype(np.int32)
    params = {"w": jnp.zeros((features, 3)), "b": jnp.zeros(3)}

    def network(p, x):
        return x @ p["w"] + p["b"]

    if cliff:
        params = {"w": jnp.zeros((3, 3)), "z": jnp.zeros(())}

        def network(p, x):
            return jnp.where(p["z"] > 2.0, jnp.nan, x @ p["w"])

    model = bdl.Model(network=network, params=params, likelihood=bdl.Categorical())
    return bdl.compile(model, (x[:100], y[:100], x[100:], y[100:]), batch_size=20)


def regressor() -> bdl.CompiledModel:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(90, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -0.5]) + 0.3 * rng.normal(size=90)).astype(np.float32)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros(2)}, likelihood=bdl.Gaussian(0.3)
    )
    return bdl.compile(model, (x[:60], y[:60], x[60:], y[60:]), batch_size=20)


def first_draws(samples: bdl.Samples, k: int, chains) -> dict:
    """The first k draws of ``chains`` with one sample axis, as ``Samples.flat`` gives them."""
    return jax.tree.map(lambda a: a[chains, :k].reshape(-1, *a.shape[2:]), samples.positions)


def kept_metrics(target, positions) -> np.ndarray:
    """The classifier's BMA metrics from kept draws, the way ``bdl.metrics`` scores them."""
    probs = target.predict(positions, target.x_test)
    y = target.y_test
    m = bdl.metrics
    fns = (m.accuracy, m.nll, m.expected_calibration_error, m.brier_score)
    return np.array([float(f(probs, y)) for f in fns])


def curve(evaluation, names=CLASSES) -> np.ndarray:
    return np.stack([evaluation.curve[n] for n in names], axis=1)


@pytest.fixture(scope="module")
def target():
    return classifier()


@pytest.fixture(scope="module")
def kept(target):
    """A run that keeps its draws and scores them (batches of 7: the last one padded)."""
    return bdl.sample(target, bdl.kernels.sgld(1e-3), **RUN, evaluate=RunningBMA(batch_size=7))


def test_running_bma_equals_the_bma_of_the_kept_draws(target, kept):
    ev = kept.evaluation
    k = kept.num_draws
    np.testing.assert_array_equal(ev.draws, np.arange(1, k + 1))
    np.testing.assert_array_equal(ev.chains, np.full(k, 3))
    np.testing.assert_array_equal(ev.steps, kept.steps)
    assert ev.num_test == 60
    points = curve(ev)
    for j in (1, 2, 7, k // 2, k):
        expected = kept_metrics(target, first_draws(kept, j, slice(None)))
        np.testing.assert_allclose(points[j - 1], expected, rtol=2e-6, atol=1e-6)
    final = np.array([ev.metrics[n] for n in CLASSES])
    np.testing.assert_allclose(
        final, kept_metrics(target, kept.flat(healthy=True)), rtol=2e-6, atol=1e-6
    )
    np.testing.assert_array_equal(final, points[-1])  # no chain diverged: the last point
    # the NLL of the averaged probabilities is that of the log-sum-exp of the log-likelihoods
    reference = bdl.evaluation.test_metrics(target, kept.flat())
    assert abs(ev.metrics["nll"] - reference["nll"]) < 1e-5
    assert ev.metrics["accuracy"] == reference["accuracy"]


def test_running_bma_of_a_regressor_is_the_mixture_density_and_mean():
    target = regressor()
    one_chain = {**RUN, "num_chains": 1}  # stepped without a chain axis
    s = bdl.sample(target, bdl.kernels.sgld(1e-3), **one_chain, evaluate=RunningBMA(batch_size=8))
    ev = s.evaluation
    assert list(ev.metrics) == ["rmse", "nll"] and (ev.chains == 1).all()
    y = target.y_test
    for j in (1, 3, s.num_draws):
        draws = first_draws(s, j, slice(None))
        rmse = float(bdl.metrics.rmse(target.predict(draws, target.x_test), y))
        nll = -float(jnp.mean(target.log_predictive(draws, target.x_test, y)))
        np.testing.assert_allclose(ev.curve["rmse"][j - 1], rmse, rtol=1e-5)
        np.testing.assert_allclose(ev.curve["nll"][j - 1], nll, rtol=1e-5)


def test_a_chain_that_diverges_leaves_the_bma_from_its_divergence_on():
    """Chain 1 diverges before its first draw, chain 2 after 39 draws. Point k averages the
    chains not diverged by draw k; the final metrics are those of flat(healthy=True)."""
    target = classifier(cliff=True)
    init = {"net": {"w": jnp.zeros((3, 3, 3)), "z": jnp.array([0.0, 1.8, 0.0])}}
    s = bdl.sample(
        target, bdl.kernels.sgld(0.01), num_steps=300, thin=5, num_chains=3, seed=0, init=init,
        progress=False, evaluate=True,
    )  # fmt: skip
    assert s.diverged.tolist() == [False, True, True]
    valid = s.valid.sum(axis=1)
    assert valid[1] == 0 and 0 < valid[2] < s.num_draws  # chain 2: some draws, then diverged
    ev = s.evaluation
    expected_chains = np.where(np.arange(1, s.num_draws + 1) <= valid[2], 2, 1)
    np.testing.assert_array_equal(ev.chains, expected_chains)
    points = curve(ev)
    for j in (1, int(valid[2]), int(valid[2]) + 1, s.num_draws):
        chains = [0, 2] if j <= valid[2] else [0]
        expected = kept_metrics(target, first_draws(s, j, chains))
        np.testing.assert_allclose(points[j - 1], expected, rtol=2e-6, atol=1e-6)
    final = np.array([ev.metrics[n] for n in CLASSES])
    np.testing.assert_allclose(
        final, kept_metrics(target, s.flat(healthy=True)), rtol=2e-6, atol=1e-6
    )
    # the same curve from the kept draws afterwards
    again = bma_curve(target, s)
    np.testing.assert_array_equal(curve(again), points)
    assert again.metrics == ev.metrics


class HostBytes(FixedChunks):
    """Calls of ``steps`` steps; before each, the bytes NumPy holds on the host (``tracemalloc``
    sees NumPy's allocations): what the run keeps between its calls."""

    def __init__(self, steps: int) -> None:
        super().__init__(steps)
        self.sizes: list[int] = []

    def budget(self) -> int:
        self.sizes.append(tracemalloc.get_traced_memory()[0])
        return self.steps


@pytest.mark.parametrize("stream", [False, True], ids=["scored", "scored and streamed"])
def test_without_kept_draws_memory_does_not_grow_with_the_draws(tmp_path, monkeypatch, stream):
    """Runs of 40 and 240 draws per chain of a classifier with 303 parameters: 200 more draws of
    3 chains are 727 kB, and the host holds less than a tenth of that more (the curve's points,
    a few numbers per draw)."""
    monkeypatch.setattr(stream_io, "PART_BYTES", 1)  # a part after every call
    target = classifier(features=100)
    draw_bytes = 3 * 303 * 4
    peaks, results = [], []
    for num_steps in (300, 1_300):
        policy = HostBytes(25)
        out = tmp_path / str(num_steps) if stream else None
        tracemalloc.start()
        try:
            s = bdl.sample(
                target, bdl.kernels.sgld(1e-3), **{**RUN, "num_steps": num_steps},
                keep_draws=False, evaluate=RunningBMA(batch_size=7), stream_to=out,
                loop=LoopOptions(chunks=policy),
            )  # fmt: skip
        finally:
            tracemalloc.stop()
        assert not s.kept_draws and s.num_draws == 0 and "not kept" in repr(s)
        peaks.append(max(policy.sizes[len(policy.sizes) // 4 :]))
        results.append(s)
    assert results[1].evaluation.draws[-1] == 240
    assert peaks[1] - peaks[0] < 200 * draw_bytes / 10, (peaks, 200 * draw_bytes)
    with pytest.raises(ValueError, match="hold no draws"):
        bma_curve(target, results[0])


def test_scores_do_not_depend_on_whether_draws_are_kept(target, kept):
    s = bdl.sample(
        target, bdl.kernels.sgld(1e-3), **RUN, keep_draws=False, evaluate=RunningBMA(batch_size=7),
        loop=LoopOptions(chunks=FixedChunks(25)),
    )  # fmt: skip
    np.testing.assert_array_equal(curve(s.evaluation), curve(kept.evaluation))
    assert s.evaluation.metrics == kept.evaluation.metrics


def assert_same_draws(a: bdl.Samples, b: bdl.Samples) -> None:
    for x, y in zip(jax.tree.leaves(a.positions), jax.tree.leaves(b.positions), strict=True):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(jax.tree.leaves(a.extra), jax.tree.leaves(b.extra), strict=True):
        np.testing.assert_array_equal(x, y)
    assert sorted(a.info) == sorted(b.info)
    for k in a.info:
        np.testing.assert_array_equal(a.info[k], b.info[k])
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_array_equal(a.diverged, b.diverged)
    np.testing.assert_array_equal(a.divergence_step, b.divergence_step)
    for x, y in zip(
        jax.tree.leaves(a.adapted or {}), jax.tree.leaves(b.adapted or {}), strict=True
    ):
        np.testing.assert_array_equal(x, y)
    assert a.steps_done == b.steps_done and a.meta == b.meta


@pytest.mark.parametrize(
    "name",
    ["entropy", pytest.param("sghmc", marks=pytest.mark.slow)],
    ids=["entropy (an extra)", "adapted sghmc"],
)
def test_streamed_draws_are_bitwise_the_in_memory_ones(target, tmp_path, monkeypatch, name):
    """Streamed in parts of one call each, read back joined, part by part, and scored again
    from disk. Entropy-MCMC collects an extra (its guide); adapted SGHMC has adapted values."""
    monkeypatch.setattr(stream_io, "PART_BYTES", 1)
    kernel = {
        "entropy": lambda: bdl.kernels.get("entropy", base="sgld", step_size=1e-3),
        "sghmc": lambda: bdl.kernels.get("sghmc"),
    }[name]()
    out = tmp_path / name
    s = bdl.sample(
        target, kernel, **{**RUN, "burn_in": 150}, stream_to=out, evaluate=True,
        loop=LoopOptions(chunks=FixedChunks(25)),
    )  # fmt: skip
    assert stream_io.num_parts(out) > 1
    back = bdl.load_samples(out)
    assert_same_draws(s, back)
    assert back.kept_draws and back.evaluation.metrics == s.evaluation.metrics
    parts = list(stream_io.iter_parts(out))
    np.testing.assert_array_equal(np.concatenate([p.steps for p in parts]), s.steps)
    one = bdl.load_samples(stream_io.part_path(out, 1))  # a part is a samples file
    np.testing.assert_array_equal(one.steps, parts[0].steps)
    again = bma_curve(target, out)
    np.testing.assert_array_equal(curve(again), curve(s.evaluation))


def test_a_streamed_scored_run_resumes_to_the_uninterrupted_results(
    target, kept, tmp_path, monkeypatch
):
    """Interrupted with Ctrl-C at step 200, and a crash after a part was written but before the
    checkpoint that follows it: both resume to the uninterrupted run's scores and draws."""
    from loop_helpers import StopAfter

    monkeypatch.setattr(stream_io, "PART_BYTES", 1)
    settings = dict(keep_draws=False, evaluate=RunningBMA(batch_size=7))
    ck, out = tmp_path / "ck", tmp_path / "draws"
    with pytest.warns(UserWarning, match="interrupted"):
        part = bdl.sample(
            target, bdl.kernels.sgld(1e-3), **RUN, checkpoint=ck, checkpoint_every=0.0,
            stream_to=out, **settings, loop=LoopOptions(chunks=StopAfter(23, stop=200)),
        )  # fmt: skip
    assert part.interrupted and part.evaluation.draws[-1] < kept.num_draws

    real_write = checkpoint_io.write
    calls = []

    def crashing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the stream has written a part this checkpoint does not list
            raise RuntimeError("killed")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(checkpoint_io, "write", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        bdl.sample(
            target, bdl.kernels.sgld(1e-3), resume=ck, checkpoint_every=0.0, **settings,
            loop=LoopOptions(chunks=FixedChunks(23)),
        )  # fmt: skip
    monkeypatch.setattr(checkpoint_io, "write", real_write)

    resumed = bdl.sample(target, bdl.kernels.sgld(1e-3), resume=ck, **settings)
    assert not resumed.interrupted and not resumed.kept_draws
    np.testing.assert_array_equal(curve(resumed.evaluation), curve(kept.evaluation))
    np.testing.assert_array_equal(resumed.evaluation.steps, kept.evaluation.steps)
    assert resumed.evaluation.metrics == kept.evaluation.metrics
    assert_same_draws(kept, bdl.load_samples(out))
    with pytest.raises(ValueError, match="evaluate"):
        bdl.sample(target, bdl.kernels.sgld(1e-3), resume=ck, keep_draws=False)


def test_the_evaluation_is_saved_with_the_samples(kept, tmp_path):
    for name in ("s.npz", "s.nc"):
        back = bdl.load_samples(kept.save(tmp_path / name))
        assert back.evaluation.metrics == kept.evaluation.metrics
        np.testing.assert_array_equal(curve(back.evaluation), curve(kept.evaluation))
        np.testing.assert_array_equal(back.evaluation.draws, kept.evaluation.draws)


def test_the_curve_plots_one_panel_per_metric(kept):
    import matplotlib

    matplotlib.use("Agg")
    axes = kept.evaluation.plot()
    assert len(axes) == 2
    line = axes[1].get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), kept.evaluation.draws)
    np.testing.assert_array_equal(line.get_ydata(), kept.evaluation.curve["nll"])
    with pytest.raises(ValueError, match="rmse"):
        kept.evaluation.plot(metrics=["rmse"])


def test_bad_streaming_arguments_are_refused_before_compiling(target, tmp_path):
    kernel = bdl.kernels.sgld(1e-3)
    with pytest.raises(ValueError, match="keep_draws=False keeps no draws"):
        bdl.sample(target, kernel, num_steps=10, keep_draws=False)
    with pytest.raises(TypeError, match="keep_draws"):
        bdl.sample(target, kernel, num_steps=10, keep_draws="no")
    with pytest.raises(TypeError, match="RunningBMA"):
        bdl.sample(target, kernel, num_steps=10, evaluate="test")
    with pytest.raises(ValueError, match="batch_size"):
        RunningBMA(batch_size=0)
    with pytest.raises(ValueError, match="both x and y"):
        RunningBMA(x=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="do not match"):
        bdl.sample(target, kernel, num_steps=10, evaluate=RunningBMA(np.zeros((4, 2)), np.zeros(4)))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(ValueError, match="not empty"):
        bdl.sample(target, kernel, num_steps=10, stream_to=tmp_path / "full")
    potential = bdl.Potential(lambda th: -jnp.sum(th**2), init=jnp.zeros(2))
    with pytest.raises(TypeError, match="potential has no predictive"):
        bdl.sample(bdl.compile(potential), kernel, num_steps=10, evaluate=True)
    model = bdl.Model(
        network=lambda p, x: x @ p["w"], params={"w": jnp.zeros(2)}, likelihood=bdl.Gaussian(1.0)
    )
    no_test = bdl.compile(model, (np.ones((8, 2), np.float32), np.ones(8, np.float32)))
    with pytest.raises(ValueError, match="no test split"):
        bdl.sample(no_test, kernel, num_steps=10, evaluate=True)


def test_the_command_line_scores_streams_and_plots_without_keeping_draws(tmp_path, capsys):
    from bdl.cli.main import main

    out, draws, png = tmp_path / "run.npz", tmp_path / "draws", tmp_path / "bma.png"
    args = ["sample", "linear_regression", "--kernel", "sgld", "--tuned", "--steps", "300"]
    args += ["--burn-in", "100", "--thin", "2", "--chains", "2", "--no-keep-draws"]
    args += ["--evaluate", "--stream-to", str(draws), "--curve", str(png), "--out", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "test BMA over 100 draws per chain (scored while sampling): rmse" in text
    run = bdl.load_samples(out)
    assert not run.kept_draws and run.num_draws == 0
    assert run.evaluation.draws[-1] == 100
    assert bdl.load_samples(draws).num_draws == 100
    assert png.stat().st_size > 0
    assert main(["sample", "linear_regression", "--kernel", "sgld", "--curve", "x.png"]) == 2
    assert "add --evaluate" in capsys.readouterr().err
