"""The trainers (``crowdagg train``) on the real datasets with features, beside CROWDLAB, and their speed.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_train.py labels   # inferred training labels, CROWDLAB beside
    PYTHONPATH=. .venv/bin/python benchmarks/bench_train.py cv       # 5-fold cross-validation on tasks
    PYTHONPATH=. .venv/bin/python benchmarks/bench_train.py test     # the published test sets, and the ceiling
    PYTHONPATH=. .venv/bin/python benchmarks/bench_train.py all      # the three above in one run (fits shared)
    PYTHONPATH=. .venv/bin/python benchmarks/bench_train.py speed [--device cuda]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_train.py --quick  # every table, tiny, in seconds (the CI smoke)

Every table covers every trainer in :data:`crowdagg.methods.registry.TRAINERS` (``--methods`` picks some;
``geocrowdnet``, the F variant under its plain name, is left out beside ``geocrowdnet-f``), with
its declared defaults (the classifier, epochs, batches, learning rate, weight decay, held-out answers: what
``crowdagg train`` gives), the seed of the row's repetition; ``--epochs`` and ``--param NAME=VALUE`` (given to
every method that declares NAME) override them.  Each cell is mean ± std over the seeds (``--seeds``, default
0 1 2; ``cv``: over folds × seeds).  The data: ``$CROWDAGG_DATASETS/{music,labelme}`` (``features.npy`` rows
in ``tasks.txt`` order, ``labels.csv``, ``truth.csv``, ``test_features.npy`` rows in ``test_truth.csv``
order).  Truth is read only to score: every method selects its epoch on held-out noisy answers.

**labels** -- the accuracy of the labels each method infers for the training tasks (``crowdagg train``'s
stdout), trained on all the answers; beside them our aggregators ``ds`` and ``mv`` and cleanlab 2.9's CROWDLAB
(:func:`cleanlab.multiannotator.get_label_quality_multiannotator`, its consensus labels): a scikit-learn
``LogisticRegression(max_iter=1000)`` on the features, its out-of-sample ``predict_proba`` from
``cross_val_predict`` over a seeded stratified 5-fold split, trained on the MV labels (cleanlab's tutorial), on
our DS labels, and each with ``calibrate_probs=True``.  cleanlab is a benchmark-only need
(``pip install 'crowdagg[bench]'``, or ``pip install cleanlab==2.9.0 scikit-learn``); without it the CROWDLAB
rows are left out with a note.

**cv** -- 5-fold cross-validation on tasks: a seeded split of the tasks into 5 folds; each method is trained on
the answers of 4 folds (the held-out fold's tasks are left out entirely: no answer, no feature row) and its
classifier is scored on the truth of the held-out fold; beside it, the accuracy of the labels it inferred for the
4 training folds.  ``ds``/``mv``: their training-label accuracy on the same folds.

**test** -- the published protocol: trained on every training answer (the fits of ``labels``), selected on
held-out noisy answers only, the classifier scored on labelme's 1,188 test images and music's 300 test songs,
beside the published figures, and the **ceiling** of our features: ``mv-then-train`` (same classifier, epochs,
weight decay, selection) on a set whose one annotator answers the truth of every training task.

**speed** -- seconds per epoch (from the loop's per-epoch callback: the median interval) of each method on
labelme, on this machine's CPU, and of ``--speed-method`` (default ``crowdlayer``) on a synthetic crowd
(``--items`` 100,000 tasks, ``--annotators`` 100, ``--per-task`` 3 answers each, 10 classes, 64-d class-conditional
Gaussian features: :func:`crowdagg.simulate.simulate` and :func:`crowdagg.simulate.features.gaussian_features`)
on ``--device`` (``cpu`` or ``cuda``), with the time of the same epoch's batches through the network alone
(forward, loss, backward, Adam step on batches sliced beforehand) and of the batch assembly alone (the shuffle
and the CSR gather of each batch's answers and rows), so that a data loader bottleneck shows; on CUDA also a
pure matmul of the epoch's size (the first layer's ``(items × 64) @ (64 × hidden)``, forward and backward: three
of them) and ``torch.cuda.utilization()`` sampled during the epochs (needs ``pynvml``).

``--threads N`` runs torch on N threads (``CROWDAGG_THREADS``); on a shared machine 1 is far faster than 2
(OpenMP's spinning threads wait on each other).  ``--json FILE`` writes every measurement; ``--cache FILE``
keeps each fit's measurements (keyed by dataset, method, seed, fold and options) so that a later run refits
only what is new (a trainer merged since) -- delete it when the code changes; ``--cache A B`` also reads B (a
parallel run's file) and writes A.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATASETS = ("music", "labelme")
#: The issue's figures for CROWDLAB and our ds (inferred training labels): column -> {dataset: accuracy}.
ISSUE_LABELS = {
    "CROWDLAB (LR on MV labels)": {"labelme": 0.820, "music": 0.718},
    "CROWDLAB (LR on DS labels)": {"labelme": 0.832, "music": 0.728},
    "CROWDLAB (LR on MV labels, calibrate_probs)": {"music": 0.797},
    "ds": {"labelme": 0.789, "music": 0.767},
}
#: The targets: the best end-to-end method above CROWDLAB's best configuration.
LABEL_TARGETS = {"labelme": 0.832, "music": 0.797}
#: Published test-set accuracies (%): (row, our method or None, {dataset: "figure"}).
PUBLISHED = (
    ("Max-MIG (Cao et al., ICLR 2019, Table 2)", None, {"labelme": "86.42 ± 0.36"}),
    ("AggNet (ibid.)", "raykar", {"labelme": "85.20 ± 0.26"}),
    ("CrowdLayer (ibid.)", "crowdlayer", {"labelme": "83.65 ± 0.50"}),
    ("MV-then-train (ibid.)", "mv-then-train", {"labelme": "80.41 ± 0.56"}),
    ("CoNAL (Chu et al., AAAI 2021)", None, {"labelme": "87.12", "music": "84.06"}),
)
CEILING = "ceiling: mv-then-train on the true labels"
#: Names that are another trainer under a second name (left out unless ``--methods`` names them).
ALIASES = {"geocrowdnet": "geocrowdnet-f"}
CLEANLAB_HINT = "pip install 'crowdagg[bench]' (or: pip install cleanlab==2.9.0 scikit-learn)"


# --------------------------------------------------------------------------------------------------- data
@dataclass
class Dataset:
    """One real dataset: ``data`` the answers, ``x`` (n_tasks, d) in task order, ``truth`` (n_tasks,) class
    indices (-1: unknown), ``test_x``/``test_truth`` the held-out test items (None when absent)."""

    name: str
    data: object
    x: np.ndarray
    truth: np.ndarray
    test_x: np.ndarray | None
    test_truth: np.ndarray | None


def datasets_root() -> Path:
    return Path(os.environ.get("CROWDAGG_DATASETS", ROOT.parent / "shared" / "datasets"))


def load_dataset(name: str, root: Path) -> Dataset:
    import pandas as pd

    import crowdagg

    folder = root / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = crowdagg.load_annotations(folder / "labels.csv")
    tasks = (folder / "tasks.txt").read_text().split()
    features = np.load(folder / "features.npy")
    where = {t: i for i, t in enumerate(tasks)}
    missing = [t for t in data.task_names if t not in where]
    if missing:
        raise SystemExit(f"{name}: {len(missing)} labelled tasks have no features (first {missing[0]!r})")
    x = features[[where[t] for t in data.task_names]].astype(np.float32)
    index = {str(c): i for i, c in enumerate(data.classes)}
    truth_map = pd.read_csv(folder / "truth.csv", dtype=str).set_index("task")["label"]
    truth = np.array([index.get(truth_map.get(t), -1) for t in data.task_names], dtype=np.int64)
    test_x = test_truth = None
    if (folder / "test_features.npy").exists():
        test_x = np.load(folder / "test_features.npy").astype(np.float32)
        test = pd.read_csv(folder / "test_truth.csv", dtype=str)
        test_truth = test["label"].map(index).to_numpy()
        if len(test) != len(test_x) or np.isnan(test_truth.astype(float)).any():
            raise SystemExit(f"{name}: test_truth.csv does not match test_features.npy or the classes")
        test_truth = test_truth.astype(np.int64)
    return Dataset(name, data, x, truth, test_x, test_truth)


def subset(data, tasks: np.ndarray):
    """The answers of ``tasks`` (sorted task indices) as a set of their own: same workers and classes."""
    from crowdagg.data.annotations import AnnotationSet

    new = np.full(data.n_tasks, -1, dtype=np.int64)
    new[tasks] = np.arange(tasks.size)
    keep = new[data.task] >= 0
    return AnnotationSet.from_codes(
        new[data.task[keep]], data.worker[keep], data.label[keep], n_tasks=tasks.size, n_workers=data.n_workers,
        n_classes=data.n_classes, task_names=[str(t) for t in data.task_names[tasks]],
        worker_names=[str(w) for w in data.worker_names], classes=[str(c) for c in data.classes])


def truth_set(data, truth: np.ndarray):
    """A set whose only annotator answers the truth of every task with known truth (the ceiling's data)."""
    from crowdagg.data.annotations import AnnotationSet

    known = np.flatnonzero(truth >= 0)
    return AnnotationSet.from_codes(
        known, np.zeros(known.size, dtype=np.int64), truth[known], n_tasks=data.n_tasks, n_workers=1,
        n_classes=data.n_classes, task_names=[str(t) for t in data.task_names], worker_names=["truth"],
        classes=[str(c) for c in data.classes])


def accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    known = truth >= 0
    return float(np.mean(pred[known] == truth[known]))


# --------------------------------------------------------------------------------------------------- fits
def trainers(asked: list[str] | None, cached_only: bool = False) -> list[str]:
    from crowdagg.methods.registry import TRAINERS

    names = list(TRAINERS)
    if asked is None:
        return [m for m in names if ALIASES.get(m) not in names]
    if cached_only:  # the tables of fits made elsewhere: names need not be registered here
        return asked
    unknown = [m for m in asked if m not in names]
    if unknown:
        print(f"not registered in this checkout (left out): {', '.join(unknown)}", file=sys.stderr)
    return [m for m in asked if m in names]


def two_stage(method: str) -> bool:
    return method.endswith("-then-train")


def trainer_params(method: str, seed: int, opts) -> dict:
    from crowdagg.methods.registry import get_trainer

    declared = {p.name for p in get_trainer(method).params}
    params = {k: v for k, v in opts.param.items() if k in declared}
    if opts.epochs is not None:
        params["epochs"] = opts.epochs
    params["seed"] = seed
    return params


def train(method: str, data, x: np.ndarray, seed: int, opts, callback=None):
    from crowdagg.methods.registry import get_trainer

    cls = get_trainer(method).load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**trainer_params(method, seed, opts)).fit(data, x, callback=callback)


