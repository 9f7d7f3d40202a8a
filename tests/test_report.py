"""The run report (docs/report.md): one self-contained HTML file with every section and figure,
checked by parsing the HTML and, where a Chromium is installed, by opening it in headless
Chromium; divergences and run-away chains are marked; bad paths are refused by name."""

import base64
import dataclasses
import html.parser
import os
import shutil
import subprocess
import warnings

import flax.linen as nn
import numpy as np
import pytest

import bdl
from bdl.cli.main import main
from bdl.data import digits
from bdl.model_files import load_spec
from bdl.report import FIGURES, SECTIONS, write_report

#: what every report of a momentum kernel with its target holds
CORE_FIGURES = {"trace", "rank", "kinetic-temperature", "configurational-temperature"}
#: the executables tried for the browser test, in order (Debian: chromium, chromium-headless-shell)
CHROMIUM = ("chromium", "chromium-headless-shell", "chromium-browser", "google-chrome")


class Parsed(html.parser.HTMLParser):
    """The sections, figures, embedded images and outside references of a report."""

    def __init__(self):
        super().__init__()
        self.sections, self.figures, self.images, self.outside = [], [], [], []
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("data-section"))
        if tag == "figure":
            self.figures.append(a.get("data-figure"))
        if tag == "img":
            self.images.append(a.get("src", ""))
        for key in ("src", "href"):
            value = a.get(key) or ""
            if value and not value.startswith(("data:", "#")):
                self.outside.append(value)
        if tag in ("script", "link"):
            self.outside.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def parse(path):
    parsed = Parsed()
    parsed.feed(path.read_text(encoding="utf-8"))
    return parsed


def check_self_contained(parsed):
    assert parsed.sections == list(SECTIONS), parsed.sections
    assert not parsed.outside, f"the report refers outside itself: {parsed.outside}"
    assert parsed.images and len(parsed.images) == len(parsed.figures)
    for src in parsed.images:
        head, data = src.split(",", 1)
        assert head == "data:image/png;base64", head
        assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
    assert set(parsed.figures) <= set(FIGURES)


@pytest.fixture(scope="module")
def target():
    return load_spec("linear_regression").compile()


@pytest.fixture(scope="module")
def samples(target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bdl.sample(
            target, bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0),
            num_steps=1_200, burn_in=200, thin=10, num_chains=3, seed=3,
        )  # fmt: skip


@pytest.fixture(scope="module")
def report(samples, target, tmp_path_factory):
    return samples.report(tmp_path_factory.mktemp("report") / "run.html", target)


def test_a_report_holds_every_section_and_figure(report, samples):
    parsed = parse(report)
    check_self_contained(parsed)
    assert set(parsed.figures) >= CORE_FIGURES, parsed.figures
    text = " ".join(parsed.text)
    assert "linear_regression" in text and "sghmc" in text
    raw = report.read_text(encoding="utf-8")
    for setting, value in (("seed", 3), ("num steps", 1200), ("burn in", 200), ("thin", 10)):
        assert f'<td>{setting}</td><td class="num">{value}</td>' in raw, setting
    verdict = samples.convergence
    assert verdict is not None and verdict.summary() in text
    assert "bdl version" in text and "R̂" in text and "bulk ESS" in text
    assert report.stat().st_size < 2_000_000  # small: a few figures, not one per parameter
    assert "records no run-away flags" not in text and "run-away at draw" not in text


def test_divergences_and_run_away_chains_are_marked(samples, target, tmp_path):
    steps = np.asarray(samples.steps)
    diverged = dataclasses.replace(
        samples,
        diverged=np.array([False, True, False]),
        divergence_step=np.array([-1, int(steps[40]), -1]),
    )

    flagged = dataclasses.replace(
        diverged, runaway=np.array([False, False, True]),
        runaway_step=np.array([-1, -1, int(steps[70])]),
        runaway_reason=["", "", "hot: 3.1·T"],
    )  # fmt: skip
    text = " ".join(parse(flagged.report(tmp_path / "flagged.html", target)).text)
    assert "chain 1 diverged at draw 40" in text
    assert "chain 2 run-away at draw 70" in text
    assert "1 of 3 chains diverged; 1 run-away chain" in text  # the verdict at the top


