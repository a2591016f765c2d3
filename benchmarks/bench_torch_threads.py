"""Seconds per epoch of the trainers with torch on 1 and 2 threads, alone and beside a busy core.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_torch_threads.py            # every case below (long)
    # the figures of crowdagg.core.threads.default_torch_threads:
    PYTHONPATH=. .venv/bin/python benchmarks/bench_torch_threads.py --cases music labelme --epochs 12
    PYTHONPATH=. .venv/bin/python benchmarks/bench_torch_threads.py --cases wide --tasks 5000 \
        --hidden 128 512 2048 --epochs 3 --repeat 2 --busy no --quiet-below 0.3 --quiet-wait 90
    PYTHONPATH=. .venv/bin/python benchmarks/bench_torch_threads.py --cases wide --tasks 5000 --hidden 2048 \
        --epochs 3 --repeat 1 --busy yes
    PYTHONPATH=. .venv/bin/python benchmarks/bench_torch_threads.py --cases wide --tasks 20000 --epochs 3 \
        --repeat 1 --busy no

The measurements behind the default of torch's thread count
(:func:`crowdagg.core.threads.torch_threads`).  Each case is fitted with
``crowdagg.use_threads(n)`` for n = 1 and 2 (an explicit count: torch runs
on n threads), (a) alone and (b) beside one CPU-bound process (``python -c
"while True: pass"``, started before the fits and killed after), so that a
machine whose cores other work keeps busy shows.  A figure is the median
of the seconds between the loop's per-epoch callbacks (``--epochs`` epochs:
the first interval starts after the first epoch, so setup is left out),
beside the one-minute load average (``os.getloadavg``) read just before the
fit, and the cores the other processes kept busy during the fit (from
``/proc/stat``, this process's own CPU time taken out): on a shared machine
they say what else ran.  ``--quiet-below 0.3`` waits (at most
``--quiet-wait`` seconds) before each fit alone until the others use under
0.3 cores.

The cases (the trainers' declared defaults -- the mlp of hidden 128,
batches of 64 tasks -- but where ``--hidden`` and ``--wide-batch`` say):

* ``music`` and ``labelme`` -- ``crowdlayer`` and ``raykar`` on
  ``$CROWDAGG_DATASETS/{music,labelme}`` (``features.npy`` rows in
  ``tasks.txt`` order, ``labels.csv``): 700 tasks × 124 features, 1,000 ×
  512;
* ``wide`` -- ``crowdlayer`` on a synthetic crowd (``--tasks`` tasks, 30
  workers, 3 answers a task, 8 classes, 512-d Gaussian features,
  :func:`crowdagg.simulate.features.gaussian_features`) with a wider network
  (``--hidden``, default 1024; several give one row each) on batches of 64
  and of 1,024 tasks (``--wide-batch``), where a second thread has the most
  to split.

Each row also gives the work of a batch as the rule reads it: the
network's weights × the batch's rows (multiply-adds of one forward pass
of an mlp), and what the default rule
(:func:`crowdagg.core.threads.default_torch_threads`) chooses for it on
this machine.  ``--json FILE`` writes every measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench_train import datasets_root, load_dataset  # noqa: E402

CASES = ("music", "labelme", "wide")
BUSY = "while True: pass"


def busy_seconds() -> float:
    """CPU seconds every process on this machine has run so far (``/proc/stat``: user, nice, system, irq,
    softirq, steal)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    return (sum(fields[:3]) + sum(fields[5:8])) / os.sysconf("SC_CLK_TCK")


def others_now(seconds: float = 1.0) -> float:
    """The cores the rest of the machine keeps busy over the next ``seconds`` (this process idle meanwhile)."""
    machine0 = busy_seconds()
    time.sleep(seconds)
    return max(busy_seconds() - machine0, 0.0) / seconds


def wait_for_quiet(below: float, patience: float) -> None:
    """Wait until other processes use under ``below`` cores (a second's sample), at most ``patience`` seconds:
    an "alone" figure on a shared machine is one taken while the others rest (the table says what they did)."""
    deadline = time.monotonic() + patience
    while others_now() >= below and time.monotonic() < deadline:
        pass


def epoch_seconds(method: str, data, x: np.ndarray, params: dict, threads: int) -> tuple[float, float]:
    """The median seconds per epoch of ``method`` fitted with torch on ``threads`` threads (an explicit count),
    and the cores other processes kept busy meanwhile (CPU seconds of the machine but this process's, per
    second of the fit)."""
    import crowdagg
    from crowdagg.methods.registry import get_trainer

    marks: list[float] = []
    cls = get_trainer(method).load()
    t0, machine0, own0 = time.perf_counter(), busy_seconds(), time.process_time()
    with warnings.catch_warnings(), crowdagg.use_threads(threads):
        warnings.simplefilter("ignore")
        cls(**params).fit(data, x, callback=lambda epoch, objective: marks.append(time.perf_counter()))
    others = (busy_seconds() - machine0 - (time.process_time() - own0)) / (time.perf_counter() - t0)
    return (statistics.median(np.diff(marks)) if len(marks) > 1 else float("nan")), max(others, 0.0)