class Fits:
    """Each fit's measurements, computed once per run (and kept in ``--cache`` across runs)."""

    def __init__(self, opts) -> None:
        self.opts = opts
        self.path = Path(opts.cache[0]) if opts.cache else None
        self.done: dict[str, dict] = {}
        for name in opts.cache or ():  # the first is written; the others (parallel runs' files) only read
            if Path(name).exists():
                self.done.update(json.loads(Path(name).read_text()))
        self.seconds = 0.0
        self.missing = 0

    def key(self, *parts) -> str:
        return json.dumps([*parts, self.opts.epochs, sorted(self.opts.param.items()), self.opts.threads])

    def get(self, key: str, compute) -> dict:
        if key not in self.done and self.opts.cached_only:
            self.missing += 1
            return {}
        if key not in self.done:
            t = time.perf_counter()
            self.done[key] = compute()
            self.seconds += time.perf_counter() - t
            self.done[key + " seconds"] = {"seconds": time.perf_counter() - t}
            if self.path:
                self.path.write_text(json.dumps(self.done))
            if self.opts.verbose:
                print(f"  {key}: {self.done[key]}", file=sys.stderr, flush=True)
        return self.done[key]

    def full(self, ds: Dataset, method: str, seed: int) -> dict:
        """``method`` trained on every training answer: its training labels, classifier and test accuracy."""
        def compute() -> dict:
            res = train(method, ds.data, ds.x, seed, self.opts)
            model = res.model_params["model"]
            out = {"labels": accuracy(res.labels, ds.truth), "best_epoch": int(res.model_params["best_epoch"]),
                   "classifier": accuracy(res.model_params["classifier_proba"].argmax(axis=1), ds.truth)}
            if ds.test_x is not None:
                out["test"] = accuracy(model.predict_proba(ds.test_x).argmax(axis=1), ds.test_truth)
            return out

        return self.get(self.key("full", ds.name, method, seed), compute)

    def ceiling(self, ds: Dataset, seed: int) -> dict:
        def compute() -> dict:
            res = train("mv-then-train", truth_set(ds.data, ds.truth), ds.x, seed, self.opts)
            out = {"classifier": accuracy(res.model_params["classifier_proba"].argmax(axis=1), ds.truth)}
            if ds.test_x is not None:
                out["test"] = accuracy(res.model_params["model"].predict_proba(ds.test_x).argmax(axis=1),
                                       ds.test_truth)
            return out

        return self.get(self.key("ceiling", ds.name, seed), compute)

    def fold(self, ds: Dataset, method: str, seed: int, fold: int, n_folds: int) -> dict:
        """``method`` on the answers of every fold but ``fold``; scored on ``fold``'s truth."""
        def compute() -> dict:
            train_tasks, held = split(ds, seed, fold, n_folds)
            sub = subset(ds.data, train_tasks)
            if method in ("ds", "mv"):
                return {"labels": accuracy(aggregate(sub, method, seed), ds.truth[train_tasks])}
            res = train(method, sub, ds.x[train_tasks], seed, self.opts)
            pred = res.model_params["model"].predict_proba(ds.x[held]).argmax(axis=1)
            return {"labels": accuracy(res.labels, ds.truth[train_tasks]), "heldout": accuracy(pred, ds.truth[held])}

        return self.get(self.key("fold", ds.name, method, seed, fold, n_folds), compute)

    def save(self) -> None:
        if self.path:
            self.path.write_text(json.dumps(self.done))


