"""Figures of the annotator report (``crowdagg workers --plot DIR``) and of ``crowdagg evaluate --plot FILE.png``,
as PNG bytes.

* :func:`confusion_grid` -- the estimated confusion matrices of the most
  active workers, a small heat map each (rows the true class, columns the
  answer), spammers' titles marked;
* :func:`answers_vs_accuracy` -- each worker's answers (log scale) against
  its estimated accuracy, the detector's spammers marked, the skipped ones
  grey, chance (1/K) as a dashed line;
* :func:`reliability_diagram` -- accuracy against mean confidence per
  equal-mass bin of an evaluation (``crowdagg evaluate --plot``), the
  diagonal of perfect calibration dashed.

matplotlib is the optional extra ``crowdagg[plot]``, imported by these
functions only (:func:`require` says how to install it).  Figures are drawn
on matplotlib's Agg canvas without pyplot (no global figure state, no
backend switch) under matplotlib's default style (a user's ``matplotlibrc``
does not change them), and saved without the software tag: the same report
gives the same bytes on the same matplotlib.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Workers drawn by :func:`confusion_grid` by default (a 4 × 4 grid).
TOP_WORKERS = 16
#: Figure resolution (dots per inch).
DPI = 100
#: Names longer than this are cut (with an ellipsis) in titles.
NAME_WIDTH = 18


def require() -> None:
    """A :class:`~crowdagg.errors.UsageError` naming the extra to install when matplotlib is missing (found,
    not imported)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("the figures need matplotlib: pip install 'crowdagg[plot]'")


@contextmanager
def _figure(width: float, height: float) -> Iterator[Any]:
    """A matplotlib Figure on the Agg canvas, under the default style, every text drawn as it is written.

    Class and worker names are data: mathtext would read ``\\le 5`` or ``$x$`` as TeX and fail ("unexpected
    failure") or draw something else, so ``text.parse_math`` is off for the figure."""
    require()
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context():
        matplotlib.rcdefaults()  # inside the context: the caller's settings come back after
        matplotlib.rcParams["text.parse_math"] = False
        fig = Figure(figsize=(width, height), dpi=DPI)
        FigureCanvasAgg(fig)
        yield fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _short(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def most_active(answers: np.ndarray, top: int) -> np.ndarray:
    """Indices of the ``top`` workers with the most answers, most first (ties: the earlier worker first)."""
    order = np.argsort(-np.asarray(answers, dtype=np.int64), kind="stable")
    return order[:max(int(top), 0)]


def confusion_grid(report: pd.DataFrame, confusion: np.ndarray, classes: Sequence[str], *,
                   top: int = TOP_WORKERS) -> bytes:
    """The estimated confusion matrices of the ``top`` most active workers, as a PNG.

    Parameters
    ----------
    report : DataFrame
        :func:`crowdagg.reports.workers.worker_report`'s table (``worker``,
        ``answers``, ``spammer``).
    confusion : ndarray, shape (n_workers, K, K)
        ``confusion[w, true, observed]``, rows summing to 1 (the result's).
    classes : sequence of str, length K
    top : int
        How many workers (default :data:`TOP_WORKERS`).

    Returns
    -------
    bytes
        A PNG: a grid of heat maps (rows: the true class, columns: the
        answer; 0 white to 1 dark), each titled with the worker, its
        answers and ``spammer`` when the detector flagged it; the cells'
        values written in them up to 5 classes.
    """
    workers = most_active(report["answers"].to_numpy(), top)
    k = len(classes)
    n = len(workers)
    cols = min(4, max(n, 1))
    rows = max(math.ceil(n / cols), 1)
    flagged = report["spammer"].fillna(False).to_numpy(dtype=bool)
    names = report["worker"].to_numpy(dtype=object)
    labels = [_short(str(c)) for c in classes]
    with _figure(3.0 * cols + 1.0, 3.0 * rows + 0.6) as fig:
        axes = fig.subplots(rows, cols, squeeze=False)
        image = None
        for i, ax in enumerate(axes.ravel()):
            if i >= n:
                ax.set_axis_off()
                continue
            w = int(workers[i])
            image = ax.imshow(confusion[w], vmin=0.0, vmax=1.0, cmap="Blues")
            title = f"{_short(str(names[w]))}\n{int(report['answers'].iloc[w]):,} answers"
            ax.set_title(title + (" · spammer" if flagged[w] else ""), fontsize=9,
                         color="tab:red" if flagged[w] else "black")
            if k <= 10:
                ax.set_xticks(range(k), labels, fontsize=7, rotation=90 if k > 3 else 0)
                ax.set_yticks(range(k), labels, fontsize=7)
            else:
                ax.set_xticks([])
                ax.set_yticks([])
            if k <= 5:
                for a in range(k):
                    for b in range(k):
                        v = float(confusion[w, a, b])
                        ax.text(b, a, f"{v:.2f}", ha="center", va="center", fontsize=7,
                                color="white" if v > 0.6 else "black")
            if i % cols == 0:
                ax.set_ylabel("true class", fontsize=8)
            if i // cols == rows - 1 or i + cols >= n:
                ax.set_xlabel("answer", fontsize=8)
        fig.suptitle(f"Estimated confusion matrices of the {n} most active workers", fontsize=11)
        fig.tight_layout(rect=(0.0, 0.0, 0.92, 0.97))
        if image is not None:
            fig.colorbar(image, cax=fig.add_axes((0.93, 0.15, 0.015, 0.7)), label="P(answer | true class)")
        return _png(fig)


def answers_vs_accuracy(report: pd.DataFrame, n_classes: int) -> bytes:
    """Each worker's answers (log x) against its estimated accuracy, spammers marked, as a PNG.

    Parameters
    ----------
    report : DataFrame
        :func:`crowdagg.reports.workers.worker_report`'s table.  A method
        without accuracies (``glad``) is drawn against ``agreement`` (the
        share of answers equal to the consensus), and the axis says so.
    n_classes : int
        K: chance accuracy 1/K is drawn as a dashed line.

    Returns
    -------
    bytes
        A PNG: judged workers blue, spammers (``spammer``: the detector's or
        the near-chance rule's, ``flagged_by``) red crosses, workers neither
        judged (too few co-labels, or no scan) grey.
    """
    y_col = "accuracy" if report["accuracy"].notna().any() else "agreement"
    x = report["answers"].to_numpy(dtype=np.float64)
    y = report[y_col].to_numpy(dtype=np.float64, na_value=np.nan)
    flag = report["spammer"]
    skipped = flag.isna().to_numpy()
    flagged = flag.fillna(False).to_numpy(dtype=bool)
    kept = ~flagged & ~skipped
    with _figure(7.0, 4.8) as fig:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax = fig.subplots()
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())  # 2×10¹, 3×10¹ ... crowd the axis
        groups = ((kept, "workers", dict(marker="o", color="tab:blue", alpha=0.6, s=18)),
                  (skipped, "not judged", dict(marker="o", color="0.6", alpha=0.6, s=14)),
                  (flagged, "spammers", dict(marker="x", color="tab:red", s=36)))
        for mask, label, style in groups:
            if mask.any():
                ax.scatter(x[mask], y[mask], label=f"{label} ({int(mask.sum()):,})", **style)
        if n_classes > 0:
            ax.axhline(1.0 / n_classes, color="0.4", linestyle="--", linewidth=1, label=f"chance (1/{n_classes})")
        ax.set_xlabel("answers (log scale)")
        ax.set_ylabel("estimated accuracy" if y_col == "accuracy" else "agreement with the consensus")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("Workers: answers vs " + ("estimated accuracy" if y_col == "accuracy" else "agreement"))
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        fig.tight_layout()
        return _png(fig)


