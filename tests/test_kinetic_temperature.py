"""SGHMC's kinetic temperature lies in its χ²(d) band at stationarity (Wenzel et al. 2020, App. I).

For momenta r ~ N(0, T·M), T̂_K = rᵀM⁻¹r/d has mean T and lies in the 99 % χ²(d)·T/d band 99 % of
the time. Both are tested on a 50-dimensional Gaussian with two parameter groups, with tolerances
from the ESS of the T̂_K series (and of the band indicator); a run whose noise is 30 % too hot is
rejected by the same test (power).
"""

import jax.numpy as jnp
import numpy as np
from stat_utils import mean_and_mcse, z_threshold

import bdl
from bdl.diagnostics import temperature_report

SCALES = {"w": jnp.linspace(0.5, 2.0, 40), "b": jnp.linspace(0.2, 1.0, 10)}


def independent_gaussian(temperature: float) -> bdl.Potential:
    def log_density(theta):
        return -0.5 * sum(jnp.sum((theta[k] / SCALES[k]) ** 2) for k in SCALES)

    init = {k: jnp.zeros_like(v) for k, v in SCALES.items()}
    return bdl.Potential(log_density, init=init, temperature=temperature, name="gauss50")


def kinetic_report(sampling_temperature: float):
    # h·C = 0.01 keeps the symplectic-Euler bias of E[T̂_K] (≈ hC/2) below the Monte Carlo error.
    kernel = bdl.kernels.get("sghmc", step_size=0.02, friction=0.5, collect_momentum=True)
    samples = bdl.sample(
        bdl.compile(independent_gaussian(sampling_temperature)),
        kernel,
        num_steps=40_000,
        burn_in=4_000,
        thin=10,
        num_chains=4,
        seed=3,
    )
    momentum = samples.extra["momentum"]
    return temperature_report(momentum=momentum, temperature=1.0, batch_ndim=2)


def group_z_scores(report) -> dict[str, tuple[float, float]]:
    """Per group: z of mean T̂_K against T = 1 and z of the in-band fraction against 0.99."""
    out = {}
    for name, group in {**report.groups, "all": report.overall}.items():
        mean, se, _ = mean_and_mcse(np.asarray(group.kinetic))
        inside = np.asarray(group.inside, np.float64)
        frac, frac_se, _ = mean_and_mcse(inside)
        frac_se = max(frac_se, np.sqrt(0.99 * 0.01 / inside.size))
        out[name] = ((mean - 1.0) / se, (frac - 0.99) / frac_se)
    return out


def test_sghmc_kinetic_temperature_is_in_band():
    z = group_z_scores(kinetic_report(1.0))
    threshold = z_threshold(2 * len(z))
    for name, (z_mean, z_frac) in z.items():
        assert abs(z_mean) < threshold, (name, z_mean)
        assert abs(z_frac) < threshold, (name, z_frac)


def test_too_hot_momenta_are_rejected():
    z = group_z_scores(kinetic_report(1.3))
    assert abs(z["all"][0]) > z_threshold(2 * len(z))
