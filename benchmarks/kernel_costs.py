"""Per-step cost of every registered kernel against SGD, SGD + draw and SGHMC.

The targets are those of docs/design.md, *Performance targets*.

On the digits MLP of ``step_overhead.py`` (1797 × 64, Flax linen 64→100→100→10, Categorical,
N(0, 1) prior, B = 32, d = 17 610) it times, side by side in one run, a jitted ``lax.scan`` of S
steps of

  * ``optax.sgd(lr, momentum=0.9)`` on the mean minibatch loss Ũ/n, and one Gaussian draw of d
    floats per step: the references, (sgd + draw) being the sum of the two; also both in one scan
    (the draw added to SGD's momentum: SGHMC written by hand, the cheapest fused step);
  * ``kernel.step`` of every kernel in ``bdl.kernels.names()`` (or ``--kernels``), built with
    ``bdl.kernels.get(name, ...)`` (registry defaults, smaller step sizes so that S steps stay
    finite, ``seed=0`` meta-parameters for the learned kernels), bound to the compiled model and
    stepped exactly as ``step_overhead.py`` steps SGHMC (its scans are imported from it): same
    on-device minibatch gathering and gradient, ``Info`` left to dead-code elimination;
  * NNSGHMC with its correction Γ replaced by zeros (the same D(z), Q(z) and networks; its
    recipe's ``evaluate`` evaluates the networks' values only and returns no Γ), so that the cost
    of exact Γ is isolated from the cost of the learned D and Q.

All scans are timed in interleaved rounds (one call of each per round) so background load hits
them alike; a time is the median over ``--repeats`` rounds, a ratio the median of the per-round
ratios; compilation is excluded. Per kernel it prints µs/step and the ratios to one SGD step, to
(sgd + draw) and to the SGHMC kernel step, in wall time and in process CPU time (the steadier
clock on an oversubscribed machine), the number of thunks of the optimised HLO loop body, and a
PASS/MISS line against its target: hand-designed kernels ≤ 1.05 × (sgd + draw); L2E
(and Kinetic-L2E) ≤ 1.3 × SGHMC; NNSGHMC with exact Γ ≤ 1.5 × SGHMC; then the cost of Γ.
``--parts`` also times the learned kernels' pieces alone (their networks, Γ), ``--cost`` prints
XLA's flop and byte estimates per step and ``--hlo`` the loop bodies' opcode mix.

``--model cnn`` runs all of it on a CIFAR-shaped convolutional network on random data at batch
128 (``_common.cifar_shaped_cnn``, d = 57,066), where the learned kernels' targets apply: there
the minibatch gradient, not the per-coordinate work, dominates a step.

Run: ``python benchmarks/kernel_costs.py [--model mlp|cnn] [--steps 500] [--repeats 5]
[--kernels sghmc,l2e] [--parts] [--cost] [--hlo]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import traceback
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    cifar_shaped_cnn,
    digits_mlp,
    environment,
    load_average,
    loop_body_stats,
    time_interleaved,
)
from step_overhead import finite, make_scans, median_ratio

import bdl
from bdl.kernels.blocks import Block, Scalar
from bdl.kernels.history import NoHistory
from bdl.kernels.l2e import EMA_DECAYS, learned_field, update_emas
from bdl.kernels.nnsghmc import NNSGHMCRecipe
from bdl.kernels.parameterisation import LearningRate
from bdl.kernels.preconditioners import Identity
from bdl.kernels.recipe import Context, Evaluation, hamiltonian_grad
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.utils.convolutions import canonical_convolutions
from bdl.utils.trees import tree_normal_like

REFERENCE = "sghmc"
FUSED = "sgd+draw"  # step_overhead's hand-written SGHMC: the draw added to SGD's momentum
NO_GAMMA = "nnsghmc-noΓ"
#: hyper-parameters over the registry defaults: step sizes small enough that S steps from the
#: initial position stay finite on the digits MLP (n = 1797), as in step_overhead.py
OVERRIDES: dict[str, dict[str, Any]] = {
    "sgld": {"step_size": 1e-4},
    "psgld": {"step_size": 5e-8},  # ≈ 1e-4 / n: G ≈ n/|∇Ũ| (statistic on ∇Ũ/n)
    "sghmc": {"step_size": 1e-3, "friction": 1.0},
    "sgnht": {"step_size": 1e-3},
    "cyclical": {"step_size": 1e-3, "cycle_length": 100},
    "entropy": {"step_size": 1e-4},
    "nnsghmc": {"step_size": 1e-3},
    "l2e": {"step_size": 1e-3},
    "kinetic-l2e": {"step_size": 1e-3},
}
LEARNED = frozenset({"nnsghmc", "l2e", "kinetic-l2e"})
#: name → (reference, limit) of the per-step targets; kernels not listed are hand-designed
TARGETS: dict[str, tuple[str, float]] = {
    "nnsghmc": ("sghmc", 1.5),
    "l2e": ("sghmc", 1.3),
    "kinetic-l2e": ("sghmc", 1.3),
}
SUM = "sgd + draw"
HAND_DESIGNED_TARGET = (SUM, 1.05)


# ---------------------------------------------------------------------------- kernels
class _NoGammaRecipe(NNSGHMCRecipe):
    """NNSGHMC's recipe with Γ dropped (not a valid sampler: only to price Γ); the same D(z),
    Q(z), networks and ∇H."""

    def evaluate(self, z: dict[str, Any], ctx: Context) -> Evaluation:
        return Evaluation(
            self.diffusion(z, ctx), self.curl(z, ctx), {}, hamiltonian_grad(self, z, ctx)
        )


def build_kernel(name: str) -> Any:
    """``bdl.kernels.get(name, ...)``: the benchmark's hyper-parameters over the registry
    defaults."""
    hyper = dict(OVERRIDES.get(name, {}))
    if name in LEARNED:
        hyper["seed"] = 0
    return bdl.kernels.get(name, **hyper)


def without_gamma(kernel: RecipeKernel) -> RecipeKernel:
    """The same kernel (step size, integrator, meta-parameters) with :class:`_NoGammaRecipe`."""
    recipe = kernel.recipe
    fields = {f.name: getattr(recipe, f.name) for f in dataclasses.fields(recipe)}
    return dataclasses.replace(kernel, recipe=_NoGammaRecipe(**fields))


#: fields of kernels, wrappers and recipes that matter for the cost, shown in the header
COST_FIELDS = (
    "step_size",
    "friction",
    "mass",
    "eta",
    "cycle_length",
    "exploration",
    "diffusion_constant",
    "alpha",
    "beta0",
    "c",
)


def _show(value: Any) -> str:
    if isinstance(value, Scalar):
        return repr(value.value)
    if isinstance(value, Block):
        return type(value).__name__
    return repr(value)


def _cost_fields(obj: Any) -> list[str]:
    return [
        f"{f.name}={_show(getattr(obj, f.name))}"
        for f in dataclasses.fields(obj)
        if f.name in COST_FIELDS
    ]


def describe(name: str, kernel: Any) -> str:
    """The hyper-parameters that matter for the cost, for the header: a kernel's recipe,
    integrator and history transform with their settings, and a wrapper's around its inner
    kernel."""
    if isinstance(kernel, RecipeKernel):
        pieces = [type(kernel.recipe).__name__, type(kernel.integrator).__name__]
        if not isinstance(kernel.history, NoHistory | Identity):
            pieces.append(type(kernel.history).__name__)
        recipe = _cost_fields(kernel.recipe)
        if isinstance(kernel.step_size, LearningRate):  # the friction is derived at bind
            recipe = [f for f in recipe if not f.startswith("friction=")]
        parts = [" + ".join(pieces), *_cost_fields(kernel), *recipe]
    else:
        parts = _cost_fields(kernel)
    inner = getattr(kernel, "inner", None)
    if inner is not None:
        parts.append(f"inner={describe(inner.name, inner)}")
    if name in LEARNED or name == NO_GAMMA:
        sizes = {k: getattr(v, "sizes", "?") for k, v in kernel.meta_params.items()}
        parts.append(f"nets={sizes}")
    return f"{type(kernel).__name__}({', '.join(parts)})"


def _tree_sum(*trees: Any) -> Any:
    return jax.tree.map(lambda *xs: sum(xs), *trees)


def make_part_scans(compiled: Any, kernels: dict[str, Any], steps: int) -> dict[str, Any]:
    """``{name: (jitted fn, carry)}``: S evaluations of a learned kernel's pieces alone.

    Each piece maps θ-shaped (θ, r) to a θ-shaped output that is fed back into the carry, so it is
    neither dead code nor hoisted out of the loop; the gradient features follow θ for the same
    reason. The pieces are what the kernels compute per evaluation; a step may need several.
    """
    theta = compiled.initial_position
    batch, _ = compiled.next_batch(compiled.init_batches(jax.random.key(0)), 0)
    energy, grad0 = compiled.stochastic_energy_and_grad(theta, batch)
    r0 = tree_normal_like(jax.random.key(1), theta)
    ts = jnp.arange(steps, dtype=jnp.int32)

    def grad_at(th: Any) -> Any:
        return jax.tree.map(lambda g, x: g + 1e-3 * x, grad0, th)

    pieces: dict[str, Any] = {}
    if "l2e" in kernels:
        net = kernels["l2e"].meta_params["net"]

        def l2e_field(th: Any, r: Any) -> Any:
            g = grad_at(th)
            emas = update_emas(tuple(g for _ in EMA_DECAYS), g)
            return _tree_sum(*learned_field(net, th, r, g, emas))

        def l2e_mlp(th: Any, r: Any) -> Any:
            g = grad_at(th)
            return _tree_sum(*net.map_tree(th, r, *(g for _ in range(net.in_features - 2))))

        pieces["l2e: EMAs + field (α, β)"] = l2e_field
        pieces[f"l2e: MLP {'-'.join(map(str, net.sizes))} alone"] = l2e_mlp
    if "kinetic-l2e" in kernels:
        rec_k = kernels["kinetic-l2e"].recipe
        pieces["kinetic-l2e: ∇g (f_φ, f_φ′ in one pass)"] = lambda th, r: _tree_sum(
            *rec_k.kinetic_grad({"theta": th, "r": r}).values()
        )
    if "nnsghmc" in kernels:
        rec_n = kernels["nnsghmc"].bind(compiled).recipe

        def nn_blocks(th: Any, r: Any) -> Any:
            z, ctx = {"theta": th, "r": r}, Context(energy, grad_at(th))
            friction, curl = rec_n.diffusion(z, ctx)["r"], rec_n.curl(z, ctx)
            return _tree_sum(friction.expand(th), curl[("r", "theta")].expand(th))

        def nn_gamma(th: Any, r: Any) -> Any:
            z, ctx = {"theta": th, "r": r}, Context(energy, grad_at(th))
            return _tree_sum(*rec_n.evaluate(z, ctx).gamma.values())

        pieces["nnsghmc: D, Q (f_Q, f_D)"] = nn_blocks
        pieces["nnsghmc: Γ (3 tangents)"] = nn_gamma

    def scan(piece: Any) -> Any:
        def body(carry: tuple[Any, Any], t: jax.Array) -> tuple[tuple[Any, Any], None]:
            th, r = carry
            out = piece(th, r)
            return (
                jax.tree.map(lambda x, o: x + 1e-9 * o, th, out),
                jax.tree.map(lambda x, o: x - 1e-9 * o, r, out),
            ), None

        return jax.jit(lambda carry: jax.lax.scan(canonical_convolutions(body), carry, ts)[0])

    return {name: (scan(piece), (theta, r0)) for name, piece in pieces.items()}


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=500, help="steps S per scan (default 500)")
    ap.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="timed rounds, all candidates interleaved per round (default 5)",
    )
    ap.add_argument(
        "--kernels",
        default=None,
        help="comma-separated subset of bdl.kernels.names() (default: all); "
        f"{REFERENCE} is always timed as the reference",
    )
    ap.add_argument(
        "--model",
        choices=("mlp", "cnn"),
        default="mlp",
        help="mlp: the digits MLP (default); cnn: a CIFAR-shaped CNN on random data "
        "(_common.cifar_shaped_cnn), where the gradient dominates a step",
    )
    ap.add_argument(
        "--batch-size", type=int, default=None, help="minibatch size (default 32; cnn: 128)"
    )
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    ap.add_argument(
        "--parts",
        action="store_true",
        help="also time the learned kernels' pieces alone (networks, Γ)",
    )
    ap.add_argument(
        "--cost",
        action="store_true",
        help="print XLA's flop and byte estimates per step of every scan",
    )
    ap.add_argument(
        "--hlo",
        action="store_true",
        help="print the opcode mix of each scan's optimised HLO loop body",
    )
    args = ap.parse_args(argv)
    if args.batch_size is None:
        args.batch_size = 128 if args.model == "cnn" else 32
    if args.steps < 2 or args.repeats < 1 or args.batch_size < 1:
        ap.error("--steps must be >= 2, --repeats >= 1 and --batch-size >= 1")
    names = (
        bdl.kernels.names()
        if args.kernels is None
        else [k.strip() for k in args.kernels.split(",") if k.strip()]
    )
    unknown = [k for k in names if k not in bdl.kernels.names()]
    if unknown:
        ap.error(f"unknown kernel(s) {unknown}; registered: {', '.join(bdl.kernels.names())}")
    if REFERENCE not in names:
        names = [REFERENCE, *names]
    S, R = args.steps, args.repeats

    print(f"# kernel_costs: {environment()}")
    if args.model == "cnn":
        compiled = cifar_shaped_cnn(batch_size=args.batch_size)
        label = "CIFAR-shaped CNN 32x32x3, conv 32-64-64, random data"
    else:
        compiled = digits_mlp(batch_size=args.batch_size)
        label = "digits MLP 64-100-100-10"
    print(
        f"# {label}: n = {compiled.n}, d = {compiled.dim}, batch = "
        f"{compiled.batch_size}; S = {S} steps per call, {R} interleaved rounds"
    )

    kernels: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for name in names:
        try:
            kernels[name] = build_kernel(name)
        except Exception:
            failed[name] = traceback.format_exc()
    if "nnsghmc" in kernels:
        kernels[NO_GAMMA] = without_gamma(kernels["nnsghmc"])
    for name, kernel in kernels.items():
        print(f"#   {name:<12} {describe(name, kernel)}")

    # ---- scans, compiled and warmed up; a kernel that fails to bind or compile is reported
    scans = make_scans(compiled, {}, S, args.lr)
    scans = {k: scans[k] for k in ("sgd", "draw", FUSED)}
    for name, kernel in kernels.items():
        try:
            scans[name] = make_scans(compiled, {name: kernel}, S, args.lr)[name]
        except Exception:
            failed[name] = traceback.format_exc()
    parts = make_part_scans(compiled, kernels, S) if args.parts else {}
    scans.update(parts)
    fns: dict[str, Any] = {}
    compile_s: dict[str, float] = {}
    hlo: dict[str, dict[str, Any]] = {}
    cost: dict[str, dict[str, float]] = {}
    for name, (fn, carry) in scans.items():
        try:
            start = time.perf_counter()
            exe = fn.lower(carry).compile()
            compile_s[name] = time.perf_counter() - start
            hlo[name] = loop_body_stats(exe.as_text())
            if args.cost:
                c = exe.cost_analysis()
                c = c[0] if isinstance(c, list | tuple) else c
                cost[name] = {k: float(c.get(k, 0.0)) for k in ("flops", "bytes accessed")}
            if not finite(jax.block_until_ready(exe(carry))):
                print(f"# warning: {name} produced non-finite values")
            fns[name] = partial(exe, carry)
        except Exception:
            failed[name] = traceback.format_exc()
    for name, tb in failed.items():
        # a kernel that needs what this model lacks (e.g. gibbs: a conjugate hierarchical prior)
        # says so in its error's last line; anything else gets the whole traceback
        last = tb.strip().splitlines()[-1]
        print(
            f"# FAILED {name}: {last}"
            if last.startswith("ValueError")
            else f"# FAILED {name}:\n{tb}"
        )
    if any(k not in fns for k in ("sgd", "draw", FUSED, REFERENCE)):
        raise SystemExit("the references (sgd, draw, sghmc) did not compile; nothing to compare")

    times, cpu = time_interleaved(fns, R)
    print(f"# timed rounds done, {load_average()}")

    def with_sum(t: dict[str, list[float]]) -> dict[str, list[float]]:
        return {**t, SUM: [a + b for a, b in zip(t["sgd"], t["draw"], strict=True)]}

    times, cpu = with_sum(times), with_sum(cpu)

    # ---- table
    print()
    print(
        f"{'per step':<30}{'median µs':>10}{'min µs':>9}{'/ sgd':>7}{'/ (sgd+draw)':>13}"
        f"{'/ sghmc':>8}{'cpu µs':>9}{'cpu /(s+d)':>11}{'cpu /sghmc':>11}{'thunks':>7}"
        f"{'compile s':>10}"
    )

    def row(label: str, name: str) -> None:
        ts, cs = times[name], cpu[name]
        med, lo = statistics.median(ts) / S, min(ts) / S
        ref, both = times[REFERENCE], times[SUM]
        extra = f"{hlo[name]['thunks']:7d}{compile_s[name]:10.2f}" if name in hlo else ""
        print(
            f"{label:<30}{med * 1e6:10.1f}{lo * 1e6:9.1f}{median_ratio(ts, times['sgd']):7.2f}"
            f"{median_ratio(ts, both):13.2f}{median_ratio(ts, ref):8.2f}"
            f"{statistics.median(cs) / S * 1e6:9.1f}{median_ratio(cs, cpu[SUM]):11.2f}"
            f"{median_ratio(cs, cpu[REFERENCE]):11.2f}{extra}"
        )

    row("optax.sgd momentum step", "sgd")
    row("gaussian draw of d floats", "draw")
    row("sgd + draw (the sum)", SUM)
    row("sgd + draw in one scan", FUSED)
    kernel_names = [k for k in kernels if k in fns]
    for name in kernel_names:
        row(f"{name} kernel.step", name)
    if parts:
        print("pieces alone, per evaluation:")
        for name in parts:
            if name in fns:
                row(f"  {name}", name)

    # ---- the targets: the verdict on wall time; CPU time (all threads, no waiting for a core)
    # is printed beside it because it is the steadier clock when the machine is oversubscribed
    print()
    verdicts: dict[str, dict[str, bool]] = {"wall": {}, "cpu": {}}

    def spread(num: list[float], den: list[float]) -> str:
        """The range of the per-round ratios, [min–max]."""
        ratios = [a / b for a, b in zip(num, den, strict=True)]
        return f"[{min(ratios):.2f}–{max(ratios):.2f}]"

    def verdict(ratio: float, limit: float) -> str:
        return "PASS" if ratio <= limit else f"MISS (+{100 * (ratio / limit - 1):.0f} %)"

    for name in kernel_names:
        if name == NO_GAMMA:
            continue
        against, limit = TARGETS.get(name, HAND_DESIGNED_TARGET)
        wall = median_ratio(times[name], times[against])
        cpu_r = median_ratio(cpu[name], cpu[against])
        verdicts["wall"][name], verdicts["cpu"][name] = wall <= limit, cpu_r <= limit
        fused = (
            f"; {median_ratio(times[name], times[FUSED]):.2f} wall, "
            f"{median_ratio(cpu[name], cpu[FUSED]):.2f} cpu × sgd + draw in one scan"
            if against == SUM
            else ""
        )
        print(
            f"verdict {name:<12} / ({against}) = {wall:5.2f} wall "
            f"{spread(times[name], times[against])}, {cpu_r:5.2f} cpu "
            f"{spread(cpu[name], cpu[against])}; target ≤ {limit:.2f}: {verdict(wall, limit)} "
            f"wall, {verdict(cpu_r, limit)} cpu{fused}"
        )
    for name in failed:
        print(f"verdict {name:<12} FAILED to build, bind or compile (traceback above)")
    for clock, v in verdicts.items():
        missed = [k for k, ok in v.items() if not ok]
        print(
            f"targets ({clock}): {sum(v.values())} PASS, {len(missed)} MISS"
            f"{' (' + ', '.join(missed) + ')' if missed else ''}, {len(failed)} FAILED"
        )
    if "nnsghmc" in fns and NO_GAMMA in fns:

        def both_clocks(fn: Any, fmt: str) -> str:
            return " | ".join(format(fn(t), fmt) for t in (times, cpu))

        def gamma_us(t: dict[str, list[float]]) -> float:
            return statistics.median(
                (a - b) / S * 1e6 for a, b in zip(t["nnsghmc"], t[NO_GAMMA], strict=True)
            )

        def share(t: dict[str, list[float]]) -> float:
            return 100 * statistics.median(
                (a - b) / a for a, b in zip(t["nnsghmc"], t[NO_GAMMA], strict=True)
            )

        print()
        print(
            "exact Γ in nnsghmc (wall | cpu): nnsghmc / sghmc = "
            f"{both_clocks(lambda t: median_ratio(t['nnsghmc'], t[REFERENCE]), '.2f')}; "
            "nnsghmc without Γ / sghmc = "
            f"{both_clocks(lambda t: median_ratio(t[NO_GAMMA], t[REFERENCE]), '.2f')}; "
            "nnsghmc / nnsghmc without Γ = "
            f"{both_clocks(lambda t: median_ratio(t['nnsghmc'], t[NO_GAMMA]), '.2f')}; "
            f"Γ costs {both_clocks(gamma_us, '.0f')} µs/step, "
            f"{both_clocks(share, '.0f')} % of the nnsghmc step"
        )

    if args.cost:
        print()
        print("XLA cost analysis of each scan (it counts a while-loop body once: per step)")
        for name, c in cost.items():
            print(f"  {name:<30} {c['flops'] / 1e6:8.2f} Mflop {c['bytes accessed'] / 1e6:8.2f} MB")
    if args.hlo:
        print()
        print(
            "optimised HLO of each scan's loop body: thunks = top-level ops run once per step "
            "(each a kernel launch on CPU), fused = ops inside their fusions"
        )
        for name, stats in hlo.items():
            ops = ", ".join(f"{k} {v}" for k, v in stats["ops"].most_common())
            print(f"  {name:<30} thunks {stats['thunks']:>4} fused {stats['fused']:>5} | {ops}")


if __name__ == "__main__":
    main()