def split(ds: Dataset, seed: int, fold: int, n_folds: int) -> tuple[np.ndarray, np.ndarray]:
    """(training tasks, held-out tasks), sorted: a seeded permutation of the tasks cut into ``n_folds``."""
    folds = np.array_split(np.random.default_rng([seed, 0xF01D]).permutation(ds.data.n_tasks), n_folds)
    held = np.sort(folds[fold])
    return np.setdiff1d(np.arange(ds.data.n_tasks), held), held


def aggregate(data, method: str, seed: int) -> np.ndarray:
    import crowdagg
    from crowdagg.methods.registry import get

    params = {"seed": seed} if "seed" in {p.name for p in get(method).params} else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crowdagg.aggregate(data, method, **params).labels


# --------------------------------------------------------------------------------------------------- CROWDLAB
CROWDLAB_ROWS = (("CROWDLAB (LR on MV labels)", "mv", False), ("CROWDLAB (LR on DS labels)", "ds", False),
                 ("CROWDLAB (LR on MV labels, calibrate_probs)", "mv", True),
                 ("CROWDLAB (LR on DS labels, calibrate_probs)", "ds", True))


def cleanlab_missing() -> str | None:
    try:
        import cleanlab  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as e:
        return f"CROWDLAB rows left out: {e.name} is not installed ({CLEANLAB_HINT})"
    return None


