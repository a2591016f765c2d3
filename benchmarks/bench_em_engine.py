"""DS time per EM iteration before and after the engine, alternately in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_em_engine.py --answers 1000000 10000000 [--threads 2]

"Before" is the code of ``--before`` (default ``1fd030d``, the last commit
with ``EMWorkspace``), extracted with ``git archive`` into a temporary
package ``crowdagg_old``; "after" is this checkout's ``EMState`` on the
local engine.  One iteration is the M-step from the current statistics
and the fused E-step and statistics pass over the answers; both run on
the same synthetic crowd (``synth.make_crowd``, K = 5), alternately, so
machine load hits both alike.  Prints min and median ms of each, and the
two log-likelihoods (equal: the same iteration).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def extract(rev: str, into: Path) -> None:
    """``crowdagg/`` of ``rev`` as the package ``crowdagg_old`` under ``into``."""
    tar = into / "old.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(HERE.parent), "archive", rev, "crowdagg"], stdout=fh, check=True)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    (into / "crowdagg").rename(into / "crowdagg_old")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--before", default="1fd030d")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=0, help="iterations timed (default: 25 up to 2M answers, else 16)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-em-engine-"))
    extract(args.before, tmp)
    sys.path.insert(0, str(tmp))
    import synth
    from crowdagg_old.core.threads import use_threads as old_use_threads
    from crowdagg_old.kernels.em import EMWorkspace

    from crowdagg.core.threads import use_threads
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.engine import LocalEngine
    from crowdagg.methods.blocks import full_m_step, soft_majority_vote
    from crowdagg.methods.em.ds import EMState

    for n in args.answers:
        task, worker, label, _, _, _ = synth.make_crowd(n, 5, 0)
        data = AnnotationSet.from_codes(task, worker, label, n_classes=5)
        del task, worker, label
        with use_threads(args.threads), old_use_threads(args.threads):
            ws = EMWorkspace(data.task_ptr, data.worker, data.label, data.n_workers, data.n_classes)
            ws.accumulate(soft_majority_vote(data))
            clamp = np.full(data.n_tasks, -1, dtype=np.int64)

            def old_iteration(ws: EMWorkspace = ws, clamp: np.ndarray = clamp) -> float:
                counts, tot = ws.stats()
                prior, conf_ot = full_m_step(counts.copy(), tot.copy(), 0.0)
                return ws._e_step(np.log(prior), np.log(conf_ot), clamp)

            state = EMState(LocalEngine(data), None, None, full_m_step, 0.0)  # makes its first iteration
            old_iteration()
            old_iteration()
            state.iterate()
            t_old, t_new = [], []
            for _ in range(args.repeats or (25 if n <= 2_000_000 else 16)):
                t = time.perf_counter()
                a = old_iteration()
                t_old.append(time.perf_counter() - t)
                t = time.perf_counter()
                b = state.iterate()
                t_new.append(time.perf_counter() - t)
        print(f"{n:,} answers ({data.n_tasks:,} tasks, {data.n_workers:,} workers, K=5, {args.threads} threads, "
              f"{LocalEngine(data).n_blocks} blocks): ms per iteration, min / median of {len(t_old)}: "
              f"before {1e3 * min(t_old):.1f} / {1e3 * np.median(t_old):.1f}, "
              f"after {1e3 * min(t_new):.1f} / {1e3 * np.median(t_new):.1f}  (log-likelihood {a:.6f} vs {b:.6f})",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
