"""bdl's recipe kernels behind BlackJAX's SG-MCMC interface: :func:`as_blackjax`.

BlackJAX 1.x builds an SG-MCMC algorithm from a gradient estimator and steps it in the user's
own loop::

    grad_fn = blackjax.sgmcmc.gradients.grad_estimator(logprior_fn, loglikelihood_fn, n)
    sgld = blackjax.sgld(grad_fn)
    state = sgld.init(position)
    state = sgld.step(rng_key, state, minibatch, step_size)       # temperature=1.0

:func:`as_blackjax` returns the same pair of functions for any :class:`RecipeKernel` (SGLD, pSGLD,
SGHMC, SGNHT, NNSGHMC, L2E, Kinetic-L2E, a recipe of your own), so kernels BlackJAX does not have
drop into such a loop.

Conventions (docs/blackjax.md). BlackJAX's estimator returns the gradient of the *log-density*
at full-data scale, ∇[log p(θ) + n·mean_{i∈B} log p(y_i | θ)]; bdl's kernels step on the
*energy* Ũ(θ) = −(n/|B|)·Σ_{i∈B} log p(y_i | θ) − log p(θ) (docs/design.md, *Energy*), which is
the negative of BlackJAX's estimate: the adapter passes ∇Ũ = −grad_estimator(θ, minibatch) and,
where a recipe reads the energy itself (NNSGHMC), Ũ = −logdensity_estimator(θ, minibatch). No
other factor of n enters; ``data_size`` is the n the kernel is bound to (pSGLD's statistic ∇Ũ/n,
the (ℓ, β) map h = √(ℓ/n)). The temperature is BlackJAX's: noise √(2Th), target exp(−U/T).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex

from bdl.kernels.base import Kernel
from bdl.kernels.recipe_kernel import RecipeKernel, RecipeState
from bdl.utils import arguments

PyTree = Any
#: what BlackJAX itself is pinned to (pyproject.toml, the ``bench`` extra)
REQUIREMENT = "blackjax>=1.7.1,<1.8"


class BlackJAXState(NamedTuple):
    """The state of a kernel with auxiliary variables or gradient history under
    :func:`as_blackjax` (a first-order kernel without history, such as SGLD, keeps the position
    itself, as ``blackjax.sgld`` does).

    Attributes:
        position: θ, the position pytree.
        auxiliary: the recipe's other groups by name: ``{"p": p}`` for SGHMC (the canonical
            momentum M^{−1/2}r), ``{"r": r, "xi": ξ}`` for SGNHT, ``{"r": r}`` for NNSGHMC and
            the L2E kernels.
        history: the history transform's state (pSGLD's RMSprop statistic, L2E's gradient
            averages, a layerwise mass); ``()`` when there is none.
    """

    position: PyTree
    auxiliary: dict[str, PyTree]
    history: PyTree = ()


class _Target(NamedTuple):
    """What a kernel's ``bind`` reads from a target: the training-set size n (no epochs)."""

    n: int


