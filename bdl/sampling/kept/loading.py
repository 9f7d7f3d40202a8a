"""``bdl.load_samples``: the :class:`Samples` of a samples file (:mod:`bdl.sampling.kept.reading`)
or of a directory a streamed run wrote (:mod:`bdl.sampling.kept.stream`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bdl.sampling.kept import stream
from bdl.sampling.kept.reading import read_samples
from bdl.sampling.samples import Samples

PyTree = Any


def load_samples(path: str | os.PathLike, *, like: PyTree | None = None) -> Samples:
    """The :class:`Samples` saved at ``path`` by :meth:`Samples.save`.

    Args:
        path: a ``.npz`` or ``.nc`` file written by ``Samples.save`` (or ``bdl sample --out``),
            or a directory that ``bdl.sample(..., stream_to=DIR)`` wrote (its parts are joined;
            :func:`bdl.sampling.kept.stream.iter_parts` reads them one at a time).
        like: a pytree with the positions' structure, e.g. ``compiled.initial_position``.
            Dicts, lists, tuples and named tuples are restored from the file alone; other pytree
            nodes (an Equinox module's parameters) cannot be rebuilt without their class and are
            restored as dicts by attribute name, unless ``like`` gives the structure: then the
            positions and every tree saved with their structure (``extra`` such as the
            Entropy-MCMC guide, an adapted mass) get ``like``'s.

    Returns:
        The :class:`Samples` as they were saved: positions with their ``(chain, draw)`` axes,
            the run's ``info``, ``extra``, ``meta``, convergence and evaluation.

    Raises:
        FileNotFoundError: no file at ``path``.
        SamplesFileError: (a ``ValueError``) the file is truncated or corrupt, not a bdl samples
            file, of a newer format than this bdl reads, or its suffix is not .npz or .nc.

    Examples:
        A run saved to ``.nc`` and read back, the draws bit for bit:

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
        >>> import tempfile, pathlib
        >>> import numpy as np
        >>> kernel = bdl.kernels.get("sghmc", step_size=0.01)
        >>> samples = bdl.sample(compiled, kernel, num_steps=60, burn_in=20, num_chains=2)
        >>> path = samples.save(pathlib.Path(tempfile.mkdtemp()) / "run.nc")
        >>> loaded = bdl.load_samples(path)
        >>> loaded.positions["net"]["w"].shape
        (2, 40, 2)
        >>> bool(np.array_equal(loaded.positions["net"]["w"], samples.positions["net"]["w"]))
        True
    """
    file = Path(path)
    if stream.is_stream(file):
        return stream.load_stream(file, like=like)
    return read_samples(path, like=like)