def crowdlab(ds: Dataset, seed: int, fits: Fits) -> dict[str, float]:
    """CROWDLAB's consensus accuracy in each configuration of :data:`CROWDLAB_ROWS` (one LR fit per labels)."""
    def compute() -> dict:
        import pandas as pd
        from cleanlab.multiannotator import get_label_quality_multiannotator
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_predict
        from threadpoolctl import threadpool_limits

        data = ds.data
        answers = np.full((data.n_tasks, data.n_workers), np.nan)
        answers[data.task, data.worker] = data.label  # a repeated answer: the last one
        out: dict[str, float] = {}
        for source in ("mv", "ds"):
            y = aggregate(data, source, seed)
            folds = StratifiedKFold(n_splits=fits.opts.clf_folds, shuffle=True, random_state=seed)
            with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
                warnings.simplefilter("ignore")  # BLAS on one thread: on a busy machine two spin on each other
                proba = cross_val_predict(LogisticRegression(max_iter=fits.opts.lr_max_iter), ds.x, y, cv=folds,
                                          method="predict_proba")
            if proba.shape[1] != data.n_classes:  # a class no MV/DS label has: its column is zero
                full = np.zeros((data.n_tasks, data.n_classes))
                full[:, np.unique(y)] = proba
                proba = full
            for row, s, calibrate in CROWDLAB_ROWS:
                if s != source:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = get_label_quality_multiannotator(
                        pd.DataFrame(answers), proba, calibrate_probs=calibrate, verbose=False,
                        return_annotator_stats=False, return_detailed_quality=False)
                out[row] = accuracy(result["label_quality"]["consensus_label"].to_numpy(), ds.truth)
            out[f"LR on {source.upper()} labels (out of sample)"] = accuracy(proba.argmax(axis=1), ds.truth)
        return out

    return fits.get(fits.key("crowdlab", ds.name, seed, fits.opts.clf_folds, fits.opts.lr_max_iter), compute)


# --------------------------------------------------------------------------------------------------- tables
def cell(values: list[float], scale: float = 1.0, digits: int = 3, n: int | None = None) -> str:
    """mean ± std (ddof 1) of ``values``; `` (k of n)`` when fewer than the ``n`` expected (``--cached-only``)."""
    v = np.asarray(values, dtype=float) * scale
    if v.size == 0:
        return "—"
    short = f" ({v.size} of {n})" if n is not None and v.size < n else ""
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.{digits}f}{short}"


def mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def add(acc: dict, row: str, column: str, value: float | None) -> None:
    """``acc[row][column].append(value)`` (a fit missing from the cache under ``--cached-only``: nothing)."""
    if value is not None:
        acc.setdefault(row, {}).setdefault(column, []).append(value)


