"""The run report's figures read well: traces in each quantity's own units, per-chain
distributions on the scale of their data, temperature figures whose labels fit inside them and
whose legends stay off the data, and one sentence under each temperature figure saying what it
means and what to do."""

import warnings

import flax.linen as nn
import matplotlib
import numpy as np
import pytest

import bdl
from bdl.data import digits
from bdl.diagnostics.rank_normalised import within_chains
from bdl.model_files import load_spec
from bdl.report import temperatures
from bdl.report.temperatures import configurational_reading, kinetic_reading, temperature_parts
from bdl.report.traces import distributions, monitored, trace_figures

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def regression():
    target = load_spec("linear_regression").compile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = bdl.sample(
            target, bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0),
            num_steps=1_200, burn_in=200, thin=10, num_chains=3, seed=3,
        )  # fmt: skip
    return samples, target


@pytest.fixture(scope="module")
def network():
    class Tiny(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(10)(nn.relu(nn.Dense(8)(x)))

    model = bdl.Model(network=Tiny(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
    compiled = bdl.compile(model, digits(), batch_size=32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = bdl.sample(
            compiled, bdl.kernels.get("sghmc", learning_rate=0.05, momentum=0.9),
            num_steps=300, burn_in=100, thin=10, num_chains=2,
        )  # fmt: skip
    return run, compiled


def test_a_networks_traces_are_in_their_own_units_and_its_rhat_is_the_verdicts(network):
    """Log predictive densities are traced as they are (at most 0), not as scores; R̂, ESS and
    the rank plots read each chain's normal scores within itself, as the convergence verdict
    does."""
    run, compiled = network
    found, what = monitored(run, compiled)
    assert found.scored_within_chains and "in their own units" in what
    assert np.nanmax(found.values) <= 0.0  # log p(y | x) of a classifier
    np.testing.assert_allclose(found.diagnosed, within_chains(found.values))
    np.testing.assert_allclose(run.convergence.max_rhat, np.nanmax(found.rhat), rtol=1e-9)
    trace, rank = trace_figures(run, found, 3)
    titles = [ax.get_title() for ax in trace.axes]
    assert any("of each chain's scores within itself" in t for t in titles)
    assert any(t.startswith("log p(y | x_test[") for t in titles)
    lines = [line.get_ydata() for ax in trace.axes[1::2] for line in ax.lines]
    traced = [y for y in lines if len(y) > 2]  # the traces, not the vertical marks of events
    assert traced and max(np.nanmax(y) for y in traced) <= 0.0  # as they are: not centred at 0
    for figure in (trace, rank):
        figure.clf()


def test_a_models_traces_are_its_coordinates_as_they_are(regression):
    samples, target = regression
    found, _ = monitored(samples, target)
    assert not found.scored_within_chains
    assert found.diagnosed is found.values


def test_each_chains_distribution_is_on_the_scale_of_its_data():
    """A chain that hardly moves next to one that wanders: both are visible, each scaled to its
    own peak, on an axis spanning the data rather than a spike on a wide one."""
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    values = np.stack([-1.0 + 0.5 * rng.standard_normal(80), np.full(80, -1e-4)])
    values[1, ::7] += 1e-6  # nearly constant
    fig, ax = plt.subplots()
    distributions(ax, values, chains=[3, 5])
    assert ax.get_xlim() == pytest.approx((values.min(), values.max()))
    bands = list(ax.patches)
    assert len(bands) == 2
    for k, band in enumerate(bands):  # chain 3 on top (band 1), chain 5 below (band 0)
        base = 1 - k
        top = band.get_path().vertices[:, 1].max()
        assert top == pytest.approx(base + 0.85)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["chain 3", "chain 5"]
    plt.close(fig)


def test_temperature_figures_keep_labels_inside_and_legends_off_the_data(regression, monkeypatch):
    samples, target = regression
    figures = []

    def keep(fig, name, caption, dpi=80):
        fig.canvas.draw()
        figures.append((name, fig))
        return f'<figure data-figure="{name}"></figure>'

    monkeypatch.setattr(temperatures, "figure", keep)
    parts = temperature_parts(samples, target)
    assert [name for name, _ in figures] == ["kinetic-temperature", "configurational-temperature"]
    for _, fig in figures:
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        frame = fig.bbox
        for label in (ax.xaxis.label, ax.yaxis.label):
            box = label.get_window_extent(renderer)
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1, label.get_text()
            assert frame.y0 <= box.y0 and box.y1 <= frame.y1, label.get_text()
        legend = ax.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(ax.get_window_extent(renderer))  # beside the axes
        assert legend.x1 <= frame.x1
    text = "\n".join(parts)
    kinetic = text.index("kinetic-temperature")
    configurational = text.index("configurational-temperature")
    assert "Kinetic temperature:" in text[kinetic:configurational]
    assert "Configurational temperature:" in text[configurational:]


@pytest.mark.parametrize(
    ("ratio", "inside", "good", "says"),
    [
        (1.002, True, True, "nothing to do"),
        (1.04, False, True, "within the 5% the bias check tolerates"),
        (1.4, False, False, "as if sampled at 1.4·T"),
        (0.127, False, False, 'init="prior"'),
        (float("nan"), False, True, "T is 0"),
    ],
)
def test_the_configurational_temperature_is_read_in_one_sentence(ratio, inside, good, says):
    sentence, ok = configurational_reading(ratio, inside)
    assert ok is good and says in sentence
    assert sentence.count(". ") <= 2  # one reading and what to do, not a paragraph


@pytest.mark.parametrize(
    ("fraction", "ratio", "adapted", "good", "says"),
    [
        (0.99, 1.0, False, True, "the momenta are at temperature T"),
        (0.25, 1.09, False, False, "a smaller step size"),
        (0.25, 1.09, True, False, "below the one warm-up chose"),
        (0.25, 0.8, False, False, "runs cold"),
    ],
)
def test_the_kinetic_temperature_is_read_in_one_sentence(fraction, ratio, adapted, good, says):
    sentence, ok = kinetic_reading(fraction, ratio, adapted)
    assert ok is good and says in sentence
    assert f"{fraction:.0%} of the draws lie in the band (99% would at equilibrium)" in sentence