def as_blackjax(
    kernel: Kernel,
    grad_estimator: Callable[[PyTree, PyTree], PyTree],
    data_size: int,
    *,
    logdensity_estimator: Callable[[PyTree, PyTree], jax.Array] | None = None,
) -> Any:
    """A recipe kernel as a BlackJAX ``SamplingAlgorithm``: ``init(position, rng_key=None)`` and
    ``step(rng_key, state, minibatch, step_size=None, temperature=1.0) -> state``.

    Steps follow BlackJAX 1.x's SG-MCMC conventions (``blackjax.sgld``): they return the new
    state only, and the step size and temperature are arguments of every step. The step size is
    passed per step, not fixed here, because in a BlackJAX loop the loop owns the schedule, a
    step counter in the state would break the convention that SGLD's state is the position, and
    it makes ``as_blackjax(bdl.kernels.get("sgld"), g, n)`` a drop-in for ``blackjax.sgld(g)``
    (the same draw for the same key, step size and minibatch). ``step_size=None`` takes the
    kernel's own constant step size (e.g. h = √(ℓ/n) of a kernel built with a learning rate);
    a kernel built without one, or with a schedule, needs ``step_size`` at every step.

    Signs and scale: BlackJAX's ``grad_estimator(θ, minibatch)`` is ∇log p̃(θ) = −∇Ũ(θ), the
    minibatch estimate at full-data scale (``data_size`` · the batch mean of the
    log-likelihoods, plus the log-prior). The kernel steps on ∇Ũ = −grad_estimator(θ, minibatch)
    ([design, *Energy*](../design.md#energy)), so SGLD's step is θ + h·grad_estimator +
    √(2Th)·ξ, BlackJAX's ([Kernels in a BlackJAX loop](../blackjax.md) has the details).

    Args:
        kernel: a :class:`~bdl.kernels.recipe_kernel.RecipeKernel` (``bdl.kernels.get("sgld")``,
            ``"psgld"``, ``"sghmc"``, ``"sgnht"``, ``"nnsghmc"``, ``"l2e"``, ``"kinetic-l2e"``,
            or one built from a recipe); the learned kernels carry their meta-parameters (the
            shipped ones by default). Wrappers (``cyclical``, ``entropy``, ``gibbs``,
            ``wenzel``) are refused: their schedules belong to the BlackJAX loop, which passes
            ``step_size`` and ``temperature`` to each step.
        grad_estimator: ``(position, minibatch) -> ∇log p̃``, as built by
            ``blackjax.sgmcmc.gradients.grad_estimator(logprior_fn, loglikelihood_fn,
            data_size)`` (or its control-variates variant).
        data_size: n, the training-set size the estimator was built with; the kernel is bound to
            it (pSGLD's statistic ∇Ũ/n, h = √(ℓ/n) and γ = (1 − β)√(n/ℓ) for a learning rate).
        logdensity_estimator: ``(position, minibatch) -> log p̃``, e.g.
            ``blackjax.sgmcmc.gradients.logdensity_estimator(...)`` with the same arguments;
            required by kernels whose recipe reads the energy Ũ (NNSGHMC), unused otherwise.

    Returns:
        A ``blackjax.base.SamplingAlgorithm``. Its ``init(position, rng_key=None)`` returns the
            position itself for a kernel with no auxiliary variables and no gradient history
            (SGLD), else a :class:`BlackJAXState`; ``rng_key`` is needed where the kernel draws
            its initial momentum (``init_momentum="sample"``). Its ``step(rng_key, state,
            minibatch, step_size=None, temperature=1.0)`` returns the next state.

    Raises:
        ImportError: BlackJAX is not installed.
        TypeError: ``kernel`` is not a bdl kernel, or an estimator is not callable.
        ValueError: ``kernel`` is a wrapper, or ``data_size`` is not an int >= 1.

    Examples:
        >>> import blackjax, jax, jax.numpy as jnp
        >>> import bdl
        >>> x = jnp.linspace(-1.0, 1.0, 20); y = 2.0 * x
        >>> grad_fn = blackjax.sgmcmc.gradients.grad_estimator(
        ...     lambda w: -0.5 * w**2,                          # log-prior
        ...     lambda w, xy: -0.5 * (xy[1] - w * xy[0]) ** 2,  # log-likelihood of one datum
        ...     data_size=20)
        >>> sgnht = bdl.kernels.as_blackjax(bdl.kernels.get("sgnht"), grad_fn, 20)
        >>> state = sgnht.init(jnp.zeros(()))
        >>> state = sgnht.step(jax.random.key(0), state, (x[:5], y[:5]), 1e-2)
        >>> sorted(state.auxiliary)
        ['r', 'xi']
    """
    try:
        from blackjax.base import SamplingAlgorithm
    except ImportError as exc:
        raise ImportError(
            f"as_blackjax needs BlackJAX ({REQUIREMENT}), an optional dependency of bdl: "
            "pip install 'bdl-sgmcmc[bench]' (or pip install blackjax)."
        ) from exc
    kernel = _recipe_kernel(kernel)
    if not callable(grad_estimator):
        raise TypeError(
            "as_blackjax: grad_estimator must be a function (position, minibatch) -> gradient "
            "of the log-density, e.g. blackjax.sgmcmc.gradients.grad_estimator(logprior_fn, "
            f"loglikelihood_fn, data_size); got {type(grad_estimator).__name__}."
        )
    if logdensity_estimator is not None and not callable(logdensity_estimator):
        raise TypeError(
            "as_blackjax: logdensity_estimator must be a function (position, minibatch) -> "
            "log-density, e.g. blackjax.sgmcmc.gradients.logdensity_estimator(logprior_fn, "
            f"loglikelihood_fn, data_size), or None; got {type(logdensity_estimator).__name__}."
        )
    if not isinstance(data_size, int | np.integer) or isinstance(data_size, bool) or data_size < 1:
        raise ValueError(
            "as_blackjax: data_size must be an int >= 1, the number of training examples the "
            f"gradient estimator was built with; got {data_size!r}."
        )
    kernel = kernel.bind(_Target(int(data_size)))
    stepper = _Stepper(kernel, grad_estimator, logdensity_estimator)
    return SamplingAlgorithm(stepper.init, stepper.step)


