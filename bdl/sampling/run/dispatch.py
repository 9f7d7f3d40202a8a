"""Chains over devices without partitioning: each device runs the one-device program on its block.

Under ``jax.shard_map`` XLA compiles one program partitioned over the mesh's devices, and on the
CPU that program can round some computations (warm-up's curvature and dense linear algebra)
differently from the program compiled for a single device. :func:`per_device` instead calls a
jitted one-device function once per device, with that device's block of chains committed to it
(and its own copy of everything shared), so every device runs exactly the program one device
would run on those chains. JAX dispatches each call asynchronously, so the devices run
concurrently; the outputs are assembled into arrays split over the mesh's chain axis (or
replicated on it), as ``shard_map`` returns them.

Cost: the one-device program is traced once, but XLA compiles it once per device (an
executable is bound to the device it was compiled for).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from bdl.sampling.run.layout import CHAIN, DATA
from bdl.utils.identity_map import WeakIdentityMap


def chain_devices(mesh: Mesh) -> list[jax.Device]:
    """The devices of ``mesh``'s chain axis, in the order of the blocks of chains they hold
    (a mesh whose data axis has one device)."""
    if mesh.shape.get(DATA, 1) != 1:
        raise ValueError("per-device dispatch runs chains only: the mesh has a data axis.")
    return list(mesh.devices.reshape(-1))


def blocks(tree: Any, mesh: Mesh) -> list[Any]:
    """``tree`` (arrays with a leading chain axis) as one block of chains per device of
    ``mesh``'s chain axis, each block on its device (a shard of an array already split over the
    chain axis is taken as it is, not copied)."""
    devices = chain_devices(mesh)
    split = NamedSharding(mesh, P(CHAIN))

    def shards(a: Any) -> list[Any]:
        placed = jax.device_put(a, split)
        on = {s.device: s.data for s in placed.addressable_shards}
        return [on[d] for d in devices]

    leaves, treedef = jax.tree.flatten(tree)
    per_leaf = [shards(a) for a in leaves]
    return [treedef.unflatten([s[i] for s in per_leaf]) for i in range(len(devices))]


#: each object's copies, by device, while it lives (:func:`copy_to`)
_copies: WeakIdentityMap[dict[jax.Device, Any]] = WeakIdentityMap()


def copy_to(tree: Any, device: jax.Device) -> Any:
    """``tree`` with its JAX arrays on ``device`` (other leaves, NumPy arrays included, as they
    are: a jitted call places them with its committed arguments).

    An object that takes a weak reference (a target, a kernel: immutable modules) is copied once
    per device while it lives, and later calls get the same copy: its arrays are not copied
    again, and a jitted function that keeps its programs per first argument
    (:func:`bdl.utils.owner_jit.owner_jit`) sees the same owner at every call, not a new one
    released after each. Anything else (a tuple, arrays a call donates) is copied each call."""
    held = _copies.get(tree)
    if held is not None and device in held:
        return held[device]
    on = lambda x: isinstance(x, jax.Array)  # noqa: E731
    dynamic, static = eqx.partition(tree, on)
    copy = eqx.combine(jax.device_put(dynamic, device), static)
    if held is None:
        held = {}
        _copies.remember(tree, held)
    held[device] = copy
    return copy


def assemble(outputs: list[Any], mesh: Mesh, out_specs: Any) -> Any:
    """The devices' ``outputs`` (one per device of the chain axis, in order) as arrays over
    ``mesh``: where ``out_specs`` (a prefix of the outputs' tree) is ``P("chain")`` the blocks
    are joined along the leading axis, split over the chain axis; where it is ``P()`` the
    devices' copies (equal) make one replicated array."""
    devices = chain_devices(mesh)

    def join(spec: Any, *parts: Any) -> Any:
        if spec is None:
            return None
        split = spec == P(CHAIN)
        if not split and spec != P():
            raise ValueError(f"per-device dispatch: out_specs P(chain) or P(), not {spec}")
        sharding = NamedSharding(mesh, P(CHAIN) if split else P())

        def one(*xs: jax.Array) -> jax.Array:
            shape = (xs[0].shape[0] * len(xs), *xs[0].shape[1:]) if split else xs[0].shape
            xs = [jax.device_put(x, d) for x, d in zip(xs, devices, strict=True)]
            return jax.make_array_from_single_device_arrays(shape, sharding, xs)

        return jax.tree.map(one, *parts)

    return jax.tree.map(join, out_specs, *outputs, is_leaf=lambda x: x is None or isinstance(x, P))


def per_device(
    fn: Callable[[int, tuple, Any], Any],
    mesh: Mesh,
    shared: tuple,
    chains: Any,
    out_specs: Any,
) -> Any:
    """``fn(first, shared, block)`` on each device of ``mesh``'s chain axis, assembled.

    ``block`` is the device's block of ``chains`` (leading chain axis), ``first`` the index of
    its first chain in ``chains``, and ``shared`` is copied to the device element by element
    (:func:`copy_to`). ``fn`` should call a jitted one-device function, so that each call
    compiles (once per device) and runs on the device its committed arguments are on; calls
    return before their device finishes, so the devices run concurrently. Returns the outputs
    as :func:`assemble` joins them by ``out_specs``. ``fn`` may donate the blocks of
    ``chains``, and arrays of ``shared`` inside a tuple or list (copied afresh each call), not
    an element of ``shared`` that :func:`copy_to` keeps."""
    devices = chain_devices(mesh)
    size = jax.tree.leaves(chains)[0].shape[0] // len(devices)
    # every block and copy is taken before a call can donate one
    parts = blocks(chains, mesh)
    copies = [tuple(copy_to(x, d) for x in shared) for d in devices]
    outputs = [fn(i * size, *args) for i, args in enumerate(zip(copies, parts, strict=True))]
    return assemble(outputs, mesh, out_specs)
