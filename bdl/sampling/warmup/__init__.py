"""Warm-up adaptation: step size, mass and friction learned during burn-in, then frozen.

A kernel built without a step size (``bdl.kernels.get("sghmc")``) is adapted by ``bdl.sample``
during its burn-in, per chain, in windows like Stan's warm-up (Carpenter et al. 2017;
:mod:`.schedule`): a fast window adapts the step size only, slow windows of doubling length each
end with a new mass from the window's θ (:mod:`.mass`), and a final fast window re-adapts the
step size to the last mass. The step size and friction come from the curvature, the integrator's
stability limit and the gradient noise (:mod:`.step_size`). A warm-up step that went unstable
is undone and its step size halved (:mod:`.guard`). :class:`WarmUp` (:mod:`.adaptation`) is the
object the sampling loop runs: ``init``, ``step``, ``update``, ``final``.

After burn-in the values are frozen: the sampling phase runs the kernel with constant (h, M, γ)
per chain, a constant recipe, so the checker's verdict on that frozen kernel (:func:`frozen`) is
the kernel's own.
"""

from bdl.sampling.warmup.adaptation import (
    AdaptationState,
    WarmUp,
    frozen,
    momentum_kernel,
    needs_adaptation,
    with_adapted,
)
from bdl.sampling.warmup.guard import Guard
from bdl.sampling.warmup.mass import (
    DENSE_MAX_DIM,
    Welford,
    accumulate,
    adapts_mass,
    dense,
    empty_stats,
    hessian_diagonal_mass,
    hessian_mass,
    history_mass,
    window_mass,
)
from bdl.sampling.warmup.schedule import MIN_BURN_IN, STEP_EVERY, Point, Schedule, Window, windows
from bdl.sampling.warmup.step_size import (
    AdaptParams,
    gradient_noise,
    largest_curvature,
    params_at,
)

__all__ = [
    "DENSE_MAX_DIM",
    "MIN_BURN_IN",
    "STEP_EVERY",
    "AdaptParams",
    "AdaptationState",
    "Guard",
    "Point",
    "Schedule",
    "WarmUp",
    "Welford",
    "Window",
    "accumulate",
    "adapts_mass",
    "dense",
    "empty_stats",
    "frozen",
    "gradient_noise",
    "hessian_diagonal_mass",
    "hessian_mass",
    "history_mass",
    "largest_curvature",
    "momentum_kernel",
    "needs_adaptation",
    "params_at",
    "window_mass",
    "windows",
    "with_adapted",
]
