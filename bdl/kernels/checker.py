"""The stationarity checker: does a kernel sample exp(−H/T), and does its step do what it declares?

At random states of a small non-Gaussian test energy, in float64 (docs/design.md, *Exactness
and the checker*):

1. **structure**: D is symmetric positive semi-definite and Q skew-symmetric;
2. **kinetic field**: the field the dynamics use for ∇g has a symmetric Jacobian (it is a
   gradient, so a Hamiltonian exists);
3. **Fokker–Planck**: with p = exp(−H/T) and the kernel's own Γ, the flux
   J = [−(D+Q)∇H + TΓ]p − T∇·(Dp) is divergence-free. In log space J = p·w with
   w = −(D+Q)∇H + TΓ − TΓ_D + D∇H (Γ_D = ∇·D by dense autodiff), so the residual is
   (∇·J)/p = ∇·w − w·∇H/T;
4. **discretisation**: the step's drift tends to the declared −(D+Q)∇H + TΓ as h → 0 (exactly,
   using one noise draw at three temperatures: Δz(T) − Δz(0) = hTΓ + √T·noise, so two
   temperatures separate the Γ term from the noise), and Cov[Δz]/(2h) tends to T·D (Monte Carlo,
   z-scored by its standard error);
5. **history**: one step does not change the recipe (a per-step adapted preconditioner does);
6. for the Gibbs wrapper (:mod:`bdl.kernels.gibbs`), the inner kernel's recipe as above, and
   ∂g/∂θ = 0: its exact conditional draws of θ's precisions leave exp(−H/T) invariant only when
   the auxiliary variables are independent of θ. (The test energy has no hyper-parameters; the
   draws themselves are tested statistically in tests/test_gibbs.py.)

A kernel is **exact** when all hold, otherwise **approximate** with the reasons.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bdl.kernels.base import Kernel
from bdl.kernels.blocks import as_block, matvec
from bdl.kernels.gibbs import Gibbs
from bdl.kernels.recipe import Context, Recipe, drift, hamiltonian_grad
from bdl.utils import arguments
from bdl.utils.owner_jit import owner_jit

PyTree = Any

_A = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.5]])


def test_energy(theta: PyTree) -> jax.Array:
    """U(θ) = ½θᵀAθ + 0.1Σθ⁴ + 0.3·sin(θ₀ + 2θ₂) on θ = {"a": (2,), "b": (1,)}: non-Gaussian,
    coupled, with non-zero third derivatives (so Γ terms through U are exercised)."""
    x = jnp.concatenate([theta["a"], theta["b"]])
    return 0.5 * x @ jnp.asarray(_A) @ x + 0.1 * jnp.sum(x**4) + 0.3 * jnp.sin(x[0] + 2 * x[2])


@dataclasses.dataclass
class CheckReport:
    """The checker's findings for one kernel."""

    kernel: str
    verdict: str
    reasons: list[str]
    residuals: dict[str, float]

    @property
    def exact(self) -> bool:
        return self.verdict == "exact"

    def __str__(self) -> str:
        lines = [f"{self.kernel}: {self.verdict}"]
        lines += [f"  reason: {r}" for r in self.reasons]
        width = max(len(k) for k in self.residuals) if self.residuals else 0
        lines += [f"  {k:<{width}}  {v:.3e}" for k, v in self.residuals.items()]
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """Thresholds; residuals are relative to the scale of the terms they compare."""

    structure: float = 1e-9
    kinetic_field: float = 1e-7
    fokker_planck: float = 1e-6
    drift: float = 1e-3
    noise_z: float = 6.0
    noise_bias: float = 2e-2
    history: float = 1e-10


#: the smallest temperature the checker resolves (SGHMC read as approximate at T = 1e-4)
MIN_TEMPERATURE = 1e-2