def vals(acc: dict, row: str, column: str, what: str | None = None) -> list[float]:
    got = acc.get(row, {}).get(column, {} if what else [])
    return got.get(what, []) if what else got


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def run_labels(sets: list[Dataset], methods: list[str], fits: Fits, opts) -> dict:
    acc: dict[str, dict[str, list[float]]] = {}
    for ds in sets:
        for method in methods:
            for seed in opts.seeds:
                add(acc, method, ds.name, fits.full(ds, method, seed).get("labels"))
        for method in ("ds", "mv"):
            for seed in opts.seeds:
                key = fits.key("aggregate", ds.name, method, seed)
                got = fits.get(key, lambda ds=ds, method=method, seed=seed: {  # type: ignore[misc]
                    "labels": accuracy(aggregate(ds.data, method, seed), ds.truth)})
                add(acc, method, ds.name, got.get("labels"))
    note = cleanlab_missing() if not opts.no_crowdlab else "CROWDLAB rows left out (--no-crowdlab)"
    if note is None:
        for ds in sets:
            for seed in opts.seeds:
                for row, value in crowdlab(ds, seed, fits).items():
                    acc.setdefault(row, {}).setdefault(ds.name, []).append(value)
    head = ["method"]
    for ds in sets:
        head += [ds.name, f"{ds.name} (issue)"]
    rows = []
    for name, per in acc.items():
        row = [f"`{name}`" if name in methods or name in ("ds", "mv") else name]
        for ds in sets:
            ref = ISSUE_LABELS.get(name, {}).get(ds.name)
            row += [cell(per.get(ds.name, [])), "—" if ref is None else f"{ref:.3f}"]
        rows.append(row)
    print(f"\n### Inferred training labels: accuracy, mean ± std over seeds {opts.seeds}\n")
    print(table(head, rows))
    if note:
        print(f"\n{note}")
    verdict = []
    end_to_end = [m for m in methods if not two_stage(m)]
    for ds in sets:
        if not end_to_end:
            break
        best = max(end_to_end, key=lambda m: mean(vals(acc, m, ds.name)))
        target = LABEL_TARGETS.get(ds.name)
        lab = [r for r, *_ in CROWDLAB_ROWS if ds.name in acc.get(r, {})]
        best_cl = max(lab, key=lambda r: mean(vals(acc, r, ds.name))) if lab else None
        line = f"{ds.name}: best end-to-end `{best}` {mean(vals(acc, best, ds.name)):.3f}"
        if target is not None:
            line += f" vs the target > {target:.3f} ({'met' if mean(vals(acc, best, ds.name)) > target else 'NOT met'})"
        if best_cl:
            line += f"; CROWDLAB's best here: {best_cl} {mean(vals(acc, best_cl, ds.name)):.3f}"
        for m in ("geocrowdnet-f",):
            if m in acc:
                rivals = {r: mean(vals(acc, r, ds.name)) for r in ("ds", "ds-then-train") if r in acc}
                beats = ", ".join(f"{'>' if mean(vals(acc, m, ds.name)) > v else '<='} {r} {v:.3f}"
                                  for r, v in rivals.items())
                line += f"; `{m}` {mean(vals(acc, m, ds.name)):.3f} {beats}"
        verdict.append(line)
    if verdict:
        print("\n" + "\n".join(f"- {v}" for v in verdict))
    return acc


def run_test(sets: list[Dataset], methods: list[str], fits: Fits, opts) -> dict:
    sets = [ds for ds in sets if ds.test_x is not None]
    acc: dict[str, dict[str, list[float]]] = {}
    for ds in sets:
        for method in methods:
            for seed in opts.seeds:
                add(acc, method, ds.name, fits.full(ds, method, seed).get("test"))
        if "mv-then-train" in trainers(None) or opts.cached_only:
            for seed in opts.seeds:
                add(acc, CEILING, ds.name, fits.ceiling(ds, seed).get("test"))
    head = ["method"] + [f"{ds.name} test ({len(ds.test_truth):,})" for ds in sets] + \
        [f"{ds.name} published" for ds in sets]
    published = {ours: figs for _, ours, figs in PUBLISHED if ours}
    rows = []
    for name, per in acc.items():
        label = f"`{name}`" if name in methods else name
        rows.append([label] + [cell(per.get(ds.name, []), 100, 2) for ds in sets]
                    + [published.get(name, {}).get(ds.name, "—") for ds in sets])
    for row, ours, figs in PUBLISHED:
        if ours is None or ours not in acc:
            rows.append([row] + ["—" for _ in sets] + [figs.get(ds.name, "—") for ds in sets])
    print(f"\n### Test sets: the classifier's accuracy (%), mean ± std over seeds {opts.seeds}\n")
    print(table(head, rows))
    if "mv-then-train" not in trainers(None) and not opts.cached_only:
        print("\nno `mv-then-train` in this checkout: the ceiling row is left out")
    end_to_end = [m for m in methods if not two_stage(m)]
    for ds in sets:
        if not end_to_end or "mv-then-train" not in acc:
            break
        best = max(end_to_end, key=lambda m: mean(vals(acc, m, ds.name)))
        gap = 100 * (mean(vals(acc, best, ds.name)) - mean(vals(acc, "mv-then-train", ds.name)))
        line = (f"- {ds.name}: best end-to-end `{best}` {100 * mean(vals(acc, best, ds.name)):.2f}, "
                f"{gap:+.2f} points over `mv-then-train`")
        if ds.name == "labelme":
            line += f" (target ≥ +3: {'met' if gap >= 3 else 'NOT met'})"
        print(line)
    return acc


