"""What to relabel next, replayed on the real datasets: accuracy against answers added, per policy.

For each dataset (``labels.csv`` + ``truth.csv`` under ``$CROWDAGG_DATASETS``, duplicates dropped keeping the
last; accuracy on the tasks with truth):

* **start**: one answer per task, drawn at random (seeded); every other answer is hidden, each task's hidden
  answers in a random order (seeded).
* **rounds**: fit ``ds`` on the answers revealed so far; a policy scores the tasks that still have hidden answers
  and the ``batch`` best get their next hidden answer; ``ds`` is refitted and its accuracy recorded.  ``batch`` is
  a tenth of the tasks; the replay adds up to ``--per-task`` answers per task on average (default 2: from 1 to 3
  answers a task), or until nothing is hidden.
* **policies** (the same fit, the same hidden answers, equal scores in one seeded random order):

  - ``eig``: ours, :func:`crowdagg.reports.relabel.relabel_plan` (expected information gain of one more answer
    under the ``ds`` workers; highest first);
  - ``uncertainty``: 1 - the largest ``ds`` posterior (highest first);
  - ``random``: a seeded draw;
  - ``activelab``: cleanlab's ActiveLab (``cleanlab.multiannotator.get_active_learning_scores``, lowest first) with
    the ``ds`` posteriors as its ``pred_probs`` (no classifier: what it has where there are no features);
  - ``activelab_lr`` (music, labelme: they have features): ActiveLab with a logistic regression's 5-fold
    out-of-fold probabilities, trained on the current ``ds`` labels, as ``pred_probs``.

Also, on all the answers: the accuracy of the **lowest-quality decile** -- the tenth of the tasks with the lowest
``ds`` confidence (ours) and with the lowest CROWDLAB consensus quality score
(``get_label_quality_multiannotator``; ``pred_probs`` as ActiveLab's), each of its own consensus label -- and the
share of all the errors that decile holds (a quality score that finds errors puts them there).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_relabel.py                  # the default datasets, 3 seeds
    PYTHONPATH=. .venv/bin/python benchmarks/bench_relabel.py bluebird rte --seeds 1

Writes ``benchmarks/results/relabel.json`` (``--json``) and ``benchmarks/figures/relabel_accuracy.png`` and
``relabel_gain.png`` (``--figures``; needs matplotlib).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", ROOT.parent / "shared" / "datasets"))
#: The categorical sets but trec (19,033 tasks, truth on 2,275 of them: a replay's dense ActiveLab matrix and
#: twenty fits per policy cost more than the rest together).
DEFAULT = ("bluebird", "cf", "cf_amt", "dog", "face", "labelme", "music", "rte", "sentiment", "sp_amt", "temp",
           "web", "zencrowd")
WITH_FEATURES = ("music", "labelme")
POLICIES = ("eig", "uncertainty", "random", "activelab", "activelab_lr")
#: The policies of the main table, and their column names.
SHOWN = {"eig": "eig", "uncertainty": "unc.", "random": "random", "activelab": "activelab"}


def cleanlab_missing() -> str:
    """Why ActiveLab and CROWDLAB are left out ('' when cleanlab and scikit-learn import): the `bench` extra's."""
    try:
        import cleanlab  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as e:
        return f"ActiveLab and CROWDLAB left out: {e.name or 'cleanlab'} is not installed (pip install -e '.[bench]')"
    return ""
#: Where the table reads the curves: answers added per task.
MARKS = (0.5, 1.0, 2.0)


