"""Graph inference (bp, mf, kos) beside ds, onecoin and mv: deepBP's accuracy curves, and speed beside crowd-kit.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_graph.py accuracy [--seeds 20]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_graph.py speed [--answers 1000000 [10000000]] [--crowds sparse dense]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_graph.py --quick       # both, small, in well under a minute

**accuracy** -- deepBP's synthetic setting (Kim, Cho, Kim & Ok, AISTATS 2022, §4, Figs. 2 and 3c/d;
``simulate(scenario="deepbp")``): N = 1,000 binary tasks, l = 3 workers per task, r = 4 tasks per worker
(M = 750), one-coin workers whose accuracy is drawn from Beta(α1, α2), plus extreme spammers who answer every
task uniformly at random.  One crowd per seed and setting; every method sees the same crowds.

* *prior* (Fig. 2): true prior Beta(α1, α1/2), α1 ∈ {0.2, 0.5, 1, 2} (α1 < 1: sparse -- most workers
  near-perfect hammers or adversaries), no extreme spammer.  ``bp`` and ``mf`` get the true prior as their model
  prior ("true"), and their own default prior ("default", what a user who does not know it gets).
* *mismatch* (Fig. 3a/b): true prior Beta(2, 1) and one extreme spammer; ``bp`` and ``mf`` with the true prior and
  with the model prior Beta(2, α2), α2 ∈ {0.8, 1.0, 1.2, 1.4, 1.6} (α2 = 1: the true one).
* *spammers* (Fig. 3c/d): true prior Beta(2, 1), 0 to 5 extreme spammers.  ``bp`` and ``mf`` with the true prior
  and with the paper's mismatched Beta(2, 1.4).

Each cell is the mean ± standard deviation over the seeds of the accuracy on the 1,000 tasks; the last column is
the MAP under the true worker accuracies (the best these answers allow; no method sees them).  Below the tables,
the issue's claim checked row by row: BP (true prior) against MF (true prior) and DS, by the mean of the paired
per-seed difference and its standard error, and each method's drop from 0 to the most extreme spammers.

**speed** -- deepBP's sparse graph scaled up (binary, l = 3, r = 4: ``simulate(answers // 3,
scenario="deepbp")``, 1M answers = 333,333 tasks and 250,000 workers) and the dense crowd
(``simulate(answers // 5, scenario="dense-heavy")``: 1,000 one-coin workers, ~1,000 answers each, worker 0 a
spammer on 10% of the tasks).  The crowd is drawn once (seed 0) and written as ``labels.csv``.  Each crowdagg
method then runs in a fresh process that loads its compiled kernels with a fit on a tiny crowd, reads the CSV
and times one fit (its defaults, seed 0): the fit's wall time, the process's peak RSS (``VmHWM``) and the
fit's peak above the RSS before it.  Then the whole command as a user runs it, ``crowdagg aggregate labels.csv
--method M > out.csv``, under ``/usr/bin/time -v`` (wall time and maximum RSS).  crowd-kit 1.4.2 (``KOS()``,
``DawidSkene()``, ``MMSR()``; their defaults) runs on the same CSV read by pandas (ids as int64), each in its own
process, stopped after ``--crowdkit-timeout`` seconds.  On the dense crowd, ``crowdagg workers labels.csv`` (the
annotator report) is timed the same way.

The issue's targets: bp and kos under 2 s at 1M sparse answers, under 20 s at 10M; under 10 s on the dense 1M
crowd; ``crowdagg workers`` under 5 s on it; crowd-kit's KOS took 19 s at 1M.

A method or command not in this checkout is left out with a note (the graph methods land one by one).
``--json`` writes every row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from procstat import status_mib  # this folder: the script's own path entry

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The accuracy tables' methods, in column order: (column, method, model prior: "true", "other" (the row's) or None).
ACCURACY_COLUMNS = (
    ("bp (true prior)", "bp", "true"),
    ("bp (other prior)", "bp", "other"),
    ("mf (true prior)", "mf", "true"),
    ("mf (other prior)", "mf", "other"),
    ("ds", "ds", None),
    ("onecoin", "onecoin", None),
    ("mv", "mv", None),
    ("kos", "kos", None),
)
#: Fig. 2's true priors Beta(α1, α1 / 2).
ALPHA1 = (0.2, 0.5, 1.0, 2.0)
#: Fig. 3a/b: the model priors Beta(2, α2) beside the true Beta(2, 1), with one extreme spammer.
ALPHA2 = (0.8, 1.0, 1.2, 1.4, 1.6)
#: Fig. 3c/d: the true prior, and the mismatched model prior the paper gives every method.
SPAM_PRIOR = (2.0, 1.0)
SPAM_MODEL_PRIOR = (2.0, 1.4)
#: The names under which a method may declare its worker prior (the first declared one is used).
PRIOR_PARAMS = ("prior", "worker_prior", "beta_prior")

#: The speed tables' crowdagg methods and crowd-kit's, in row order.
SPEED_METHODS = ("bp", "kos", "mf", "ds", "onecoin", "mv")
CROWDKIT_METHODS = ("KOS", "DawidSkene", "MMSR")
#: The issue's targets, seconds: (crowd, answers) -> {method: bound}; "workers" is the annotator report.
TARGETS = {("sparse", 1_000_000): {"bp": 2.0, "kos": 2.0}, ("sparse", 10_000_000): {"bp": 20.0, "kos": 20.0},
           ("dense", 1_000_000): {"bp": 10.0, "kos": 10.0, "workers": 5.0}}


# --------------------------------------------------------------------------------------------------- shared
def registered(names) -> tuple[list[str], list[str]]:
    """``(present, missing)``: which of ``names`` this checkout's registry declares."""
    from crowdagg.methods.registry import METHODS

    return [n for n in names if n in METHODS], [n for n in names if n not in METHODS]