def run_cv(sets: list[Dataset], methods: list[str], fits: Fits, opts) -> dict:
    acc: dict[str, dict[str, dict[str, list[float]]]] = {}
    for ds in sets:
        for method in [*methods, "ds", "mv"]:
            for seed in opts.seeds:
                for fold in range(opts.folds):
                    got = fits.fold(ds, method, seed, fold, opts.folds)
                    per = acc.setdefault(method, {}).setdefault(ds.name, {})
                    for what, value in got.items():
                        per.setdefault(what, []).append(value)
    head = ["method"]
    for ds in sets:
        head += [f"{ds.name} held-out fold", f"{ds.name} training labels"]
    rows = []
    for name, per in acc.items():
        row = [f"`{name}`"]
        for ds in sets:
            got = per.get(ds.name, {})
            n = opts.folds * len(opts.seeds)
            row += [cell(got.get("heldout", []), n=n if name not in ("ds", "mv") else None),
                    cell(got.get("labels", []), n=n)]
        rows.append(row)
    print(f"\n### {opts.folds}-fold cross-validation on tasks: accuracy, mean ± std over {opts.folds} folds × "
          f"seeds {opts.seeds}\n")
    print(table(head, rows))
    if "geocrowdnet-f" in acc and "ds-then-train" in acc:
        for ds in sets:
            for what in ("heldout", "labels"):
                g, d = mean(vals(acc, "geocrowdnet-f", ds.name, what)), mean(vals(acc, "ds-then-train", ds.name, what))
                if np.isnan(g) or np.isnan(d):
                    continue
                print(f"- {ds.name} {what}: `geocrowdnet-f` {g:.3f} {'>' if g > d else '<='} `ds-then-train` {d:.3f}")
    return acc


# --------------------------------------------------------------------------------------------------- speed
def epoch_times(method: str, data, x: np.ndarray, opts, epochs: int, device: str, extra: dict | None = None):
    """Fit ``method`` for ``epochs`` epochs: the seconds between the loop's per-epoch callbacks, the fit's, and
    the mean seconds per call of the held-out objective (the evaluation after each epoch)."""
    marks: list[float] = []
    params = {**trainer_params(method, 0, opts), "epochs": epochs, "device": device, **(extra or {})}
    from crowdagg.methods.registry import get_trainer

    base = get_trainer(method).load()
    spent: list[float] = []

    class Timed(base):  # type: ignore[misc, valid-type]
        def _objective(self, state):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            out = super()._objective(state)  # a float: synchronised
            spent.append(time.perf_counter() - t)
            return out

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Timed(**params).fit(data, x, callback=lambda it, obj: marks.append(time.perf_counter()))
    total = time.perf_counter() - t0
    return np.diff(marks), total, float(np.mean(spent)) if spent else 0.0


