r"""How far a method's confidences can be trusted: expected calibration error, Brier score, reliability table.

A posterior row ``proba[i]`` (K,) is *calibrated* when, among the tasks
given confidence :math:`c = \max_k p_{ik}`, a share :math:`c` is right.
Where the labels scored are given (``predicted``: a method's own labels, or
the ``label`` column of a predictions file), a task's confidence is the
posterior of *its* label, :math:`c_i = p_{i,\hat y_i}`: what is scored is
the claim "this label is right with probability c".  Measured against known
truth:

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
from typing import Any

import numpy as np

from ..core.checks import PROBA_ROUNDING, PROBA_SUM_TOLERANCE
from ..errors import DataError
from ..kernels.validate import as_code_array, as_float_array

__all__ = ["Calibration", "ReliabilityBin", "brier_score", "calibration", "check_posterior_rows", "confidence_bins", "confidence_calibration",
           "expected_calibration_error", "reliability_bins"]

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
    #: None where only each label's confidence is known (no posterior row: the Brier score needs every class's)
    brier: float | None
    bins: tuple[ReliabilityBin, ...]
    n_bins: int


def _checked(proba: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(proba), np.asarray(truth)
    if p.ndim != 2 or y.ndim != 1 or len(p) != len(y):
        raise DataError(f"calibration needs posteriors (N, K) and N true classes; got {p.shape} and {y.shape}")
    p = as_float_array(p, "calibration: the posteriors", 2)  # (text or complex: refused, not cast)
    y = as_code_array(y, "calibration: the true class")  # (a float class 0.5 was truncated to 0)
    if not np.isfinite(p).all():
        raise DataError("calibration: the posteriors hold NaN or inf")
    check_posterior_rows(p, lambda i: f"calibration: posterior row {i}")
    if len(y) and (y.min() < 0 or y.max() >= p.shape[1]):
        raise DataError(f"calibration: a true class index is outside [0, {p.shape[1]})")
    return p, y.astype(np.int64)


def check_posterior_rows(proba: np.ndarray, where: Any) -> None:
    """Refuse posterior rows (N, K) holding NaN, inf, a value outside [0, 1], or not summing to 1 within
    :data:`PROBA_SUM_TOLERANCE`; ``where(i)`` names row i in the message."""
    bad = (~np.isfinite(proba) | (proba < -PROBA_ROUNDING) | (proba > 1.0 + PROBA_ROUNDING)).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        value = next(v for v in proba[i].tolist() if not (np.isfinite(v) and -PROBA_ROUNDING <= v
                                                          <= 1.0 + PROBA_ROUNDING))
        raise DataError(f"{where(i)}: probability {value!r} is not a number in [0, 1]")
    sums = proba.sum(axis=1)
    off = np.abs(sums - 1.0) > PROBA_SUM_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        raise DataError(f"{where(i)}: the probabilities sum to {float(sums[i]):.6g}, not 1")


def _bin_count(n_bins: object) -> int:
    """``n_bins`` as an int >= 1, or a DataError (a float or text count was cut or failed in numpy)."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise DataError(f"calibration: n_bins must be at least 1, got {n_bins!r}")
    return int(n_bins)


def reliability_bins(proba: np.ndarray, truth: np.ndarray, n_bins: int = N_BINS,
                     predicted: np.ndarray | None = None) -> tuple[ReliabilityBin, ...]:
    """The equal-mass reliability table: ``n_bins`` bins (fewer when there are fewer tasks), in rising confidence.

    ``predicted`` (N,) class indices: the labels scored (default the
    argmax of each row; pass a method's own labels when its ties were drawn,
    or a file's labels), each task's confidence then the posterior of its label.
    """
    p, y = _checked(proba, truth)
    if not len(y):
        return confidence_bins(np.zeros(0), np.zeros(0, dtype=bool), n_bins)
    if predicted is None:
        pred = p.argmax(axis=1)
    else:
        pred = np.asarray(predicted)
        if pred.shape == y.shape:
            pred = as_code_array(pred, "calibration: the predicted class").astype(np.int64)
        if pred.shape != y.shape or pred.min() < 0 or pred.max() >= p.shape[1]:
            raise DataError(f"calibration: the predicted classes must be {len(y)} indices in [0, {p.shape[1]})")
    conf = p[np.arange(len(y)), pred]
    return confidence_bins(conf, pred == y, n_bins)


def confidence_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> tuple[ReliabilityBin, ...]:
    """The equal-mass reliability table of labels given only their confidence: ``confidence`` (N,) each label's
    probability, ``correct`` (N,) whether it is the truth.  What :func:`reliability_bins` bins."""
    n_bins = _bin_count(n_bins)
    conf, right = np.asarray(confidence), np.asarray(correct)
    if conf.ndim != 1 or conf.shape != right.shape:
        raise DataError(f"calibration needs one confidence and one outcome per task; got {conf.shape} and "
                        f"{right.shape}")
    conf = as_float_array(conf, "calibration: the confidences", 1)
    right = as_float_array(right, "calibration: the outcomes", 1)
    if not np.isin(right, (0.0, 1.0)).all():  # (an outcome of 2 made a bin's accuracy 2.0)
        raise DataError(f"calibration: an outcome is {float(right[~np.isin(right, (0.0, 1.0))][0])!r}, not right "
                        "(True, 1) or wrong (False, 0)")
    if not np.isfinite(conf).all() or (len(conf) and (conf.min() < -PROBA_ROUNDING
                                                      or conf.max() > 1.0 + PROBA_ROUNDING)):
        raise DataError("calibration: a confidence is NaN or outside [0, 1]")
    conf = np.clip(conf, 0.0, 1.0)  # (a posterior's rounding: 1.0000000000000002)
    if not len(conf):
        return ()
    order = np.argsort(conf, kind="stable")
    out = []
    for idx in np.array_split(order, min(n_bins, len(conf))):
        c = conf[idx]
        out.append(ReliabilityBin(len(idx), float(c.min()), float(c.max()), float(c.mean()),
                                  float(right[idx].mean())))
    return tuple(out)


def _ece(bins: tuple[ReliabilityBin, ...]) -> float:
    n = sum(b.count for b in bins)
    return float(sum(b.count * abs(b.accuracy - b.confidence) for b in bins) / n) if n else 0.0


def expected_calibration_error(proba: np.ndarray, truth: np.ndarray, n_bins: int = N_BINS,
                               predicted: np.ndarray | None = None) -> float:
    """ECE over ``n_bins`` equal-mass bins (see the module's docstring); 0.0 for no tasks."""
    return _ece(reliability_bins(proba, truth, n_bins, predicted))


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
    return Calibration(_ece(bins), brier_score(proba, truth), bins, n_bins)


def confidence_calibration(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> Calibration:
    """ECE and reliability table of labels known only by their confidence (no Brier score: ``brier`` is None)."""
    bins = confidence_bins(confidence, correct, n_bins)
    return Calibration(_ece(bins), None, bins, n_bins)
