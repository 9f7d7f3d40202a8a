"""The first ``bdl.sample`` call of a process, with and without the persistent XLA cache; and
the README's kind of job as a whole process against the same job written by hand with BlackJAX.

Each measurement is a fresh Python process (nothing compiled yet). The model is the digits MLP of
``_common.py`` and the kernel SGHMC (h = 1e-3, C = 1); the call runs ``--steps`` steps with one
draw and one chain, so its time is almost all tracing and compilation. Three processes:

1. no persistent cache (what a Python user gets by default);
2. ``bdl.enable_compilation_cache`` on an empty directory (cold: compiles and writes);
3. the same directory again (warm: what every later ``bdl`` command gets for the same model).

For each it prints the time from the process's start (interpreter, imports, ``bdl.compile`` of
the model) to the end of the ``bdl.sample`` call — what the target measures — then the call
alone and the whole process with its exit (JAX's shutdown adds 0.2–0.4 s), measured from
outside.

``--job``: the README's example as a whole process, shortened: the digits data
(``bdl.data.digits``), a Flax linen MLP 64→100→10, ``bdl.Categorical()``, prior
``bdl.Normal(1.0)``, ``bdl.compile(..., batch_size=32)``, SGLD with a fixed step (h = 1e-5), 4
chains from prior draws, ``--job-steps`` steps (default 200, burn-in half of them, thin 10),
then the test-set BMA and its accuracy. Against it, the same job written by hand (:data:`HAND`):
the same data file read with NumPy (no scikit-learn import) and split at random, the same
network, its log-density written out, ``blackjax.sgld``, prior draws and the chains' steps in
one jitted ``vmap`` of a ``lax.scan`` (data passed as arguments, not baked in as constants), the
network's parameter shapes from ``jax.eval_shape`` (nothing compiled for them; with
``--hand-init``, from ``net.init`` run eagerly, as Flax's examples write it), and a jitted BMA.
Fresh processes alternate bdl and BlackJAX (and, with ``--before DIR``, the bdl job with the bdl
package imported from DIR: a copy of the code before a change), ``--repeats`` of each, no
persistent cache; it prints the median and range of the seconds from the process's start to the
BMA's accuracy (the job), of the whole process with its exit, of process CPU time, and bdl ÷
BlackJAX. In the bdl process, ``jax.monitoring`` also records where the seconds went: each
program's XLA compilation, tracing and lowering, and the times at which the imports,
``bdl.compile``, ``bdl.sample`` and the BMA ended, counted from the script's first line (medians
over the repeats).

``--parts``: where the job's compilation goes. Each case in a fresh process on the job's model and
4 chains, printing the seconds of XLA compilation of each program (medians over ``--repeats``):
``bdl.sample`` with SGLD at a fixed step (200 steps, burn-in 100, thin 10) and with adapted
SGHMC (``bdl.kernels.get("sghmc")``, 400 steps, burn-in 200); bdl's own kernel step (the bound
SGLD kernel's ``step`` on ``compiled.next_batch``'s minibatches) in one jitted ``vmap`` of a
``lax.scan``, as a user would write it around bdl's kernel; and BlackJAX's ``sgld`` in the same
scan (``peers.blackjax_chain``). The two scans start from prior draws made before (not counted;
``bdl.sample`` makes its own in its start program, which is counted).

Run: ``python benchmarks/first_call.py [--steps 1000] [--repeats 2]``, ``python
benchmarks/first_call.py --job [--repeats 5] [--hand-init] [--before DIR]``, or ``python
benchmarks/first_call.py --parts [--repeats 3]``. The targets are in
docs/design.md, *Performance targets*.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment, load_average

CHILD = """
import sys, time
sys.path.insert(0, {bench!r})
import jax
import bdl
if {cache!r}:
    bdl.enable_compilation_cache({cache!r})
from _common import digits_mlp
compiled = digits_mlp()
kernel = bdl.kernels.get("sghmc", step_size=1e-3, friction=1.0)
start = time.perf_counter()
out = bdl.sample(compiled, kernel, num_steps={steps}, thin={steps}, num_chains=1, progress=False)
jax.block_until_ready(out.positions)
print(time.perf_counter() - start, time.time())
"""


def first_call(steps: int, cache: str) -> tuple[float, float, float, float]:
    """(seconds of the ``bdl.sample`` call, seconds from the process's start to the end of
    that call, seconds of the whole process with its exit, CPU seconds of the whole process:
    user + system over all its threads, steadier on a shared machine)."""
    code = CHILD.format(bench=str(Path(__file__).resolve().parent), cache=cache, steps=steps)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, start_clock = time.perf_counter(), time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    whole = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    call, call_end = (float(v) for v in out.stdout.strip().splitlines()[-1].split())
    return call, call_end - start_clock, whole, cpu


#: the README's kind of job with bdl; prints the accuracy, then where the seconds went (JSON)
JOB_BDL = """
import time
started = time.time()
import json
from collections import defaultdict
import jax
seconds = defaultdict(float)
def listen(event, duration, **kwargs):
    name = str(kwargs.get("fun_name", ""))
    if event.startswith("/jax/core/compile/"):
        seconds[event.rsplit("/", 1)[-1] + ":" + name] += duration
