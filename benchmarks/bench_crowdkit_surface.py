"""crowdagg.crowdkit.DawidSkene beside crowd-kit's own DawidSkene, on the same crowd, in one run.

What a crowd-kit user gets by changing the import: the same class, the same
semantics (its EM start, loss and stopping rule), crowdagg's kernels.

    .venv/bin/python benchmarks/bench_crowdkit_surface.py --answers 1000000 [10000000]
        [--crowdkit-python .venv-bench/bin/python] [--iters 5] [--repeats 3] [--json OUT]

Synthetic crowd of ``benchmarks/synth.py`` (K = 5, 5 answers per task, one-coin
workers with accuracy U(0.6, 0.9)), as a DataFrame of int64 columns task, worker,
label.  ``DawidSkene(n_iter=N, tol=-inf)`` is fitted with N = 2 and N = 2 + iters
(min of ``repeats``); ms per EM iteration = (t(N2) - t(N1)) / (N2 - N1), so the
set-up (majority vote, first M-step, building the arrays) is excluded and shown
apart.  crowd-kit runs ``benchmarks/crowdkit_speed.py`` -- the same crowd, the same
timing -- under the crowd-kit interpreter (``bash benchmarks/setup_crowdkit.sh``
makes ``.venv-bench``); each size and each tool in a fresh process.  Both report
their accuracy after N2 iterations: the same model on the same data, it must agree.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


def _one(n_answers: int, n_classes: int, seed: int, n1: int, iters: int, repeats: int) -> dict:
    """One size, in this process: our surface's fits at n_iter = n1 and n1 + iters."""
    import resource

    import numpy as np
    import pandas as pd
    import synth

    from crowdagg.crowdkit import DawidSkene

    task, worker, label, truth, n_tasks, n_workers = synth.make_crowd(n_answers, n_classes, seed)
    df = pd.DataFrame({"task": task, "worker": worker, "label": label})
    del task, worker, label
    DawidSkene(n_iter=1).fit(df.iloc[:1000])  # load the kernels

    def best(n_iter: int) -> tuple[float, DawidSkene]:
        times, model = [], None
        for _ in range(repeats):
            model = DawidSkene(n_iter=n_iter, tol=-np.inf)
            t = time.perf_counter()
            model.fit(df)
            times.append(time.perf_counter() - t)
            assert len(model.loss_history_) == n_iter
        return min(times), model  # type: ignore[return-value]

    n2 = n1 + iters
    t1, _ = best(n1)
    t2, model = best(n2)
    per_iter = (t2 - t1) / iters
    return {
        "answers": len(df), "tasks": int(n_tasks), "workers": int(n_workers), "classes": n_classes,
        "fit_n1_s": t1, "fit_n2_s": t2, "n1": n1, "n2": n2, "ms_per_iter": per_iter * 1e3,
        "setup_s": t1 - n1 * per_iter,
        "accuracy_after_n2": float((model.labels_.reindex(np.arange(n_tasks)).to_numpy() == truth).mean()),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _crowdkit(python: str, n: int, n_classes: int, seed: int, iters: int, repeats: int) -> dict | None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "crowdkit.json"
        cmd = [python, str(HERE / "crowdkit_speed.py"), "--answers", str(n), "--classes", str(n_classes),
               "--seed", str(seed), "--iters", str(iters), "--repeats", str(repeats), "--json", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"crowd-kit run failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return None
        return json.loads(out.read_text())


def _both(ours: dict, ck: dict | None, key: str, fmt: str) -> str:
    return format(ours[key], fmt) + (" / " + format(ck[key], fmt) if ck else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--answers", type=int, nargs="+", default=[1_000_000])
    p.add_argument("--classes", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--crowdkit-python", default=str(ROOT / ".venv-bench" / "bin" / "python"),
                   help="an interpreter with crowd-kit 1.4.2 (skipped when absent)")
    p.add_argument("--json", default=str(HERE / "results" / "crowdkit_surface.json"))
    args = p.parse_args(argv)
    have_ck = Path(args.crowdkit_python).exists()
    print(f"DawidSkene(n_iter=N, tol=-inf), K={args.classes}, 5 answers per task; ms per EM iteration = "
          f"(t(N2)-t(N1))/(N2-N1), min of {args.repeats}; each size and tool in a fresh process\n")
    print("| answers | tasks | workers | crowdagg.crowdkit ms/iter | crowd-kit ms/iter | speed-up "
          "| set-up s (ours / crowd-kit) | accuracy after N2 (ours / crowd-kit) | peak RSS MiB (ours / crowd-kit) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for n in args.answers:
        cmd = [sys.executable, __file__, "_one", str(n), str(args.classes), str(args.seed), "2", str(args.iters),
               str(args.repeats)]
        ours = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        ck = None
        if have_ck:
            ck = _crowdkit(args.crowdkit_python, n, args.classes, args.seed, args.iters, args.repeats)
        rows.append({"crowdagg.crowdkit": ours, "crowd-kit": ck})

        print(f"| {n:,} | {ours['tasks']:,} | {ours['workers']:,} | {ours['ms_per_iter']:.1f} | "
              + (f"{ck['ms_per_iter']:.0f} | {ck['ms_per_iter'] / ours['ms_per_iter']:.0f}x" if ck else " | ")
              + f" | {_both(ours, ck, 'setup_s', '.2f')} | {_both(ours, ck, 'accuracy_after_n2', '.4f')}"
              + f" | {_both(ours, ck, 'peak_rss_mib', '.0f')} |",
              flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        print(json.dumps(_one(*(int(a) for a in sys.argv[2:8]))))
    else:
        sys.exit(main())