def reliability_diagram(bins: Sequence[Any], ece: float, brier: float | None, source: str) -> bytes:
    """The reliability diagram of an evaluation, as a PNG.

    Parameters
    ----------
    bins : sequence of :class:`~crowdagg.reports.calibration.ReliabilityBin`
        The equal-mass bins in rising confidence (``Evaluation.reliability``).
    ece, brier : float
        Written in the title (``brier`` None: left out, confidences alone).
    source : str
        What the confidences are (``posteriors`` or ``confidence``), for the x axis.

    Returns
    -------
    bytes
        A PNG: each bin's accuracy (y) at its mean confidence (x), joined in
        order, with a horizontal bar over the bin's confidence range and the
        gap to the diagonal shaded (red: over-confident, the accuracy below
        the confidence; blue: under-confident); the diagonal of perfect
        calibration dashed.  Equal-mass bins hold equal counts, so where the
        points crowd is where the confidences pile up.
    """
    from .calibration import ReliabilityBin

    bins = list(bins)
    if not all(isinstance(b, ReliabilityBin) for b in bins):
        bad = next(b for b in bins if not isinstance(b, ReliabilityBin))
        raise UsageError(f"reliability_diagram takes ReliabilityBin rows (Evaluation.reliability), got "
                         f"{type(bad).__name__}")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (ece, 0.0 if brier is None else brier)):
        raise UsageError(f"reliability_diagram: ece and brier must be finite numbers (brier None: left out), got "
                         f"{ece!r} and {brier!r}")
    conf = np.array([b.confidence for b in bins], dtype=np.float64)
    acc = np.array([b.accuracy for b in bins], dtype=np.float64)
    low = np.array([b.low for b in bins], dtype=np.float64)
    high = np.array([b.high for b in bins], dtype=np.float64)
    counts = [int(b.count) for b in bins]
    with _figure(5.6, 5.4) as fig:
        ax = fig.subplots()
        lo = float(min(conf.min(), acc.min(), 0.5)) if len(bins) else 0.0
        lo = max(0.0, math.floor(lo * 10.0) / 10.0)
        ax.plot([lo, 1.0], [lo, 1.0], color="0.4", linestyle="--", linewidth=1, label="perfect calibration")
        for c, a in zip(conf.tolist(), acc.tolist()):
            ax.plot([c, c], [a, c], color="tab:red" if a < c else "tab:blue", alpha=0.35, linewidth=4,
                    solid_capstyle="butt")
        ax.hlines(acc, low, high, color="tab:orange", linewidth=1.5, alpha=0.8, label="bin's confidence range")
        ax.plot(conf, acc, marker="o", color="tab:orange", linewidth=1, markersize=5,
                label=f"accuracy per bin ({len(bins)} bins of ~{counts[0] if counts else 0:,} tasks)")
        ax.set_xlim(lo - 0.01, 1.01)
        ax.set_ylim(lo - 0.01, 1.01)
        ax.set_aspect("equal")
        ax.set_xlabel(f"mean confidence of the label ({source})")
        ax.set_ylabel("accuracy")
        title = f"Reliability: ECE {ece:.4f}" + ("" if brier is None else f", Brier {brier:.4f}")
        ax.set_title(title + f"\n{sum(counts):,} tasks, equal-mass bins", fontsize=10)
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        return _png(fig)


__all__ = ["TOP_WORKERS", "answers_vs_accuracy", "confusion_grid", "most_active", "reliability_diagram", "require"]
