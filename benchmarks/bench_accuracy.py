"""Accuracy and calibration (ECE) of every categorical aggregator on the real datasets, beside crowd-kit.

Run from the repository root with the project's environment:

    .venv/bin/python benchmarks/bench_accuracy.py                              # every method, every set
    .venv/bin/python benchmarks/bench_accuracy.py --methods mv,ds,mf --datasets music,web

* The methods: every method of the registry (:data:`crowdagg.methods.registry.METHODS`) whose kind is
  ``categorical``, with its declared defaults -- a method added to the registry is run without editing this
  file; ``--methods`` names a subset (or a method the default run leaves out).  A method that refuses a set
  (``kos``: two classes only) is reported as such, with its reason, and left out of the means.
* The datasets: every folder of ``--datasets`` (default ``$CROWDAGG_DATASETS``, else ``../shared/datasets``
  beside the checkout) holding ``labels.csv`` and ``truth.csv``, but ``emotion`` (numeric); ``--datasets a,b``
  names some.  Read as the project's accuracy protocol reads them: ``load_annotations(path,
  duplicates="last")``, scored on the tasks with truth.
* The scores: :func:`crowdagg.reports.evaluate.evaluate_run` -- accuracy of the labels, and the ECE (15
  equal-mass bins of the posterior of each task's label, :mod:`crowdagg.reports.calibration`) and Brier score
  of the posteriors.
* The tables (markdown, on stdout): accuracy and ECE per dataset and method, the mean row over the sets every
  method ran on, the per-dataset oracle (the best of our methods on each set, chosen with the truth: a bound,
  not a method), and crowd-kit's figures (``benchmarks/results/crowdkit_reference.json`` and
  ``crowdkit_glad_reference.json``: MV, DS, OneCoin, GLAD) with their per-dataset best.
* JSON: ``--json`` (default ``benchmarks/results/accuracy.json``): every figure, each fit's seconds and
  iterations, and the command's settings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DEFAULT_DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", ROOT.parent / "shared" / "datasets"))
#: A numeric data set (no classes): left out of a categorical benchmark.
NOT_CATEGORICAL = ("emotion",)
#: crowd-kit's figures: (column, file, key in a dataset's entry).
CROWDKIT = (
    ("MV", "crowdkit_reference.json", "mv_acc"),
    ("DS", "crowdkit_reference.json", "ds_acc"),
    ("OneCoin", "crowdkit_reference.json", "onecoin_acc"),
    ("GLAD", "crowdkit_glad_reference.json", "crowdkit_acc"),
)


def categorical_methods() -> list[str]:
    """Every categorical aggregator in the registry, in its listing order (new methods included as declared)."""
    from crowdagg.methods.registry import METHODS

    return [name for name, spec in METHODS.items() if spec.kind == "categorical"]


def dataset_names(root: Path) -> list[str]:
    """The folders of ``root`` with answers and truth, but the numeric ones."""
    return sorted(p.name for p in root.iterdir()
                  if (p / "labels.csv").exists() and (p / "truth.csv").exists() and p.name not in NOT_CATEGORICAL)


def crowdkit_figures(names: list[str]) -> dict[str, dict[str, float]]:
    """{dataset: {crowd-kit method: accuracy}} from the stored reference runs (blank where a file is missing)."""
    out: dict[str, dict[str, float]] = {n: {} for n in names}
    for column, file, key in CROWDKIT:
        try:
            sets = json.loads((RESULTS / file).read_text()).get("datasets", {})
        except (OSError, ValueError):
            continue
        for n in names:
            if key in sets.get(n, {}):
                out[n][column] = float(sets[n][key])
    return out


def score(data: Any, truth: dict[str, str], method: str) -> dict[str, Any]:
    """One fit of ``method`` with its defaults, scored on the tasks with truth; ``error`` where it refuses."""
    from crowdagg import aggregate
    from crowdagg.errors import CrowdaggError
    from crowdagg.reports.evaluate import evaluate_run

    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = aggregate(data, method)
    except CrowdaggError as exc:
        return {"error": str(exc).splitlines()[0]}
    seconds = time.perf_counter() - t0
    ev, _ = evaluate_run(data, result, truth, None)
    return {"accuracy": ev.accuracy, "ece": ev.ece, "brier": ev.brier, "n_compared": ev.n_compared,
            "seconds": seconds, "iterations": int(result.n_iter), "converged": bool(result.converged)}


def run(datasets: Path, names: list[str], methods: list[str]) -> dict[str, Any]:
    """Every method on every set: {dataset: {"answers": n, "methods": {method: scores}}}, printed as it goes."""
    from crowdagg import load_annotations
    from crowdagg.io.read import read_task_labels

    out: dict[str, Any] = {}
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = load_annotations(datasets / name / "labels.csv", duplicates="last")
        truth = read_task_labels(datasets / name / "truth.csv")
        scores = {}
        for m in methods:
            scores[m] = score(data, truth, m)
            s = scores[m]
            shown = (f"accuracy {s['accuracy']:.4f} ECE {s['ece']:.4f} ({s['seconds']:.2f} s)" if "error" not in s
                     else f"refused: {s['error']}")
            print(f"{name:>10} {m:>10}: {shown}", file=sys.stderr, flush=True)
        out[name] = {"answers": int(data.n_answers), "tasks": int(data.n_tasks), "workers": int(data.n_workers),
                     "classes": int(data.n_classes), "methods": scores}
    return out


def summarise(sets: dict[str, Any], methods: list[str], crowdkit: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Each method's mean over the sets it ran on, the oracle per set (over the methods that ran on it) and its
    mean, crowd-kit's figures and their per-set best; the means of the oracle and crowd-kit over every set."""
    ran = {m: [n for n in sets if "error" not in sets[n]["methods"][m]] for m in methods}
    mean = {key: {m: float(np.mean([sets[n]["methods"][m][key] for n in ran[m]])) if ran[m] else None
                  for m in methods} for key in ("accuracy", "ece", "brier")}
    oracle = {}
    for n, entry in sets.items():
        fits = {m: s for m, s in entry["methods"].items() if "error" not in s}
        best = max(fits.values(), key=lambda s: s["accuracy"])["accuracy"] if fits else None
        oracle[n] = {"accuracy": best, "methods": sorted(m for m, s in fits.items() if s["accuracy"] == best)}
    ck_best = {n: max(v.values()) for n, v in crowdkit.items() if v}
    every = list(sets)
    return {
        "sets_run": ran,
        "mean": mean,
        "oracle": oracle,
        "oracle_mean": float(np.mean([o["accuracy"] for o in oracle.values() if o["accuracy"] is not None])),
        "crowdkit": crowdkit,
        "crowdkit_best_mean": float(np.mean([ck_best[n] for n in every if n in ck_best])) if ck_best else None,
        "crowdkit_mean": {c: float(np.mean([crowdkit[n][c] for n in every if c in crowdkit[n]]))
                          for c, _, _ in CROWDKIT if any(c in crowdkit[n] for n in every)},
    }