def prior_param(method: str) -> str | None:
    """The name of the parameter by which ``method`` takes its worker prior, if it declares one."""
    from crowdagg.methods.registry import get

    declared = {p.name for p in get(method).params}
    return next((p for p in PRIOR_PARAMS if p in declared), None)


def fit(data, method: str, prior: tuple[float, float] | None = None, seed: int = 0):
    """``crowdagg.aggregate(data, method, seed=seed)`` (``prior`` passed as the method's worker-prior parameter),
    its warnings silenced (the table is the point)."""
    from crowdagg import aggregate
    from crowdagg.methods.registry import get

    params: dict = {"seed": seed} if "seed" in {p.name for p in get(method).params} else {}
    if prior is not None:
        name = prior_param(method)
        if name is None:
            raise SystemExit(f"{method} declares no worker-prior parameter ({', '.join(PRIOR_PARAMS)})")
        params[name] = prior
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return aggregate(data, method, **params)


def oracle_accuracy(crowd) -> float:
    """Accuracy of the MAP labels under the TRUE prior and matrices: what the crowd's answers allow at best (the
    benchmark's yardstick; no method sees it).  Matrices are clipped to [1e-12, 1]: a sparse Beta draws
    accuracies of exactly 0 or 1."""
    logpost = np.tile(np.log(crowd.prior), (crowd.n_tasks, 1))
    # answer (task n, worker w, label l) adds log C_w[k, l] to every class k of task n
    np.add.at(logpost, crowd.task, np.log(np.clip(crowd.confusion[crowd.worker, :, crowd.label], 1e-12, 1.0)))
    return float(np.mean(np.argmax(logpost, axis=1) == crowd.truth))


def mean_sd(values) -> str:
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.4f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.4f}"


# --------------------------------------------------------------------------------------------------- accuracy
def accuracy_settings(quick: bool) -> list[dict]:
    """The rows of the two tables: ``{"table", "row", "beta", "extreme", "other"}``, ``other`` the prior of the
    "other prior" columns (``None``: the method's default)."""
    rows = [{"table": "prior", "row": f"Beta({a:g}, {a / 2:g})", "beta": (a, a / 2), "extreme": 0, "other": None}
            for a in (ALPHA1[::3] if quick else ALPHA1)]
    rows += [{"table": "mismatch", "row": f"Beta(2, {a2:g})", "beta": SPAM_PRIOR, "extreme": 1, "other": (2.0, a2)}
             for a2 in (ALPHA2[::4] if quick else ALPHA2)]
    rows += [{"table": "spammers", "row": str(e), "beta": SPAM_PRIOR, "extreme": e, "other": SPAM_MODEL_PRIOR}
             for e in ((0, 2) if quick else range(6))]
    return rows


