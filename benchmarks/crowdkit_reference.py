"""Reference accuracies of crowd-kit 1.4.2 on the real datasets in ../shared/datasets.

crowd-kit is NOT a dependency of crowdagg: it is the test extra (``pip install -e '.[test]'``), and the
committed figures (``benchmarks/results/crowdkit_reference.json``) come from that test environment (its
crowd-kit and pandas), the one the oracle tests compare with.  An isolated virtualenv works too:

    python3 -m venv .venv-bench && .venv-bench/bin/pip install crowd-kit==1.4.2 psutil
    # or, idempotently:  bash benchmarks/setup_crowdkit.sh

Run (from the repository root):

    .venv/bin/python benchmarks/crowdkit_reference.py [--datasets DIR] [--json OUT]

For every dataset folder (``labels.csv`` with header ``task,worker,label`` and
``truth.csv`` with header ``task,label``; all columns read as str), except the
numeric ``emotion`` dataset, this runs crowd-kit ``MajorityVote``,
``DawidSkene(n_iter=100)`` and ``OneCoinDawidSkene(n_iter=100)`` (crowd-kit's default
tol=1e-5, i.e. EM stops once the per-answer ELBO gain is < tol; ``--tol=-inf`` forces
all 100 iterations)
on the answers with duplicate (task, worker) pairs dropped keeping the LAST one,
and reports accuracy on the tasks that have a truth label.

Columns:
  * ``MV acc``            -- crowd-kit MajorityVote as is (ties go to the first label
                             in sorted string order, via ``DataFrame.idxmax``).
  * ``MV acc (ties split)`` -- the same vote counts, ties split evenly (expected
                             accuracy of a random tie-break), comparable to the
                             sanity figures in ../shared/datasets/README.md.
  * ``DS acc``, ``OneCoin acc`` -- DawidSkene / OneCoinDawidSkene, n_iter=100.
  * ``DS iters``          -- EM iterations DawidSkene actually ran (len(loss_history_)).
  * ``DS seconds``        -- wall time of DawidSkene(n_iter=100).fit_predict.
  * ``MACE acc``          -- ``MACE(n_iter=50)``, crowd-kit's defaults otherwise (10 restarts, variational
                             Bayes M-step, alpha = beta = 0.5, smoothing 0.1, random_state 0).
  * ``M-MSR acc``         -- ``MMSR()`` with crowd-kit's defaults (n_iter=10000, tol=1e-10, random_state 0).
  * ``ZBS acc``           -- ``ZeroBasedSkill()`` with crowd-kit's defaults (n_iter=100, lr_init 1.0 halved
                             every 20 iterations, skills starting at 1/K + eps with eps 1e-5).

Every run is timed (``*_seconds`` in the JSON).

Everything is deterministic (MACE's and M-MSR's random starts are seeded by crowd-kit's default
random_state 0); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib.metadata import version

import pandas as pd
from crowdkit.aggregation import MACE, MMSR, DawidSkene, MajorityVote, OneCoinDawidSkene, ZeroBasedSkill

EXCLUDE = {"emotion"}  # numeric (regression) dataset


def default_datasets_dir() -> str:
    """``$CROWDAGG_DATASETS`` (as the test suite reads it), else ../shared/datasets beside the checkout."""
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.environ.get("CROWDAGG_DATASETS", os.path.normpath(os.path.join(repo_root, "..", "shared", "datasets")))


def reference_options(ap: argparse.ArgumentParser, only: bool = False) -> None:
    """``--datasets DIR`` and ``--json OUT`` (and, with ``only``, ``--only a,b``): every reference script's options."""
    ap.add_argument("--datasets", default=default_datasets_dir(),
                    help="folder holding one sub-folder per dataset (default: %(default)s)")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    if only:
        ap.add_argument("--only", default=None, help="comma-separated dataset names (default: all but emotion)")


def dataset_names(folder: str, only: str | None = None) -> list[str]:
    """The dataset folders of ``folder`` with answers and truth, sorted, but :data:`EXCLUDE` (and, with ``only``,
    those it names alone)."""
    names = sorted(
        d for d in os.listdir(folder)
        if d not in EXCLUDE
        and os.path.isfile(os.path.join(folder, d, "labels.csv"))
        and os.path.isfile(os.path.join(folder, d, "truth.csv"))
    )
    if only:
        wanted = set(only.split(","))
        names = [n for n in names if n in wanted]
    if not names:
        print(f"no datasets found in {folder}", file=sys.stderr)
    return names