def tables(sets: dict[str, Any], methods: list[str], summary: dict[str, Any]) -> str:
    """The markdown tables: accuracy (with the oracle and crowd-kit), ECE, and the refusals."""

    def f(v: float | None) -> str:
        return "" if v is None else f"{v:.3f}"

    def mean_of(key: str, m: str) -> str:  # a method that refused some sets: its mean is over fewer, and says so
        part = len(summary["sets_run"][m]) < len(sets)
        return f(summary["mean"][key][m]) + (f" ({len(summary['sets_run'][m])} sets)" if part else "")

    ck_cols = list(summary["crowdkit_mean"])
    lines = ["accuracy on the tasks with truth (duplicates dropped keeping the last)", "",
             "| dataset | answers | " + " | ".join(methods) + " | oracle | " + " | ".join(f"crowd-kit {c}" for c in ck_cols)
             + (" | crowd-kit best |" if ck_cols else ""),
             "|---|---:|" + "---:|" * (len(methods) + 1 + len(ck_cols) + (1 if ck_cols else 0))]
    for n, entry in sets.items():
        ms = entry["methods"]
        ck = summary["crowdkit"].get(n, {})
        row = [f(ms[m].get("accuracy")) if "error" not in ms[m] else "refused" for m in methods]
        lines.append(f"| {n} | {entry['answers']} | " + " | ".join(row) + f" | {f(summary['oracle'][n]['accuracy'])} | "
                     + " | ".join(f(ck.get(c)) for c in ck_cols) + (f" | {f(max(ck.values()) if ck else None)} |"
                                                                     if ck_cols else ""))
    lines.append("| **mean** | | " + " | ".join(mean_of("accuracy", m) for m in methods)
                 + f" | {f(summary['oracle_mean'])} | " + " | ".join(f(summary["crowdkit_mean"][c]) for c in ck_cols)
                 + (f" | {f(summary['crowdkit_best_mean'])} |" if ck_cols else ""))
    lines += ["", "ECE (15 equal-mass bins of the posterior of each task's label) on the same tasks", "",
              "| dataset | " + " | ".join(methods) + " |", "|---|" + "---:|" * len(methods)]
    for n, entry in sets.items():
        ms = entry["methods"]
        lines.append(f"| {n} | " + " | ".join(f(ms[m].get("ece")) if "error" not in ms[m] else "refused"
                                             for m in methods) + " |")
    lines.append("| **mean** | " + " | ".join(mean_of("ece", m) for m in methods) + " |")
    lines.append("| mean Brier | " + " | ".join(mean_of("brier", m) for m in methods) + " |")
    lines += ["", "a method's mean is over the sets it ran on (all unless said); oracle: the best of these methods on "
              "each set, chosen with the truth (a bound, not a method)"]
    refused = [(n, m, e["methods"][m]["error"]) for n, e in sets.items() for m in methods if "error" in e["methods"][m]]
    lines += [f"{m} refused {n}: {why}" for n, m, why in refused]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default=None,
                    help="comma-separated registry methods (default: every categorical aggregator)")
    ap.add_argument("--datasets", default=None, help="comma-separated dataset folders (default: every one)")
    ap.add_argument("--root", type=Path, default=DEFAULT_DATASETS, help="the datasets' folder")
    ap.add_argument("--json", type=Path, default=RESULTS / "accuracy.json", help="write the figures here")
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        ap.error(f"no datasets folder {args.root} (set $CROWDAGG_DATASETS or --root)")
    from crowdagg.methods.registry import METHODS

    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else categorical_methods()
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        ap.error(f"unknown method(s) {', '.join(unknown)}; the registry's: {', '.join(METHODS)}")
    available = dataset_names(args.root)
    names = [d.strip() for d in args.datasets.split(",") if d.strip()] if args.datasets else available
    missing = [d for d in names if d not in available]
    if missing:
        ap.error(f"no dataset {', '.join(missing)} in {args.root} (there: {', '.join(available)})")
    t0 = time.perf_counter()
    sets = run(args.root, names, methods)
    summary = summarise(sets, methods, crowdkit_figures(names))
    print(tables(sets, methods, summary))
    import crowdagg

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "settings": {"methods": methods, "datasets": names, "duplicates": "last", "n_bins": 15,
                     "scored": "tasks with truth", "crowdagg": crowdagg.__version__,
                     "python": platform.python_version(), "seconds": time.perf_counter() - t0},
        "datasets": sets, "summary": summary,
    }, indent=1) + "\n")
    print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
