"""Checks of a run's arguments and schedules, made before anything is compiled."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bdl.compile.precision import check_precision
from bdl.compile.target import Target
from bdl.kernels.base import Kernel
from bdl.kernels.recipe_kernel import RecipeKernel
from bdl.utils import arguments
from bdl.utils.identity_map import PairMemo
from bdl.utils.owner_jit import owner_jit

#: the (kernel, target) pairs whose start was traced
_STARTS_CHECKED: PairMemo[None] = PairMemo()


def _positive_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}.")
    return int(value)


def check_run(num_steps: Any, burn_in: Any, thin: Any, num_chains: Any) -> int:
    """Validate the run lengths; returns the number of draws per chain."""
    num_steps = _positive_int("num_steps", num_steps, 1)
    burn_in = _positive_int("burn_in", burn_in, 0)
    if isinstance(thin, int | np.integer) and not isinstance(thin, bool) and thin <= 0:
        raise ValueError(f"thin must be >= 1 (keep every thin-th step); got {thin}.")
    thin = _positive_int("thin", thin, 1)
    _positive_int("num_chains", num_chains, 1)
    if burn_in >= num_steps:
        raise ValueError(
            f"burn_in ({burn_in}) must be smaller than num_steps ({num_steps}): "
            "nothing would be collected."
        )
    draws = (num_steps - burn_in) // thin
    if draws == 0:
        raise ValueError(
            f"thin ({thin}) is larger than num_steps - burn_in "
            f"({num_steps - burn_in}): nothing would be collected."
        )
    return draws


def check_start(target: Any, kernel: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Check the arguments of ``sample`` that reach JAX before the run lengths are looked at:
    ``seed`` (an integer in [0, 2**32); a JAX key is refused, since the run records its seed),
    ``init`` against the target's positions, ``progress``, and that the kernel can start at the
    target's positions. Returns ``options`` with the seed as a Python ``int``."""
    options = dict(options)
    if options.get("seed") is not None:
        options["seed"] = arguments.seed(options["seed"], "seed")
    if options.get("progress") is not None:
        arguments.flag(options["progress"], "progress")
    if isinstance(target, Target) and isinstance(kernel, Kernel):
        check_precision(target)  # compiled in the floating-point type the run computes in
        chains = options.get("num_chains")
        if chains is None and options.get("resume") is None:
            chains = 1
        if chains is None or arguments.is_integer(chains):  # else check_run names it
            target.check_init(options.get("init", "auto"), None if chains is None else int(chains))

        # the kernel's state at the target's position, traced abstractly (nothing is compiled):
        # a kernel setting of another shape than the positions fails here, naming the setting.
        # Once per kernel and target: a repeated call skips the trace.
        def trace_start() -> None:
            jax.eval_shape(lambda: kernel.init(target.initial_position, jax.random.key(0)))

        _STARTS_CHECKED.get_or_compute(kernel, target, trace_start)
    return options


_SCHEDULE_POINTS = 200_001  # steps at which long runs check their schedules


def check_schedules(target: Target, kernel: Kernel, num_steps: int, adapting: bool) -> None:
    """Raise ``ValueError`` naming the first step at which the temperature is not a finite
    T ≥ 0 or the step size not a finite h > 0 (every step, or 200,001 evenly spaced ones)."""
    if _constant_schedules(target, kernel):
        return  # validated when the kernel and the model were built
    if num_steps <= _SCHEDULE_POINTS:
        steps = np.arange(num_steps)
    else:
        steps = np.unique(np.linspace(0, num_steps - 1, _SCHEDULE_POINTS).astype(np.int64))
    h, temperature = (np.asarray(a) for a in _schedules(target, kernel, steps, adapting))
    for name, values, ok in (
        ("temperature", temperature, np.isfinite(temperature) & (temperature >= 0)),
        ("step size", h, np.isfinite(h) & (h > 0)),
    ):
        if not ok.all():
            i = int(np.argmin(ok))
            raise ValueError(
                f"the {name} schedule gives {values[i]:.4g} at step {steps[i]}: it must be finite "
                f"and {'>= 0' if name == 'temperature' else '> 0'} at every step of the run."
            )


def _constant_schedules(target: Target, kernel: Kernel) -> bool:
    """A constant temperature and a recipe kernel with a constant (or adapted) step size."""
    if target.constant_temperature() is None or not isinstance(kernel, RecipeKernel):
        return False
    return kernel.step_size is None or isinstance(kernel.step_size, int | float)


@owner_jit
def _schedules(
    target: Target, kernel: Kernel, steps: jax.Array, adapting: bool
) -> tuple[jax.Array, jax.Array]:
    def at(t: jax.Array) -> tuple[jax.Array, jax.Array]:
        temperature = jnp.asarray(target.temperature(t), jnp.float32)
        if adapting:
            return jnp.ones(()), temperature
        h, temperature = kernel.hyper(t, temperature)
        return jnp.asarray(h, jnp.float32), jnp.asarray(temperature, jnp.float32)

    return jax.vmap(at)(jnp.asarray(steps, jnp.int32))