# --------------------------------------------------------------------------- the data
class Replay:
    """One dataset's answers (codes), truth and features, and the seeded start/hidden split."""

    def __init__(self, name: str, root: Path = DATASETS) -> None:
        from crowdagg import load_annotations
        from crowdagg.io.read import read_task_labels

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.data = load_annotations(root / name / "labels.csv", duplicates="last")
        d = self.data
        truth = read_task_labels(root / name / "truth.csv")
        names = d.task_names.tolist()
        cls = {c: i for i, c in enumerate(d.classes)}
        self.truth = np.array([cls.get(truth.get(t), -1) for t in names], dtype=np.int64)
        self.scored = self.truth >= 0
        self.features = None
        if name in WITH_FEATURES and (root / name / "features.npy").exists():
            feats = np.load(root / name / "features.npy").astype(np.float64)
            order = (root / name / "tasks.txt").read_text().split()
            row = {t: i for i, t in enumerate(order)}
            self.features = reduce(feats[[row[t] for t in names]])

    def split(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Answers sorted by (task, a seeded key): ``order`` (n_answers,), each task's first position ``ptr``
        (n_tasks + 1,); the first answer of each task is the start."""
        d = self.data
        key = np.random.default_rng(seed).random(d.n_answers)
        order = np.lexsort((key, d.task))
        ptr = np.concatenate([[0], np.cumsum(np.bincount(d.task, minlength=d.n_tasks))])
        shown = np.minimum(ptr[1:] - ptr[:-1], 1)
        return order, ptr, shown

    def subset(self, order: np.ndarray, ptr: np.ndarray, shown: np.ndarray) -> Any:
        """The revealed answers (each task's first ``shown``) as an AnnotationSet on the same vocabularies."""
        from crowdagg.data.annotations import AnnotationSet

        d = self.data
        pos = np.repeat(ptr[:-1], shown) + (np.arange(shown.sum()) - np.repeat(np.cumsum(shown) - shown, shown))
        rows = order[pos]
        return AnnotationSet.from_codes(
            d.task[rows], d.worker[rows], d.label[rows], n_tasks=d.n_tasks, n_workers=d.n_workers,
            n_classes=d.n_classes, task_names=d.task_names, worker_names=d.worker_names, classes=d.classes,
        )

    def accuracy(self, labels: np.ndarray) -> float:
        return float(np.mean(labels[self.scored] == self.truth[self.scored]))


#: Principal components the features are cut to before the logistic regression (labelme has 512 features: a
#: 5-fold fit a round on all of them cost more than every other policy together; 50 keep most of the variance).
N_COMPONENTS = 50


def reduce(features: np.ndarray) -> np.ndarray:
    """The features standardised and cut to their first :data:`N_COMPONENTS` principal components (no labels read:
    done once, before any replay)."""
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    x = StandardScaler().fit_transform(features)
    return PCA(min(N_COMPONENTS, x.shape[1]), random_state=0).fit_transform(x) if x.shape[1] > N_COMPONENTS else x


def fit_ds(data: Any) -> Any:
    from crowdagg.methods.api import aggregate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return aggregate(data, "ds")


def dense_labels(data: Any) -> np.ndarray:
    """(n_tasks, workers with answers) of class codes, NaN where none: cleanlab's ``labels_multiannotator``."""
    used = np.flatnonzero(data.answers_per_worker > 0)
    col = np.full(data.n_workers, -1, dtype=np.int64)
    col[used] = np.arange(len(used))
    dense = np.full((data.n_tasks, len(used)), np.nan)
    dense[data.task, col[data.worker]] = data.label
    return dense


def oof_probs(features: np.ndarray, labels: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """A logistic regression's 5-fold out-of-fold class probabilities (n, k), trained on ``labels``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import KFold, StratifiedKFold

    x = features
    out = np.full((len(labels), k), 1.0 / k)
    counts = np.bincount(labels, minlength=k)
    folds = (StratifiedKFold(5, shuffle=True, random_state=seed) if counts[counts > 0].min() >= 5
             else KFold(5, shuffle=True, random_state=seed))
    for train, test in folds.split(x, labels):
        clf = LogisticRegression(max_iter=200, C=0.1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(x[train], labels[train])
        out[np.ix_(test, clf.classes_)] = clf.predict_proba(x[test])
        missing = np.setdiff1d(np.arange(k), clf.classes_)
        out[np.ix_(test, missing)] = 0.0
    out = np.clip(out, 1e-6, None)
    return out / out.sum(axis=1, keepdims=True)


@contextlib.contextmanager
def quiet_cleanlab() -> Any:
    """cleanlab prints its notes (annotators without overlap) to stdout, and warns: the tables keep stdout."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def clean_probs(p: np.ndarray) -> np.ndarray:
    """Posteriors for cleanlab: no exact 0 (it takes logs), rows summing to 1."""
    p = np.clip(p, 1e-9, None)
    return p / p.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------- the policies (higher score first)
def policy_scores(policy: str, result: Any, data: Any, replay: Replay, rng: np.random.Generator) -> np.ndarray:
    if policy == "eig":
        from crowdagg.reports.relabel import relabel_plan

        return relabel_plan(result).score
    if policy == "uncertainty":
        return 1.0 - result.posteriors.max(axis=1)
    if policy == "random":
        return rng.random(data.n_tasks)
    from cleanlab.multiannotator import get_active_learning_scores

    if policy == "activelab":
        probs = clean_probs(result.posteriors)
    else:
        probs = oof_probs(replay.features, result.labels, data.n_classes)
    with quiet_cleanlab():
        scores, _ = get_active_learning_scores(dense_labels(data), probs)
    return -np.asarray(scores)


def run_policy(replay: Replay, policy: str, seed: int, per_task: float) -> dict[str, Any]:
    """One replay: accuracy after each round, and the answers added by then."""
    d = replay.data
    order, ptr, shown = replay.split(seed)
    available = ptr[1:] - ptr[:-1]
    batch = max(1, d.n_tasks // 10)
    budget = min(int(round(per_task * d.n_tasks)), int((available - shown).sum()))
    rng = np.random.default_rng([seed, 7])
    tie = np.random.default_rng([seed, 11]).permutation(d.n_tasks)  # equal scores: one random order for all
    added, acc, seconds = [0], [], 0.0
    data = replay.subset(order, ptr, shown)
    result = fit_ds(data)
    acc.append(replay.accuracy(result.labels))
    while added[-1] < budget:
        open_ = np.flatnonzero(shown < available)
        t0 = time.perf_counter()
        score = policy_scores(policy, result, data, replay, rng)[open_]
        seconds += time.perf_counter() - t0
        take = min(batch, budget - added[-1], len(open_))
        pick = open_[np.lexsort((tie[open_], -score))[:take]]
        shown = shown.copy()
        shown[pick] += 1
        added.append(added[-1] + take)
        data = replay.subset(order, ptr, shown)
        result = fit_ds(data)
        acc.append(replay.accuracy(result.labels))
    return {"added": added, "accuracy": acc, "policy_seconds": seconds}


def at(curve: dict[str, Any], answers: float) -> float | None:
    """Accuracy once ``answers`` were added (linear between rounds); None past the curve's end."""
    added = np.asarray(curve["added"], dtype=float)
    if answers > added[-1] + 1e-9:
        return None
    return float(np.interp(answers, added, curve["accuracy"]))


# --------------------------------------------------------------------------- the lowest-quality decile
def deciles(replay: Replay) -> dict[str, Any]:
    """Accuracy of the tenth of the tasks each quality score ranks lowest (all answers), and its share of errors."""
    d = replay.data
    result = fit_ds(d)
    tie = np.random.default_rng(5).permutation(d.n_tasks)
    scored = np.flatnonzero(replay.scored)
    n_low = max(1, len(scored) // 10)

    def low(quality: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        q = quality[scored]
        lowest = scored[np.lexsort((tie[scored], q))[:n_low]]
        wrong = labels[scored] != replay.truth[scored]
        return {"decile_accuracy": float(np.mean(labels[lowest] == replay.truth[lowest])),
                "errors_in_decile": float(np.sum(labels[lowest] != replay.truth[lowest]) / max(wrong.sum(), 1)),
                "accuracy": float(np.mean(~wrong))}

    from crowdagg.reports.relabel import relabel_plan

    out = {"ds_confidence": low(result.confidence, result.labels),
           "ds_eig": low(-relabel_plan(result).score, result.labels)}
    if cleanlab_missing():
        return out
    from cleanlab.multiannotator import get_label_quality_multiannotator

    probs = {"crowdlab": clean_probs(result.posteriors)}
    if replay.features is not None:
        probs["crowdlab_lr"] = oof_probs(replay.features, result.labels, d.n_classes)
    for key, p in probs.items():
        with quiet_cleanlab():
            res = get_label_quality_multiannotator(dense_labels(d), p, verbose=False, return_annotator_stats=False,
                                                   return_detailed_quality=False)
        frame = res["label_quality"]
        out[key] = low(frame["consensus_quality_score"].to_numpy(), frame["consensus_label"].to_numpy())
    return out


# --------------------------------------------------------------------------- table and figures
def mean_curve(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The seeds' mean curve (every seed adds the same answers per round)."""
    return {"added": runs[0]["added"], "accuracy": np.mean([r["accuracy"] for r in runs], axis=0).tolist()}


def print_tables(results: dict[str, Any]) -> None:
    print("\nAccuracy (ds) after adding answers, by policy (mean over seeds); `start` is one answer per task, "
          "`all` every answer\n")
    shown = [p for p in SHOWN if all(p in r["curves"] for r in results.values())]
    head = "| dataset | start | " + " | ".join(f"+{m:g}/task {SHOWN[p]}" for m in MARKS for p in shown) + " | all |"
    print(head)
    print("|---|---:|" + "---:|" * (len(shown) * len(MARKS) + 1))
    means: dict[str, list[float]] = {}
    for name, r in results.items():
        cells = [f"{r['curves']['random']['accuracy'][0]:.3f}"]
        n = r["n_tasks"]
        for m in MARKS:
            for p in shown:
                v = at(r["curves"][p], m * n)
                cells.append("" if v is None else f"{v:.3f}")
                if v is not None:
                    means.setdefault(f"{m}:{p}", []).append(v)
        print(f"| {name} | " + " | ".join(cells) + f" | {r['all_answers']:.3f} |")
    print("\nMean over the datasets reaching each mark:")
    for m in MARKS:
        parts = [f"{p} {np.mean(means[f'{m}:{p}']):.4f}" for p in shown
                 if f"{m}:{p}" in means]
        print(f"  +{m:g} answers/task ({len(means.get(f'{m}:eig', []))} sets): " + ", ".join(parts))
    lr = {n: r for n, r in results.items() if "activelab_lr" in r["curves"]}
    if lr:
        print("\nWith features (ActiveLab on a logistic regression's out-of-fold probabilities):")
        for name, r in lr.items():
            vals = [at(r["curves"][p], m * r["n_tasks"]) for m in MARKS for p in ("eig", "activelab_lr")]
            print(f"  {name}: " + ", ".join(f"+{m:g}/task eig {a:.3f} vs activelab_lr {b:.3f}"
                                            for m, a, b in zip(MARKS, vals[::2], vals[1::2])
                                            if a is not None and b is not None))
    print("\nLowest-quality decile (all answers; its accuracy, and its share of all the errors):\n")
    print("| dataset | ds accuracy | ds confidence: decile acc. | errors caught | ds EIG (highest): decile acc. | "
          "errors caught | CROWDLAB (ds posteriors): decile acc. | errors caught | CROWDLAB (LR): decile acc. | "
          "errors caught |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        dec = r["deciles"]
        cells = [f"{dec['ds_confidence']['accuracy']:.3f}"]
        for key in ("ds_confidence", "ds_eig", "crowdlab", "crowdlab_lr"):
            if key in dec:
                cells += [f"{dec[key]['decile_accuracy']:.3f}", f"{dec[key]['errors_in_decile']:.2f}"]
            else:
                cells += ["", ""]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for key in ("ds_confidence", "ds_eig", "crowdlab"):
        if not all(key in r["deciles"] for r in results.values()):
            continue
        vals = [r["deciles"][key]["decile_accuracy"] for r in results.values()]
        caught = [r["deciles"][key]["errors_in_decile"] for r in results.values()]
        print(f"  mean {key}: decile accuracy {np.mean(vals):.3f}, errors caught {np.mean(caught):.2f}")


def plot(results: dict[str, Any], figures: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures.mkdir(parents=True, exist_ok=True)
    names = list(results)
    cols = 4
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    style = {"eig": ("C0", "-"), "uncertainty": ("C1", "--"), "random": ("C7", ":"), "activelab": ("C3", "-."),
             "activelab_lr": ("C2", "-.")}
    for ax, name in zip(axes.flat, names):
        r = results[name]
        for p, curve in r["curves"].items():
            x = np.asarray(curve["added"]) / r["n_tasks"]
            ax.plot(x, curve["accuracy"], color=style[p][0], linestyle=style[p][1], label=p)
        ax.axhline(r["all_answers"], color="k", linewidth=0.5)
        ax.set_title(name)
        ax.set_xlabel("answers added per task")
        ax.set_ylabel("ds accuracy")
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    handles: dict[str, Any] = {}
    for ax in axes.flat:  # every policy once (activelab_lr is drawn on the sets with features only)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    spare = list(axes.flat)[len(names)] if len(names) < axes.size else axes.flat[0]
    spare.legend(handles.values(), handles.keys(), loc="center" if len(names) < axes.size else "best")
    fig.tight_layout()
    fig.savefig(figures / "relabel_accuracy.png", dpi=90)
    plt.close(fig)
    # each policy's accuracy minus random's, averaged over the datasets, on a common per-task axis
    fig, ax = plt.subplots(figsize=(6, 4))
    grid = np.linspace(0, max(MARKS), 41)
    for p in [p for p in ("eig", "uncertainty", "activelab") if all(p in r["curves"] for r in results.values())]:
        diffs = []
        for r in results.values():
            n = r["n_tasks"]
            row = [at(r["curves"][p], g * n) for g in grid]
            base = [at(r["curves"]["random"], g * n) for g in grid]
            diffs.append([np.nan if a is None or b is None else a - b for a, b in zip(row, base)])
        ax.plot(grid, np.nanmean(np.asarray(diffs, dtype=float), axis=0), color=style[p][0], linestyle=style[p][1],
                label=p)
    ax.axhline(0, color=style["random"][0], linestyle=":", label="random")
    ax.set_xlabel("answers added per task")
    ax.set_ylabel("accuracy - random's (mean over datasets)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(figures / "relabel_gain.png", dpi=90)
    plt.close(fig)


def protocol(args: argparse.Namespace) -> dict[str, Any]:
    return {"start": "1 answer per task", "batch": "n_tasks // 10", "per_task": args.per_task, "seeds": args.seeds,
            "aggregator": "ds", "duplicates": "last", "lr_features": f"standardised, first {N_COMPONENTS} PCs"}


def save(args: argparse.Namespace, results: dict[str, Any]) -> None:
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"protocol": protocol(args), "datasets": results}, indent=1))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("datasets", nargs="*", default=list(DEFAULT))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--per-task", type=float, default=2.0, help="answers added per task on average (default 2)")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "relabel.json")
    ap.add_argument("--figures", type=Path, default=HERE / "figures")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--resume", action="store_true", help="keep the datasets --json already holds (same protocol)")
    ap.add_argument("--plot-only", action="store_true", help="draw the figures from --json alone")
    ap.add_argument("--deciles-only", action="store_true",
                    help="recompute only the lowest-quality deciles of the datasets --json holds")
    args = ap.parse_args(argv)
    if args.plot_only:
        plot(json.loads(args.json.read_text())["datasets"], args.figures)
        return
    if args.deciles_only:
        stored = json.loads(args.json.read_text())
        for name, r in stored["datasets"].items():
            r["deciles"] = deciles(Replay(name))
        args.json.write_text(json.dumps(stored, indent=1))
        print_tables(stored["datasets"])
        return
    missing = cleanlab_missing()
    if missing:
        print(missing, file=sys.stderr)
    results: dict[str, Any] = {}
    done: dict[str, Any] = {}
    if args.resume and args.json.exists():  # the datasets an interrupted run of the same protocol finished
        earlier = json.loads(args.json.read_text())
        if earlier.get("protocol", {}) == protocol(args):
            done = earlier["datasets"]
    for name in args.datasets:
        if name in done:
            results[name] = done[name]
            continue
        t0 = time.perf_counter()
        replay = Replay(name)
        policies = [p for p in POLICIES if (p != "activelab_lr" or replay.features is not None)
                    and not (p.startswith("activelab") and missing)]
        curves, seconds = {}, {}
        for p in policies:
            runs = [run_policy(replay, p, seed, args.per_task) for seed in range(args.seeds)]
            curves[p] = mean_curve(runs)
            curves[p]["per_seed"] = [r["accuracy"] for r in runs]
            seconds[p] = float(np.mean([r["policy_seconds"] for r in runs]))
        results[name] = {
            "n_tasks": replay.data.n_tasks, "n_answers": replay.data.n_answers, "n_scored": int(replay.scored.sum()),
            "all_answers": replay.accuracy(fit_ds(replay.data).labels), "curves": curves,
            "policy_seconds": seconds, "deciles": deciles(replay),
        }
        results[name]["seconds"] = time.perf_counter() - t0
        print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        save(args, results)  # after each dataset: --resume picks up from here
    results = dict(sorted(results.items()))
    print_tables(results)
    save(args, results)
    if not args.no_plot:
        plot(results, args.figures)


if __name__ == "__main__":
    main(sys.argv[1:])