def check(
    kernel: Kernel,
    *,
    temperature: float = 0.7,
    num_states: int = 4,
    seed: int = 0,
    step_size: float = 1e-5,
    noise_draws: int = 20_000,
    tolerances: Tolerances | None = None,
) -> CheckReport:
    """Check ``kernel`` for stationarity and for agreement of its step with its recipe."""
    if not isinstance(kernel, Kernel):
        raise TypeError(
            "check(kernel) needs a kernel object, e.g. bdl.kernels.get('sgld', step_size=1e-3); "
            f"got {arguments.shown(kernel)}."
        )
    if not (isinstance(temperature, int | float) and MIN_TEMPERATURE <= temperature < math.inf):
        raise ValueError(
            f"check(temperature=...) must be a finite number >= {MIN_TEMPERATURE:g}; got "
            f"{arguments.shown(temperature)}. Γ and the noise enter a step as h·T and √(2hT): "
            "at smaller T they vanish into the step's rounding and an exact kernel would read as "
            "approximate (at T = 0 there is nothing to check). The default is 0.7."
        )
    tol = tolerances or Tolerances()
    with jax.enable_x64(True):
        return _check(kernel, float(temperature), num_states, seed, step_size, noise_draws, tol)


def _check(
    kernel: Kernel, T: float, num_states: int, seed: int, h: float, draws: int, tol: Tolerances
) -> CheckReport:
    energy = test_energy
    grad_fn = _test_energy_and_grad
    joint_energy = kernel.augment_energy(energy)
    key = jax.random.key(seed)
    worst: dict[str, float] = {}
    reasons: list[str] = []

    def record(name: str, value: float) -> None:
        worst[name] = max(worst.get(name, 0.0), float(value))

    for s in range(num_states):
        k_theta, k_init, k_warm, k_z, k_step, key = jax.random.split(jax.random.fold_in(key, s), 6)
        theta = {
            "a": 0.8 * jax.random.normal(k_theta, (2,), jnp.float64),
            "b": 0.8 * jax.random.normal(jax.random.fold_in(k_theta, 1), (1,), jnp.float64),
        }
        state = kernel.init(theta, k_init)
        for i in range(3):  # populate any gradient history
            state, _ = _step(kernel, jax.random.fold_in(k_warm, i), state, grad_fn, 1e-3, T)
        if kernel.recipe_kernel() is None:
            return CheckReport(
                kernel.name,
                "approximate",
                ["not built on a recipe kernel: cannot be checked"],
                {},
            )
        recipe = kernel.recipe_at(state)
        if recipe is None:
            return CheckReport(kernel.name, "approximate", ["no recipe declared"], {})
        inner = kernel.recipe_state(state)
        z = _randomise(inner.z, k_z)
        state = kernel.with_recipe_state(state, inner._replace(z=z))
        a = jax.device_get(_analyse(recipe, joint_energy, z, jnp.asarray(T)))

        d_mat, q_mat, jac = a["D"], a["Q"], a["kinetic_jacobian"]
        scale = 1.0 + np.max(np.abs(d_mat)) + np.max(np.abs(q_mat))
        record("D asymmetry", np.max(np.abs(d_mat - d_mat.T)) / scale)
        record(
            "D negative eigenvalue",
            max(0.0, -np.min(np.linalg.eigvalsh(0.5 * (d_mat + d_mat.T)))) / scale,
        )
        record("Q + Qᵀ", np.max(np.abs(q_mat + q_mat.T)) / scale)
        record("kinetic field curl", np.max(np.abs(jac - jac.T)) / (1.0 + np.max(np.abs(jac))))
        record(
            "Γ vs ∇·(D+Q)",
            np.max(np.abs(a["gamma_kernel"] - a["gamma_true"]))
            / (1.0 + np.max(np.abs(a["gamma_true"]))),
        )
        record("Fokker–Planck residual", abs(a["fp_residual"]) / (1.0 + a["fp_scale"]))

        step_err = _step_agreement(kernel, state, grad_fn, a, T, h, k_step)
        for name, value in step_err.items():
            record(name, value)
        record(
            "noise covariance |z|", _noise_z(kernel, state, grad_fn, d_mat, T, k_step, draws, tol)
        )

        stepped, _ = _step(kernel, jax.random.fold_in(k_step, 7), state, grad_fn, 1e-3, T)
        after = jax.device_get(_analyse(kernel.recipe_at(stepped), joint_energy, z, jnp.asarray(T)))
        change = max(
            np.max(np.abs(after["D"] - d_mat)),
            np.max(np.abs(after["Q"] - q_mat)),
            np.max(np.abs(after["kinetic_field"] - a["kinetic_field"])),
        )
        record("recipe change per step", change / scale)
        if isinstance(kernel, Gibbs):
            record("Gibbs: ∂g/∂θ", _kinetic_theta_gradient(recipe, z))

    if worst["D asymmetry"] > tol.structure or worst["D negative eigenvalue"] > tol.structure:
        reasons.append("D is not symmetric positive semi-definite")
    if worst["Q + Qᵀ"] > tol.structure:
        reasons.append("Q is not skew-symmetric")
    if worst["kinetic field curl"] > tol.kinetic_field:
        reasons.append("learned kinetic field is not a gradient (no Hamiltonian exists)")
    if worst["Fokker–Planck residual"] > tol.fokker_planck:
        why = (
            "Γ omitted or wrong"
            if worst["Γ vs ∇·(D+Q)"] > tol.fokker_planck
            else "exp(−H/T) is not stationary"
        )
        reasons.append(f"{why}: Fokker–Planck residual {worst['Fokker–Planck residual']:.2e}")
    if max(worst["drift error"], worst["Γ-term error"]) > tol.drift:
        reasons.append("the step disagrees with the declared recipe (drift)")
    if worst["noise covariance |z|"] > tol.noise_z:
        reasons.append("the step's noise covariance is not 2hT·D")
    if worst["recipe change per step"] > tol.history:
        reasons.append("depends on gradient history: the recipe (D, Q or g) changes every step")
    if worst.get("Gibbs: ∂g/∂θ", 0.0) > tol.structure:
        reasons.append(
            "the kinetic energy g depends on θ: a Gibbs draw of θ's precisions changes the "
            "conditional law of the auxiliary variables"
        )
    verdict = "approximate" if reasons else "exact"
    return CheckReport(kernel.name, verdict, reasons, worst)