def versions(*packages: str) -> str:
    """``crowd-kit 1.4.2, pandas 2.2.3, ..., python 3.11.9``: the packages' versions, then Python's."""
    return ", ".join(f"{p} {version(p)}" for p in packages) + f", python {platform.python_version()}"


def write_reference(path: str, packages: tuple[str, ...], settings: dict, results: dict) -> None:
    """A reference run's JSON at ``path``: the tool, the ``packages``' versions, Python's, the settings and the
    results by dataset."""
    write_results(path, {
        "tool": "crowd-kit",
        "versions": {p: version(p) for p in packages},
        "python": platform.python_version(),
        "settings": settings,
        "datasets": results,
    })


def labels_by_task(result) -> pd.Series:
    """A crowdagg result's labels (as text), indexed by task name, as crowd-kit's ``labels_`` are."""
    return pd.Series(result.label_names().tolist(), index=result.data.task_names.tolist())


def write_results(path: str, out: dict) -> None:
    """The run's figures as JSON at ``path`` (its folder made)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    print(f"\nwrote {path}")


def accuracy(pred: pd.Series, truth: pd.Series) -> float:
    """Accuracy on tasks with truth; a truth task without a prediction counts as wrong."""
    p = pred.reindex(truth.index)
    return float((p.astype(object) == truth.astype(object)).sum() / len(truth))


def mv_ties_split(probas: pd.DataFrame, truth: pd.Series) -> float:
    """Expected accuracy of majority vote with ties broken uniformly at random."""
    probas = probas.reindex(truth.index)
    is_max = probas.eq(probas.max(axis=1), axis=0)
    n_max = is_max.sum(axis=1)
    hit = pd.Series(
        [bool(is_max.at[t, lab]) if lab in is_max.columns else False for t, lab in truth.items()],
        index=truth.index,
    )
    score = hit.astype(float) / n_max.where(n_max > 0, 1)
    return float(score.sum() / len(truth))


def read_dataset(path: str) -> tuple[pd.DataFrame, pd.Series, int]:
    """A dataset folder's answers (all str; duplicate (task, worker) pairs dropped keeping the LAST), its truth
    (by task) and its number of rows before the duplicates went."""
    labels = pd.read_csv(os.path.join(path, "labels.csv"), dtype=str, keep_default_na=False)
    truth_df = pd.read_csv(os.path.join(path, "truth.csv"), dtype=str, keep_default_na=False)
    truth = truth_df.drop_duplicates("task", keep="last").set_index("task")["label"]
    n_raw = len(labels)
    data = labels[["task", "worker", "label"]].drop_duplicates(["task", "worker"], keep="last")
    data = data.reset_index(drop=True)
    return data, truth, n_raw


def dataset_shape(data: pd.DataFrame, truth: pd.Series, n_raw: int) -> dict:
    """What a result row says of its dataset: answers (before and after the duplicates), tasks, workers, classes,
    truth labels."""
    return {
        "n_answers_raw": n_raw,
        "n_answers": len(data),
        "n_duplicates_dropped": n_raw - len(data),
        "n_tasks": int(data["task"].nunique()),
        "n_workers": int(data["worker"].nunique()),
        "n_classes": int(data["label"].nunique()),
        "n_truth": int(len(truth)),
    }


MACE_N_ITER = 50  # the setting; crowd-kit's own default too


def timed_fit_predict(model, data: pd.DataFrame) -> tuple[pd.Series, float]:
    """``model.fit_predict(data)`` and its wall time in seconds."""
    t0 = time.perf_counter()
    pred = model.fit_predict(data)
    return pred, time.perf_counter() - t0


def run_dataset(path: str, tol: float = 1e-5) -> dict:
    data, truth, n_raw = read_dataset(path)

    mv = MajorityVote().fit(data)
    mv_acc = accuracy(mv.labels_, truth)
    mv_split = mv_ties_split(mv.probas_, truth)

    t0 = time.perf_counter()
    ds = DawidSkene(n_iter=100, tol=tol)
    ds_pred = ds.fit_predict(data)
    ds_sec = time.perf_counter() - t0
    ds_acc = accuracy(ds_pred, truth)

    t0 = time.perf_counter()
    oc = OneCoinDawidSkene(n_iter=100, tol=tol)
    oc_pred = oc.fit_predict(data)
    oc_sec = time.perf_counter() - t0
    oc_acc = accuracy(oc_pred, truth)

    mace_pred, mace_sec = timed_fit_predict(MACE(n_iter=MACE_N_ITER), data)
    mmsr_pred, mmsr_sec = timed_fit_predict(MMSR(), data)
    zbs_pred, zbs_sec = timed_fit_predict(ZeroBasedSkill(), data)

    return {
        **dataset_shape(data, truth, n_raw),
        "mv_acc": mv_acc,
        "mv_acc_ties_split": mv_split,
        "ds_acc": ds_acc,
        "ds_iters": len(ds.loss_history_),
        "ds_seconds": ds_sec,
        "onecoin_acc": oc_acc,
        "onecoin_iters": len(oc.loss_history_),
        "onecoin_seconds": oc_sec,
        "mace_acc": accuracy(mace_pred, truth),
        "mace_seconds": mace_sec,
        "mmsr_acc": accuracy(mmsr_pred, truth),
        "mmsr_seconds": mmsr_sec,
        "zbs_acc": accuracy(zbs_pred, truth),
        "zbs_seconds": zbs_sec,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    reference_options(ap)
    ap.add_argument("--tol", type=float, default=1e-5,
                    help="tol for DawidSkene/OneCoinDawidSkene (crowd-kit default %(default)s; "
                         "crowd-kit stops when ELBO gain < tol, so pass --tol=-inf to force all 100 iterations)")
    args = ap.parse_args(argv)

    names = dataset_names(args.datasets)
    if not names:
        return 1

    results = {}
    print(f"{versions('crowd-kit', 'pandas', 'numpy')}; datasets: {args.datasets} "
          f"(excluded: {', '.join(sorted(EXCLUDE))})")
    print(f"DawidSkene / OneCoinDawidSkene: n_iter=100, tol={args.tol}; "
          "duplicates (task, worker): dropped, keeping the last answer\n")
    print(f"MACE: n_iter={MACE_N_ITER}, crowd-kit's defaults otherwise; MMSR, ZeroBasedSkill: crowd-kit's defaults\n")
    print("| dataset | n_answers | dups dropped | MV acc | MV acc (ties split) | DS acc | OneCoin acc | DS iters | "
          "DS seconds | MACE acc | M-MSR acc | ZBS acc | MACE seconds | M-MSR seconds | ZBS seconds |")
    print("|---|" + "---:|" * 14)
    for name in names:
        r = run_dataset(os.path.join(args.datasets, name), tol=args.tol)
        results[name] = r
        print(f"| {name} | {r['n_answers']} | {r['n_duplicates_dropped']} | {r['mv_acc']:.4f} | "
              f"{r['mv_acc_ties_split']:.4f} | {r['ds_acc']:.4f} | {r['onecoin_acc']:.4f} | "
              f"{r['ds_iters']} | {r['ds_seconds']:.3f} | {r['mace_acc']:.4f} | {r['mmsr_acc']:.4f} | "
              f"{r['zbs_acc']:.4f} | {r['mace_seconds']:.2f} | {r['mmsr_seconds']:.2f} | {r['zbs_seconds']:.2f} |",
              flush=True)

    if args.json:
        write_reference(args.json, ("crowd-kit", "pandas", "numpy", "scipy", "scikit-learn"), {
            "DawidSkene": {"n_iter": 100, "tol": repr(args.tol)},
            "OneCoinDawidSkene": {"n_iter": 100, "tol": repr(args.tol)},
            "MACE": {"n_iter": MACE_N_ITER, "others": "crowd-kit defaults"},
            "MMSR": "crowd-kit defaults",
            "ZeroBasedSkill": "crowd-kit defaults",
            "duplicates": "drop (task, worker) duplicates, keep last"}, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