def run_accuracy(seeds: list[int], n_tasks: int, quick: bool) -> list[dict]:
    from crowdagg.methods.registry import get
    from crowdagg.simulate import simulate

    present, missing = registered(dict.fromkeys(m for _, m, _ in ACCURACY_COLUMNS))
    if missing:
        print(f"not registered in this checkout (left out of the accuracy tables): {', '.join(missing)}")
    columns = [c for c in ACCURACY_COLUMNS if c[1] in present and (c[2] is None or prior_param(c[1]) is not None)]
    for c in ACCURACY_COLUMNS:
        if c[1] in present and c not in columns:
            print(f"{c[1]} declares no worker prior ({', '.join(PRIOR_PARAMS)}): its prior columns are left out")
    rows = []
    done: dict[tuple, tuple[list[float], float]] = {}  # (method, prior, true prior, spammers) -> (accuracies, s)
    for s in accuracy_settings(quick):
        acc: dict[str, list[float]] = {}
        seconds: dict[str, float] = {}
        todo = []
        for col, method, which in columns:
            prior = {"true": s["beta"], "other": s["other"], None: None}[which]
            key = (method, prior, s["beta"], s["extreme"])
            if key in done:  # the same fits on the same crowds as an earlier row's
                acc[col], seconds[col] = done[key]
            else:
                todo.append((col, method, prior, key))
                acc[col], seconds[col] = [], 0.0
        acc["MAP, true accuracies"] = []
        for seed in seeds:
            crowd = simulate(n_tasks, scenario="deepbp", worker_prior=s["beta"], extreme_spammers=s["extreme"],
                             seed=seed)
            data = crowd.to_annotations()
            for col, method, prior, _ in todo:
                t = time.perf_counter()
                result = fit(data, method, prior=prior, seed=seed)
                seconds[col] += time.perf_counter() - t
                acc[col].append(float(np.mean(result.labels == crowd.truth)))
            acc["MAP, true accuracies"].append(oracle_accuracy(crowd))
        for col, _, _, key in todo:
            done[key] = (acc[col], seconds[col])
        rows.append({**s, "accuracy": acc, "seconds": {c: seconds[c] for c, _, _, _ in todo}, "seeds": len(seeds)})
    defaults = ", ".join(f"{m}: Beta({', '.join(f'{x:g}' for x in get(m).param(name).default)})"
                         for m in ("bp", "mf") if m in present and (name := prior_param(m)) is not None)
    for table, title, first in (
        ("prior", "Fig. 2: true prior = model prior Beta(α1, α1/2), no extreme spammer; \"other prior\" is the "
                  f"method's default ({defaults or 'none here'})", "true prior"),
        ("mismatch", "Fig. 3a/b: true prior Beta(2, 1), one extreme spammer; \"other prior\" is the model prior "
                     "in the first column", "other prior"),
        ("spammers", "Fig. 3c/d: true prior Beta(2, 1), extreme spammers added; \"other prior\" is the paper's "
                     "mismatched Beta(2, 1.4)", "extreme spammers"),
    ):
        mine = [r for r in rows if r["table"] == table]
        if not mine:
            continue
        heads = list(mine[0]["accuracy"])
        print(f"\n### {title} (N = {n_tasks:,}, l = 3, r = 4; mean ± sd over {len(seeds)} seeds)\n")
        print(f"| {first} | " + " | ".join(heads) + " |")
        print("|---|" + "---:|" * len(heads))
        for r in mine:
            best = max(np.mean(r["accuracy"][h]) for h in heads[:-1])
            cells = [("**" + mean_sd(r["accuracy"][h]) + "**") if np.mean(r["accuracy"][h]) == best and
                     h != heads[-1] else mean_sd(r["accuracy"][h]) for h in heads]
            print(f"| {r['row']} | " + " | ".join(cells) + " |")
    print_claims(rows)
    total: dict[str, float] = {}
    for r in rows:
        for c, sec in r["seconds"].items():
            total[c] = total.get(c, 0.0) + sec
    print("\nFit seconds, all settings and seeds: " + ", ".join(f"{c} {s:.1f}" for c, s in total.items()
                                                               if not c.startswith("MAP")))
    return rows