def _kinetic_theta_gradient(recipe: Recipe, z: dict[str, PyTree]) -> float:
    """max |∂g/∂θ| at z. Gibbs draws of θ's hyper-parameters from π_T's conditional leave
    exp(−H/T) invariant only when g(θ, r) does not depend on θ (then r ⟂ θ)."""
    grad = jax.grad(lambda theta: recipe.kinetic({**z, "theta": theta}))(z["theta"])
    return float(max((jnp.max(jnp.abs(g)) for g in jax.tree.leaves(grad)), default=0.0))


def _randomise(z: dict[str, PyTree], key: jax.Array) -> dict[str, PyTree]:
    flat, unravel = ravel_pytree(z)
    return unravel(0.8 * jax.random.normal(key, flat.shape, jnp.float64))


class _Dense:
    """Dense views of a recipe at small dimension: D(z), Q(z), Γ, ∇g field, FP residual."""

    def __init__(self, recipe: Recipe, energy: Callable[[PyTree], jax.Array], z: dict):
        self.recipe, self.energy = recipe, energy
        self.kinds = recipe.groups
        self.zf, self.unravel = ravel_pytree(z)

    def ctx(self, z: dict) -> Context:
        u, g = jax.value_and_grad(self.energy)(z["theta"])
        return Context(u, g)

    def _matrix(self, which: str) -> Callable[[jax.Array], jax.Array]:
        def matrix(zf: jax.Array) -> jax.Array:
            z = self.unravel(zf)
            ctx = self.ctx(z)
            if which == "D":
                blocks = {(g, g): b for g, b in self.recipe.diffusion(z, ctx).items()}
            else:
                blocks = self.recipe.curl(z, ctx)

            def apply(vf: jax.Array) -> jax.Array:
                v = self.unravel(vf)
                out = {g: jax.tree.map(jnp.zeros_like, z[g]) for g in self.kinds}
                for (row, col), block in blocks.items():
                    kinds = self.kinds[row], self.kinds[col]
                    prod = matvec(as_block(block), v[col], z[row], *kinds)
                    out[row] = jax.tree.map(jnp.add, out[row], prod)
                return ravel_pytree(out)[0]

            return jax.jacfwd(apply)(jnp.zeros_like(zf))

        return matrix

    @property
    def D(self) -> Callable[[jax.Array], jax.Array]:
        return self._matrix("D")

    @property
    def Q(self) -> Callable[[jax.Array], jax.Array]:
        return self._matrix("Q")

    def gamma_true(self, zf: jax.Array) -> jax.Array:
        """Γ_i = Σ_j ∂_j (D + Q)_ij by dense autodiff (through U and ∇U exactly)."""
        dm = jax.jacfwd(lambda x: self.D(x) + self.Q(x))(zf)
        return jnp.einsum("ijj->i", dm)

    def gamma_diffusion(self, zf: jax.Array) -> jax.Array:
        return jnp.einsum("ijj->i", jax.jacfwd(self.D)(zf))

    def gamma_kernel(self, zf: jax.Array) -> jax.Array:
        z = self.unravel(zf)
        return ravel_pytree(_full(self.recipe.evaluate(z, self.ctx(z)).gamma, z))[0]

    def kinetic_field(self, zf: jax.Array) -> jax.Array:
        z = self.unravel(zf)
        return ravel_pytree(_full(self.recipe.kinetic_grad(z), z))[0]

    def grad_h(self, zf: jax.Array) -> jax.Array:
        z = self.unravel(zf)
        return ravel_pytree(_full(hamiltonian_grad(self.recipe, z, self.ctx(z)), z))[0]

    def drift(self, zf: jax.Array, T: float) -> jax.Array:
        z = self.unravel(zf)
        ev = self.recipe.evaluate(z, self.ctx(z))
        return ravel_pytree(drift(self.recipe, ev, z, T, tuple(self.kinds)))[0]

    def fokker_planck(self, zf: jax.Array, T: float) -> tuple[jax.Array, jax.Array]:
        def w(x: jax.Array) -> jax.Array:
            return self.drift(x, T) - T * self.gamma_diffusion(x) + self.D(x) @ self.grad_h(x)

        div = jnp.trace(jax.jacfwd(w)(zf))
        flow = w(zf) @ self.grad_h(zf) / T
        return div - flow, jnp.abs(div) + jnp.abs(flow)


