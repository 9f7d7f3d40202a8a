"""The stationarity checker: does a kernel sample exp(−H/T), and does its step do what it declares?

At random states of a small non-Gaussian test energy, in float64 (docs/design.md, *Exactness
and the checker*):

1. **structure**: D is symmetric positive semi-definite and Q skew-symmetric;
2. **kinetic field**: the field the dynamics use for ∇g has a symmetric Jacobian (it is a
   gradient, so a Hamiltonian exists);
3. **Fokker–Planck**: with p = exp(−H/T) and the kernel's own Γ, the flux
   J = [−(D+Q)∇H + TΓ]p − T∇·(Dp) is divergence-free, evaluated in log space
   (:mod:`bdl.kernels.dense_recipe`);
4. **drift**: the step's drift tends to the declared −(D+Q)∇H + TΓ as h → 0 (exactly, using one
   noise draw at four temperatures: Δz(T) − Δz(0) = a√T + hΓT + bT^{3/2} separates the Γ term
   from the noise);
5. **noise**: the covariance rate of one step tends to T·D as h → 0. The integrator's step is a
   function of its Gaussian draw ξ, so B = ∂z'/∂ξ gives its covariance B·Bᵀ by autodiff, with no
   sampling; C(h) = B·Bᵀ/(2h) = T·D + O(h), and its Richardson extrapolation to h = 0 from h,
   h/2 and h/4 must equal T·D to rounding (:mod:`bdl.kernels.increments`). When
   ``kernel.step`` is not that integrator's move of the standard draw of its key (a wrapper that
   adds randomness of its own), the step is also sampled and Cov[Δz] z-scored against B·Bᵀ;
6. **history**: one step does not change the recipe (a per-step adapted preconditioner does);
7. for the Gibbs wrapper (:mod:`bdl.kernels.gibbs`), the inner kernel's recipe as above, and
   ∂g/∂θ = 0: its exact conditional draws of θ's precisions leave exp(−H/T) invariant only when
   the auxiliary variables are independent of θ. (The test energy has no hyper-parameters; the
   draws themselves are tested statistically in tests/test_gibbs.py.)

A kernel is **exact** when all hold, otherwise **approximate** with the reasons.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bdl.kernels import increments
from bdl.kernels.base import Kernel
from bdl.kernels.dense_recipe import analyse
from bdl.kernels.gibbs import Gibbs
from bdl.kernels.recipe import Recipe
from bdl.utils import arguments

PyTree = Any

_A = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.5]])


def test_energy(theta: PyTree) -> jax.Array:
    """U(θ) = ½θᵀAθ + 0.1Σθ⁴ + 0.3·sin(θ₀ + 2θ₂) on θ = {"a": (2,), "b": (1,)}: non-Gaussian,
    coupled, with non-zero third derivatives (so Γ terms through U are exercised)."""
    x = jnp.concatenate([theta["a"], theta["b"]])
    return 0.5 * x @ jnp.asarray(_A) @ x + 0.1 * jnp.sum(x**4) + 0.3 * jnp.sin(x[0] + 2 * x[2])


@dataclasses.dataclass
class CheckReport:
    """The checker's findings for one kernel.

    Attributes:
        kernel: the kernel's name.
        verdict: ``"exact"`` or ``"approximate"``.
        reasons: why a kernel is approximate (empty when exact).
        residuals: the largest residual of each check, by name.
    """

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
    """Thresholds; residuals are relative to the scale of the terms they compare.

    ``noise`` bounds the exact noise-covariance error, a rounding error: ≈ 3e-16 for float64
    recipes, up to ≈ d²·6e-8 when the recipe's constants are float32 (values adapted by a float32
    run, whose D and noise factor agree to float32 rounding; ≈ 1e-8 measured); a variance error
    of 2 % reads 2e-2. ``step_identity`` decides whether ``kernel.step`` is its integrator's
    move of the standard draw (rounding only); when it is not, the step is also sampled and its
    covariance z-scored (``noise_z``, with ``noise_bias``·T·max|D| added to the standard error
    as a floor)."""

    structure: float = 1e-9
    kinetic_field: float = 1e-7
    fokker_planck: float = 1e-6
    drift: float = 1e-3
    noise: float = 1e-5
    step_identity: float = 1e-9
    noise_z: float = 6.0
    noise_bias: float = 1e-3
    history: float = 1e-10


#: the smallest temperature the checker resolves (SGHMC read as approximate at T = 1e-4)
MIN_TEMPERATURE = 1e-2

#: the step size of the sampled noise check
SAMPLED_STEP = 1e-4


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
    """Check ``kernel`` for stationarity and for agreement of its step with its recipe.

    ``step_size`` is the h of the drift and exact noise checks, ``noise_draws`` the number of
    steps the sampled noise check takes per state when it runs ([the stationarity
    checker](../checker.md)).

    Args:
        kernel: the kernel to check (its recipe is evaluated in float64).
        temperature: T of the test energy.
        num_states: random states the residuals are computed at.
        seed: the seed of the states and the noise.
        step_size: h of the drift and exact noise checks.
        noise_draws: steps of the sampled noise check per state.
        tolerances: the thresholds (default :class:`Tolerances`' own).

    Returns:
        A :class:`CheckReport`: the verdict (exact or approximate), its reasons and the largest
            residuals.
    """
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
            k_i = jax.random.fold_in(k_warm, i)
            state, _ = increments.step(kernel, k_i, state, grad_fn, 1e-3, T)
        recipe_kernel = kernel.recipe_kernel()
        if recipe_kernel is None:
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
        a = jax.device_get(analyse(recipe, joint_energy, z, jnp.asarray(T, jnp.float64)))

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

        noise = _noise_check(
            kernel, recipe, state, joint_energy, grad_fn, d_mat, T, h, k_step, draws, tol
        )
        for name, value in noise.items():
            record(name, value)

        stepped_state, _ = increments.step(
            kernel, jax.random.fold_in(k_step, 7), state, grad_fn, 1e-3, T
        )
        after = jax.device_get(
            analyse(kernel.recipe_at(stepped_state), joint_energy, z, jnp.asarray(T, jnp.float64))
        )
        change = max(
            np.max(np.abs(after["D"] - d_mat)),
            np.max(np.abs(after["Q"] - q_mat)),
            np.max(np.abs(after["kinetic_field"] - a["kinetic_field"])),
        )
        record("recipe change per step", change / scale)
        if isinstance(kernel, Gibbs):
            record("Gibbs: ∂g/∂θ", _kinetic_theta_gradient(recipe, z))

    return CheckReport(kernel.name, *_verdict(worst, tol), worst)


def _verdict(worst: dict[str, float], tol: Tolerances) -> tuple[str, list[str]]:
    reasons = []
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
    if worst["noise covariance error"] > tol.noise:
        reasons.append(
            "the step's noise covariance is not 2hT·D: relative error "
            f"{worst['noise covariance error']:.2e}"
        )
    elif worst.get("noise covariance |z| (sampled)", 0.0) > tol.noise_z:
        reasons.append(
            "the step's noise covariance is not 2hT·D: sampled |z| "
            f"{worst['noise covariance |z| (sampled)']:.1f}"
        )
    if worst["recipe change per step"] > tol.history:
        reasons.append("depends on gradient history: the recipe (D, Q or g) changes every step")
    if worst.get("Gibbs: ∂g/∂θ", 0.0) > tol.structure:
        reasons.append(
            "the kinetic energy g depends on θ: a Gibbs draw of θ's precisions changes the "
            "conditional law of the auxiliary variables"
        )
    return ("approximate" if reasons else "exact"), reasons


def _kinetic_theta_gradient(recipe: Recipe, z: dict[str, PyTree]) -> float:
    """max |∂g/∂θ| at z. Gibbs draws of θ's hyper-parameters from π_T's conditional leave
    exp(−H/T) invariant only when g(θ, r) does not depend on θ (then r ⟂ θ)."""
    grad = jax.grad(lambda theta: recipe.kinetic({**z, "theta": theta}))(z["theta"])
    return float(max((jnp.max(jnp.abs(g)) for g in jax.tree.leaves(grad)), default=0.0))


def _randomise(z: dict[str, PyTree], key: jax.Array) -> dict[str, PyTree]:
    flat, unravel = ravel_pytree(z)
    return unravel(0.8 * jax.random.normal(key, flat.shape, jnp.float64))


def _test_energy_and_grad(theta: PyTree) -> tuple[jax.Array, PyTree]:
    return jax.value_and_grad(test_energy)(theta)


def _step_agreement(
    kernel: Kernel, state: Any, grad_fn: Any, a: dict, T: float, h: float, key: jax.Array
) -> dict[str, float]:
    """Drift and Γ-term of one step against the recipe, relative errors at step size h."""
    d0 = np.asarray(increments.delta(kernel, state, grad_fn, h, 0.0, key))
    expected0 = a["drift0"]
    drift_err = np.max(np.abs(d0 / h - expected0)) / (1.0 + np.max(np.abs(expected0)))
    # Δz(T) − Δz(0) = a√T + hΓ·T + b·T^{3/2} + …, all sharing one noise draw: the T^{3/2} term
    # is there when a later half-step sees noise of an earlier one (symplectic Euler with a
    # noise-dependent Q, e.g. NNSGHMC), so fit all three powers from three temperatures
    ts = np.array([T, T / 4.0, T / 16.0])
    g = np.stack([np.asarray(increments.delta(kernel, state, grad_fn, h, t, key)) - d0 for t in ts])
    x = np.sqrt(ts)
    gamma_hat = np.linalg.solve(np.stack([x, x**2, x**3], axis=1), g)[1] / h
    gamma = a["gamma_kernel"]
    gamma_err = np.max(np.abs(gamma_hat - gamma)) / (1.0 + np.max(np.abs(gamma)))
    return {"drift error": float(drift_err), "Γ-term error": float(gamma_err)}


def _noise_check(
    kernel: Kernel,
    recipe: Recipe,
    state: Any,
    energy: Any,
    grad_fn: Any,
    d_mat: np.ndarray,
    T: float,
    h: float,
    key: jax.Array,
    draws: int,
    tol: Tolerances,
) -> dict[str, float]:
    """The exact noise-covariance error of the recipe kernel's integrator at this state; and,
    when ``kernel.step`` from ``key`` is not that integrator's move of the standard draw of
    ``key`` (randomness of its own beyond the draw), the sampled |z| of the step as well."""
    integrator = kernel.recipe_kernel().integrator
    z = kernel.recipe_state(state).z
    exact = jax.device_get(increments.integrator_noise(recipe, integrator, energy, z, T, h, key))
    out = {"noise covariance error": _noise_error(exact, d_mat, T)}
    stepped = np.asarray(increments.delta(kernel, state, grad_fn, h, T, key))
    moved = exact["delta"]
    if np.max(np.abs(stepped - moved)) <= tol.step_identity * np.max(np.abs(moved)):
        return out  # the step is the integrator's move: its covariance is B·Bᵀ
    sampled = increments.integrator_noise(recipe, integrator, energy, z, T, SAMPLED_STEP, key)
    rate = np.asarray(sampled["rates"][0])
    out["noise covariance |z| (sampled)"] = _noise_z(
        kernel, state, grad_fn, rate, d_mat, T, key, draws, tol
    )
    return out


def _noise_error(noise: dict[str, np.ndarray], d_mat: np.ndarray, T: float) -> float:
    """max |C(0) − T·D| / (T·max|D|) (absolute when D = 0), C(h) = B·Bᵀ/(2h) the integrator's
    covariance rate, extrapolated from h, h/2, h/4 by C(0) = [8C(h/4) − 6C(h/2) + C(h)]/3,
    which is exact for a quadratic in h and leaves O(h³) otherwise (docs/checker.md)."""
    c_h, c_half, c_quarter = noise["rates"]
    extrapolated = (8.0 * c_quarter - 6.0 * c_half + c_h) / 3.0
    target = T * np.asarray(d_mat)
    scale = T * (np.max(np.abs(d_mat)) if np.any(d_mat) else 1.0)
    return float(np.max(np.abs(extrapolated - target)) / scale)


def _noise_z(
    kernel: Kernel,
    state: Any,
    grad_fn: Any,
    rate: np.ndarray,
    d_mat: np.ndarray,
    T: float,
    key: jax.Array,
    draws: int,
    tol: Tolerances,
) -> float:
    """Largest z-score over all entries of the sampled Cov[Δz]/(2h) of ``draws`` steps
    (h = SAMPLED_STEP) against ``rate``, the integrator's exact B·Bᵀ/(2h) at that h."""
    h = SAMPLED_STEP
    sample = increments.deltas(kernel, state, grad_fn, h, T, jax.random.split(key, draws))
    cov = np.atleast_2d(np.cov(np.asarray(sample), rowvar=False)) / (2 * h)
    diag = np.clip(np.diag(rate), 0.0, None)
    se = np.sqrt((np.outer(diag, diag) + rate**2) / draws)
    bias = tol.noise_bias * T * (np.max(np.abs(d_mat)) + 1e-12)
    return float(np.max(np.abs(cov - rate) / (se + bias)))