def print_claims(rows: list[dict]) -> None:
    """The issue's claim, row by row: BP >= MF and >= DS (and MV, KOS), each with the row's own model prior for BP
    and MF (the true one; the "other" one in the mismatch table); BP degrades less as extreme spammers are added."""
    if not rows or "bp (true prior)" not in rows[0]["accuracy"]:
        return
    rivals = [c for c in ("mf", "ds", "mv", "kos") if any(k.split(" ")[0] == c for k in rows[0]["accuracy"])]
    print("\n### The claim: BP against each method, paired over seeds\n")
    print("Mean of the per-seed difference BP − other, ± its standard error; ✓ where BP's mean is at least the "
          "other's.  BP and MF use the true prior, except in the mismatch rows (the row's model prior).\n")
    print("| table | row | " + " | ".join(f"BP − {c.upper()}" for c in rivals) + " |")
    print("|---|---|" + "---:|" * len(rivals))
    wins = dict.fromkeys(rivals, 0)
    counted: set[tuple] = set()  # Beta(2, 1) without spammers is a row of two tables: counted once
    for r in rows:
        which = "other prior" if r["table"] == "mismatch" else "true prior"
        mismatched = r["table"] == "mismatch" and tuple(r["other"]) != tuple(r["beta"])
        setting = (tuple(r["beta"]), r["extreme"], tuple(r["other"]) if mismatched else None)
        fresh = setting not in counted
        counted.add(setting)
        a = np.asarray(r["accuracy"][f"bp ({which})"])
        cells = []
        for c in rivals:
            d = a - np.asarray(r["accuracy"][f"mf ({which})" if c == "mf" else c])
            se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else 0.0
            ok = d.mean() >= 0
            wins[c] += ok and fresh
            cells.append(f"{d.mean():+.4f} ± {se:.4f} {'✓' if ok else '✗'}")
        print(f"| {r['table']} | {r['row']} | " + " | ".join(cells) + " |")
    print("\nSettings where BP's mean is at least the other's: "
          + ", ".join(f"{c.upper()} {wins[c]}/{len(counted)}" for c in rivals))
    spam = [r for r in rows if r["table"] == "spammers"]
    if len(spam) > 1:
        lo, hi = spam[0], spam[-1]
        drops = {c: np.mean(lo["accuracy"][c]) - np.mean(hi["accuracy"][c]) for c in lo["accuracy"]}
        print(f"\nDrop in mean accuracy from {lo['extreme']} to {hi['extreme']} extreme spammers (smaller is more "
              "robust): " + ", ".join(f"{c} {d:+.4f}" for c, d in drops.items()))


