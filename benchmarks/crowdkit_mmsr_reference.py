"""Reference accuracies of crowd-kit 1.4.2's MMSR on the real datasets in ../shared/datasets, beside crowdagg's mmsr.

crowd-kit is NOT a dependency of crowdagg: it is the test extra (``pip install -e '.[test]'``) or the isolated
``.venv-bench`` of ``benchmarks/crowdkit_reference.py`` (``bash benchmarks/setup_crowdkit.sh``).

Run (from the repository root):

    .venv/bin/python benchmarks/crowdkit_mmsr_reference.py [--datasets DIR] [--json OUT] [--only rte,dog]
    # --datasets defaults to $CROWDAGG_DATASETS, else ../shared/datasets

For every dataset folder but the numeric ``emotion`` (answers read as str, duplicate (task, worker) pairs dropped
keeping the LAST one, accuracy on the tasks with a truth label), this reports:

  * ``crowd-kit acc`` -- ``MMSR()`` with its defaults (n_iter 10,000, tol 1e-10, random_state 0), its iterations
    (``len(loss_history_)``), seconds, and the workers its skills_ make negative; a failure (its vote's all-NaN
    scores when every skill is 0, an allocation) is printed in their place;
  * ``mmsr acc`` -- ``crowdagg.aggregate(data, "mmsr")`` (signs from each worker's pair evidence), its negative
    workers, and ``max ||w| - |w_ck||``: the largest difference of the skills' magnitudes (crowdagg's ``weight``
    against crowd-kit's ``skills_``, the same log-odds: the same rank-one completion);
  * ``spectral acc`` -- ``signs=spectral`` (crowd-kit's sign step on the co-labelled pairs only).

Everything is deterministic; nothing is downloaded.
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
    from crowdkit.aggregation import MMSR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crowdkit_reference as ref  # noqa: E402


def ours(data: pd.DataFrame, truth: pd.Series, theirs: pd.Series | None) -> dict:
    """crowdagg's mmsr (both sign rules) on the same answers."""
    import crowdagg

    annotations = crowdagg.load_annotations(data)
    out: dict = {}
    for key, params in (("mmsr", {}), ("spectral", {"signs": "spectral"})):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = crowdagg.aggregate(annotations, "mmsr", **params)
        out[f"{key}_seconds"] = time.perf_counter() - t0
        out[f"{key}_acc"] = ref.accuracy(ref.labels_by_task(result), truth)
        weight = pd.Series(result.worker_params["weight"], index=result.data.worker_names.tolist())
        out[f"{key}_negative"] = int((weight < 0).sum())
        if key == "mmsr" and theirs is not None:
            theirs = theirs.reindex(weight.index)
            same = np.sign(weight) == np.sign(theirs)  # (clipped unevenly by sign when K > 2: compared where alike)
            out["max_dw"] = float(np.abs(np.abs(weight[same]) - np.abs(theirs[same])).max()) if same.any() else 0.0
            out["signs_agree"] = float(same.mean())
    return out


def run_dataset(path: str) -> dict:
    data, truth, n_raw = ref.read_dataset(path)
    row = ref.dataset_shape(data, truth, n_raw)
    t0 = time.perf_counter()
    theirs = None
    try:
        with warnings.catch_warnings():  # crowd-kit's pandas FutureWarnings
            warnings.simplefilter("ignore")
            model = MMSR().fit(data)
            theirs = model.skills_
            labels = model.predict(data)
        row.update(crowdkit_acc=ref.accuracy(labels, truth), crowdkit_iters=len(model.loss_history_),
                   crowdkit_negative=int((theirs < 0).sum()))
    except (ValueError, MemoryError) as e:
        row["crowdkit_error"] = f"{type(e).__name__}: {e}"
    row["crowdkit_seconds"] = time.perf_counter() - t0
    row.update(ours(data, truth, theirs))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ref.reference_options(ap, only=True)
    args = ap.parse_args(argv)
    names = ref.dataset_names(args.datasets, args.only)
    if not names:
        return 1
    print(f"{ref.versions('crowd-kit', 'pandas', 'numpy')}; MMSR() defaults; duplicates (task, worker) dropped "
          "keeping the last\n")
    print("| dataset | answers | workers | crowd-kit acc | iters | negative | seconds | mmsr acc | negative | "
          "max ‖w|−|w_ck‖ | signs agree | spectral acc | negative |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    results = {}
    for name in names:
        r = run_dataset(os.path.join(args.datasets, name))
        results[name] = r
        ck = (f"{r['crowdkit_acc']:.4f} | {r['crowdkit_iters']} | {r['crowdkit_negative']}" if "crowdkit_acc" in r
              else f"{r['crowdkit_error']} | | ")
        dw = f"{r['max_dw']:.1e} | {r['signs_agree']:.2f}" if "max_dw" in r else " | "
        print(f"| {name} | {r['n_answers']} | {r['n_workers']} | {ck} | {r['crowdkit_seconds']:.1f} | "
              f"{r['mmsr_acc']:.4f} | {r['mmsr_negative']} | {dw} | {r['spectral_acc']:.4f} | "
              f"{r['spectral_negative']} |", flush=True)
    if args.json:
        ref.write_reference(args.json, ("crowd-kit", "pandas", "numpy", "scipy"),
                            {"MMSR": {"n_iter": 10000, "tol": 1e-10, "random_state": 0},
                             "duplicates": "drop (task, worker) duplicates, keep last"}, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
