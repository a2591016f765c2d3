"""Synthetic features for a simulated crowd: class-conditional Gaussian mixtures with a controllable separation.

For a trainer (``crowdagg train``) a crowd needs features: each task's
vector is drawn from its true class's Gaussian,

.. math::

    x_n \\mid y_n = k \\;\\sim\\; \\mathcal N(\\mu_k, I_d), \\qquad
    \\mu_k = \\tfrac{s}{\\sqrt 2}\\, u_k,

with ``u_1 .. u_K`` orthonormal directions drawn at random (K <= d), so
every pair of class means is exactly ``s`` apart (``separation``): the
Bayes error between two classes is ``Φ(-s/2)`` (s = 3: 6.7 %; s = 5:
0.6 %), and a linear classifier is the right model.  The seeds' scenarios
use images (MNIST, CIFAR-10); a Gaussian mixture of known separation is
the controllable stand-in the tests and benchmarks need (its Bayes
accuracy is known, and features of any dimension cost nothing to draw).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..core.checks import check_float, check_int, check_seed
from ..errors import UsageError, param


def gaussian_features(truth: np.ndarray, n_classes: int, *, dim: int = 64, separation: float = 3.0,
                      seed: int = 0) -> np.ndarray:
    """Features (n_tasks, dim) float32 for tasks of true classes ``truth`` (n_tasks,) in ``0 .. n_classes-1``.

    ``separation``: the distance between any two class means, in units of
    the noise's standard deviation.  Draws from ``np.random.default_rng(seed)``.
    """
    dim = check_int("dim", dim, 1, 1 << 20)
    n_classes = check_int("n_classes", n_classes, 1, 1 << 15)
    separation = check_float("separation", separation, 0.0, 1e6)
    seed = check_seed(seed)
    truth = np.asarray(truth)
    if truth.ndim != 1 or (truth.size and (truth.min() < 0 or truth.max() >= n_classes)):
        raise UsageError(f"{param('truth')} must be class indices in 0..{n_classes - 1}")
    if n_classes > dim:
        raise UsageError(f"{param('dim')}={dim}: {n_classes} classes need at least {n_classes} feature dimensions "
                         "for equidistant class means")
    rng = np.random.default_rng(seed)
    directions, _ = np.linalg.qr(rng.standard_normal((dim, n_classes)))  # orthonormal columns
    means = (separation / np.sqrt(2.0)) * directions.T  # (K, d): pairwise distance exactly `separation`
    x = rng.standard_normal((truth.size, dim))
    x += means[truth]
    return x.astype(np.float32)


#: The file beside the features that lists their rows' task ids (what ``crowdagg train --tasks`` reads by default).
TASKS_FILE = "tasks.txt"


def feature_files(truth: np.ndarray, task_names: list[str], n_classes: int, path: str | os.PathLike[str], *,
                  outdir: str | os.PathLike[str], dim: int = 64, separation: float = 3.0, seed: int = 0,
                  max_memory: Any = None) -> list[tuple[Path, bytes]]:
    """The files of ``crowdagg simulate --features PATH``: the features as ``.npy`` and ``tasks.txt`` beside them.

    ``PATH`` (a ``.npy`` file) holds :func:`gaussian_features` of ``truth``
    (n_tasks,), row ``i`` the task ``task_names[i]``; ``tasks.txt`` in the
    same directory lists those names, one a line, so that ``crowdagg train
    --features PATH`` finds its rows' tasks (and ``labels.csv`` beside them
    when ``PATH`` is in the crowd's ``outdir``).  A ``tasks.txt`` outside
    ``outdir`` that exists and lists other tasks is refused rather than
    overwritten (it belongs to other features).  The features draw from
    their own stream (``seed`` mixed with a constant): the crowd's draws do
    not change.  Returns (path, bytes) pairs for
    :meth:`~crowdagg.simulate.crowd.SimulatedCrowd.write`'s ``extra``.
    """
    from ..core import memory

    target = Path(os.fspath(path))
    if target.suffix.lower() != ".npy":
        raise UsageError(f"{param('features')} must name a .npy file (the features' rows, tasks.txt beside them), "
                         f"got {os.fspath(path)!r}")
    dim = check_int("dim", dim, 1, 1 << 20)
    memory.check(8.0 * len(task_names) * dim, f"{len(task_names):,} tasks × {dim:,} features", max_memory,
                 f"use a smaller {param('feature_dim')}")
    stream = int(np.random.SeedSequence([check_seed(seed), 0xFEA7]).generate_state(1)[0])
    x = gaussian_features(truth, n_classes, dim=dim, separation=separation, seed=stream)
    buffer = io.BytesIO()
    np.save(buffer, x, allow_pickle=False)
    listing = "".join(f"{t}\n" for t in task_names).encode()
    beside = target.parent / TASKS_FILE
    if beside.exists() and not _same_dir(target.parent, Path(os.fspath(outdir))):
        try:
            same = beside.read_bytes() == listing
        except OSError:
            same = False
        if not same:
            raise UsageError(f"{beside} exists and lists other tasks: it belongs to other features; write the "
                             f"features into the output directory ({os.fspath(outdir)}) or another directory")
    return [(target, buffer.getvalue()), (beside, listing)]


def _same_dir(a: Path, b: Path) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)
