"""Elementwise MLPs: the meta-learned part of NNSGHMC, L2E and Kinetic-L2E, and their files.

A learned sampler applies one tiny MLP to a feature vector per coordinate, for every coordinate of
a parameter pytree at once (Andrychowicz et al. 2016; Gong et al. 2019; Kim et al. 2024): each
coordinate i of each leaf gets features (x₁ᵢ, …, x_Fᵢ) — a feature is a θ-shaped pytree or a
global scalar broadcast to every coordinate — and the MLP maps them to ``out`` numbers. The cost is
O(d·H) for d coordinates and H hidden units, with no coupling between coordinates.

Meta-parameters of a learned kernel are a ``dict[str, ElementwiseMLP]``; they are saved to and
loaded from ``.npz`` files (:func:`save_meta_params`, :func:`load_meta_params`) that need no code
to rebuild the networks. Trained parameters shipped with the package live in
``bdl/kernels/meta_params/<kernel>.npz`` and are picked up by :func:`resolve_meta_params`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

PyTree = Any
MetaParams = dict[str, "ElementwiseMLP"]

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "softplus": jax.nn.softplus,
    "swish": jax.nn.swish,
}

#: the seed of the random meta-parameters used when none are given and none are shipped
DEFAULT_SEED = 0


class ElementwiseMLP(eqx.Module):
    """An MLP ``in → hidden… → out`` applied independently to every coordinate.

    ``weights[k]`` has shape (fan_in, fan_out) and ``biases[k]`` (fan_out,); the activation follows
    every layer but the last. Build one with :func:`init_mlp`.

    Args:
        weights: the weight matrices, input layer first.
        biases: the bias vectors, one per layer.
        activation: the activation's name (``"tanh"``, ``"relu"``, …).
    """

    weights: tuple[jax.Array, ...]
    biases: tuple[jax.Array, ...]
    activation: str = eqx.field(static=True, default="tanh")

    def __check_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}; got {self.activation!r}."
            )
        if len(self.weights) != len(self.biases) or not self.weights:
            raise ValueError("weights and biases must be non-empty and of equal length.")

    @property
    def in_features(self) -> int:
        return int(self.weights[0].shape[0])

    @property
    def out_features(self) -> int:
        return int(self.weights[-1].shape[1])

    @property
    def sizes(self) -> tuple[int, ...]:
        return (self.in_features, *(int(w.shape[1]) for w in self.weights))

    def __call__(self, x: jax.Array) -> jax.Array:
        """Features ``(..., in)`` to outputs ``(..., out)``."""
        return self._layers(self._first(list(jnp.moveaxis(x, -1, 0))))

    def _first(self, inputs: Sequence[Any]) -> jax.Array:
        """First layer as Σ_k W_k·x_k + b, hidden units leading: ``(hidden, *coordinates)``.

        Scalars broadcast without materialising a feature array; with the coordinates on the
        minor axis the elementwise work vectorises and later layers are (out × in)·(in × N)
        matrix products.
        """
        w = self.weights[0]
        shape = jnp.broadcast_shapes(*(jnp.shape(x) for x in inputs))
        expand = (slice(None),) + (None,) * len(shape)
        acc = self.biases[0][expand]
        for k, x in enumerate(inputs):
            acc = acc + w[k][expand] * jnp.asarray(x)
        return acc

    def after_first_layer(self, pre: jax.Array) -> jax.Array:
        """The network from its first layer's pre-activations ``(hidden, *coordinates)`` (its
        first affine map Σ_k W_k·x_k + b computed by the caller) to ``(*coordinates, out)``.

        Args:
            pre: the first layer's pre-activations ``(hidden, *coordinates)``.

        Returns:
            The outputs ``(*coordinates, out)``.
        """
        return self._layers(pre)

    def _layers(self, h: jax.Array) -> jax.Array:
        """Hidden layers and the output layer on ``(units, *coordinates)``; returns
        ``(*coordinates, out)``."""
        act = ACTIVATIONS[self.activation]
        for w, b in zip(self.weights[1:], self.biases[1:], strict=True):
            h = jnp.tensordot(w, act(h), axes=(0, 0)) + b[(slice(None),) + (None,) * (h.ndim - 1)]
        return jnp.moveaxis(h, 0, -1)

    def _layers_with_partials(self, h: jax.Array, partials: jax.Array) -> tuple[jax.Array, ...]:
        """:meth:`_layers` carrying K input partials: ``h`` is ``(units, *coordinates)`` and
        ``partials`` ``(units, K, *coordinates)`` (or broadcastable), the first layer's ∂h/∂x_j.

        The chain rule through an elementwise network is local: ∂a/∂x_j = act'(h)·∂h/∂x_j, then
        a linear layer maps values and partials alike. Values and partials are stacked on one
        axis so that each layer is ONE matrix product over (1 + K)·N columns, and act' comes from
        the same forward pass (a JVP of the activation on a ones tangent). Returns
        ``(*coordinates, out)`` values and ``(*coordinates, out, K)`` partials.
        """
        act = ACTIVATIONS[self.activation]
        shape = jnp.broadcast_shapes(jnp.shape(h)[1:], jnp.shape(partials)[2:])
        h = jnp.broadcast_to(h, jnp.shape(h)[:1] + shape)
        for w, b in zip(self.weights[1:], self.biases[1:], strict=True):
            a, slope = jax.jvp(act, (h,), (jnp.ones_like(h),))
            stacked = jnp.concatenate([a[:, None], slope[:, None] * partials], axis=1)
            out = jnp.tensordot(w, stacked, axes=(0, 0))
            h = out[:, 0] + b[(slice(None),) + (None,) * (h.ndim - 1)]
            partials = out[:, 1:]
        return jnp.moveaxis(h, 0, -1), jnp.moveaxis(partials, (0, 1), (-2, -1))

    def _one_hidden_layer_with_partials(
        self, inputs: Sequence[Any], wrt: tuple[int, ...]
    ) -> tuple[list[jax.Array], list[list[jax.Array]]]:
        """Values and partials of a network with one hidden layer, written unit by unit:

            hⱼ = b₀ⱼ + Σₘ W₀ₘⱼ·xₘ,   outₖ = b₁ₖ + Σⱼ W₁ⱼₖ·act(hⱼ),
            ∂outₖ/∂xₘ = Σⱼ W₁ⱼₖ·W₀ₘⱼ·act'(hⱼ).

        Every term is elementwise in the coordinates, so XLA compiles the network into loop
        fusions that keep the hidden units in registers: no ``(units, N)`` array is written and
        read back, which is what a small network's matrix products cost on a CPU (the work is
        memory-bound; the activations may be recomputed in each consumer, which costs less).
        Returns lists over outputs, and over ``wrt`` then outputs, shaped like the inputs.
        """
        act = ACTIVATIONS[self.activation]
        (w0, w1), (b0, b1) = self.weights, self.biases
        units, n_out = int(w0.shape[1]), int(w1.shape[1])
        outs: list[Any] = [b1[k] for k in range(n_out)]
        partials: list[list[Any]] = [[0.0] * n_out for _ in wrt]
        for j in range(units):
            h = b0[j]
            for m, x in enumerate(inputs):
                h = h + w0[m, j] * x
            a, slope = jax.jvp(act, (h,), (jnp.ones_like(h),))
            for k in range(n_out):
                outs[k] = outs[k] + w1[j, k] * a
                for row, m in zip(partials, wrt, strict=True):
                    row[k] = row[k] + w1[j, k] * (w0[m, j] * slope)
        shape = jnp.broadcast_shapes(*(jnp.shape(x) for x in inputs))
        return (
            [jnp.broadcast_to(o, shape) for o in outs],
            [[jnp.broadcast_to(p, shape) for p in row] for row in partials],
        )

    def map_tree(self, *inputs: Any) -> tuple[PyTree, ...]:
        """Apply to per-coordinate features given as θ-shaped pytrees or global scalars.

        Output k at coordinate i is MLP(x₁ᵢ, …, x_Fᵢ)_k.

        Args:
            *inputs: the F features, θ-shaped pytrees or scalars.

        Returns:
            ``out_features`` pytrees shaped like the (first) pytree input.
        """
        flat, unflatten = self._flatten(inputs)
        out = self._layers(self._first(flat))
        return tuple(unflatten(out[..., k]) for k in range(self.out_features))

    def map_tree_with_partials(
        self, *inputs: Any, wrt: Sequence[int]
    ) -> tuple[tuple[PyTree, ...], tuple[tuple[PyTree, ...], ...]]:
        """:meth:`map_tree` and the partial derivatives of its outputs in the inputs ``wrt``.

        The network acts on each coordinate alone, so its Jacobian in a pytree input is diagonal
        and ∂outₖ,ᵢ/∂xⱼ,ᵢ is all there is; for a global scalar input xⱼ the partial is still one
        number per coordinate. One forward pass computes all of them: no Jacobian, no reverse
        pass, and for a 1-input network value and derivative cost one stacked pass instead of a
        forward and a backward one. A network with one hidden layer is written out unit by unit
        instead.

        Args:
            *inputs: the F features, θ-shaped pytrees or scalars.
            wrt: the indices of the inputs to differentiate in.

        Returns:
            ``(outputs, partials)`` with ``partials[m][k]`` = ∂outₖ/∂x_{wrt[m]}, each shaped like
                the outputs.
        """
        wrt = tuple(int(j) for j in wrt)
        if not wrt or any(j < 0 or j >= self.in_features for j in wrt):
            raise ValueError(
                f"wrt must name inputs 0..{self.in_features - 1} of this MLP; got {wrt}."
            )
        flat, unflatten = self._flatten(inputs)
        if len(self.weights) == 2:
            out, d_out = self._one_hidden_layer_with_partials(flat, wrt)
            return (
                tuple(unflatten(o) for o in out),
                tuple(tuple(unflatten(d) for d in d_m) for d_m in d_out),
            )
        h = self._first(flat)
        first = self.weights[0][jnp.asarray(wrt)].T  # (units, K): ∂h/∂x_j of the first layer
        partials = first[(...,) + (None,) * (h.ndim - 1)]
        out, d_out = self._layers_with_partials(h, partials)
        outputs = tuple(unflatten(out[..., k]) for k in range(self.out_features))
        grads = tuple(
            tuple(unflatten(d_out[..., k, m]) for k in range(self.out_features))
            for m in range(len(wrt))
        )
        return outputs, grads

    def _flatten(self, inputs: Sequence[Any]) -> tuple[list[Any], Callable[[jax.Array], PyTree]]:
        """Inputs as one flat vector per pytree feature (scalars kept), and the map from a flat
        per-coordinate array back to the (first) pytree input's structure.

        With several leaves the leaves are concatenated, so the network appears once in the
        compiled program, not once per leaf (compile time independent of the number of leaves).
        """
        if len(inputs) != self.in_features:
            raise ValueError(f"this MLP takes {self.in_features} features; got {len(inputs)}.")
        ref = next((x for x in inputs if not _is_scalar(x)), None)
        if ref is None:
            return list(inputs), lambda out: out
        leaves, treedef = jax.tree.flatten(ref)
        if len(leaves) == 1:
            flat = [x if _is_scalar(x) else treedef.flatten_up_to(x)[0] for x in inputs]
            return flat, lambda out: jax.tree.unflatten(treedef, [out])
        flat = [
            x
            if _is_scalar(x)
            else jnp.concatenate([jnp.ravel(v) for v in treedef.flatten_up_to(x)])
            for x in inputs
        ]
        splits = [int(s) for s in np.cumsum([int(np.size(v)) for v in leaves])[:-1]]

        def unflatten(out: jax.Array) -> PyTree:
            parts = jnp.split(out, splits, axis=0)
            return jax.tree.unflatten(
                treedef, [p.reshape(jnp.shape(v)) for p, v in zip(parts, leaves, strict=True)]
            )

        return flat, unflatten


def _is_scalar(x: Any) -> bool:
    return isinstance(x, int | float) or (
        hasattr(x, "shape") and x.shape == () and not isinstance(x, dict | list | tuple)
    )


def init_mlp(
    key: jax.Array,
    sizes: Sequence[int],
    *,
    activation: str = "tanh",
    final_scale: float = 1.0,
) -> ElementwiseMLP:
    """Random MLP with layer sizes ``(in, hidden…, out)``: LeCun-normal weights N(0, 1/fan_in),
    zero biases, the last layer's weights multiplied by ``final_scale`` (0 gives a zero output)."""
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must be (in, hidden..., out) with positive entries; got {sizes}.")
    if not math.isfinite(final_scale) or final_scale < 0:
        raise ValueError(f"final_scale must be a finite number >= 0; got {final_scale}.")
    keys = jax.random.split(key, len(sizes) - 1)
    weights, biases = [], []
    for i, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:], strict=True)):
        w = jax.random.normal(k, (fan_in, fan_out)) / math.sqrt(fan_in)
        if i == len(sizes) - 2:
            w = w * final_scale
        weights.append(w)
        biases.append(jnp.zeros((fan_out,), w.dtype))
    return ElementwiseMLP(tuple(weights), tuple(biases), activation)


