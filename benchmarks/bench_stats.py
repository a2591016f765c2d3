"""Krippendorff's alpha and the agreement statistics of ``crowdagg stats``, timed beside the ``krippendorff`` package.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_stats.py [--answers 1000000] [--classes 5] [--repeat 3]

The crowd: :func:`synth.make_crowd` (``answers // 5`` tasks of 5 answers from
distinct workers, ``max(100, answers // 5000)`` one-coin workers, K classes),
as an AnnotationSet built once (no reading).  Timed, the best of ``--repeat``
wall seconds, each once on a small crowd first (numba's compilation, numpy's
first calls):

* ``crowdagg alpha``: :func:`crowdagg.kernels.agreement.group_counts` and
  :func:`crowdagg.reports.agreement.krippendorff_alpha` -- alpha from the answers;
* ``crowdagg stats``: :func:`crowdagg.reports.agreement.stats` -- every figure
  of ``crowdagg stats``, majority vote's fit included;
* ``krippendorff (reliability data)``: ``krippendorff.alpha`` on the
  workers × tasks matrix (NaN where a worker did not answer) it documents,
  the matrix's filling included;
* ``krippendorff (value counts)``: ``krippendorff.alpha`` on the tasks ×
  classes count table, its building (``np.add.at``) included -- the
  package's fastest entry.

The figures must agree to 1e-9 (the script stops otherwise); one line per
entry, with the ratio to ``crowdagg alpha``; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import make_crowd  # noqa: E402


def best(fn: Callable[[Any], Any], arg: Any, repeat: int) -> tuple[float, Any]:
    """The least wall time of ``repeat`` calls ``fn(arg)``, and the last call's value."""
    times, value = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn(arg)
        times.append(time.perf_counter() - t)
    return min(times), value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=1_000_000)
    ap.add_argument("--classes", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import krippendorff

    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.kernels.agreement import group_counts
    from crowdagg.reports.agreement import krippendorff_alpha, stats

    def crowd(n_answers: int, seed: int) -> AnnotationSet:
        task, worker, label, _, n_tasks, n_workers = make_crowd(n_answers, args.classes, seed)
        return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers,
                                        n_classes=args.classes)

    def ours_alpha(data: AnnotationSet) -> float:
        size, squares, _, _, pairable = group_counts(data.task_ptr, data.label, data.n_classes)
        return krippendorff_alpha(size, squares, pairable)[0]

    def reliability(data: AnnotationSet) -> float:
        matrix = np.full((data.n_workers, data.n_tasks), np.nan)
        matrix[data.worker, data.task] = data.label
        return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))

    def value_counts(data: AnnotationSet) -> float:
        table = np.zeros((data.n_tasks, data.n_classes))
        np.add.at(table, (data.task, data.label), 1.0)
        return float(krippendorff.alpha(value_counts=table, level_of_measurement="nominal"))

    entries: dict[str, Callable[[AnnotationSet], float]] = {
        "crowdagg alpha": ours_alpha,
        "crowdagg stats": lambda d: stats(d).alpha,
        "krippendorff (reliability data)": reliability,
        "krippendorff (value counts)": value_counts,
    }
    warm = crowd(20_000, 1)
    data = crowd(args.answers, 0)
    print(f"{data.n_answers:,} answers, {data.n_tasks:,} tasks, {data.n_workers:,} workers, K={data.n_classes}",
          flush=True)
    rows: dict[str, dict[str, float]] = {}
    for name, fn in entries.items():
        fn(warm)
        seconds, alpha = best(fn, data, args.repeat)
        rows[name] = {"seconds": seconds, "alpha": alpha}
    reference = rows["crowdagg alpha"]
    for name, row in rows.items():
        if abs(row["alpha"] - reference["alpha"]) > 1e-9:
            print(f"{name}: alpha {row['alpha']!r} differs from crowdagg's {reference['alpha']!r}", file=sys.stderr)
            return 1
        ratio = row["seconds"] / reference["seconds"]
        print(f"{name:32s} {row['seconds']:8.4f} s  {ratio:8.1f}x  alpha {row['alpha']:.12f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
