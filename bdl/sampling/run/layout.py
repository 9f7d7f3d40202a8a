"""Where a run's chains and minibatches live: a device mesh with a ``chain`` and a ``data`` axis.

``bdl.sample`` places the chains along the mesh's ``chain`` axis: each device advances its own
block of chains, and nothing is communicated between them. Every per-chain key is derived from
the seed before the chains are split over devices (``split(key, num_chains)[c]`` is chain c's
key on any layout), so a chain has the same start, random numbers and minibatches on any
layout. Under ``vmap`` XLA compiles a device's step for its number of chains, which can change
the rounding; with the chains in turn every device runs the same per-chain program
(:func:`bdl.sampling.run.program.in_turn`), and on a mesh of chains only each device is given the
one-device program for its block of chains rather than a share of one partitioned program
(:mod:`bdl.sampling.run.dispatch`), so that the run is bitwise one device's (docs/scaling.md).

The optional ``data`` axis splits every minibatch: with D devices on it, device d evaluates the
minibatch energy on its share B_d of |B|/D examples, at full-data scale,

    Ũ_d(θ) = −(n/|B_d|) Σ_{i∈B_d} log p(y_i | x_i, θ) − log p(θ),

and the devices average: (1/D) Σ_d Ũ_d(θ) = −(n/|B|) Σ_{i∈B} log p(y_i | x_i, θ) − log p(θ) = Ũ(θ),
the one-device minibatch energy (docs/design.md, *Energy*), and likewise for ∇Ũ — the
likelihood gradient summed over the devices' shares, the prior's counted once. Only the order
of the float additions differs from one device, so draws agree to float reassociation, not
bitwise.

Across processes (``jax.distributed``) each process runs a contiguous block of the chains on
its own devices. Chains never communicate, so no collective crosses a process boundary: a
process neither waits for the others nor needs their devices, and each writes its own draws
(:func:`bdl.merge_samples` joins them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from bdl.compile.batching import next_indices
from bdl.utils.arguments import shown

if TYPE_CHECKING:
    from bdl.compile.compiled_model import CompiledModel

CHAIN = "chain"
DATA = "data"
AXES = (CHAIN, DATA)


def make_mesh(
    chains: int | None = None, data: int = 1, devices: Sequence[jax.Device] | None = None
) -> Mesh:
    """A ``(chain, data)`` mesh of ``chains × data`` devices for :func:`bdl.sample` (``mesh=``).

    Args:
        chains: devices along the chain axis (default: all of ``devices`` not on the data axis).
        data: devices each minibatch is split across (default 1: no split).
        devices: the devices to use (default: this process's, ``jax.local_devices()``).

    Returns:
        The ``jax.sharding.Mesh`` with axes ``("chain", "data")``.

    Raises:
        ValueError: ``chains × data`` is not the number of devices given.
    """
    devices = list(jax.local_devices() if devices is None else devices)
    data = _count(data, "data")
    if chains is None:
        if len(devices) % data:
            raise ValueError(
                f"make_mesh: data={data} does not divide the {len(devices)} devices; give a "
                f"divisor of {len(devices)}: {_divisors(len(devices))}."
            )
        chains = len(devices) // data
    chains = _count(chains, "chains")
    if chains * data > len(devices):
        raise ValueError(
            f"make_mesh: chains × data = {chains} × {data} = {chains * data} devices, but only "
            f"{len(devices)} are available; give chains × data <= {len(devices)}."
        )
    return Mesh(np.array(devices[: chains * data], dtype=object).reshape(chains, data), AXES)


@dataclasses.dataclass(frozen=True)
class Layout:
    """A run's placement: the mesh (``None``: one device, as without sharding) and the block of
    chains ``[start, stop)`` of the run's ``num_chains`` that this process runs."""

    mesh: Mesh | None
    start: int
    stop: int
    num_chains: int

    @property
    def chain_devices(self) -> int:
        return 1 if self.mesh is None else int(self.mesh.shape[CHAIN])

    @property
    def data_devices(self) -> int:
        return 1 if self.mesh is None else int(self.mesh.shape[DATA])

    @property
    def local_chains(self) -> int:
        return self.stop - self.start

    @property
    def processes(self) -> int:
        return self.num_chains // self.local_chains

    def describe(self) -> dict[str, Any]:
        """The layout as JSON for ``Samples.meta``."""
        return {
            "chain_devices": self.chain_devices,
            "data_devices": self.data_devices,
            "processes": self.processes,
            "chains": [self.start, self.stop],
        }

    def select(self, tree: Any) -> Any:
        """This process's chains of ``tree`` (leading axis: all ``num_chains``)."""
        if self.local_chains == self.num_chains:
            return tree
        return jax.tree.map(lambda a: a[self.start : self.stop], tree)

    def shard(self, tree: Any) -> Any:
        """``tree`` (leading axis: this process's chains) split over the chain axis."""
        if self.mesh is None:
            return tree
        return jax.device_put(tree, NamedSharding(self.mesh, P(CHAIN)))

    def replicate(self, tree: Any) -> Any:
        """``tree`` on every device of the mesh."""
        if self.mesh is None:
            return tree
        return jax.device_put(tree, NamedSharding(self.mesh, P()))

    def place(self, tree: Any) -> Any:
        """This process's chains of ``tree``, split over the chain axis."""
        return self.shard(self.select(tree))

    def per_chain(
        self, fn: Callable[..., Any], shared: Any, chains: Any, out_specs: Any = None
    ) -> Any:
        """``fn(shared, chains)`` with each device given its block of ``chains`` (leading chain
        axis) and all of ``shared`` (targets, kernels, step counters); inside ``fn`` a model
        target evaluates its minibatches split over the data axis. ``out_specs``: where the
        outputs' chain axis is (default: leading). Call it under ``jit``."""
        if self.mesh is None:
            return fn(shared, chains)
        out_specs = P(CHAIN) if out_specs is None else out_specs
        from bdl.compile.compiled_model import CompiledModel  # numpyro: imported on use

        dynamic, static = eqx.partition(shared, eqx.is_array)
        data = self.data_devices

        def body(dynamic: Any, chains: Any) -> Any:
            shared = eqx.combine(dynamic, static)
            if data > 1:
                shared = jax.tree.map(
                    lambda x: DataShare(x, data) if isinstance(x, CompiledModel) else x,
                    shared,
                    is_leaf=lambda x: isinstance(x, CompiledModel),
                )
            return fn(shared, chains)

        # check_vma=False: a vmapped minibatch stream is varying in one branch of its epoch
        # ``cond`` only; nothing here needs the check (chains never communicate, the data axis
        # only averages)
        return jax.shard_map(
            body, mesh=self.mesh, in_specs=(P(), P(CHAIN)), out_specs=out_specs, check_vma=False
        )(dynamic, chains)


class DataShare(eqx.Module):
    """A compiled model seen from one device of the data axis: its minibatch is the device's
    share of the one-device minibatch, and its energy and gradient the average over the axis of
    the shares' full-data-scale estimates, which is the one-device estimate (module docstring)."""

    model: CompiledModel
    shares: int = eqx.field(static=True)

    def __getattr__(self, name: str) -> Any:  # everything else is the model's
        return getattr(self.model, name)

    def temperature(self, step: jax.Array) -> jax.Array:
        return self.model.temperature(step)

    def init_batches(self, key: jax.Array) -> Any:
        return self.model.init_batches(key)

    def next_batch(self, stream: Any, step: jax.Array) -> tuple[Any, Any]:
        model = self.model
        size = model.batch_size // self.shares
        offset = jax.lax.axis_index(DATA) * size
        if model.batch_size == model.n:
            take = lambda a: jax.lax.dynamic_slice_in_dim(a, offset, size)  # noqa: E731
            return (take(model.x_train), take(model.y_train)), stream
        idx, stream = next_indices(stream, step, model.n, model.batch_size)
        idx = jax.lax.dynamic_slice_in_dim(idx, offset, size)
        return (model.x_train[idx], model.y_train[idx]), stream

    def stochastic_energy_and_grad(self, position: Any, batch: Any) -> tuple[jax.Array, Any]:
        dynamic, static = eqx.partition(self.model, eqx.is_array)
        return _averaged(position, batch, dynamic, static)


@eqx.filter_custom_jvp
def _averaged(position: Any, batch: Any, model: Any, static: Any) -> tuple[jax.Array, Any]:
    return _mean_energy_and_grad(position, batch, model, static)


@_averaged.def_jvp
def _averaged_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    # the energy's tangent is written with the averaged gradient, the same on every device, so
    # that reverse mode (warm-up differentiates the energy) transposes no collective
    position, batch, model, static = primals
    dx = tangents[0]
    mean = partial(_mean_energy_and_grad, batch=batch, model=model, static=static)
    if dx is None:
        energy, grad = mean(position)
        return (energy, grad), (jnp.zeros_like(energy), jax.tree.map(jnp.zeros_like, grad))
    (energy, grad), (_, d_grad) = jax.jvp(mean, (position,), (dx,))
    pairs = zip(jax.tree.leaves(grad), jax.tree.leaves(dx), strict=True)
    d_energy = sum(jnp.vdot(g, d) for g, d in pairs)
    return (energy, grad), (d_energy, d_grad)


def _mean_energy_and_grad(
    position: Any, batch: Any, model: Any, static: Any
) -> tuple[jax.Array, Any]:
    """The average over the data axis of the devices' (Ũ_d, ∇Ũ_d)."""
    energy, grad = eqx.combine(model, static).stochastic_energy_and_grad(position, batch)
    return jax.lax.pmean((energy, grad), DATA)


def resolve(
    target: Any,
    num_chains: int,
    devices: Any = None,
    mesh: Any = None,
) -> Layout:
    """The run's :class:`Layout` from ``devices=`` / ``mesh=``, checked before anything compiles.

    Default: one device for a single chain; otherwise every local device on the chain axis.
    With several processes (``jax.distributed``), each runs ``num_chains / processes`` chains.
    """
    processes, index = jax.process_count(), jax.process_index()
    if mesh is not None and devices is not None:
        raise ValueError(
            "sample: give devices= or mesh=, not both (a mesh already names its devices)."
        )
    if mesh is not None:
        mesh = _check_mesh(mesh)
    else:
        local = jax.local_devices()
        if devices is None:
            chosen = local if num_chains > 1 or processes > 1 else local[:1]
        elif isinstance(devices, bool) or not isinstance(devices, int | np.integer | Sequence):
            raise TypeError(
                f"devices must be a number of devices or a list of jax devices; got "
                f"{shown(devices)}."
            )
        elif isinstance(devices, int | np.integer):
            if devices < 1 or devices > len(local):
                raise ValueError(
                    f"devices={int(devices)}: this process has {len(local)} "
                    f"{local[0].platform} device(s); give 1 to {len(local)}."
                )
            chosen = local[: int(devices)]
        else:
            chosen = list(devices)
            if not chosen or not all(isinstance(d, jax.Device) for d in chosen):
                raise TypeError(
                    "devices must be a number of devices or a non-empty list of jax devices "
                    f"(jax.local_devices()); got {shown(devices)}."
                )
            foreign = [d for d in chosen if d not in local]
            if foreign:
                raise ValueError(
                    f"devices: {foreign} are not this process's devices; with jax.distributed "
                    "each process runs its chains on its own devices (jax.local_devices())."
                )
        mesh = Mesh(np.array(chosen, dtype=object).reshape(len(chosen), 1), AXES)
    chain_devices, data_devices = int(mesh.shape[CHAIN]), int(mesh.shape[DATA])
    per_process = chain_devices * processes
    if num_chains % per_process:
        where = f"{chain_devices} device(s)" + (
            f" in each of {processes} processes" if processes > 1 else ""
        )
        working = ", ".join(str(per_process * k) for k in range(1, 5))
        fewer = _divisors(num_chains, chain_devices) if processes == 1 else []
        hint = f", or run on {fewer} devices (devices=)" if fewer else ""
        raise ValueError(
            f"num_chains={num_chains} cannot be split evenly over {where} along the chain axis: "
            f"give num_chains a multiple of {per_process} ({working}, …){hint}."
        )
    if data_devices > 1:
        from bdl.compile.compiled_model import CompiledModel

        batch = getattr(target, "batch_size", None)
        if not isinstance(target, CompiledModel):
            raise ValueError(
                "a data axis splits a model's minibatches across devices; "
                f"{type(target).__name__} has no minibatch of examples. Use a mesh without one."
            )
        if batch % data_devices:
            raise ValueError(
                f"batch_size={batch} cannot be split over the {data_devices} devices of the "
                f"data axis: give bdl.compile(batch_size=) a multiple of {data_devices}, or a "
                f"data axis of {_divisors(batch, data_devices)} devices."
            )
    per_chunk = num_chains // processes
    start = index * per_chunk
    if chain_devices * data_devices == 1:
        mesh = None  # one device: the plain program, as without sharding
    return Layout(mesh, start, start + per_chunk, num_chains)


def _check_mesh(mesh: Any) -> Mesh:
    """``mesh`` as a 2-D ``(chain, data)`` mesh of this process's devices."""
    if not isinstance(mesh, Mesh):
        raise TypeError(
            "mesh must be a jax.sharding.Mesh with axes named 'chain' and/or 'data' (e.g. "
            f"bdl.make_mesh(chains=2, data=2)); got {shown(mesh)}."
        )
    names = tuple(mesh.axis_names)
    unknown = [n for n in names if n not in AXES]
    if unknown or not names:
        raise ValueError(
            f"mesh has axes {names}; bdl.sample uses axes named 'chain' (chains split over "
            "devices) and 'data' (each minibatch split over devices): rename "
            f"{unknown or names}, e.g. bdl.make_mesh(chains=2, data=2)."
        )
    local = set(jax.local_devices())
    if any(d not in local for d in mesh.devices.flat):
        raise ValueError(
            "mesh holds devices of other processes; with jax.distributed each process runs its "
            "chains on a mesh of its own devices (jax.local_devices())."
        )
    devices = mesh.devices
    for axis in AXES:
        if axis not in names:
            devices = devices[..., None]
            names = (*names, axis)
    order = [names.index(axis) for axis in AXES]
    return Mesh(np.transpose(devices, order), AXES)


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"make_mesh: {name} must be an integer; got {shown(value)}.")
    if value < 1:
        raise ValueError(f"make_mesh: {name} must be >= 1; got {value}.")
    return int(value)


def _divisors(n: int, at_most: int | None = None) -> list[int]:
    top = n if at_most is None else min(n, at_most)
    return [k for k in range(1, top + 1) if n % k == 0]