# --------------------------------------------------------------------------------------------------- speed
def draw_crowd(kind: str, answers: int, seed: int = 0):
    from crowdagg.simulate import simulate

    if kind == "sparse":
        return simulate(answers // 3, scenario="deepbp", seed=seed)
    return simulate(answers // 5, scenario="dense-heavy", seed=seed)


def crowd_dir(kind: str, answers: int, workdir: Path) -> Path:
    """The crowd's ``labels.csv`` (and ``truth.csv``, ...) plus ``truth.npy`` and ``oracle.json``, drawn once (seed
    0) and reused."""
    out = workdir / f"{kind}_{answers}"
    if (out / "oracle.json").is_file():
        return out
    crowd = draw_crowd(kind, answers)
    crowd.write(out)
    np.save(out / "truth.npy", crowd.truth)
    (out / "oracle.json").write_text(json.dumps({"oracle_accuracy": oracle_accuracy(crowd), "answers": crowd.n_answers,
                                                 "tasks": crowd.n_tasks, "workers": crowd.n_workers}))
    return out


def task_index(names) -> np.ndarray:
    """Simulated task names ``t<i>`` as their indices ``i``."""
    return np.char.lstrip(np.asarray(names).astype(str), "t").astype(np.int64)


def speed_child(method: str, kind: str, folder: Path, out: Path) -> None:
    """One crowdagg method on the crowd in ``folder``, in this fresh process; its figures as JSON into ``out``."""
    t_start = time.perf_counter()
    from crowdagg import load_annotations
    from crowdagg.core.threads import count

    fit(draw_crowd(kind, 3000, seed=1).to_annotations(), method)  # the kernels: numba's cache (compiled once)
    startup = time.perf_counter() - t_start
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations(folder / "labels.csv")
    read_s = time.perf_counter() - t
    truth = np.load(folder / "truth.npy")
    peak_reading = status_mib("VmHWM")
    with open("/proc/self/clear_refs", "w") as fh:  # VmHWM := the RSS now, so the peak below is the fit's
        fh.write("5")
    before = status_mib("VmHWM")
    t = time.perf_counter()
    result = fit(data, method)
    fit_s = time.perf_counter() - t
    peak_fit = status_mib("VmHWM")
    labels = np.asarray(result.label_names()).astype(np.int64)
    accuracy = float(np.mean(labels == truth[task_index(data.task_names)]))
    out.write_text(json.dumps({"side": "crowdagg", "method": method, "threads": count(), "startup_s": startup,
                               "read_s": read_s, "fit_s": fit_s, "peak_rss_mib": max(peak_reading, peak_fit),
                               "fit_peak_above_mib": peak_fit - before, "n_iter": int(result.n_iter),
                               "accuracy": accuracy}))


def crowdkit_child(method: str, folder: Path, out: Path) -> None:
    """One crowd-kit 1.4.2 aggregator (its defaults) on the crowd's CSV read by pandas, in this fresh process.

    The ids ``t<i>``/``w<j>`` are given to it as int64 ``i``/``j`` (pandas groups integers several times faster
    than strings; crowd-kit's own speed benchmarks use integer ids too)."""
    import pandas as pd
    from crowdkit import aggregation

    frame = pd.read_csv(folder / "labels.csv")
    frame["task"] = frame["task"].str.slice(1).astype(np.int64)
    frame["worker"] = frame["worker"].str.slice(1).astype(np.int64)
    truth = np.load(folder / "truth.npy")
    model = getattr(aggregation, method)()
    t = time.perf_counter()
    labels = model.fit_predict(frame)
    fit_s = time.perf_counter() - t
    accuracy = float(np.mean(labels.to_numpy().astype(np.int64) == truth[labels.index.to_numpy(np.int64)]))
    out.write_text(json.dumps({"side": "crowd-kit", "method": f"crowd-kit {method}", "fit_s": fit_s,
                               "peak_rss_mib": status_mib("VmHWM"), "accuracy": accuracy}))


#: The 1-minute load average sampled before each timed process: a loaded machine's figures say so.
LOADS: list[float] = []


def run_child(args: list[str], timeout: float | None = None) -> tuple[int | None, float, str]:
    """Run this script with ``args`` in a fresh process: (exit code, None on timeout; wall s; stderr)."""
    LOADS.append(os.getloadavg()[0])
    t = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT)}
    try:
        proc = subprocess.run([sys.executable, __file__, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t, ""
    return proc.returncode, time.perf_counter() - t, proc.stderr


def timed_command(args: list[str], stdout: Path) -> dict:
    """``crowdagg ARGS > stdout`` under ``/usr/bin/time -v``: wall s, maximum RSS MiB, exit code, stderr's tail."""
    cmd = [sys.executable, "-m", "crowdagg._entry", *args]
    LOADS.append(os.getloadavg()[0])
    timer = shutil.which("time") or "/usr/bin/time"
    use_timer = Path(timer).is_file()
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT)}
    t = time.perf_counter()
    with open(stdout, "wb") as fh:
        proc = subprocess.run(([timer, "-v"] if use_timer else []) + cmd, stdout=fh, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln and not ln.startswith("\t")]
    return {"code": proc.returncode, "wall_s": wall, "max_rss_mib": int(rss.group(1)) / 1024 if rss else None,
            "stderr": "\n".join(lines[-3:])}


def command_exists(name: str) -> bool:
    from crowdagg.cli import app

    return any((c.name or getattr(c.callback, "__name__", "")) == name for c in app.registered_commands)


