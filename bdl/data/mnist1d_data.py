"""MNIST-1D (Greydanus 2020, "Scaling down deep learning", arXiv:2011.14439), generated offline.

The ``mnist1d`` package builds each example from one of ten hand-drawn 1-D templates (12 points)
by random padding, dilation, scaling, a circular translation, correlated and i.i.d. noise and a
shear, then interpolates it to 40 samples; the whole set is standardised by its global mean and
standard deviation. With the package's defaults (5,000 examples, 80 % train) that gives the
standard 4,000 / 1,000 split of 40-dimensional signals in 10 balanced classes.

Only the generator is used (``mnist1d.data.make_dataset``); the package's ``get_dataset`` would
try to download a pickle, and nothing here ever does. The generator seeds NumPy's and Python's
global random state; :func:`mnist1d` restores both afterwards, so loading the data does not change
the draws of unrelated code.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

from bdl.data.dataset import Dataset
from bdl.utils import arguments
from bdl.utils.cache import cache_dir
from bdl.utils.files import atomic_path

__all__ = ["mnist1d"]

#: the length of every generated signal (the package's ``final_seq_length``)
SIGNAL_LENGTH = 40
#: the bump of this file's format: cached arrays from another format are regenerated
_FORMAT = 1


def mnist1d(
    seed: int = 42,
    num_samples: int = 5000,
    train_split: float = 0.8,
    cache: bool | str | os.PathLike[str] = True,
) -> Dataset:
    """The MNIST-1D signals: ``x`` of shape ``(n, 40)`` (float32), labels 0…9 (int32).

    Args:
        seed: seed of the generator (42 is the package's default). The same seed always gives
            the same arrays.
        num_samples: examples in total (train + test), a multiple of 10 (equal counts per class).
        train_split: fraction of the (shuffled) examples that form the training split.
        cache: ``True`` keeps the generated arrays in bdl's cache directory
            (``$BDL_CACHE_DIR``, else ``~/.cache/bdl``) under ``data/``, a directory to keep them
            there instead, ``False`` to generate them every time (≈ 1–3 s).

    Returns:
        A :class:`Dataset` named ``"mnist1d"`` with ``num_classes=10``.
    """
    seed = arguments.seed(seed)
    num_samples = arguments.integer(num_samples, "num_samples", minimum=10)
    if num_samples % 10:
        raise ValueError(
            f"num_samples must be a multiple of 10 (equal counts of the 10 classes); got "
            f"{num_samples}."
        )
    train_split = arguments.number(train_split, "train_split", above=0.0, below=1.0)
    n_train = int(num_samples * train_split)
    if not 0 < n_train < num_samples:
        raise ValueError(
            f"train_split={train_split:g} of num_samples={num_samples} leaves an empty split."
        )
    path = _cache_path(cache, seed, num_samples, train_split)
    if path is not None and path.is_file():
        with np.load(path) as stored:
            arrays = {k: stored[k] for k in ("x", "y", "x_test", "y_test")}
    else:
        arrays = _generate(seed, num_samples, train_split)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                np.savez(f, **arrays)
    return Dataset(
        "mnist1d",
        arrays["x"],
        arrays["y"],
        arrays["x_test"],
        arrays["y_test"],
        num_classes=10,
    )


def _cache_path(
    cache: bool | str | os.PathLike[str], seed: int, num_samples: int, train_split: float
) -> Path | None:
    if cache is False:
        return None
    if cache is True:
        root = cache_dir() / "data"
    elif isinstance(cache, str | os.PathLike):
        root = Path(cache)
    else:
        raise TypeError(f"cache must be True, False or a directory; got {arguments.shown(cache)}.")
    name = f"mnist1d-v{_FORMAT}-seed{seed}-n{num_samples}-train{train_split:.6g}.npz"
    return root / name


def _generate(seed: int, num_samples: int, train_split: float) -> dict[str, np.ndarray]:
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError as err:
        raise ImportError("bdl.data.mnist1d needs the mnist1d package: pip install mnist1d") from (
            err
        )

    args = get_dataset_args()
    args.seed, args.num_samples, args.train_split = seed, num_samples, train_split
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        raw = make_dataset(args)
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    return {
        "x": np.asarray(raw["x"], np.float32),
        "y": np.asarray(raw["y"], np.int32),
        "x_test": np.asarray(raw["x_test"], np.float32),
        "y_test": np.asarray(raw["y_test"], np.int32),
    }