def _like(value: Any, template: Any) -> Any:
    """Broadcast a block product to the structure of the row group."""
    structured = isinstance(template, dict | list | tuple) or bool(jnp.shape(template))
    if structured and not isinstance(value, dict | list | tuple) and jnp.ndim(value) == 0:
        return jax.tree.map(lambda t: jnp.broadcast_to(value, t.shape), template)
    return value


def _full(values: dict[str, PyTree], z: dict[str, PyTree]) -> dict[str, PyTree]:
    return {
        g: _like(values[g], z[g]) if g in values else jax.tree.map(jnp.zeros_like, z[g]) for g in z
    }


def _test_energy_and_grad(theta: PyTree) -> tuple[jax.Array, PyTree]:
    return jax.value_and_grad(test_energy)(theta)


def _step(kernel: Kernel, key: jax.Array, state: Any, grad_fn: Any, h: float, T: float) -> Any:
    return _step_jit(kernel, key, state, grad_fn, jnp.asarray(h), jnp.asarray(T))


def _delta(kernel: Kernel, state: Any, grad_fn: Any, h: float, T: float, key: jax.Array) -> Any:
    return _delta_jit(kernel, state, grad_fn, jnp.asarray(h), jnp.asarray(T), key)


def _deltas(kernel: Kernel, state: Any, grad_fn: Any, h: float, T: float, keys: jax.Array) -> Any:
    h, T = jnp.asarray(h), jnp.asarray(T)
    return _deltas_jit(kernel, state, grad_fn, h, T, keys)


