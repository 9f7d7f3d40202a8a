"""The progress report: no rate before work has started (compilation is not in the ETA), plain
lines at a low rate in logs, a rewritten line on terminals, and the final line once."""

from __future__ import annotations

import io

import pytest

from bdl.sampling.run import progress as progress_module
from bdl.sampling.run.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", c)
    return c


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_style_follows_whether_stderr_is_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert Progress(10, True).newline is True
    monkeypatch.setattr("sys.stderr", Terminal())
    assert Progress(10, True).newline is False
    assert Progress(10, True, newline=True).newline is True


def test_the_eta_excludes_compilation(clock, capsys):
    meter = Progress(1000, True, "sgld", newline=True, interval=0.0)
    clock.now = 30.0  # the first chunk: 30 s of compiling, 16 steps
    meter.update(16)
    clock.now = 31.0  # then 100 steps/s
    meter.update(116)
    first, second = capsys.readouterr().err.splitlines()
    assert first == "sgld: 16/1000 steps"  # no rate yet
    assert second == "sgld: 116/1000 steps  100 steps/s  ETA 9 s"


def test_later_one_off_costs_fade_from_the_rate(clock, capsys):
    meter = Progress(100_000, True, "sgld", newline=True, interval=0.0)
    meter.update(0)
    clock.now = 10.0  # a second compilation: 10 s for 100 steps
    meter.update(100)
    for t in range(11, 31):  # then 1,000 steps/s
        clock.now = float(t)
        meter.update(100 + 1000 * (t - 10))
    last = capsys.readouterr().err.splitlines()[-1]
    # over the recent half (15 s): 1,000 steps/s; since the first update it would be 670
    assert last == "sgld: 20100/100000 steps  1,000 steps/s  ETA 80 s"


def test_logs_get_plain_lines_every_ten_seconds(clock, capsys):
    meter = Progress(100, True, "sghmc", newline=True)
    for t in range(1, 26):
        clock.now = float(t)
        meter.update(4 * t)
    meter.close(100)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert [line.split()[1] for line in lines] == ["40/100", "80/100", "100/100"]


def test_the_final_line_is_printed_once(clock, capsys):
    meter = Progress(100, True, "sghmc", newline=True, interval=0.0)
    clock.now = 1.0
    meter.update(50)
    clock.now = 2.0
    meter.update(100)
    meter.close(100)
    meter.close(100)
    lines = capsys.readouterr().err.splitlines()
    assert sum("100/100" in line for line in lines) == 1


def test_a_terminal_line_is_rewritten_and_ended_once(clock, monkeypatch):
    stream = Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    meter = Progress(100, True, "sgld")
    for t in range(1, 5):
        clock.now = float(t)
        meter.update(25 * t)
    meter.close(100)
    meter.close(100)
    text = stream.getvalue()
    assert text.count("\r") == 4 and text.endswith("\n") and text.count("\n") == 1
    assert text.count("100/100") == 1


def test_a_disabled_meter_writes_nothing(clock, capsys):
    meter = Progress(100, False)
    meter.update(50, force=True)
    meter.close(100)
    assert capsys.readouterr().err == ""
