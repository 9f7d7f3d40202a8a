"""pSGLD: SGLD preconditioned by RMSprop (Li, Chen, Carlson & Carin 2016).

Recipe (per step): z = θ, g = 0, D = G, Q = 0, with G = 1/(λ + √V) and
V ← αV + (1−α)(∇Ũ/n)² a running average of the squared mean minibatch gradient (Li et al. 2016,
Alg. 1; Kim et al. 2024, Eq. 3). Euler–Maruyama:

    θ ← θ − hG∇Ũ(θ) + √(2ThG)·ξ,   ξ ~ N(0, I).

This is Li et al.'s update θ ← θ + (ε/2)G(∇log p(θ) + Σ_i ∇log p(x_i|θ)) + N(0, εG) with
ε = 2h at T = 1 (and Kim et al.'s Eq. 3 with their ε = h).

It is :func:`bdl.kernels.sgld.sgld` with the :class:`~bdl.kernels.preconditioners.RMSprop`
history transform. G is computed from the gradients of the previous steps (V is updated after the
move; the first step initialises V = g₁²), so it does not depend on the current θ and the recipe's
Γ is zero. Li et al.'s correction term Γ = ∇_θ·G (which they drop) belongs to the idealised model
where G is a function of θ; here the approximation is of another kind: G changes every step with
the gradient history, so θ alone is not a Markov chain with invariant law π_T. The checker labels
the kernel approximate with "depends on gradient history". For an exact preconditioned SGLD,
freeze the preconditioner between updates: ``sgld(step_size, layerwise(...))``.
"""

from __future__ import annotations

from bdl.kernels.integrators import EulerMaruyama
from bdl.kernels.preconditioners import rmsprop
from bdl.kernels.recipe_kernel import RecipeKernel, StepSize
from bdl.kernels.sgld import Langevin


def psgld(
    step_size: StepSize | None = None, alpha: float = 0.99, eps: float = 1e-5
) -> RecipeKernel:
    """SGLD preconditioned by RMSprop (Li et al. 2016).

    Args:
        step_size: h = ε/2 of Li et al. (float or schedule). G ≈ 1/|∇Ũ/n| makes the drift
            hG∇Ũ ≈ h·n per coordinate, so stable steps shrink as 1/n.
        alpha: decay α of the squared-gradient average (default 0.99, as Li et al.).
        eps: λ, regulariser of G = 1/(λ + √V) (default 1e-5, as Li et al.).

    Returns:
        The kernel, a :class:`RecipeKernel`.
    """
    return RecipeKernel(Langevin(), step_size, EulerMaruyama(), rmsprop(alpha, eps), name="psgld")