@owner_jit
def _step_jit(kernel: Kernel, key: jax.Array, state: Any, grad_fn: Any, h: Any, T: Any) -> Any:
    return kernel.step(key, state, grad_fn, h, T)


def _delta_fn(kernel: Kernel, state: Any, grad_fn: Any, h: Any, T: Any, key: jax.Array) -> Any:
    new, _ = kernel.step(key, state, grad_fn, h, T)
    after, before = kernel.recipe_state(new).z, kernel.recipe_state(state).z
    return ravel_pytree(after)[0] - ravel_pytree(before)[0]


_delta_jit = owner_jit(_delta_fn)


@owner_jit
def _deltas_jit(kernel: Kernel, state: Any, grad_fn: Any, h: Any, T: Any, keys: jax.Array) -> Any:
    return jax.vmap(lambda k: _delta_fn(kernel, state, grad_fn, h, T, k))(keys)


@owner_jit
def _analyse(recipe: Recipe, energy: Any, z: dict, T: float) -> dict[str, jax.Array]:
    """Every dense quantity the checker needs at state z, in one compiled function."""
    dense = _Dense(recipe, energy, z)
    zf = dense.zf
    residual, fp_scale = dense.fokker_planck(zf, T)
    return {
        "D": dense.D(zf),
        "Q": dense.Q(zf),
        "kinetic_field": dense.kinetic_field(zf),
        "kinetic_jacobian": jax.jacfwd(dense.kinetic_field)(zf),
        "gamma_true": dense.gamma_true(zf),
        "gamma_kernel": dense.gamma_kernel(zf),
        "fp_residual": residual,
        "fp_scale": fp_scale,
        "drift0": dense.drift(zf, 0.0),
    }


def _step_agreement(
    kernel: Kernel, state: Any, grad_fn: Any, a: dict, T: float, h: float, key: jax.Array
) -> dict[str, float]:
    """Drift and Γ-term of one step against the recipe, relative errors at step size h."""
    d0 = np.asarray(_delta(kernel, state, grad_fn, h, 0.0, key))
    expected0 = a["drift0"]
    drift_err = np.max(np.abs(d0 / h - expected0)) / (1.0 + np.max(np.abs(expected0)))
    # Δz(T) − Δz(0) = a√T + hΓ·T + b·T^{3/2} + …, all sharing one noise draw: the T^{3/2} term
    # is there when a later half-step sees noise of an earlier one (symplectic Euler with a
    # noise-dependent Q, e.g. NNSGHMC), so fit all three powers from three temperatures
    ts = np.array([T, T / 4.0, T / 16.0])
    g = np.stack([np.asarray(_delta(kernel, state, grad_fn, h, t, key)) - d0 for t in ts])
    x = np.sqrt(ts)
    gamma_hat = np.linalg.solve(np.stack([x, x**2, x**3], axis=1), g)[1] / h
    gamma = a["gamma_kernel"]
    gamma_err = np.max(np.abs(gamma_hat - gamma)) / (1.0 + np.max(np.abs(gamma)))
    return {"drift error": float(drift_err), "Γ-term error": float(gamma_err)}


def _noise_z(
    kernel: Kernel,
    state: Any,
    grad_fn: Any,
    d_mat: np.ndarray,
    T: float,
    key: jax.Array,
    draws: int,
    tol: Tolerances,
) -> float:
    """Largest z-score of Cov[Δz]/(2h) against T·D over all entries (h = 1e-4)."""
    h = 1e-4
    deltas = _deltas(kernel, state, grad_fn, h, T, jax.random.split(key, draws))
    cov = np.atleast_2d(np.cov(np.asarray(deltas), rowvar=False)) / (2 * h)
    target = T * np.asarray(d_mat)
    diag = np.clip(np.diag(target), 0.0, None)
    se = np.sqrt((np.outer(diag, diag) + target**2) / draws)
    bias = tol.noise_bias * T * (np.max(np.abs(target)) + 1e-12)
    z = np.abs(cov - target) / (se + bias)
    return float(np.max(z))