def run_speed(answers: list[int], kinds: list[str], methods: list[str], ck_methods: list[str], workdir: Path,
              ck_timeout: float, reuse_crowdkit: bool = False) -> list[dict]:
    rows = []
    present, missing = registered(methods)
    if missing:
        print(f"not registered in this checkout (left out of the speed table): {', '.join(missing)}")
    has_workers = command_exists("workers")
    if not has_workers:
        print("`crowdagg workers` is not in this checkout: its row is left out")
    for n in answers:
        for kind in kinds:
            folder = crowd_dir(kind, n, workdir)
            meta = json.loads((folder / "oracle.json").read_text())
            base = {"crowd": kind, "answers_asked": n, **meta}
            for method in present:
                out = workdir / f"speed_{kind}_{n}_{method}.json"
                code, wall, err = run_child(["--speed-child", method, kind, str(folder), str(out)])
                if code:
                    sys.stderr.write(err)
                    rows.append({**base, "side": "crowdagg", "method": method, "failed": err.strip().splitlines()[-1:]})
                    continue
                row = {**base, **json.loads(out.read_text()), "process_s": wall}
                cli = timed_command(["aggregate", str(folder / "labels.csv"), "--method", method],
                                    workdir / f"out_{method}.csv")
                row["cli"] = cli
                rows.append(row)
            if kind == "dense" and has_workers:
                cli = timed_command(["workers", str(folder / "labels.csv")], workdir / "workers_out.csv")
                rows.append({**base, "side": "crowdagg", "method": "crowdagg workers", "cli": cli})
            for method in ck_methods:
                if method == "MMSR" and meta["workers"] > 20_000:
                    rows.append({**base, "side": "crowd-kit", "method": f"crowd-kit {method}",
                                 "skipped": f"dense {meta['workers']:,} x {meta['workers']:,} worker covariance"})
                    continue
                out = workdir / f"speed_{kind}_{n}_ck_{method}.json"
                if reuse_crowdkit and out.is_file():  # crowd-kit's side does not change with this checkout
                    rows.append({**base, **json.loads(out.read_text()), "reused": True})
                    continue
                code, wall, err = run_child(["--crowdkit-child", method, str(folder), str(out)], timeout=ck_timeout)
                if code is None:  # kept like a result: --reuse-crowdkit does not wait for it again
                    stopped = {"side": "crowd-kit", "method": f"crowd-kit {method}",
                               "skipped": f"stopped after {ck_timeout:.0f} s"}
                    out.write_text(json.dumps(stopped))
                    rows.append({**base, **stopped})
                elif code:
                    rows.append({**base, "side": "crowd-kit", "method": f"crowd-kit {method}",
                                 "skipped": "failed: " + (err.strip().splitlines() or ["?"])[-1]})
                else:
                    rows.append({**base, **json.loads(out.read_text()), "process_s": wall})
    print_speed(rows)
    return rows


