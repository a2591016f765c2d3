"""Reference accuracies of crowd-kit 1.4.2's GLAD on the real datasets in ../shared/datasets, beside crowdagg's.

crowd-kit is NOT a dependency of crowdagg: it is the test extra (``pip install -e '.[test]'``) or the isolated
``.venv-bench`` of ``benchmarks/crowdkit_reference.py`` (``bash benchmarks/setup_crowdkit.sh``).

Run (from the repository root):

    .venv/bin/python benchmarks/crowdkit_glad_reference.py [--datasets DIR] [--json OUT] [--n-iter 20]
    # --datasets defaults to $CROWDAGG_DATASETS, else ../shared/datasets
    # only some datasets:  --only bluebird,rte

For every dataset folder (``labels.csv`` with header ``task,worker,label`` and ``truth.csv`` with header
``task,label``; all columns read as str), except the numeric ``emotion`` dataset, on the answers with
duplicate (task, worker) pairs dropped keeping the LAST one, this reports:

  * ``crowd-kit acc``  -- crowd-kit ``GLAD(n_iter=20)`` (its defaults otherwise: tol=1e-5, conjugate
                          gradient M-step of at most 25 iterations, gtol 1e-2), accuracy on the tasks that
                          have a truth label (a truth task without a prediction counts as wrong), its
                          iterations (len(loss_history_)) and seconds;
  * when crowdagg is importable, its crowd-kit adapter ``crowdagg.crowdkit.GLAD`` with the same settings:
    ``adapter max |dp|``, ``|dα|``, ``|dlogβ|`` -- the largest differences of ``probas_`` (aligned by task
    and label), ``alphas_`` and ``betas_`` (log β) from crowd-kit's --, ``labels agree`` (share of tasks
    with the same label), its iterations and seconds;
  * ``glad acc`` -- crowdagg's own method, ``crowdagg.aggregate(data, "glad")`` with its defaults, when
    that method is registered (else the column says why not).

crowd-kit's GLAD stops its M-step after 25 conjugate-gradient iterations, far from converged, and the
line search's decisions make the result sensitive to the last bit of its objective: multiplying its Q
and gradient by 1 + 1e-15 moves crowd-kit's own bluebird abilities by 6e-3 after six EM iterations.  The
adapter (the same optimiser on crowdagg's kernels, which sum in another order) agrees with it to
rounding where crowd-kit stops after two or three iterations, and to ~1e-3 .. 1e-1 after more, where a
label at a near-tie may differ; ``--m-step-max-iter 1000 --m-step-tol 1e-8`` runs each M-step to
convergence, where the two agree to ~1e-5 (and crowd-kit takes minutes per dataset).

Everything is deterministic; nothing is downloaded.  crowd-kit takes ~11 minutes on trec and ~1 on web.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

with warnings.catch_warnings():  # crowd-kit's imports warn about optional extras
    warnings.simplefilter("ignore")
    from crowdkit.aggregation import GLAD

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crowdkit_reference as ref  # noqa: E402


def max_diff(mine: pd.Series | pd.DataFrame, theirs: pd.Series | pd.DataFrame) -> float:
    """The largest absolute difference, ``mine`` aligned on ``theirs``' labels (a missing one is inf)."""
    if isinstance(theirs, pd.DataFrame):
        mine = mine.reindex(index=theirs.index, columns=theirs.columns)
    else:
        mine = mine.reindex(theirs.index)
    diff = np.abs(mine.to_numpy(dtype=np.float64) - theirs.to_numpy(dtype=np.float64))
    return float(np.nan_to_num(diff, nan=np.inf).max()) if diff.size else 0.0


def adapter(data: pd.DataFrame, theirs: GLAD, settings: dict) -> dict:
    """crowdagg's crowd-kit adapter with the same settings, against crowd-kit's fit."""
    try:
        from crowdagg.crowdkit import GLAD as Adapter
    except ImportError as e:  # crowdagg not importable, or a crowdagg without the adapter
        return {"adapter": f"not run: {e}"}
    t0 = time.perf_counter()
    mine = Adapter(**settings).fit(data)
    seconds = time.perf_counter() - t0
    same = mine.labels_.reindex(theirs.labels_.index).astype(object) == theirs.labels_.astype(object)
    return {
        "adapter_max_dp": max_diff(mine.probas_, theirs.probas_),
        "adapter_max_dalpha": max_diff(mine.alphas_, theirs.alphas_),
        "adapter_max_dlogbeta": max_diff(mine.betas_, theirs.betas_),
        "adapter_labels_agree": float(same.mean()),
        "adapter_iters": len(mine.loss_history_),
        "adapter_seconds": seconds,
    }


