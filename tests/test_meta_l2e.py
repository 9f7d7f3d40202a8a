"""Meta-training of L2E and Kinetic-L2E: the antithetic ES estimator (Kim et al. 2024, Eq. 10),
the BMA meta-loss (Eq. 7), checkpoint/resume, config validation and the command line."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bdl
from bdl.cli.main import main
from bdl.kernels.elementwise_mlp import load_meta_params
from bdl.meta import es, l2e_training
from bdl.meta.config import load_config, parse_config, shipped_config_path
from bdl.meta.l2e_training import L2EConfig, bma_meta_loss, zero_heads
from bdl.meta.tasks import (
    FIRST_FAMILIES,
    HELD_OUT,
    TRAINING_FAMILIES,
    TaskDistribution,
    make_task,
    mnist1d_subsample,
)

TINY = {
    "kernel": "l2e",
    "seed": 3,
    "iterations": 4,
    "num_pairs": 2,
    "sigma": 0.05,
    "learning_rate": 0.05,
    "num_steps": 30,
    "burn_in": 10,
    "thin": 5,
    "init_final_scale": 0.1,
    "families": ["prior-mlp-1"],
    "held_out": "",
    "checkpoint_every": 1,
    "eval_repeats": 1,
}
TINY_TOML = """
kernel = "{kernel}"
seed = 3
iterations = 2
num_pairs = 2
num_steps = 30
burn_in = 10
thin = 5
families = ["prior-mlp-1"]
held_out = ""
eval_repeats = 0
"""


# ---------------------------------------------------------------------------- ES estimator
def test_antithetic_es_gradient_matches_quadratic_gradient_within_mc_error():
    """On L(φ) = ½φᵀAφ + bᵀφ each pair gives L(φ+η) − L(φ−η) = 2g·η exactly, so Eq. 10 is
    ĝ = (1/N) Σ (g·ε_i) ε_i with ε ~ N(0, I): mean g, covariance Σ = (‖g‖²I + ggᵀ)/N. The
    Mahalanobis distance N(ĝ − g)ᵀ(‖g‖²I + ggᵀ)⁻¹(ĝ − g) is then ≈ χ²_d."""
    rng = np.random.default_rng(0)
    m = rng.normal(size=(5, 5))
    a = jnp.asarray(m @ m.T / 5 + np.eye(5), jnp.float32)
    b = jnp.asarray(rng.normal(size=5), jnp.float32)
    phi = {"u": jnp.asarray([0.3, -1.2], jnp.float32), "v": jnp.asarray([0.5, 0.1, 2.0])}

    def flat(p):
        return jnp.concatenate([p["u"], p["v"]])

    def loss(p):
        x = flat(p)
        return 0.5 * x @ a @ x + b @ x

    g = np.asarray(a @ flat(phi) + b, np.float64)
    cov_unit = np.dot(g, g) * np.eye(5) + np.outer(g, g)  # N · Cov[ĝ]

    n = 4000
    estimate = jax.jit(es.es_gradient, static_argnums=0, static_argnames=("num_pairs", "sigma"))
    mean_loss, grad = estimate(loss, phi, jax.random.key(1), num_pairs=n, sigma=0.1)
    err = np.asarray(flat(grad), np.float64) - g
    z = err / np.sqrt(np.diag(cov_unit) / n)
    assert np.all(np.abs(z) < 4.0), z
    mahalanobis = n * err @ np.linalg.solve(cov_unit, err)
    assert mahalanobis < stats.chi2.ppf(0.999, df=5), mahalanobis
    # the mean population loss is L(φ) + σ²tr(A)/2 in expectation
    expected = float(loss(phi)) + 0.5 * 0.1**2 * float(jnp.trace(a))
    assert abs(float(mean_loss) - expected) < 0.05

    # the variance formula itself: 400 independent estimates with N = 8 pairs
    keys = jax.random.split(jax.random.key(2), 400)
    grads = jax.jit(
        jax.vmap(lambda k: flat(es.es_gradient(loss, phi, k, num_pairs=8, sigma=0.1)[1]))
    )(keys)
    var = np.asarray(grads, np.float64).var(axis=0, ddof=1)
    expected_var = np.diag(cov_unit) / 8
    # a sample variance of 400 draws has relative sd ≈ √(2/399)·√(kurtosis factor) ≲ 0.15
    np.testing.assert_allclose(var, expected_var, rtol=0.35)


def test_antithetic_population_layout():
    params = {"w": jnp.arange(3.0)}
    eps = es.perturbations(jax.random.key(0), params, 4, 0.5)
    assert eps["w"].shape == (4, 3)
    pop = es.antithetic_population(params, eps)
    np.testing.assert_allclose(pop["w"][:4], params["w"] + eps["w"])
    np.testing.assert_allclose(pop["w"][4:], params["w"] - eps["w"])


# ---------------------------------------------------------------------------- meta-loss
def test_bma_meta_loss_by_hand():
    # K = 3 samples, 2 held-out points: p(y*|x*, θ_k)
    p = np.array([[0.5, 0.2], [0.1, 0.4], [0.3, 0.9]])
    # point 1: mean p = 0.3 → −log 0.3; point 2: mean p = 0.5 → −log 0.5
    expected = -(math.log(0.3) + math.log(0.5)) / 2
    got = float(bma_meta_loss(jnp.log(jnp.asarray(p))))
    assert got == pytest.approx(expected, rel=1e-6)
    # the BMA loss is below the mean per-sample cross-entropy (the ensemble's "ambiguity")
    assert got < float(-np.mean(np.log(p)))


def l2e_config(table):
    return parse_config(L2EConfig, table, "test")


def test_zero_heads_make_the_learned_kernels_sghmc():
    for name in ("l2e", "kinetic-l2e"):
        cfg = l2e_config({"kernel": name, "init_final_scale": 1.0})
        params = l2e_training.init_params(cfg)
        zero = zero_heads(params)
        for mlp in zero.values():
            assert not np.any(np.asarray(mlp.weights[-1])) and not np.any(mlp.biases[-1])
            assert np.any(np.asarray(mlp.weights[0]))


# ---------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("update", "key"),
    [
        ({"sigmaa": 0.1}, "sigmaa"),
        ({"sigma": -1.0}, "sigma"),
        ({"num_pairs": 0}, "num_pairs"),
        ({"iterations": 2.5}, "iterations"),
        ({"families": ["digits-mlp-8", "nope"]}, "families"),
        ({"held_out": "digits-mlp-8"}, "held_out"),
        ({"burn_in": 5000}, "burn_in"),
        ({"init_momentum": "random"}, "init_momentum"),
    ],
)
def test_bad_config_keys_raise_naming_the_key(update, key, tmp_path):
    with pytest.raises(ValueError, match=key):
        l2e_config({"kernel": "l2e", **update})
    with pytest.raises(ValueError, match=key):
        l2e_training.train({"kernel": "kinetic-l2e", **update}, tmp_path, progress=False)


@pytest.mark.parametrize(
    "table",
    [{"kernel": "kinetic-l2e", "form": "paper"}, {"kernel": "l2e", "form": "Paper"}],
)
def test_bad_form_raises_naming_the_key(table):
    with pytest.raises(ValueError, match="form"):
        l2e_config(table)


def test_shipped_configs_are_valid_and_hold_out_breast_cancer():
    paper = l2e_config(load_config(str(shipped_config_path("l2e-paper")), "l2e"))
    residual = l2e_config(load_config(None, "l2e"))
    kinetic = l2e_config(load_config(None, "kinetic-l2e"))
    for cfg in (paper, residual, kinetic):
        assert cfg.held_out == HELD_OUT and HELD_OUT not in cfg.families
        assert cfg.num_steps >= 1000
    assert (paper.form, residual.form) == ("paper", "residual")
    assert (paper.meta_params_name, residual.meta_params_name) == ("l2e-paper", "l2e")
    # both L2E forms train on the same (widened) family; Kinetic-L2E keeps its first eight
    assert set(paper.families) == set(residual.families) == set(TRAINING_FAMILIES)
    assert set(kinetic.families) == set(FIRST_FAMILIES)
    assert not any("mnist1d-cnn" in f for f in TRAINING_FAMILIES)
    # the two forms differ in nothing but the form and the evaluation rounds
    differ = {
        f.name
        for f in dataclasses.fields(L2EConfig)
        if getattr(paper, f.name) != getattr(residual, f.name)
    }
    assert differ == {"form", "eval_repeats"}
    with pytest.raises(ValueError, match="held_out"):
        TaskDistribution([*TRAINING_FAMILIES, HELD_OUT], HELD_OUT)


def test_mnist1d_tasks_are_stratified_disjoint_subsamples():
    a, b = mnist1d_subsample(4), mnist1d_subsample(6)
    assert a.x_train.shape == (1000, 40) and a.x_test.shape == (500, 40)
    np.testing.assert_array_equal(np.bincount(a.y_train, minlength=10), np.full(10, 100))
    np.testing.assert_array_equal(np.bincount(a.y_test, minlength=10), np.full(10, 50))
    rows = {r.tobytes() for r in a.x_train}
    assert not any(r.tobytes() in rows for r in a.x_test)
    assert not np.array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.x_train, mnist1d_subsample(4).x_train)


@pytest.mark.parametrize(
    ("name", "dim"), [("digits-rescnn-4x2", 986), ("mnist1d-mlp-16x16x16", 1370)]
)
def test_widened_families_have_their_documented_size(name, dim):
    task = make_task(name, 2)
    theta = jax.tree.map(lambda a: a[0], task.model.init_positions(jax.random.key(0), 1))
    assert sum(int(np.size(x)) for x in jax.tree.leaves(theta)) == dim
    assert np.isfinite(
        float(task.model.log_likelihood(theta, task.model.x_test, task.model.y_test).sum())
    )


def test_paper_form_trains_against_the_same_sghmc_baseline(tmp_path):
    """form = "paper" writes l2e-paper.npz; its per-iteration SGHMC baseline (residual form,
    zero heads, run in a call of its own) equals the residual form's in-population baseline on
    the same tasks and chain keys."""
    table = {**TINY, "iterations": 2, "held_out": "iris-mlp-16"}
    paper = l2e_training.train({**table, "form": "paper"}, tmp_path / "p", progress=False)
    residual = l2e_training.train({**table, "eval_repeats": 0}, tmp_path / "r", progress=False)
    assert paper.meta_params_path.name == "l2e-paper.npz"
    assert load_meta_params(paper.meta_params_path)["net"].activation == "relu"
    np.testing.assert_allclose(
        [h["sghmc_loss"] for h in paper.history],
        [h["sghmc_loss"] for h in residual.history],
        rtol=1e-4,
    )
    assert [h["loss"] for h in paper.history] != [h["loss"] for h in residual.history]
    evaluation = json.loads((tmp_path / "p" / "eval.json").read_text())
    assert [r["held_out"] for r in evaluation] == [False, True]
    assert all(np.isfinite(r["l2e-paper"]) and np.isfinite(r["sghmc"]) for r in evaluation)


def test_tasks_replay_from_seed_and_iteration():
    dist = TaskDistribution(["prior-mlp-1"], None)
    a, b = dist.sample(7, 11), dist.sample(7, 11)
    assert a.name == b.name and a.data_seed % 2 == 0
    np.testing.assert_array_equal(a.model.x_train, b.model.x_train)
    assert all(t.data_seed % 2 == 1 for t in dist.evaluation_tasks(7))


# ---------------------------------------------------------------------------- train/resume
def _read_params(path):
    return jax.tree.leaves(load_meta_params(path))


def test_train_checkpoint_resume_is_bitwise_equal(tmp_path):
    whole = l2e_training.train(TINY, tmp_path / "whole", progress=False)
    assert whole.iterations == 4 and len(whole.history) == 4

    # eval_repeats may change on resume; skipping the evaluation keeps the test fast
    split = {**TINY, "eval_repeats": 0}
    first = l2e_training.train({**split, "iterations": 2}, tmp_path / "split", progress=False)
    assert first.iterations == 2
    assert json.loads((tmp_path / "split" / "history.json").read_text())["iteration"] == 2
    with pytest.raises(ValueError, match="--resume"):
        l2e_training.train(split, tmp_path / "split", progress=False)
    with pytest.raises(ValueError, match="sigma"):
        l2e_training.train({**split, "sigma": 0.1}, tmp_path / "split", resume=True, progress=False)
    resumed = l2e_training.train(split, tmp_path / "split", resume=True, progress=False)
    assert resumed.iterations == 4

    for x, y in zip(
        _read_params(whole.meta_params_path), _read_params(resumed.meta_params_path), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert [h["loss"] for h in whole.history] == [h["loss"] for h in resumed.history]
    assert all(np.isfinite(h["loss"]) and np.isfinite(h["sghmc_loss"]) for h in whole.history)
    for name in ("loss.png", "eval.json", "checkpoint.eqx", "l2e.npz"):
        assert (tmp_path / "whole" / name).is_file()
    evaluation = json.loads((tmp_path / "whole" / "eval.json").read_text())
    assert evaluation[0]["family"] == "prior-mlp-1" and np.isfinite(evaluation[0]["l2e"])


def interrupt_second_es_step(monkeypatch):
    """Make the second ES iteration raise KeyboardInterrupt, as Ctrl-C would."""
    real = l2e_training.es_step
    calls = []

    def interrupt_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(l2e_training, "es_step", interrupt_second)


def test_ctrl_c_saves_a_checkpoint(tmp_path, monkeypatch):
    interrupt_second_es_step(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        l2e_training.train({**TINY, "checkpoint_every": 10}, tmp_path, progress=False)
    record = json.loads((tmp_path / "history.json").read_text())
    assert record["iteration"] == 1 and len(record["history"]) == 1
    assert (tmp_path / "checkpoint.eqx").is_file()


# ---------------------------------------------------------------------------- command line
@pytest.mark.parametrize("kernel", ["l2e", "kinetic-l2e"])
def test_cli_meta_train_runs(kernel, tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_TOML.format(kernel=kernel))
    out = tmp_path / "out"
    code = main(["meta-train", kernel, "--config", str(config), "--out", str(out), "--quiet"])
    assert code == 0
    assert "2 iterations" in capsys.readouterr().out
    path = out / f"{kernel}.npz"
    kernel_obj = bdl.kernels.get(kernel, meta_params=path, step_size=0.01)
    assert kernel_obj.meta_params.keys() == load_meta_params(path).keys()
    assert (out / "loss.png").is_file()


def test_cli_meta_train_ctrl_c_exits_130_and_keeps_the_checkpoint(tmp_path, monkeypatch, capsys):
    interrupt_second_es_step(monkeypatch)
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_TOML.format(kernel="l2e"))
    out = tmp_path / "out"
    code = main(["meta-train", "l2e", "--config", str(config), "--out", str(out), "--quiet"])
    assert code == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    assert (out / "checkpoint.eqx").is_file()
