r"""How far a method's confidences can be trusted: expected calibration error, Brier score, reliability table.

A posterior row ``proba[i]`` (K,) is *calibrated* when, among the tasks
given confidence :math:`c = \max_k p_{ik}`, a share :math:`c` is right.
Measured against known truth:

* **ECE** (expected calibration error) with ``n_bins`` **equal-mass**
  bins: the tasks sorted by confidence (ties kept in task order: a stable
  sort) and cut into ``n_bins`` runs of equal count (sizes differing by at
  most one, :func:`numpy.array_split`), then

  .. math:: \mathrm{ECE} = \sum_b \frac{n_b}{N}\,\bigl|\mathrm{acc}_b - \mathrm{conf}_b\bigr|

  with :math:`\mathrm{acc}_b` the share of bin b whose predicted class (the
  argmax, or the labels given) is the truth and :math:`\mathrm{conf}_b` its
  mean confidence.  Equal-mass bins (Nixon et al., *Measuring calibration
  in deep learning*, CVPR-W 2019) keep every bin populated where crowd
  posteriors pile up near 1, which equal-width bins do not; 15 bins is the
  usual count (Guo et al., ICML 2017).
* **Brier score**: :math:`\frac1N \sum_i \sum_k (p_{ik} - 1[k = y_i])^2`
  (multiclass; 0 is perfect, 2 the worst).
* **reliability table**: per bin its size, confidence range, mean
  confidence and accuracy -- what a reliability diagram draws.

Numpy only; shapes: ``proba`` (N, K) rows summing to 1, ``truth`` (N,)
class indices in ``[0, K)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError

__all__ = ["Calibration", "ReliabilityBin", "brier_score", "calibration", "expected_calibration_error"]

#: The number of equal-mass bins of the ECE and the reliability table.
N_BINS = 15


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of the reliability table: its tasks' count, confidence range, mean confidence and accuracy."""

    count: int
    low: float
    high: float
    confidence: float
    accuracy: float


@dataclass(frozen=True)
class Calibration:
    """ECE, Brier score and the reliability table of one set of posteriors against the truth."""

    ece: float
    brier: float
    bins: tuple[ReliabilityBin, ...]
    n_bins: int


def _checked(proba: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(proba, dtype=np.float64)
    y = np.asarray(truth)
    if p.ndim != 2 or y.ndim != 1 or len(p) != len(y):
        raise DataError(f"calibration needs posteriors (N, K) and N true classes; got {p.shape} and {y.shape}")
    if not np.isfinite(p).all():
        raise DataError("calibration: the posteriors hold NaN or inf")
    if len(y) and (y.min() < 0 or y.max() >= p.shape[1]):
        raise DataError(f"calibration: a true class index is outside [0, {p.shape[1]})")
    return p, y.astype(np.int64)


def reliability_bins(proba: np.ndarray, truth: np.ndarray, n_bins: int = N_BINS,
                     predicted: np.ndarray | None = None) -> tuple[ReliabilityBin, ...]:
    """The equal-mass reliability table: ``n_bins`` bins (fewer when there are fewer tasks), in rising confidence.

    ``predicted`` (N,) class indices: the labels scored (default the
    argmax of each row; pass a method's own labels when its ties were drawn).
    """
    p, y = _checked(proba, truth)
    if n_bins < 1:
        raise DataError(f"calibration: n_bins must be at least 1, got {n_bins}")
    if not len(y):
        return ()
    conf = p.max(axis=1)
    pred = p.argmax(axis=1) if predicted is None else np.asarray(predicted, dtype=np.int64)
    right = (pred == y).astype(np.float64)
    order = np.argsort(conf, kind="stable")
    out = []
    for idx in np.array_split(order, min(n_bins, len(y))):
        c = conf[idx]
        out.append(ReliabilityBin(len(idx), float(c.min()), float(c.max()), float(c.mean()),
                                  float(right[idx].mean())))
    return tuple(out)


def expected_calibration_error(proba: np.ndarray, truth: np.ndarray, n_bins: int = N_BINS,
                               predicted: np.ndarray | None = None) -> float:
    """ECE over ``n_bins`` equal-mass bins (see the module's docstring); 0.0 for no tasks."""
    bins = reliability_bins(proba, truth, n_bins, predicted)
    n = sum(b.count for b in bins)
    return float(sum(b.count * abs(b.accuracy - b.confidence) for b in bins) / n) if n else 0.0


def brier_score(proba: np.ndarray, truth: np.ndarray) -> float:
    """The multiclass Brier score: mean over tasks of Σ_k (p_k - 1[k = truth])²; 0.0 for no tasks."""
    p, y = _checked(proba, truth)
    if not len(y):
        return 0.0
    sq = (p ** 2).sum(axis=1) - 2.0 * p[np.arange(len(y)), y] + 1.0
    return float(sq.mean())


def calibration(proba: np.ndarray, truth: np.ndarray, n_bins: int = N_BINS,
                predicted: np.ndarray | None = None) -> Calibration:
    """ECE, Brier score and reliability table in one call."""
    bins = reliability_bins(proba, truth, n_bins, predicted)
    n = sum(b.count for b in bins)
    ece = float(sum(b.count * abs(b.accuracy - b.confidence) for b in bins) / n) if n else 0.0
    return Calibration(ece, brier_score(proba, truth), bins, n_bins)
