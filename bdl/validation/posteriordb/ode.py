"""The ODE posteriors of the posteriordb suite, and the solver they use.

* ``hudson_lynx_hare-lotka_volterra``: the Lotka–Volterra equations du/dt = (α − βv)u,
  dv/dt = (−γ + δu)v from z(0) = z_init, observed with log-normal errors at t = 0 (y_init) and
  at the 20 times t_n: y_{n,k} ~ LogNormal(log z_k(t_n), σ_k); α, γ ~ N⁺(1, 0.5²),
  β, δ ~ N⁺(0.05, 0.05²), z_init ~ LogNormal(log 10, 1), σ ~ LogNormal(−1, 1). Solved as the
  program's ``integrate_ode_rk45`` states: Dormand–Prince 5(4), relative tolerance 1e-5,
  absolute tolerance 1e-3, at most 500 steps.
* ``one_comp_mm_elim_abs-one_comp_mm_elim_abs``: one compartment with first-order absorption
  and Michaelis–Menten elimination, dC/dt = 1[t > 0]·e^{−k_a t}·D·k_a/V − (V_m/V)·C/(K_m + C),
  C(0) = 0, observed as Ĉ_n ~ LogNormal(log C(t_n), σ); k_a, K_m, V_m, σ ~ Cauchy⁺(0, 1). The
  program uses ``integrate_ode_bdf`` at its default tolerances (1e-10, in double precision);
  here Dormand–Prince 5(4) at 1e-6, the finest float32 carries, at most 4,096 steps.

The rows are the observation times (t = 0 included for the lynx and hares), whose input is the
time; the network solves the ODE at the times of its batch. diffrax (Kidger 2021) is an optional
dependency: ``pip install 'bdl-sgmcmc[ode]'``. A solve that fails (too many steps) gives NaN, which
the samplers treat as a divergence and NUTS as a rejected proposal, as Stan rejects a proposal
whose solve throws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from bdl.data.dataset import Dataset
from bdl.dsl.model import Model
from bdl.dsl.numpyro_likelihood import Likelihood
from bdl.dsl.priors import ByPath

MISSING = (
    "the ODE posteriors of the posteriordb suite need the optional ODE solver diffrax, which is "
    "not installed: pip install 'bdl-sgmcmc[ode]' (or pip install diffrax)."
)


def require_diffrax() -> Any:
    """The ``diffrax`` module.

    Returns:
        diffrax.

    Raises:
        ImportError: diffrax is not installed (the message says how to install it).
    """
    try:
        import diffrax
    except ImportError as err:
        raise ImportError(MISSING) from err
    return diffrax


def solve(
    rhs: Callable[[jax.Array, jax.Array, Any], jax.Array],
    y0: jax.Array,
    times: jax.Array,
    args: Any,
    *,
    t0: float = 0.0,
    rtol: float,
    atol: float,
    max_steps: int,
) -> jax.Array:
    """The solution of dy/dt = rhs(t, y, args), y(t0) = y0, at ``times`` (any order, each
    ≥ t0), by Dormand–Prince 5(4) with an adaptive step; NaN where the solver fails.

    Args:
        rhs: the right-hand side ``(t, y, args) -> dy/dt``.
        y0: the initial state ``(k,)``.
        times: where to report the solution ``(m,)``.
        args: what ``rhs`` reads besides t and y (the parameters).
        t0: the initial time.
        rtol: the relative tolerance of each step.
        atol: its absolute tolerance.
        max_steps: the most steps; a solve that needs more fails.

    Returns:
        y at ``times``, ``(m, k)``.

    Raises:
        ImportError: diffrax is not installed.
    """
    diffrax = require_diffrax()
    # one dtype, the state's: data arrays made while float64 was on (NUTS) stay float64
    dtype = jnp.result_type(y0)
    times = jnp.asarray(times, dtype)
    t0 = jnp.asarray(t0, dtype)
    order = jnp.argsort(times)
    ts = times[order]
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs),
        diffrax.Dopri5(),
        t0,
        ts[-1],
        None,
        y0,
        args=args,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        # differentiable in both modes: bdl.sample's warm-up measures curvature by jvp of the
        # gradient, which the default checkpointed adjoint (a custom_vjp) does not allow
        adjoint=diffrax.DirectAdjoint(),
        throw=False,
    )
    ok = solution.result == diffrax.RESULTS.successful
    ys = jnp.where(ok, solution.ys, jnp.nan)
    return ys[jnp.argsort(order)]


def lotka_volterra_rhs(t: jax.Array, z: jax.Array, theta: jax.Array) -> jax.Array:
    """dz/dt of the Lotka–Volterra equations, z = (prey u, predators v),
    θ = (α, β, γ, δ): ((α − βv)u, (−γ + δu)v).

    Args:
        t: the time (unused: the system is autonomous).
        z: the populations ``(2,)``.
        theta: the rates ``(4,)``.

    Returns:
        dz/dt ``(2,)``.
    """
    u, v = z[0], z[1]
    return jnp.stack([(theta[0] - theta[1] * v) * u, (-theta[2] + theta[3] * u) * v])


def population_model(rtol: float, atol: float, max_steps: int) -> Callable[..., jax.Array]:
    """log z(t) of the Lotka–Volterra solution from z(0) = z_init, as a network.

    Args:
        rtol: the solver's relative tolerance.
        atol: its absolute tolerance.
        max_steps: its most steps.

    Returns:
        ``f(params, x) -> (m, 2)``: log z at the times ``x[:, 0]``, for
        ``params = {"theta": (α, β, γ, δ), "z_init": z(0)}``.
    """

    def log_populations(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        z = solve(
            lotka_volterra_rhs,
            params["z_init"],
            x[:, 0],
            params["theta"],
            rtol=rtol,
            atol=atol,
            max_steps=max_steps,
        )
        return jnp.log(z)

    return log_populations


def lotka_volterra(
    data: dict[str, Any], *, rtol: float = 1e-5, atol: float = 1e-3, max_steps: int = 500
) -> tuple[Model, Dataset]:
    """``hudson_lynx_hare-lotka_volterra``: the lynx and hare pelts of 1900–1920 under the
    Lotka–Volterra equations with log-normal errors.

    Args:
        data: posteriordb's ``hudson_lynx_hare`` data.
        rtol: the solver's relative tolerance (default the program's).
        atol: its absolute tolerance (default the program's).
        max_steps: its most steps (default the program's).

    Returns:
        The model and its data set: 21 rows, t = 0 with y_init, then the 20 times.

    Raises:
        ImportError: diffrax is not installed.
    """
    require_diffrax()
    times = np.concatenate([[0.0], np.asarray(data["ts"], np.float64)])[:, None]
    y = np.concatenate([np.asarray(data["y_init"], np.float64)[None], np.asarray(data["y"])])
    rates = dist.TruncatedNormal(
        jnp.array([1.0, 0.05, 1.0, 0.05]), jnp.array([0.5, 0.05, 0.5, 0.05]), low=0.0
    ).to_event(1)
    prior = ByPath(
        {"/theta$": rates, "/z_init$": dist.LogNormal(jnp.log(10.0), 1.0).expand([2]).to_event(1)}
    )
    likelihood = Likelihood.from_numpyro(
        dist.LogNormal, scale=dist.LogNormal(-1.0, 1.0).expand([2]).to_event(1)
    )
    model = Model(
        population_model(rtol, atol, max_steps),
        likelihood,
        prior=prior,
        params={"theta": jnp.array([1.0, 0.05, 1.0, 0.05]), "z_init": jnp.array([10.0, 10.0])},
        name="hudson_lynx_hare-lotka_volterra",
    )
    data_set = Dataset(
        "hudson_lynx_hare-lotka_volterra", times.astype(np.float32), y.astype(np.float32)
    )
    return model, data_set


def one_compartment(dose: float, volume: float) -> Callable[..., jax.Array]:
    """dC/dt of one_comp_mm_elim_abs.stan for a dose D into a volume V.

    Args:
        dose: D, the total dose (mg).
        volume: V, the compartment's volume (L).

    Returns:
        ``rhs(t, C, (k_a, K_m, V_m)) -> dC/dt``: absorption 1[t > 0]·e^{−k_a t}·D·k_a/V minus the
        Michaelis–Menten elimination (V_m/V)·C/(K_m + C).
    """

    def rhs(t: jax.Array, c: jax.Array, theta: jax.Array) -> jax.Array:
        k_a, k_m, v_m = theta[0], theta[1], theta[2]
        absorbed = jnp.where(t > 0, jnp.exp(-k_a * t) * dose * k_a / volume, 0.0)
        return absorbed - (v_m / volume) * c / (k_m + c)

    return rhs


def concentration_model(
    data: dict[str, Any], rtol: float, atol: float, max_steps: int
) -> Callable[..., jax.Array]:
    """one_comp_mm_elim_abs.stan's log concentration at the times of a batch, as a network.

    Args:
        data: posteriordb's ``one_comp_mm_elim_abs`` data (D, V, t0).
        rtol: the solver's relative tolerance.
        atol: its absolute tolerance.
        max_steps: its most steps.

    Returns:
        ``f(params, x) -> (m,)``: log C at the times ``x[:, 0]``.
    """
    rhs = one_compartment(float(data["D"]), float(data["V"]))
    t0 = float(data["t0"])

    def log_concentration(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        theta = jnp.stack([params["k_a"], params["K_m"], params["V_m"]])
        y0 = jnp.zeros(1, theta.dtype)
        c = solve(rhs, y0, x[:, 0], theta, t0=t0, rtol=rtol, atol=atol, max_steps=max_steps)
        return jnp.log(c[:, 0])

    return log_concentration


def one_comp_mm_elim_abs(
    data: dict[str, Any], *, rtol: float = 1e-6, atol: float = 1e-6, max_steps: int = 4096
) -> tuple[Model, Dataset]:
    """``one_comp_mm_elim_abs-one_comp_mm_elim_abs``: a one-compartment pharmacokinetic model
    with Michaelis–Menten elimination.

    Args:
        data: posteriordb's ``one_comp_mm_elim_abs`` data.
        rtol: the solver's relative tolerance.
        atol: its absolute tolerance.
        max_steps: its most steps.

    Returns:
        The model and its data set (rows: the measurement times).

    Raises:
        ImportError: diffrax is not installed.
    """
    require_diffrax()
    half_cauchy = dist.HalfCauchy(1.0)
    model = Model(
        concentration_model(data, rtol, atol, max_steps),
        Likelihood.from_numpyro(dist.LogNormal, scale=half_cauchy),
        prior=half_cauchy,
        params={"k_a": jnp.ones(()), "K_m": jnp.ones(()), "V_m": jnp.ones(())},
        name="one_comp_mm_elim_abs-one_comp_mm_elim_abs",
    )
    times = np.asarray(data["times"], np.float32)[:, None]
    y = np.asarray(data["C_hat"], np.float32)
    return model, Dataset("one_comp_mm_elim_abs-one_comp_mm_elim_abs", times, y)
