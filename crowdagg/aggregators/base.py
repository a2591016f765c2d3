"""Base class and shared pieces of the aggregators."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..checks import check_int
from ..data import AnnotationSet
from ..errors import DataError
from ..result import AggregationResult

#: Floor on confusion entries before taking logs (as crowd-kit clips at 1e-10).
PROB_FLOOR = 1e-10


class Aggregator:
    """Base class: settings are stored by ``__init__``, checked by :meth:`fit`.

    Subclasses set ``name`` (CLI name), ``summary`` (one line for
    ``crowdagg methods``) and ``params`` (the settings ``__init__`` accepts,
    besides ``seed``), and implement :meth:`_fit`.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed

    def get_params(self) -> dict[str, Any]:
        return {p: getattr(self, p) for p in ("seed", *self.params)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def fit(self, data: AnnotationSet, *, callback: Any = None) -> AggregationResult:
        """Aggregate ``data``; ``callback(iteration, log_likelihood)`` is called per EM step."""
        if not isinstance(data, AnnotationSet):
            raise TypeError(f"fit expects an AnnotationSet, got {type(data).__name__}")
        if data.n_answers == 0:
            raise DataError("no answers to aggregate")
        seed = check_int("seed", self.seed, 0)
        return self._fit(data, np.random.default_rng(seed), callback)

    def _fit(self, data: AnnotationSet, rng: np.random.Generator, callback: Any) -> AggregationResult:
        raise NotImplementedError


def argmax_random_ties(scores: np.ndarray, rng: np.random.Generator, atol: float = 0.0) -> np.ndarray:
    """Row-wise argmax, ties (within ``atol`` of the maximum) broken uniformly at random.

    shape (n, K) -> (n,) int64.  One uniform draw per cell keeps the choice
    reproducible for a given seed and unbiased among the tied classes.
    """
    if scores.shape[1] == 1:
        return np.zeros(scores.shape[0], dtype=np.int64)
    top = scores.max(axis=1, keepdims=True)
    tied = scores >= top - atol
    draw = rng.random(scores.shape)
    return np.argmax(np.where(tied, draw, -1.0), axis=1).astype(np.int64)


def normalize_rows(scores: np.ndarray) -> np.ndarray:
    total = scores.sum(axis=1, keepdims=True)
    return scores / np.where(total > 0, total, 1.0)


def softmax_rows(log_scores: np.ndarray) -> np.ndarray:
    z = log_scores - log_scores.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    return normalize_rows(z)


def full_m_step(counts_ot: np.ndarray, class_tot: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    """Dawid--Skene M-step with additive (Dirichlet) smoothing.

    Parameters
    ----------
    counts_ot : (n_workers, K_observed, K_true) expected answer counts.
    class_tot : (K,) expected class totals.
    smoothing : pseudo-count added to every cell (Dirichlet alpha - 1).

    Returns
    -------
    prior : (K,)
    conf_ot : (n_workers, K_observed, K_true), columns sum to 1.
    """
    k = class_tot.shape[0]
    num = np.maximum(counts_ot + smoothing, PROB_FLOOR)
    conf_ot = num / num.sum(axis=1, keepdims=True)
    prior = np.maximum(class_tot + smoothing, PROB_FLOOR)
    prior = prior / prior.sum() if k else prior
    return prior, conf_ot


def one_coin_m_step(counts_ot: np.ndarray, class_tot: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    """One-coin M-step: p_w = (expected correct + s) / (answers + 2 s), errors uniform."""
    k = class_tot.shape[0]
    prior = np.maximum(class_tot + smoothing, PROB_FLOOR)
    prior = prior / prior.sum()
    agree = np.trace(counts_ot, axis1=1, axis2=2)
    total = counts_ot.sum(axis=(1, 2))
    p = (agree + smoothing) / np.maximum(total + 2.0 * smoothing, PROB_FLOOR)
    # Clipped so that the E-step's logs stay finite.
    return prior, one_coin_matrices(np.clip(p, PROB_FLOOR, 1.0 - PROB_FLOOR), k)


def one_coin_matrices(p: np.ndarray, k: int) -> np.ndarray:
    """Confusion matrices of one-coin workers with accuracy ``p`` (shape (n_workers,)).

    Returns shape (n_workers, K, K); diagonal p, off-diagonal (1 - p)/(K - 1).
    The matrices are symmetric, so they read the same in either layout.
    """
    p = np.asarray(p, dtype=np.float64)
    if k == 1:
        return np.ones((p.shape[0], 1, 1))
    off = (1.0 - p) / (k - 1)
    mats = np.repeat(off[:, None, None], k, axis=1).repeat(k, axis=2)
    idx = np.arange(k)
    mats[:, idx, idx] = p[:, None]
    return mats


def posterior_confusion(data: AnnotationSet, post: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    """Prior and per-worker confusion (``[w, true, observed]``) implied by posteriors.

    One Dawid--Skene M-step: used to report worker confusion for methods
    that do not model it (MV) and to start EM.
    """
    from ..kernels import EMWorkspace

    ws = EMWorkspace(data.task_ptr, data.worker, data.label, data.n_workers, data.n_classes)
    ws.accumulate(post)
    counts, tot = ws.stats()
    prior, conf_ot = full_m_step(counts, tot, smoothing)
    return prior, np.ascontiguousarray(conf_ot.transpose(0, 2, 1))


def make_result(
    method: str,
    data: AnnotationSet,
    post: np.ndarray,
    labels: np.ndarray,
    prior: np.ndarray,
    confusion: np.ndarray,
    **extra: Any,
) -> AggregationResult:
    return AggregationResult(
        method=method,
        posteriors=post,
        labels=labels,
        prior=prior,
        confusion=confusion,
        data=data,
        **extra,
    )