def net_and_loader_times(data, x: np.ndarray, opts, device: str, batch_size: int, hidden: int,
                         model: str, dropout: float) -> dict:
    """One epoch's batches through the network alone (forward, CE, backward, Adam; batches sliced beforehand) and
    the batch assembly alone (the base's shuffle and CSR gather), on ``device``; medians of ``opts.repeats``."""
    import torch

    from crowdagg.learning import networks
    from crowdagg.learning.trainer import Answers, batch_answers, resolve_device

    dev = resolve_device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.manual_seed(0)
    spec = networks.NetSpec(model, tuple(x.shape[1:]), data.n_classes, hidden, dropout)
    net = networks.build(spec).to(dev)
    xt = torch.as_tensor(x, device=dev)
    networks.standardizer(net).fit(xt)
    answers = Answers.of(np.asarray(data.task, dtype=np.int64), np.asarray(data.worker, dtype=np.int64),
                         np.asarray(data.label, dtype=np.int64), data.n_tasks, dev)
    tasks = torch.arange(data.n_tasks, device=dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    order = tasks[torch.randperm(tasks.shape[0]).to(dev)]
    batches = [(xt[order[lo:lo + batch_size]].clone(),
                torch.randint(0, data.n_classes, (min(batch_size, order.shape[0] - lo),), device=dev))
               for lo in range(0, order.shape[0], batch_size)]
    amp = dev.type == "cuda"

    def network_epoch() -> None:
        net.train()
        for xb, yb in batches:
            if amp:
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    logits = net(xb).float()
            else:
                logits = net(xb)
            loss = torch.nn.functional.cross_entropy(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def loader_epoch() -> None:
        perm = tasks[torch.randperm(tasks.shape[0]).to(dev)]
        for lo in range(0, perm.shape[0], batch_size):
            b = perm[lo:lo + batch_size]
            index, row = batch_answers(answers, b)
            _ = (xt[b], answers.worker[index], answers.label[index], row)

    out = {}
    for name, fn in (("network", network_epoch), ("loader", loader_epoch)):
        fn()  # warm-up
        sync()
        times = []
        for _ in range(opts.repeats):
            t = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times)
    if dev.type == "cuda":
        w = torch.randn(x.shape[1], hidden, device=dev)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            _ = xt @ w
            sync()
            times = []
            for _ in range(max(opts.repeats, 3)):
                t = time.perf_counter()
                for _ in range(3):  # forward, and the two products of its backward
                    _ = xt @ w
                sync()
                times.append(time.perf_counter() - t)
        out["matmul"] = statistics.median(times)
    return out


class Utilisation:
    """``torch.cuda.utilization()`` sampled every 0.1 s on a thread (None when it is not available)."""

    def __init__(self, device: str) -> None:
        self.samples: list[int] = []
        self.ok = False
        if device.startswith("cuda"):
            try:
                import torch

                torch.cuda.utilization()
                self.ok = True
            except Exception as e:  # pynvml missing, or no NVML
                print(f"torch.cuda.utilization() unavailable ({type(e).__name__}: {e}); pip install pynvml",
                      file=sys.stderr)
        self.stop = threading.Event()

    def __enter__(self) -> Utilisation:
        if self.ok:
            import torch

            def loop() -> None:
                while not self.stop.wait(0.1):
                    self.samples.append(int(torch.cuda.utilization()))

            self.thread = threading.Thread(target=loop, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.ok:
            self.thread.join()

    def summary(self) -> str:
        return f"{statistics.median(self.samples)}%" if self.samples else "n/a"


def run_speed(methods: list[str], fits: Fits, opts) -> dict:
    import torch

    from crowdagg.core import threads
    from crowdagg.simulate import simulate
    from crowdagg.simulate.features import gaussian_features

    rows: dict = {"real": [], "synthetic": []}
    if opts.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {opts.device}: CUDA is not available to torch {torch.__version__} here")
    cpu = f"{os.cpu_count()} CPUs, torch on {threads.count()} thread(s), torch {torch.__version__}"
    real = "labelme" if "labelme" in opts.datasets else opts.datasets[0]
    if opts.device == "cpu":
        ds = load_dataset(real, datasets_root())
        table_rows = []
        for method in methods:
            per_epoch, total, _ = epoch_times(method, ds.data, ds.x, opts, opts.speed_epochs, "cpu")
            med = float(np.median(per_epoch)) if len(per_epoch) else total
            rows["real"].append({"method": method, "epoch_s": med, "fit_s": total, "epochs": opts.speed_epochs})
            table_rows.append([f"`{method}`", f"{1 / med:.1f}", f"{1000 * med:.0f}",
                               f"{total:.1f} ({opts.speed_epochs})"])
        print(f"\n### Speed on {real} ({ds.data.n_tasks:,} tasks, {ds.x.shape[1]} features), CPU: {cpu}\n")
        print(table(["method", "epochs/s", "ms/epoch (median)", "fit s (epochs)"], table_rows))

    if opts.items <= 0:  # the real dataset's table only
        return rows
    crowd = simulate(n_tasks=opts.items, n_workers=opts.annotators, n_classes=opts.classes, per_task=opts.per_task,
                     seed=0)
    data = crowd.to_annotations()
    x = gaussian_features(crowd.truth, opts.classes, dim=opts.dim, seed=0)
    from crowdagg.methods.registry import get_trainer

    declared = {p.name: p.default for p in get_trainer(opts.speed_method).params}
    hidden = opts.param.get("hidden", declared["hidden"])
    model = opts.param.get("model", declared["model"])
    dropout = opts.param.get("dropout", declared["dropout"])
    table_rows = []
    for batch in opts.speed_batch:
        util = Utilisation(opts.device)
        with util:
            per_epoch, total, evaluation = epoch_times(opts.speed_method, data, x, opts, opts.speed_epochs,
                                                       opts.device,
                                           {"batch_size": batch})
        epoch = float(np.median(per_epoch)) if len(per_epoch) else total
        with threads.fit_scope():  # torch's threads as in a fit
            parts = net_and_loader_times(data, x, opts, opts.device, batch, hidden, model, dropout)
        row = {"method": opts.speed_method, "device": opts.device, "items": opts.items, "annotators": opts.annotators,
               "answers": int(data.n_answers), "dim": opts.dim, "batch_size": batch, "epoch_s": epoch, "fit_s": total,
               "network_s": parts["network"], "loader_s": parts["loader"], "matmul_s": parts.get("matmul"),
               "objective_s": evaluation,
               "gpu_utilisation": util.summary()}
        rows["synthetic"].append(row)
        table_rows.append([f"`{opts.speed_method}`", opts.device, f"{batch:,}", f"{epoch:.3f}", f"{1 / epoch:.2f}",
                           f"{parts['network']:.3f}", f"{parts['loader']:.3f}",
                           f"{100 * parts['loader'] / epoch:.0f}%", f"{evaluation:.3f}",
                           "—" if "matmul" not in parts else f"{1000 * parts['matmul']:.2f} ms",
                           util.summary() if opts.device != "cpu" else "—"])
        print(f"epoch {epoch:.3f} s (batch {batch}); network alone {parts['network']:.3f} s; batch assembly alone "
              f"{parts['loader']:.3f} s; held-out objective {evaluation:.3f} s"
              + (f"; pure matmul {1000 * parts['matmul']:.2f} ms; GPU utilisation {util.summary()}"
                 if "matmul" in parts else ""), file=sys.stderr)
    where = cpu if opts.device == "cpu" else f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    print(f"\n### Speed on a synthetic crowd: {opts.items:,} tasks, {opts.annotators} annotators, "
          f"{data.n_answers:,} answers, {opts.classes} classes, {opts.dim}-d features; {where}\n")
    print(table(["method", "device", "batch", "s/epoch (median)", "epochs/s", "network alone s", "batch assembly s",
                 "assembly share", "held-out objective s", "pure matmul (epoch's first layer, ×3)",
                 "GPU utilisation (median)"], table_rows))
    return rows


# --------------------------------------------------------------------------------------------------- main
def parse_param(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--param takes NAME=VALUE, got {text!r}")
    if value.lower() in ("true", "false"):  # a bool parameter (maxmig's forecaster), as the CLI's -p reads it
        return name, value.lower() == "true"
    for kind in (int, float):
        try:
            return name, kind(value)
        except ValueError:
            pass
    return name, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=("labels", "cv", "test", "all", "speed"))
    ap.add_argument("--methods", nargs="+", help="trainers (default: every registered one)")
    ap.add_argument("--datasets", nargs="+", choices=DATASETS, help="default: both (--quick: music)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, help="every trainer's epochs (default: its declared default)")
    ap.add_argument("--param", nargs="+", type=parse_param, default=[], metavar="NAME=VALUE",
                    help="a trainer parameter given to every method that declares it")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--clf-folds", type=int, default=5, help="CROWDLAB's out-of-sample folds")
    ap.add_argument("--lr-max-iter", type=int, default=1000, help="CROWDLAB's LogisticRegression max_iter")
    ap.add_argument("--no-crowdlab", action="store_true")
    ap.add_argument("--threads", type=int, help="torch's threads (CROWDAGG_THREADS; default: the policy's)")
    ap.add_argument("--device", default="cpu", help="speed: cpu or cuda")
    ap.add_argument("--items", type=int, default=100_000, help="speed: the synthetic crowd's tasks (0: none)")
    ap.add_argument("--annotators", type=int, default=100)
    ap.add_argument("--per-task", type=int, default=3)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--speed-method", default="crowdlayer")
    ap.add_argument("--speed-epochs", type=int, default=5)
    ap.add_argument("--speed-batch", type=int, nargs="+", default=[64, 1024], help="batch sizes of the synthetic run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache", nargs="+", metavar="FILE",
                    help="JSON file keeping each fit's measurements across runs (more files: read them too, write the "
                         "first: runs in parallel, each with its own first file, merged by a last run)")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--cached-only", action="store_true",
                    help="fit nothing: the tables from --cache alone (a missing fit is left out of its cell)")
    ap.add_argument("--verbose", action="store_true", help="each fit's measurements on stderr as they come")
    ap.add_argument("--quick", action="store_true",
                    help="every table, tiny: 2 epochs, one seed, 2 folds, crowdlayer (+ the two-stage baselines), "
                         "a 2,000-task synthetic crowd")
    opts = ap.parse_args(argv)
    opts.param = dict(opts.param)
    opts.datasets = opts.datasets or (["music"] if opts.quick else list(DATASETS))
    if opts.quick:
        opts.epochs, opts.seeds, opts.folds, opts.repeats = opts.epochs or 2, opts.seeds[:1], 2, 1
        opts.items, opts.annotators, opts.speed_epochs, opts.speed_batch = 2000, 20, 2, [256]
        opts.lr_max_iter = min(opts.lr_max_iter, 50)
        opts.param.setdefault("hidden", 16)
        opts.methods = opts.methods or [m for m in ("crowdlayer", "mv-then-train", "ds-then-train")]
    if opts.threads is not None:
        from crowdagg.core import threads

        threads.set_threads(opts.threads)
    methods = trainers(opts.methods, opts.cached_only)
    if not methods:
        raise SystemExit("no trainer to run")
    fits = Fits(opts)
    results: dict = {"methods": methods, "seeds": opts.seeds, "epochs": opts.epochs, "param": opts.param}
    t0 = time.perf_counter()
    if opts.what == "speed" or opts.quick:
        results["speed"] = run_speed(methods, fits, opts)
    if opts.what != "speed":
        sets = [load_dataset(name, datasets_root()) for name in opts.datasets]
        if opts.what in ("labels", "all"):
            results["labels"] = run_labels(sets, methods, fits, opts)
        if opts.what in ("test", "all"):
            results["test"] = run_test(sets, methods, fits, opts)
        if opts.what in ("cv", "all"):
            results["cv"] = run_cv(sets, methods, fits, opts)
    fits.save()
    wall = time.perf_counter() - t0
    if fits.missing:
        print(f"\n{fits.missing} fits were not in the cache (--cached-only): their cells have fewer values")
    print(f"\n{wall:.0f} s wall ({fits.seconds:.0f} s in new fits); torch threads: "
          f"{os.environ.get('CROWDAGG_THREADS') or opts.threads or 'policy'}; methods {', '.join(methods)}; "
          f"epochs {opts.epochs or 'declared default'}; params {opts.param or 'defaults'}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