# ------------------------------------------------------------------------- meta-parameter files
def save_meta_params(
    path: str | os.PathLike, kernel_or_params: Any, *, metadata: dict[str, Any] | None = None
) -> Path:
    """Write a kernel's meta-parameters (or a ``dict[str, ElementwiseMLP]``) to an ``.npz`` file.

    The file holds every weight and bias as float arrays plus a JSON header with the activations,
    so :func:`load_meta_params` rebuilds the networks without any code or skeleton. ``metadata``
    (JSON-serialisable) goes into the header too, read back by :func:`load_meta_metadata`; a
    kernel whose recipe has ``file_metadata()`` (NNSGHMC: its input statistics) adds that.

    Args:
        path: the ``.npz`` file to write.
        kernel_or_params: a learned kernel (nnsghmc, l2e, kinetic-l2e) or its networks by name.
        metadata: JSON-serialisable data to store with them.

    Returns:
        The path written.
    """
    params = getattr(kernel_or_params, "meta_params", kernel_or_params)
    _validate_params(params)
    recipe = getattr(kernel_or_params, "recipe", None)
    own = recipe.file_metadata() if hasattr(recipe, "file_metadata") else {}
    metadata = {**own, **(metadata or {})}
    reserved = {"format", "networks"} & set(metadata)
    if reserved:
        raise ValueError(f"metadata must not use the header keys {sorted(reserved)}.")
    arrays: dict[str, np.ndarray] = {}
    header = {"format": "bdl-meta-params-1", "networks": {}, **metadata}
    for name, mlp in params.items():
        header["networks"][name] = {"activation": mlp.activation, "layers": len(mlp.weights)}
        for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases, strict=True)):
            arrays[f"{name}/w{i}"] = np.asarray(w)
            arrays[f"{name}/b{i}"] = np.asarray(b)
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, __header__=np.asarray(json.dumps(header)), **arrays)
    return path


