"""crowdagg.crowdkit beside crowd-kit itself, on the same crowd, in one run: DawidSkene, MajorityVote, Wawa.

What a crowd-kit user gets by changing the import: the same class, the same
semantics (its EM start, loss and stopping rule, its tie order), crowdagg's kernels.

    .venv/bin/python benchmarks/bench_crowdkit_surface.py --answers 1000000 [10000000]
        [--crowdkit-python .venv-bench/bin/python] [--iters 5] [--repeats 3] [--json OUT]

MajorityVote / Wawa table: the whole ``fit_predict`` call (encoding the
frame, the votes, building the result frames), min of ``repeats``, on the
first ``--answers`` size, once with int64 columns and once with string ids
(``t<n>``, ``w<n>``, ``c<k>``: pandas 3's ``str`` columns), each tool in a
fresh process.  crowd-kit runs under ``--crowdkit-python`` (by default
``.venv-bench``, else this interpreter when it imports crowd-kit, as after
``pip install -e '.[test]'``).

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
sys.path[:0] = [str(HERE), str(ROOT)]  # synth, and this checkout's crowdagg (not an installed one)


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


def _votes(tool: str, n_answers: int, text: int, repeats: int) -> dict:
    """One tool's MajorityVote and Wawa ``fit_predict`` times on the crowd, in this process."""
    import warnings

    import pandas as pd
    import synth

    warnings.simplefilter("ignore")  # crowd-kit's pandas FutureWarnings
    if tool == "crowdagg":
        from crowdagg.crowdkit import MajorityVote, Wawa
    else:
        from crowdkit.aggregation import MajorityVote, Wawa
    task, worker, label, truth, n_tasks, n_workers = synth.make_crowd(n_answers, 5, 0)
    columns = {"task": task, "worker": worker, "label": label}
    if text:
        columns = {k: prefix + pd.Series(v).astype(str) for (k, v), prefix in zip(columns.items(), "twc")}
    df = pd.DataFrame(columns)
    del task, worker, label, columns
    for cls in (MajorityVote, Wawa):
        cls().fit_predict(df.iloc[:1000])  # load (and compile) first
    out: dict = {"tool": tool, "answers": len(df), "ids": "str" if text else "int64",
                 "dtypes": [str(t) for t in df.dtypes]}
    for cls in (MajorityVote, Wawa):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            labels = cls().fit_predict(df)
            times.append(time.perf_counter() - t)
        out[cls.__name__] = min(times)
        out[cls.__name__ + "_labels_head"] = [str(v) for v in labels.iloc[:3]]
    return out


def _votes_python(crowdkit_python: str) -> str | None:
    if Path(crowdkit_python).exists():
        return crowdkit_python
    probe = subprocess.run([sys.executable, "-c", "import crowdkit.aggregation"], capture_output=True)
    return sys.executable if probe.returncode == 0 else None


def _vote_rows(n: int, crowdkit_python: str, repeats: int) -> list[dict]:
    print(f"\nMajorityVote and Wawa: the whole fit_predict call, {n:,} answers, min of {repeats}; each tool "
          "and id kind in a fresh process\n")
    print("| ids | crowdagg.crowdkit MV s | crowd-kit MV s | speed-up | crowdagg.crowdkit Wawa s | crowd-kit Wawa s "
          "| speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ck_python = _votes_python(crowdkit_python)
    rows = []
    for text in (0, 1):
        runs = {}
        for tool, python in (("crowdagg", sys.executable), ("crowd-kit", ck_python)):
            if python is None:
                runs[tool] = None
                continue
            cmd = [python, __file__, "_votes", tool, str(n), str(text), str(repeats)]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if proc.returncode != 0:
                print(f"{tool} run failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                runs[tool] = None
                continue
            runs[tool] = json.loads(proc.stdout.splitlines()[-1])
        ours, ck = runs["crowdagg"], runs["crowd-kit"]
        assert ours is not None
        cells = [ours["ids"]]
        for name in ("MajorityVote", "Wawa"):
            cells += [f"{ours[name]:.3f}", f"{ck[name]:.3f}" if ck else "", f"{ck[name] / ours[name]:.1f}x" if ck else ""]
        print("| " + " | ".join(cells) + " |", flush=True)
        rows.append({"crowdagg.crowdkit": ours, "crowd-kit": ck})
    return rows


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
    p.add_argument("--no-ds", action="store_true", help="only the MajorityVote / Wawa table")
    args = p.parse_args(argv)
    have_ck = Path(args.crowdkit_python).exists()
    print(f"DawidSkene(n_iter=N, tol=-inf), K={args.classes}, 5 answers per task; ms per EM iteration = "
          f"(t(N2)-t(N1))/(N2-N1), min of {args.repeats}; each size and tool in a fresh process\n")
    print("| answers | tasks | workers | crowdagg.crowdkit ms/iter | crowd-kit ms/iter | speed-up "
          "| set-up s (ours / crowd-kit) | accuracy after N2 (ours / crowd-kit) | peak RSS MiB (ours / crowd-kit) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for n in [] if args.no_ds else args.answers:
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
    votes = _vote_rows(args.answers[0], args.crowdkit_python, args.repeats)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"rows": rows, "votes": votes}, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        print(json.dumps(_one(*(int(a) for a in sys.argv[2:8]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "_votes":
        print(json.dumps(_votes(sys.argv[2], *(int(a) for a in sys.argv[3:6]))))
    else:
        sys.exit(main())
