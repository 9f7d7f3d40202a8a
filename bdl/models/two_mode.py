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
    return bdl.ModelSpec(
        potential,
        kernels={"sgld": {"step_size": 5e-3}, "sghmc": {"step_size": 5e-2, "friction": 2.0}},
        num_steps=20_000,
        burn_in=1_000,
        thin=5,
        description="two-mode 2-D mixture (sharp and flat modes)",
    )