def load_meta_params(path: str | os.PathLike) -> MetaParams:
    """Read meta-parameters written by :func:`save_meta_params`.

    Args:
        path: the ``.npz`` file.

    Returns:
        The networks by name, as ``dict[str, ElementwiseMLP]``.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a bdl meta-parameter file.
    """
    with _open_meta_file(path) as (header, data):
        params = {}
        for name, spec in header["networks"].items():
            n = int(spec["layers"])
            params[name] = ElementwiseMLP(
                tuple(jnp.asarray(data[f"{name}/w{i}"]) for i in range(n)),
                tuple(jnp.asarray(data[f"{name}/b{i}"]) for i in range(n)),
                spec["activation"],
            )
    return params


def load_meta_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``metadata`` a file written by :func:`save_meta_params` carries (``{}`` if none).

    Args:
        path: the ``.npz`` file.

    Returns:
        The metadata, a dict.

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    with _open_meta_file(path) as (header, _):
        return {k: v for k, v in header.items() if k not in ("format", "networks")}


@contextlib.contextmanager
def _open_meta_file(path: str | os.PathLike) -> Iterator[tuple[dict[str, Any], Any]]:
    """The JSON header and the open arrays of a file written by :func:`save_meta_params`;
    ``FileNotFoundError`` without a file, ``ValueError`` for a file without the header."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no meta-parameter file at {path}.")
    with np.load(path, allow_pickle=False) as data:
        if "__header__" not in data:
            raise ValueError(f"{path} is not a bdl meta-parameter file (no header).")
        yield json.loads(str(data["__header__"])), data


def shipped_meta_params_path(kernel_name: str) -> Path | None:
    """``bdl/kernels/meta_params/<kernel_name>.npz`` if the package ships trained parameters."""
    try:
        candidate = resources.files("bdl.kernels").joinpath("meta_params", f"{kernel_name}.npz")
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover - broken install
        return None
    return Path(str(candidate)) if candidate.is_file() else None


def resolve_meta_params(
    kernel_name: str,
    meta_params: Any,
    seed: int | None,
    random_init: Callable[[int], MetaParams],
    expected: dict[str, tuple[int, int]] | None = None,
) -> MetaParams:
    """The meta-parameters a learned kernel uses, in order of precedence:

    1. ``meta_params``: a ``dict[str, ElementwiseMLP]`` or the path of a saved file;
    2. ``seed``: random initial meta-parameters ``random_init(seed)``;
    3. the parameters shipped in ``bdl/kernels/meta_params/<kernel_name>.npz``, if present;
    4. ``random_init(DEFAULT_SEED)``.

    With ``expected`` (network name → (inputs, outputs)) the architecture is checked
    (:func:`check_architecture`).
    """
    params = _resolve(kernel_name, meta_params, seed, random_init)
    if expected is not None:
        check_architecture(kernel_name, params, expected)
    return params


def _resolve(
    kernel_name: str, meta_params: Any, seed: int | None, random_init: Callable[[int], MetaParams]
) -> MetaParams:
    if meta_params is not None and seed is not None:
        raise ValueError(f"{kernel_name}: give meta_params or seed, not both.")
    if isinstance(meta_params, str | os.PathLike):
        return load_meta_params(meta_params)
    if meta_params is not None:
        _validate_params(meta_params)
        return dict(meta_params)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise TypeError(f"{kernel_name}: seed must be an integer; got {seed!r}.")
        return random_init(int(seed))
    shipped = shipped_meta_params_path(kernel_name)
    if shipped is not None:
        return load_meta_params(shipped)
    return random_init(DEFAULT_SEED)


def check_architecture(
    kernel_name: str, params: MetaParams, expected: dict[str, tuple[int, int]]
) -> None:
    """Raise ``ValueError`` naming ``meta_params`` unless ``params`` has exactly the networks of
    ``expected`` (name → (in_features, out_features))."""
    _validate_params(params)
    if set(params) != set(expected):
        raise ValueError(
            f"{kernel_name}: meta_params must have networks {sorted(expected)}; "
            f"got {sorted(params)}."
        )
    for name, (n_in, n_out) in expected.items():
        mlp = params[name]
        if (mlp.in_features, mlp.out_features) != (n_in, n_out):
            raise ValueError(
                f"{kernel_name}: meta_params[{name!r}] must map {n_in} features to {n_out} "
                f"outputs; got {mlp.in_features} → {mlp.out_features}."
            )


def _validate_params(params: Any) -> None:
    if not isinstance(params, dict) or not all(
        isinstance(k, str) and isinstance(v, ElementwiseMLP) for k, v in params.items()
    ):
        raise TypeError(
            "meta_params must be a dict of name -> ElementwiseMLP (or the path of a file "
            f"written by save_meta_params); got {type(params).__name__}."
        )