def print_speed(rows: list[dict]) -> None:
    print("\n### Speed and memory (fresh process per method; crowdagg's defaults, seed 0; crowd-kit 1.4.2's "
          "defaults)\n")
    print("| crowd | answers | tasks | workers | method | fit s | target s | whole command s | command's max RSS MiB "
          "| fit's peak above the data MiB | iterations | accuracy |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        target = TARGETS.get((r["crowd"], r["answers_asked"]), {})
        key = "workers" if r["method"] == "crowdagg workers" else r["method"]
        bound = target.get(key)
        mark = " †" if r.get("reused") else ""
        head = f"| {r['crowd']} | {r['answers']:,} | {r['tasks']:,} | {r['workers']:,} | {r['method']}{mark} |"
        if "skipped" in r or "failed" in r:
            print(head + f" {r.get('skipped') or r.get('failed')} | | | | | | |")
            continue
        cli = r.get("cli")
        fit_s = f"**{r['fit_s']:.2f}**" if "fit_s" in r else "–"
        if cli is None:
            whole = "–"
        elif cli["code"]:
            whole = f"exit {cli['code']}: {cli['stderr'].splitlines()[-1] if cli['stderr'] else ''}"
        else:
            whole = f"**{cli['wall_s']:.2f}**" if r["method"] == "crowdagg workers" else f"{cli['wall_s']:.2f}"
        rss = cli["max_rss_mib"] if cli and cli.get("max_rss_mib") else r.get("peak_rss_mib")
        cells = [fit_s, "–" if bound is None else f"< {bound:g}", whole, "–" if rss is None else f"{rss:.0f}",
                 f"{r['fit_peak_above_mib']:.0f}" if "fit_peak_above_mib" in r else "–", str(r.get("n_iter", "–")),
                 f"{r['accuracy']:.4f}" if "accuracy" in r else "–"]
        print(head + " " + " | ".join(cells) + " |")
    seen = {(r["crowd"], r["answers"]): r["oracle_accuracy"] for r in rows}
    print("\nAccuracy of the MAP labels under the true worker accuracies (the best these answers allow): "
          + ", ".join(f"{c} {n:,} answers {a:.4f}" for (c, n), a in seen.items()))
    if any(r.get("reused") for r in rows):
        print("† crowd-kit's figures from an earlier run on the same crowd (--reuse-crowdkit).")
    threads = {r["threads"] for r in rows if "threads" in r}
    print(f"crowdagg threads: {', '.join(map(str, sorted(threads))) or '–'}; crowd-kit and the CLI's writing are "
          "single-threaded.")
    if LOADS:
        print(f"1-minute load average before each timed process: {min(LOADS):.1f} to {max(LOADS):.1f} on "
              f"{os.cpu_count()} cores (above the core count, the machine was shared and the times are long).")


# --------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", metavar="PART", help="accuracy and/or speed (default: both)")
    ap.add_argument("--quick", action="store_true", help="small sizes for the test suite: 2 seeds, N = 300, two rows "
                    "per table; 30,000 answers, bp, kos, mf and ds beside crowd-kit's KOS")
    ap.add_argument("--seeds", type=int, default=20, help="accuracy: seeds 0..SEEDS-1, one crowd each (default 20)")
    ap.add_argument("--tasks", type=int, default=1000, help="accuracy: N (deepBP: 1,000)")
    ap.add_argument("--answers", type=int, nargs="+", default=[1_000_000], help="speed: crowd sizes (answers)")
    ap.add_argument("--crowds", nargs="+", default=["sparse", "dense"], choices=["sparse", "dense"],
                    help="speed: deepBP's sparse (3, 4)-regular graph and/or the dense crowd")
    ap.add_argument("--methods", nargs="+", default=list(SPEED_METHODS), help="speed: crowdagg methods, in order")
    ap.add_argument("--crowdkit", nargs="*", default=list(CROWDKIT_METHODS),
                    help="speed: crowd-kit aggregators beside them (none: --crowdkit with no name)")
    ap.add_argument("--crowdkit-timeout", type=float, default=300.0, help="speed: stop a crowd-kit run after this")
    ap.add_argument("--reuse-crowdkit", action="store_true", help="speed: take crowd-kit's rows from an earlier "
                    "run's files in --workdir where there are any (its side does not change with crowdagg)")
    ap.add_argument("--workdir", type=Path, help="speed: where the crowds are written and kept (default: a "
                    "temporary folder, removed after)")
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument("--speed-child", nargs=4, metavar=("METHOD", "KIND", "DIR", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--crowdkit-child", nargs=3, metavar=("METHOD", "DIR", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.speed_child:
        method, kind, folder, dest = args.speed_child
        speed_child(method, kind, Path(folder), Path(dest))
        return 0
    if args.crowdkit_child:
        method, folder, dest = args.crowdkit_child
        crowdkit_child(method, Path(folder), Path(dest))
        return 0
    parts = args.parts or ["accuracy", "speed"]
    unknown = sorted(set(parts) - {"accuracy", "speed"})
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}: choose from accuracy, speed")
    if args.quick:
        args.seeds, args.tasks, args.answers, args.crowdkit = 2, 300, [30_000], ["KOS"]
        args.methods = ["bp", "kos", "mf", "ds"]
    out: dict = {}
    if "accuracy" in parts:
        out["accuracy"] = run_accuracy(list(range(args.seeds)), args.tasks, args.quick)
    if "speed" in parts:
        if args.crowdkit and subprocess.run([sys.executable, "-c", "import crowdkit.aggregation"],
                                            capture_output=True).returncode:
            print("crowd-kit is not installed here (pip install -e '.[test]'): crowdagg only")
            args.crowdkit = []
        with tempfile.TemporaryDirectory(prefix="bench-graph-") as tmp:
            workdir = args.workdir or Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            out["speed"] = run_speed(args.answers, args.crowds, args.methods, args.crowdkit, workdir,
                                     args.crowdkit_timeout, args.reuse_crowdkit)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