jax.monitoring.register_event_duration_secs_listener(listen)
import flax.linen as nn
import bdl
from bdl.data import digits
marks = {{"imports": time.time()}}

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(nn.relu(nn.Dense(100)(x)))

data = digits()
model = bdl.Model(network=MLP(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0),
                  temperature=1.0)
compiled = bdl.compile(model, data, batch_size=32)
marks["bdl.compile"] = time.time()
kernel = bdl.kernels.get("sgld", step_size=1e-5)
samples = bdl.sample(compiled, kernel, num_steps={steps}, burn_in={burn_in}, thin=10,
                     num_chains=4, init="prior", progress=False)
marks["bdl.sample"] = time.time()
probs = compiled.predict(samples.flat(), compiled.x_test)
accuracy = float((probs.argmax(-1) == compiled.y_test).mean())
marks["BMA"] = time.time()
print(json.dumps({{"accuracy": accuracy, "marks": {{k: v - started for k, v in marks.items()}},
                  "seconds": seconds}}))
print(time.time())
"""

#: the same job by hand with BlackJAX (module docstring)
HAND = """
import importlib.util, time
from pathlib import Path
import numpy as np
import jax
import jax.numpy as jnp
import flax.linen as nn
import blackjax

spec = importlib.util.find_spec("sklearn")  # the data file bdl reads, without importing sklearn
path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
table = np.loadtxt(path, delimiter=",")
x = (table[:, :-1] / 16.0).astype(np.float32)
y = table[:, -1].astype(np.int32)
order = np.random.default_rng(0).permutation(len(y))
test, train = order[: len(y) // 5], order[len(y) // 5 :]
x_train, y_train, x_test, y_test = (jnp.asarray(a) for a in (x[train], y[train], x[test], y[test]))
n, batch, steps, burn_in, thin, chains, h = len(y_train), 32, {steps}, {burn_in}, 10, 4, 1e-5

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(nn.relu(nn.Dense(100)(x)))

net = MLP()
if {init}:
    shapes = net.init(jax.random.key(0), x_train[:1])
else:
    shapes = jax.eval_shape(net.init, jax.random.key(0), x_train[:1])

def log_density(params, minibatch):
    xb, yb = minibatch
    log_p = jax.nn.log_softmax(net.apply(params, xb))
    log_likelihood = jnp.take_along_axis(log_p, yb[:, None], axis=1).sum()
    log_prior = sum(jax.scipy.stats.norm.logpdf(p).sum() for p in jax.tree.leaves(params))
    return log_prior + n / batch * log_likelihood

sgld = blackjax.sgld(jax.grad(log_density))

@jax.jit
def run(key, x_train, y_train):
    k_init, k_run = jax.random.split(key)
    leaves, tree = jax.tree.flatten(shapes)

    def prior_draw(k):
        ks = jax.random.split(k, len(leaves))
        return tree.unflatten([jax.random.normal(kk, a.shape) for kk, a in zip(ks, leaves)])

    def chain(params, k):
        def step(p, t):
            k_batch, k_noise = jax.random.split(jax.random.fold_in(k, t))
            idx = jax.random.randint(k_batch, (batch,), 0, n)
            p = sgld.step(k_noise, p, (x_train[idx], y_train[idx]), h)
            return p, p

        _, trace = jax.lax.scan(step, params, jnp.arange(steps))
        return jax.tree.map(lambda a: a[burn_in + thin - 1 :: thin], trace)

    starts = jax.vmap(prior_draw)(jax.random.split(k_init, chains))
    return jax.vmap(chain)(starts, jax.random.split(k_run, chains))

draws = run(jax.random.key(0), x_train, y_train)
flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), draws)
bma = jax.jit(lambda ps, x: jax.vmap(lambda p: jax.nn.softmax(net.apply(p, x)))(ps).mean(0))
probs = bma(flat, x_test)
accuracy = float((probs.argmax(-1) == y_test).mean())
print(accuracy)
print(time.time())
"""


def run_job(code: str, path: str | None = None) -> tuple[float, float, float, str]:
    """(seconds from the process's start to the end of the job, of the whole process with its
    exit, CPU seconds of the whole process, the child's line before its last); ``path``: a
    directory put first on the child's ``PYTHONPATH`` (another checkout's bdl)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_clock = time.time()
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}  # no cache
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([path, *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    whole = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = out.stdout.strip().splitlines()
    return float(lines[-1]) - start_clock, whole, cpu, lines[-2]


#: one case of ``--parts`` (module docstring); prints {program: compile seconds} as JSON
PARTS = """
import json, sys
from collections import defaultdict
sys.path.insert(0, {bench!r})
import jax, jax.numpy as jnp
seconds = defaultdict(float)
def listen(event, duration, **kwargs):
    if event.endswith("backend_compile_duration"):
        seconds[str(kwargs.get("fun_name", "?"))] += duration
jax.monitoring.register_event_duration_secs_listener(listen)
import flax.linen as nn
import bdl
from peers import blackjax_chain, jitted

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(nn.relu(nn.Dense(100)(x)))

model = bdl.Model(network=MLP(), likelihood=bdl.Categorical(), prior=bdl.Normal(1.0))
compiled = bdl.compile(model, bdl.data.digits(), batch_size=32)
case, chains = {case!r}, 4
starts = compiled.init_positions(jax.random.key(0), chains, "prior")  # the scans' starts
seconds.clear()
sgld = bdl.kernels.get("sgld", step_size=1e-5)
if case == "bdl.sample, SGLD at a fixed step":
    bdl.sample(compiled, sgld, num_steps=200, burn_in=100, thin=10, num_chains=chains,
               init="prior", progress=False)
elif case == "bdl.sample, adapted SGHMC":
    bdl.sample(compiled, bdl.kernels.get("sghmc"), num_steps=400, burn_in=200, thin=10,
               num_chains=chains, init="prior", progress=False)
elif case == "bdl's SGLD step in a scan":
    bound = sgld.bind(compiled)
    h, temperature = jnp.float32(1e-5), jnp.float32(1.0)

    def chain(theta, key):
        def step(carry, t):
            state, stream = carry
            batch, stream = compiled.next_batch(stream, t)
            energy_and_grad = lambda th: compiled.stochastic_energy_and_grad(th, batch)
            state, _ = bound.step(jax.random.fold_in(key, t), state, energy_and_grad, h,
                                  temperature)
            return (state, stream), None
        carry = (bound.init(theta, key), compiled.init_batches(key))
        return jax.lax.scan(step, carry, jnp.arange(200))[0][0]

    run = jax.jit(lambda starts, key: jax.vmap(chain)(starts, jax.random.split(key, chains)))
    jax.block_until_ready(run(starts, jax.random.key(1)))
else:
    run = jitted(blackjax_chain("sgld", "bdl"), chains)
    jax.block_until_ready(run(compiled, starts, jax.random.key(1), num_steps=200))
print(json.dumps(seconds))
"""
PART_CASES = (
    "bdl.sample, SGLD at a fixed step",
    "bdl.sample, adapted SGHMC",
    "bdl's SGLD step in a scan",
    "BlackJAX's sgld in a scan",
)


def parts(args: argparse.Namespace) -> int:
    """Seconds of XLA compilation per program, per case (module docstring)."""
    bench = str(Path(__file__).resolve().parent)
    print(f"# compilation per program, 4 chains, digits MLP 64-100-10; {load_average()}")
    for case in PART_CASES:
        runs = []
        for _ in range(args.repeats):
            code = PARTS.format(bench=bench, case=case)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True)  # fmt: skip
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        names = {name for run in runs for name in run}
        median = {name: statistics.median(run.get(name, 0.0) for run in runs) for name in names}
        top = sorted(median.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{name} {value:.2f}" for name, value in top[:6] if value >= 0.01)
        print(f"{case}: {sum(median.values()):.2f} s in all; {shown}", flush=True)
    return 0


def job(args: argparse.Namespace) -> int:
    """The README's kind of job, bdl against BlackJAX by hand (module docstring)."""
    steps, burn_in = args.job_steps, args.job_steps // 2
    codes = {
        "bdl": (JOB_BDL.format(steps=steps, burn_in=burn_in), None),
        "BlackJAX": (HAND.format(steps=steps, burn_in=burn_in, init=bool(args.hand_init)), None),
    }
    if args.before:  # the same bdl job with the bdl package found first in that directory
        codes["bdl before"] = (codes["bdl"][0], args.before)
    hand = "net.init run eagerly" if args.hand_init else "jax.eval_shape of net.init"
    print(f"# job: 4 chains of SGLD, {steps} steps (burn-in {burn_in}, thin 10), then the BMA;"
          f" by hand: parameter shapes from {hand}; {load_average()}", flush=True)  # fmt: skip
    times: dict[str, dict[str, list[float]]] = {
        name: {"job": [], "whole": [], "cpu": []} for name in codes
    }
    profiles = []
    for _ in range(args.repeats):
        for name, (code, path) in codes.items():
            end, whole, cpu, line = run_job(code, path)
            for key, value in (("job", end), ("whole", whole), ("cpu", cpu)):
                times[name][key].append(value)
            if name == "bdl":
                profiles.append(json.loads(line))
    for name, got in times.items():
        row = "; ".join(
            f"{key} {statistics.median(v):5.2f} s [{min(v):.2f}, {max(v):.2f}]"
            for key, v in got.items()
        )
        print(f"{name:<10} {row}", flush=True)
    ratios = {
        key: statistics.median(times["bdl"][key]) / statistics.median(times["BlackJAX"][key])
        for key in ("job", "whole", "cpu")
    }
    print("bdl ÷ BlackJAX: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items())
          + f"  {'PASS' if ratios['job'] <= 1.0 else 'MISS'} (job ≤ 1.0); {load_average()}",
          flush=True)  # fmt: skip
    if "bdl before" in times:
        was = {k: statistics.median(times["bdl before"][k]) for k in ("job", "whole", "cpu")}
        print("bdl before ÷ BlackJAX: " + ", ".join(
            f"{k} {v / statistics.median(times['BlackJAX'][k]):.2f}" for k, v in was.items()
        ), flush=True)  # fmt: skip
    _where(profiles)
    return 0


def _where(profiles: list[dict]) -> None:
    """Medians over the bdl processes of when each part ended and of each program's seconds."""
    marks = {k: statistics.median(p["marks"][k] for p in profiles) for k in profiles[0]["marks"]}
    print("# bdl, ended at (s from the script's first line): "
          + ", ".join(f"{k} {v:.2f}" for k, v in marks.items()))  # fmt: skip
    keys = {k for p in profiles for k in p["seconds"]}
    seconds = {k: statistics.median(p["seconds"].get(k, 0.0) for p in profiles) for k in keys}
    for phase in ("backend_compile_duration", "jaxpr_trace_duration",
                  "jaxpr_to_mlir_module_duration"):  # fmt: skip
        part = {k.split(":", 1)[1]: v for k, v in seconds.items() if k.startswith(phase + ":")}
        top = sorted(part.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{name or '?'} {v:.2f}" for name, v in top[:8])
        print(f"# bdl, {phase}: {sum(part.values()):.2f} s in all; {shown}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--job", action="store_true", help="bdl against BlackJAX by hand")
    p.add_argument("--job-steps", type=int, default=200)
    p.add_argument("--hand-init", action="store_true", help="by hand: shapes from net.init")
    p.add_argument("--before", help="also the bdl job with bdl imported from this directory")
    p.add_argument("--parts", action="store_true", help="compile seconds per program and case")
    args = p.parse_args(argv)
    print(environment(), flush=True)
    if args.parts:
        return parts(args)
    if args.job:
        return job(args)
    rows: dict[str, list[float]] = {"no cache": [], "cold cache": [], "warm cache": []}
    to_end: dict[str, list[float]] = {name: [] for name in rows}
    wholes: dict[str, list[float]] = {name: [] for name in rows}
    cpus: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            for name, cache in (("no cache", ""), ("cold cache", tmp), ("warm cache", tmp)):
                call, end, whole, cpu = first_call(args.steps, cache)
                rows[name].append(call)
                to_end[name].append(end)
                wholes[name].append(whole)
                cpus[name].append(cpu)
    for name, values in rows.items():
        shown = ", ".join(f"{v:.2f}" for v in to_end[name])
        print(
            f"{name:<11} process start to the call's end {statistics.median(to_end[name]):5.2f} s "
            f"({shown}); the call {statistics.median(values):5.2f} s; whole process with its "
            f"exit {statistics.median(wholes[name]):5.2f} s ({statistics.median(cpus[name]):5.2f}"
            " s CPU)"
        )
    ratio = statistics.median(rows["warm cache"]) / statistics.median(rows["no cache"])
    print(f"warm / no cache: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