def _recipe_kernel(kernel: Any) -> RecipeKernel:
    arguments.instance(
        kernel, Kernel, "as_blackjax: kernel must be a bdl kernel, e.g. bdl.kernels.get('sgld')"
    )
    if not isinstance(kernel, RecipeKernel):
        raise ValueError(
            f"as_blackjax: kernel {kernel.name!r} is a wrapper ({type(kernel).__name__}) whose "
            "step sizes, temperatures or extra moves depend on the step count or the compiled "
            "model, which a BlackJAX step does not see; in a BlackJAX loop the loop supplies "
            "them. Pass the recipe kernel inside it, kernel.recipe_kernel(), and give each "
            "step its step_size and temperature."
        )
    return kernel


class _Stepper:
    """``init`` and ``step`` of one bound kernel (:func:`as_blackjax`)."""

    def __init__(
        self,
        kernel: RecipeKernel,
        grad_estimator: Callable[[PyTree, PyTree], PyTree],
        logdensity_estimator: Callable[[PyTree, PyTree], jax.Array] | None,
    ) -> None:
        self.kernel = kernel
        self.grad_estimator = grad_estimator
        self.logdensity_estimator = logdensity_estimator
        self._reads_energy: dict[Any, bool] = {}

    # ------------------------------------------------------------------------------ state
    def _bare(self, position: PyTree) -> bool:
        """Whether the state is the position itself: no auxiliary group, no history."""
        no_aux = set(self.kernel.recipe.groups) == {"theta"}
        return no_aux and not jax.tree.leaves(self.kernel.history.init(position))

    def _to_recipe(self, state: Any) -> RecipeState:
        if isinstance(state, BlackJAXState):
            return RecipeState({"theta": state.position, **state.auxiliary}, state.history)
        if not self._bare(state):
            raise ValueError(
                f"as_blackjax({self.kernel.name}): state must be the BlackJAXState that init "
                "returned (this kernel keeps auxiliary variables or gradient history beside the "
                "position); got a bare position."
            )
        return RecipeState({"theta": state}, self.kernel.history.init(state))

    @staticmethod
    def _from_recipe(state: RecipeState, bare: bool) -> Any:
        if bare:
            return state.z["theta"]
        aux = {k: v for k, v in state.z.items() if k != "theta"}
        return BlackJAXState(state.z["theta"], aux, state.history)

    # ------------------------------------------------------------------------------ init
    def init(self, position: PyTree, rng_key: jax.Array | None = None) -> Any:
        """The initial state at ``position`` (a bare position or a :class:`BlackJAXState`)."""
        if rng_key is None:
            if _depends_on_first(
                lambda key, pos: self.kernel.init(pos, key), jax.random.key(0), position
            ):
                raise ValueError(
                    f"as_blackjax({self.kernel.name}): init draws the initial auxiliary "
                    "variables (init_momentum='sample'); pass init(position, rng_key)."
                )
            rng_key = jax.random.key(0)  # not read by this kernel's init
        state = self.kernel.init(position, rng_key)
        self._check_energy(state)
        return self._from_recipe(state, self._bare(position))

    # ------------------------------------------------------------------------------ step
    def step(
        self,
        rng_key: jax.Array,
        state: Any,
        minibatch: PyTree,
        step_size: Any = None,
        temperature: Any = 1.0,
    ) -> Any:
        """The next state after one step on ``minibatch`` at (h, T)."""
        h = self._step_size(step_size)
        if isinstance(temperature, int | float):
            arguments.number(
                temperature, f"as_blackjax({self.kernel.name}): temperature", at_least=0.0
            )
        bare = not isinstance(state, BlackJAXState)
        rstate = self._to_recipe(state)
        reads_energy = self._check_energy(rstate)

        def energy_and_grad(theta: PyTree) -> tuple[jax.Array, PyTree]:
            grad = jax.tree.map(jnp.negative, self.grad_estimator(theta, minibatch))
            if reads_energy:
                energy = -self.logdensity_estimator(theta, minibatch)
            else:  # read by no part of the move (checked): Info's energy only
                energy = jnp.zeros((), jnp.result_type(*jax.tree.leaves(grad)))
            return energy, grad

        new, _ = self.kernel.step(rng_key, rstate, energy_and_grad, h, temperature)
        return self._from_recipe(new, bare)

    def _step_size(self, step_size: Any) -> Any:
        name = self.kernel.name
        if step_size is not None:
            if isinstance(step_size, int | float):
                arguments.number(step_size, f"as_blackjax({name}): step_size", above=0.0)
            return step_size
        own = self.kernel.step_size
        if own is None:
            raise ValueError(
                f"as_blackjax({name}): the kernel has no step size of its own (bdl.sample adapts "
                "it in burn-in); pass step_size to each step, as to blackjax.sgld's step."
            )
        if callable(own):
            raise ValueError(
                f"as_blackjax({name}): the kernel's step size is a schedule t -> h_t and a "
                "BlackJAX step has no step counter; pass step_size=h_t to each step."
            )
        return own

    def _check_energy(self, state: RecipeState) -> bool:
        """Whether the move reads Ũ (traced once per state shape); ``ValueError`` when it does
        and no ``logdensity_estimator`` was given."""
        leaves, treedef = jax.tree.flatten(state)
        signature = (treedef, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves))
        if signature not in self._reads_energy:

            def move(energy: jax.Array, s: RecipeState, h: Any, temp: Any) -> RecipeState:
                grad = jax.tree.map(jnp.zeros_like, s.z["theta"])
                return self.kernel.step(jax.random.key(0), s, lambda _: (energy, grad), h, temp)[0]

            self._reads_energy[signature] = _depends_on_first(
                move, jnp.zeros(()), state, jnp.ones(()), jnp.ones(())
            )
        reads = self._reads_energy[signature]
        if reads and self.logdensity_estimator is None:
            raise ValueError(
                f"as_blackjax({self.kernel.name}): this kernel's recipe reads the energy "
                "estimate Ũ(θ), which a gradient estimator does not give; pass "
                "logdensity_estimator=blackjax.sgmcmc.gradients.logdensity_estimator(logprior_fn, "
                "loglikelihood_fn, data_size) with the grad_estimator's arguments."
            )
        return reads


