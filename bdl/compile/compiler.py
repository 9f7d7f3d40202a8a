"""``bdl.compile``: lower a declared model and its data to a compiled target."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bdl.augment.base import as_augmentation, check_augmentation
from bdl.compile import bounds, gradient_check
from bdl.compile.checks import (
    as_dataset,
    check_batch_size,
    check_data,
    check_output,
    check_params,
    check_potential,
    targets,
)
from bdl.compile.compiled_model import CompiledModel
from bdl.compile.compiled_potential import CompiledPotential
from bdl.compile.data_fields import as_field_dataset, check_log_prob, dataset_fields
from bdl.compile.observations import check_starting_values, observations_only
from bdl.compile.prior_checks import check_priors
from bdl.compile.support import check_observed
from bdl.dsl.hierarchical import hyper_groups
from bdl.dsl.model import Model
from bdl.dsl.network import NetworkStateError, make_adapter
from bdl.dsl.no_network import starting_values
from bdl.dsl.potential import Potential
from bdl.dsl.priors import LeafInfo
from bdl.dsl.temperature import as_schedule
from bdl.utils import arguments
from bdl.utils.dtypes import as_float, float_dtype
from bdl.utils.trees import path_to_str

#: how the hidden-gradient check is turned off, in its message
SWITCH = "bdl.compile(..., check_gradient=False)"


def compile(
    model: Model | Potential,
    data: Any = None,
    *,
    batch_size: int | None = None,
    seed: int = 0,
    augment: Any = None,
    check_gradient: bool = True,
) -> CompiledModel | CompiledPotential:
    """Compile a declaration into pure JAX functions (energy, stochastic gradient, predictive…).

    Args:
        model: a :class:`bdl.Model` (needs ``data``) or a :class:`bdl.Potential` (no data).
        data: a :class:`bdl.data.Dataset`, a tuple ``(x, y)`` / ``(x, y, x_test, y_test)``, or a
            dict ``{"x": x, "y": y, name: per-example array, …}`` whose further keys are data
            fields a likelihood reads (``bdl.Gaussian(scale="sigma")``).
        batch_size: minibatch size B, 1 ≤ B ≤ n; ``None`` uses full-batch gradients.
        seed: seed of the network's first initialisation.
        augment: data augmentation of the minibatches, ``augment(key, x) -> x`` on one example
            (:mod:`bdl.augment`), when the model does not declare one itself.
        check_gradient: check, at the start position, that the autodiff gradient sees how the
            energy changes (:mod:`bdl.compile.gradient_check`); ``False`` skips it, for an
            energy whose gradient is meant to miss part of it.

    All checks (shapes, labels, NaN/inf, batch size, output shape vs likelihood) run here, before
    anything is compiled, and raise ``ValueError``/``TypeError`` naming the argument.

    Returns:
        A :class:`bdl.CompiledModel` for a model, a :class:`bdl.CompiledPotential` for a
            potential: the energy U(θ), the minibatch energy and gradient at full-data scale,
            predictions, NumPyro's ``potential_fn`` and the initial positions.

    Raises:
        ValueError: data missing, malformed or not finite, a batch size outside 1..n, targets
            outside the likelihood's support, a network output that does not fit the
            likelihood, or a gradient that does not see how the energy changes (rounding, an
            integer cast, ``jax.lax.stop_gradient`` in the network).
        TypeError: ``model`` is not a :class:`bdl.Model` or :class:`bdl.Potential`, data of
            the wrong kind, or ``check_gradient`` not a bool.

    Examples:
        >>> import jax.numpy as jnp
        >>> import bdl
        >>> from bdl.data import linear_regression
        >>> model = bdl.Model(
        ...     network=lambda params, x: x @ params["w"],
        ...     params={"w": jnp.zeros(2)},
        ...     likelihood=bdl.Gaussian(scale=0.5),
        ...     prior=bdl.Normal(1.0),
        ... )
        >>> data = linear_regression(n=50, dim=2, n_test=10)
        >>> compiled = bdl.compile(model, data, batch_size=10)
        >>> compiled.n, compiled.batch_size, compiled.dim
        (50, 10, 2)
        >>> bool(compiled.energy(compiled.initial_position) > 0)
        True
    """
    seed = arguments.seed(seed, "compile(seed=...)")
    if not isinstance(check_gradient, bool):
        raise TypeError(
            f"compile(check_gradient=...) must be True or False; got {check_gradient!r}."
        )
    if isinstance(model, Potential):
        if data is not None:
            raise ValueError("compile(potential, data=...): a Potential takes no data.")
        if augment is not None:
            raise ValueError("compile(potential, augment=...): a Potential has no data to augment.")
        init = model.init
        start = init(jax.random.key(seed)) if callable(init) else init
        check_potential(model, start)
        compiled = CompiledPotential(
            initial_position=jax.tree.map(lambda a: jnp.asarray(a, float_dtype()), start),
            n=1,
            name=model.name,
            potential=model,
            temperature_schedule=as_schedule(model.temperature),
        )
        if check_gradient:
            gradient_check.check_gradient(compiled, SWITCH)
        return compiled
    if not isinstance(model, Model):
        raise TypeError(
            f"compile() needs a bdl.Model or bdl.Potential; got {type(model).__name__}."
        )
    if data is None:
        raise ValueError("compile(model, data=...): a Model needs training data.")

    augment = as_augmentation(augment, "compile(augment=...)")
    if augment is not None and model.augment is not None:
        raise ValueError(
            "compile(augment=...) was given for a model that declares its own augmentation "
            f"(Model(augment={model.augment!r})); give it in one place only."
        )
    augment = model.augment if augment is None else augment
    without_network = model.network is None
    if without_network:
        data = observations_only(data)
    dataset = as_field_dataset(data) if isinstance(data, dict) else as_dataset(data)
    check_data(dataset)
    n = dataset.n
    batch_size = check_batch_size(batch_size, n)
    regression = model.likelihood.task == "regression"
    dtype = float_dtype()  # float32, or float64 in JAX's 64-bit mode (docs/precision.md)
    x = np.asarray(dataset.x_train, dtype)
    x_test = None if dataset.x_test is None else np.asarray(dataset.x_test, dtype)
    y = targets(model.likelihood, dataset.y_train, "y_train")
    y_test = None if dataset.y_test is None else targets(model.likelihood, dataset.y_test, "y_test")

    if augment is not None:
        check_augmentation(augment, x[0], "augment")
    if model.params is not None and not callable(model.params) and not without_network:
        check_params(model.params)
    try:
        adapter = make_adapter(
            model.network,
            jnp.asarray(x[:2]),
            params=None if without_network else model.params,
            batched=model.batched,
            key=jax.random.key(seed),
        )
    except NetworkStateError:
        raise
    except Exception as err:  # e.g. a linen module whose initialisation rejects the inputs
        raise ValueError(
            f"the network cannot be initialised on inputs of shape {x.shape[1:]} (per example): "
            f"{type(err).__name__}: {err}"
        ) from err
    try:
        out = jax.eval_shape(adapter.apply, adapter.params, jnp.asarray(x[: min(n, 2)]))
    except Exception as err:  # the network rejected the inputs: say which argument is at fault
        raise ValueError(
            f"the network cannot be applied to inputs of shape {x.shape[1:]} (per example): "
            f"{type(err).__name__}: {err}"
        ) from None
    check_output(out)
    out_shape = (n, *out.shape[1:]) if out.shape and out.shape[0] == min(n, 2) else out.shape
    # check the labels as converted above (integer-valued float labels are accepted as ints)
    model.likelihood.check(tuple(out_shape), y)
    fields_train, fields_test = dataset_fields(model.likelihood, dataset)
    check_log_prob(model.likelihood, out, y, fields_train)
    check_observed(model.likelihood, out, y, "y_train", fields_train, "fields")
    if y_test is not None:
        check_observed(model.likelihood, out, y_test, "y_test", fields_test, "fields_test")
    num_classes = None
    if not regression:
        num_classes = dataset.num_classes
        if num_classes is None:  # (x, y) tuples carry no class count: read it off the predictive
            num_classes = int(jax.eval_shape(model.likelihood.mean, out).shape[-1])

    flat, treedef = jax.tree_util.tree_flatten_with_path(adapter.params)
    input_axis = 0 if adapter.fan_in_axes == "leading" else 1
    infos = tuple(
        LeafInfo("net/" + path_to_str(p), tuple(np.shape(v)), adapter.fan_in(v), input_axis)
        for p, v in flat
    )
    priors = tuple(model.prior.resolve(info) for info in infos)
    check_priors(model, infos, priors)  # arguments, supports, event shapes: before any tracing
    hyper = hyper_groups(priors)

    compiled = CompiledModel(
        x_train=jnp.asarray(x),
        y_train=jnp.asarray(y),
        x_test=None if x_test is None else jnp.asarray(x_test),
        y_test=None if y_test is None else jnp.asarray(y_test),
        initial_position=None,
        n=n,
        batch_size=batch_size,
        name=model.name if model.name != "model" else dataset.name,
        num_classes=num_classes,
        model=model,
        adapter=adapter,
        leaf_infos=infos,
        leaf_priors=priors,
        net_treedef=treedef,
        hyper_groups=hyper,
        temperature_schedule=as_schedule(model.temperature),
        augment=augment,
        fields_train={k: jnp.asarray(v, dtype) for k, v in fields_train.items()},
        fields_test=None
        if fields_test is None
        else {k: jnp.asarray(v, dtype) for k, v in fields_test.items()},
    )
    if without_network:
        lik = starting_values(model.likelihood, model.params)
        check_starting_values(model.likelihood, lik)
        position = compiled.unconstrain(adapter.params, lik)
    else:
        position = compiled.unconstrain(adapter.params)
    compiled = _replace_initial(compiled, as_float(position, dtype))
    bounds.check(compiled)  # bounds that read other parameters: names, cycles, shapes
    if check_gradient:
        gradient_check.check_gradient(compiled, SWITCH)
    return compiled


def _replace_initial(compiled: CompiledModel, position: Any) -> CompiledModel:
    return eqx.tree_at(
        lambda c: c.initial_position, compiled, position, is_leaf=lambda x: x is None
    )
