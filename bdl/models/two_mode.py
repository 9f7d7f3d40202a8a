"""The two-mode 2-D energy of Li & Zhang (2024, Sec. 6.1): ½N([−2, −1], 0.5·I) + ½N([2, 1], I).

The first mode is sharp, the second flat; Entropy-MCMC should prefer the flat one.
"""

import jax.numpy as jnp

import bdl
from bdl.data.synthetic_energies import two_mode_log_density


def build(temperature: float = 1.0) -> bdl.ModelSpec:
    potential = bdl.Potential(
        log_density=two_mode_log_density,
        init=jnp.array([-0.2, -0.2]),
        temperature=temperature,
        name="two_mode",
    )
    # in full, as every model file declares it: the files share no code (bdl/models/__init__.py)
    return bdl.ModelSpec(
        potential,
        kernels={"sgld": {"step_size": 5e-3}, "sghmc": {"step_size": 5e-2, "friction": 2.0}},
        # the chains cross between the modes rarely (an energy barrier of ≈ 3): SGLD needs about
        # 2,000,000 steps for R̂ < 1.01 and a bulk ESS of 1,000 (20,000 gave neither)
        num_steps=2_000_000,
        burn_in=5_000,
        thin=500,
        # so does NUTS: with 4 × 1,000 draws its reference fails the trust gate (R̂ 1.021, bulk
        # ESS 114), with 5,000 draws after 2,000 warm-up steps it passes (R̂ 1.005, ESS 633)
        nuts={"num_warmup": 2_000, "num_samples": 5_000},
        description="two-mode 2-D mixture (sharp and flat modes)",
    )