def test_a_validation_report_holds_the_marginals_and_the_table(samples, target, tmp_path):
    reference = bdl.validation.Reference(
        positions=samples.positions, space="parameter", monitored=np.zeros((3, 2, 1)),
        max_rhat=1.0, min_ess=1_000.0, settings={},
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        validation = bdl.validate(
            target, bdl.kernels.get("sghmc", step_size=5e-3, friction=20.0),
            num_steps=1_200, burn_in=200, thin=10, num_chains=3, seed=4, reference=reference,
            plot=tmp_path / "validate.png",
        )  # fmt: skip
    path = write_report(validation.samples, tmp_path / "v.html", target=target,
                        validation=validation)  # fmt: skip
    parsed = parse(path)
    check_self_contained(parsed)
    assert {"marginals", "validation-plot"} <= set(parsed.figures)
    text = " ".join(parsed.text)
    assert ("PASS" if validation.passed else "FAIL") in text
    assert all(row.name in text for row in validation.rows)


def test_a_network_report_is_in_function_space_with_the_bma_curve(tmp_path):
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
    parsed = parse(run.report(tmp_path / "net.html", compiled, quantities=3))
    check_self_contained(parsed)
    assert {"trace", "rank", "bma-curve"} <= set(parsed.figures)
    text = " ".join(parsed.text)
    assert "function space" in text and "x_test" in text and "accuracy" in text
    assert "net/Dense_0/kernel" not in text.split("Traces and rank plots")[1].split("Chains")[0]


@pytest.mark.parametrize(
    ("path", "error", "match"),
    [("run.txt", ValueError, r"must end in \.html"), ("missing/run.html", ValueError,
     "does not exist")],
)  # fmt: skip
def test_a_bad_path_is_refused_by_name(samples, tmp_path, path, error, match):
    with pytest.raises(error, match=match):
        samples.report(tmp_path / path)
    with pytest.raises(ValueError, match="quantities must be"):
        samples.report(tmp_path / "run.html", quantities=0)


def test_cli_refuses_a_report_that_is_not_html(tmp_path, capsys):
    status = main(["sample", "linear_regression", "--kernel", "sgld", "--report",
                   str(tmp_path / "run.png")])  # fmt: skip
    assert status == 2
    assert "--report" in capsys.readouterr().err


def chromium_path():
    return next((shutil.which(name) for name in CHROMIUM if shutil.which(name)), None)


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium, driven through its command line (--dump-dom, --screenshot)."""
    path = chromium_path()
    if path is None:
        pytest.skip(
            "no Chromium on this machine (apt-get install chromium, or chromium-headless-shell): "
            "the HTML parsing tests above still check every section and figure"
        )
    return path


def render(chromium, page, screenshot):
    """``page`` as headless Chromium lays it out: (DOM after load, screenshot written)."""
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--virtual-time-budget=10000", "--window-size=1200,1600"]  # fmt: skip
    env = {**os.environ, "HOME": str(screenshot.parent)}
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
        env=env, check=True,
    ).stdout  # fmt: skip
    subprocess.run([*flags, f"--screenshot={screenshot}", page.as_uri()], capture_output=True,
                   timeout=120, env=env, check=True)  # fmt: skip
    return dom


def test_chromium_shows_every_section_and_figure(chromium, report, tmp_path):
    # a copy of the report with a probe that records, once the page has loaded, every section
    # on screen and every figure whose image the browser decoded (its natural size)
    probe = """<script>window.addEventListener('load', () => {
      const seen = [...document.querySelectorAll('section')]
        .filter(s => s.getBoundingClientRect().height > 0).map(s => s.id);
      const shown = [...document.querySelectorAll('figure')]
        .filter(f => f.querySelector('img').naturalWidth > 100).map(f => f.dataset.figure);
      document.body.setAttribute('data-seen', seen.join(' '));
      document.body.setAttribute('data-shown', shown.join(' '));
    });</script>"""
    page = tmp_path / "probed.html"
    page.write_text(report.read_text(encoding="utf-8").replace("</body>", probe + "</body>"))
    dom = render(chromium, page, tmp_path / "shot.png")
    seen = dom.split('data-seen="')[1].split('"')[0].split()
    shown = dom.split('data-shown="')[1].split('"')[0].split()
    assert seen == list(SECTIONS)
    assert set(shown) >= CORE_FIGURES, shown
    assert len(shown) == len(parse(report).figures)
    assert (tmp_path / "shot.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_cli_sample_and_validate_write_their_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("BDL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    run = ["--kernel", "sghmc", "--steps", "1200", "--burn-in", "200", "--thin", "10"]
    status = main(["sample", "linear_regression", *run, "--chains", "2", "--report", "run.html"])
    assert status in (0, 4)  # 4: not converged, said in the report
    check_self_contained(parse(tmp_path / "run.html"))
    status = main(["validate", "linear_regression", *run, "--nuts-warmup", "300",
                   "--nuts-samples", "300", "--report"])  # fmt: skip
    assert status in (0, 1)
    parsed = parse(tmp_path / "bdl-output" / "validate_linear_regression_sghmc.html")
    check_self_contained(parsed)
    assert {"marginals", "validation-plot"} <= set(parsed.figures)