def work_per_batch(data, x: np.ndarray, params: dict) -> tuple[int, int]:
    """(the network's weights, its weights × the batch's rows): what the thread rule reads."""
    from crowdagg.learning import networks
    from crowdagg.methods.registry import get_trainer

    declared = {p.name: p.default for p in get_trainer("crowdlayer").params}
    p = {**declared, **params}
    spec = networks.NetSpec(p["model"], tuple(x.shape[1:]), data.n_classes, p["hidden"], p["dropout"])
    weights = networks.n_weights(spec)
    return weights, weights * min(p["batch_size"], data.n_tasks)


def cases(opts) -> list[tuple[str, str, object, np.ndarray, dict]]:
    """(case, method, data, features, parameters) of every fit asked for."""
    out = []
    for name in ("music", "labelme"):
        if name in opts.cases:
            ds = load_dataset(name, datasets_root())
            for method in opts.methods:
                out.append((name, method, ds.data, ds.x, {"epochs": opts.epochs, "seed": 0, "device": "cpu"}))
    if "wide" in opts.cases:
        from crowdagg.simulate import simulate
        from crowdagg.simulate.features import gaussian_features

        crowd = simulate(n_tasks=opts.tasks, n_workers=30, n_classes=8, per_task=3, seed=0)
        x = gaussian_features(crowd.truth, 8, dim=512, seed=0)
        data = crowd.to_annotations()
        for hidden in opts.hidden:
            for batch in opts.wide_batch:
                out.append((f"wide ({opts.tasks:,} tasks, hidden {hidden:,}, batch {batch:,})", "crowdlayer", data, x,
                            {"epochs": opts.epochs, "seed": 0, "device": "cpu", "hidden": hidden,
                             "batch_size": batch}))
    return out


def table(rows: list[dict]) -> str:
    """One line per case, method and busy/alone: the median s/epoch of each count over the repeats (their range
    beside it), the other work's cores and the load, and what the rule chooses for the case."""
    from crowdagg.core import threads

    counts = sorted({r["threads"] for r in rows})
    head = ["case", "method", "beside a busy core", "weights × batch rows",
            *(f"{n} thread{'s' if n > 1 else ''}: s/epoch (range)" for n in counts),
            "other work (cores)", "1-min load", "default rule"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["case"], r["method"], r["busy"]), []).append(r)
    for (case, method, busy), group in groups.items():
        cells = []
        for n in counts:
            s = [r["epoch_s"] for r in group if r["threads"] == n]
            cells.append(f"{statistics.median(s):.3f} ({min(s):.3f}–{max(s):.3f})" if s else "—")
        others = [r["others"] for r in group]
        loads = [r["load"] for r in group]
        work = group[0]["work"]
        lines.append(f"| {case} | `{method}` | {'yes' if busy else 'no'} | {work:,} | " + " | ".join(cells)
                     + f" | {min(others):.2f}–{max(others):.2f} | {min(loads):.2f}–{max(loads):.2f} | "
                     f"{threads.default_torch_threads(work, threads.all_cores())} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--methods", nargs="+", default=["crowdlayer", "raykar"], help="trainers on music and labelme")
    ap.add_argument("--epochs", type=int, default=4, help="epochs per fit (the median of the last epochs - 1)")
    ap.add_argument("--tasks", type=int, default=100_000, help="tasks of the wide case")
    ap.add_argument("--hidden", type=int, nargs="+", default=[1024], help="hidden units of the wide case's mlp")
    ap.add_argument("--wide-batch", type=int, nargs="+", default=[64, 1024], help="batch sizes of the wide case")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3, help="fits per count (the table gives their median)")
    ap.add_argument("--busy", nargs="+", choices=("no", "yes"), default=["no", "yes"],
                    help="alone (no) and beside one busy process (yes)")
    ap.add_argument("--quiet-below", type=float, metavar="CORES",
                    help="before each fit alone, wait until other processes use under CORES cores (a shared machine)")
    ap.add_argument("--quiet-wait", type=float, default=120.0, metavar="S", help="... for at most S seconds")
    ap.add_argument("--json", help="write every measurement here")
    opts = ap.parse_args(argv)

    import torch

    print(f"{os.cpu_count()} CPUs, torch {torch.__version__} ({torch.__config__.parallel_info().splitlines()[-1]})",
          file=sys.stderr)
    rows = []
    for case, method, data, x, params in cases(opts):
        weights, work = work_per_batch(data, x, params)
        for busy in opts.busy:
            hog = subprocess.Popen([sys.executable, "-c", BUSY]) if busy == "yes" else None
            try:
                if hog is not None:
                    time.sleep(1.0)  # let the busy loop take its core
                for repeat in range(opts.repeat):
                    for n in opts.threads:  # interleaved: a change of load between repeats falls on both counts
                        if hog is None and opts.quiet_below is not None:
                            wait_for_quiet(opts.quiet_below, opts.quiet_wait)
                        load = os.getloadavg()[0]
                        seconds, others = epoch_seconds(method, data, x, params, n)
                        row = {"case": case, "method": method, "busy": busy == "yes", "threads": n,
                               "repeat": repeat, "epoch_s": seconds, "load": load, "others": others,
                               "weights": weights, "work": work}
                        rows.append(row)
                        print(f"{case:<20} {method:<11} busy={busy:<3} threads={n}  {seconds:8.3f} s/epoch  "
                              f"load {load:4.2f}  other work {others:4.2f} cores  weights {weights:,}  "
                              f"work/batch {work:,}", file=sys.stderr)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
    print(table(rows))
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