def _abstract(tree: PyTree) -> PyTree:
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), tree)


def _depends_on_first(fn: Callable[..., Any], first: Any, *rest: Any) -> bool:
    """Whether any output of ``fn(first, *rest)`` depends on ``first``, read from its jaxpr
    (traced on shapes only; a higher-order primitive other than a plain call counts every output
    as dependent on any dependent input)."""
    closed = jax.make_jaxpr(fn)(_abstract(first), *(_abstract(r) for r in rest))
    count = len(jax.tree.leaves(_abstract(first)))
    flags = _flow(closed.jaxpr, [True] * count + [False] * (len(closed.jaxpr.invars) - count))
    return any(flags)


def _flow(jaxpr: Any, dependent: list[bool]) -> list[bool]:
    """Which outputs of ``jaxpr`` depend on the inputs flagged in ``dependent``."""
    marked = {v for v, d in zip(jaxpr.invars, dependent, strict=True) if d}

    def hit(v: Any) -> bool:
        return isinstance(v, jex.Var) and v in marked

    for eqn in jaxpr.eqns:
        flags = [hit(v) for v in eqn.invars]
        if not any(flags):
            continue
        inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        inner = getattr(inner, "jaxpr", inner)
        if isinstance(inner, jex.Jaxpr) and len(inner.invars) == len(flags):
            out = _flow(inner, flags)
        else:
            out = [True] * len(eqn.outvars)
        marked.update(v for v, d in zip(eqn.outvars, out, strict=True) if d)
    return [hit(v) for v in jaxpr.outvars]