def own_glad(data: pd.DataFrame, truth: pd.Series) -> dict:
    """crowdagg's ``glad`` method (its defaults), when it is registered."""
    try:
        import crowdagg
        from crowdagg.methods.registry import UnknownMethod
    except ImportError as e:
        return {"glad": f"not run: {e}"}
    t0 = time.perf_counter()
    try:
        result = crowdagg.aggregate(crowdagg.load_annotations(data), "glad")
    except UnknownMethod:
        return {"glad": "not run: method 'glad' is not registered in this crowdagg"}
    seconds = time.perf_counter() - t0
    return {"glad_acc": ref.accuracy(ref.labels_by_task(result), truth), "glad_seconds": seconds}


def run_dataset(path: str, settings: dict) -> dict:
    data, truth, n_raw = ref.read_dataset(path)

    t0 = time.perf_counter()
    with warnings.catch_warnings():  # crowd-kit's pandas FutureWarnings
        warnings.simplefilter("ignore")
        theirs = GLAD(**settings).fit(data)
    seconds = time.perf_counter() - t0
    return {
        **ref.dataset_shape(data, truth, n_raw),
        "crowdkit_acc": ref.accuracy(theirs.labels_, truth),
        "crowdkit_iters": len(theirs.loss_history_),
        "crowdkit_seconds": seconds,
        **adapter(data, theirs, settings),
        **own_glad(data, truth),
    }


def cell(r: dict, key: str, fmt: str) -> str:
    if key in r:
        return format(r[key], fmt)
    why = r.get("adapter" if key.startswith("adapter") else "glad", "")
    return "n/a" if why else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ref.reference_options(ap, only=True)
    ap.add_argument("--n-iter", type=int, default=20, help="GLAD's n_iter (default %(default)s)")
    ap.add_argument("--m-step-max-iter", type=int, default=25, help="crowd-kit's default %(default)s")
    ap.add_argument("--m-step-tol", type=float, default=1e-2, help="crowd-kit's default %(default)s")
    args = ap.parse_args(argv)
    settings = {"n_iter": args.n_iter, "m_step_max_iter": args.m_step_max_iter, "m_step_tol": args.m_step_tol}

    names = ref.dataset_names(args.datasets, args.only)
    if not names:
        return 1

    results = {}
    print(f"{ref.versions('crowd-kit', 'pandas', 'numpy', 'scipy')}; datasets: {args.datasets} "
          f"(excluded: {', '.join(sorted(ref.EXCLUDE))})")
    print(f"GLAD({', '.join(f'{k}={v}' for k, v in settings.items())}); duplicates (task, worker): dropped, "
          "keeping the last answer\n")
    print("| dataset | n_answers | crowd-kit acc | iters | seconds | adapter max abs dp | dalpha | dlogbeta "
          "| labels agree | adapter iters | adapter seconds | glad acc |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = set()
    for name in names:
        r = run_dataset(os.path.join(args.datasets, name), settings)
        results[name] = r
        notes.update(r[k] for k in ("adapter", "glad") if k in r)
        print(f"| {name} | {r['n_answers']} | {r['crowdkit_acc']:.4f} | {r['crowdkit_iters']} | "
              f"{r['crowdkit_seconds']:.1f} | {cell(r, 'adapter_max_dp', '.1e')} | "
              f"{cell(r, 'adapter_max_dalpha', '.1e')} | {cell(r, 'adapter_max_dlogbeta', '.1e')} | "
              f"{cell(r, 'adapter_labels_agree', '.4f')} | {cell(r, 'adapter_iters', 'd')} | "
              f"{cell(r, 'adapter_seconds', '.2f')} | {cell(r, 'glad_acc', '.4f')} |", flush=True)
    for note in sorted(notes):
        print(f"\nnote: {note}")

    if args.json:
        ref.write_reference(args.json, ("crowd-kit", "pandas", "numpy", "scipy"),
                            {"GLAD": settings, "duplicates": "drop (task, worker) duplicates, keep last"}, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
