"""deepBP's scenarios on real features: the trainers beside the answers-only aggregators as extreme spammers come.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_deepbp_cases.py --threads 1
    PYTHONPATH=. .venv/bin/python benchmarks/bench_deepbp_cases.py --methods deepbp bp --seeds 0 --epochs 20
    PYTHONPATH=. .venv/bin/python benchmarks/bench_deepbp_cases.py --quick     # 1 seed, 200 tasks, 2 epochs

Kim, Cho, Kim & Ok (AISTATS 2022), "Robust deep learning from crowds with belief propagation", §4 (ALGORITHMS.md
§14.2; the answers-only curves are ``bench_graph.py accuracy``): N = 1,000 binary tasks on an (l = 3, r = 4)-regular
graph (M = 750; ``simulate(scenario="deepbp")``), one-coin workers whose accuracy is drawn from Beta(2, 1) -- the
worker prior Dir(2, 1) --, then 0, 1, 2, 3 extreme spammers who answer every task uniformly at random.  The crowds
are nested: one crowd with the most spammers is drawn per seed and the first e of its spammers kept, so at one seed
every row shares the truth, the graph, the accuracies and the honest answers, and a row differs from the one above
by one spammer's 1,000 answers.

The features are real: scikit-learn's bundled digits (1,797 8×8 images, 64 features) as two classes, even (class 0)
against odd (class 1).  Each task gets an image of its true class, drawn by the seed without replacement (891 even
and 906 odd images: ~500 of each go to the tasks); the ~800 images left are the held-out test.  The paper's own
images are Dogs-vs-Cats under a CNN.  Trained on the true labels of 1,000 of them, a logistic regression tells even
from odd on the other 797 at ~.91 and a 128-unit mlp at ~.97 (scikit-learn, seeds 0-2): the features carry more
than the answers (bp ~.75 from the answers alone; the MAP under the true accuracies ~.88) but are not perfect.
Each row is run twice: with these features ("informative") and with the features replaced by Gaussian noise of the
same shape ("noise": N(0, 1) float32, drawn by the seed), the case the clipping is for (paper Fig. 1: a classifier
that learns nothing must not bend BP).

Columns: ``deepbp``, ``deepmf`` (the paper's trainers); ``bp``, ``mf`` (the same inference from the answers only:
``bp`` with its default one-coin model -- the crowd's true model --, ``bp:worker_model=confusion`` with the
Dirichlet rows of deepbp's ``worker_model=confusion``; deepbp and deepmf default to the paper's one-coin prior,
and ``mf``'s default is the confusion model); ``raykar`` (EM with the classifier as the prior), ``ds-then-train`` and
``mv``: the accuracy of the labels each infers for the 1,000 training tasks (what ``crowdagg train`` writes), mean
± std over ``--seeds`` (default 0-9: the crowd's draw, the images' and the noise's, and the trainer's seed); then
the paired per-seed differences deepbp - deepmf and deepbp - bp (mean ± std, and on how many seeds deepbp is at
least as accurate); the last column is the MAP under the true worker accuracies (the best the answers allow
without features; no method sees them).  A second table: each trainer's classifier on the held-out digits
(informative rows only: trained on noise, a classifier has nothing to say about digits).  Every method runs with
its declared defaults (Beta(2, 1) on the one-coin accuracy, or Dir(2, 1) on each confusion row, is the default
prior of bp, mf, deepbp and deepmf: the true one) -- but deepbp and deepmf at the paper's learning rate of these
figures (:data:`PAPER`: 1e-4, its Table 2; ``--declared``: their declared 1e-2, at which a classifier on noise
features memorises its targets and holds BP to its own guesses: deepbp 1.1-2.7 points below bp there) --, and
``--epochs`` (the trainers') and ``--param NAME=VALUE``
(given, parsed as the CLI's ``-p`` parses it, to every method declaring NAME); truth is read only to score.  A
method this checkout does not declare, or whose module does not load, is left out with a note.

Below the tables, issue 31's acceptance, one verdict line each (:func:`verdicts` gives the rules): deepbp at least as
accurate as deepmf on average, and losing less from 0 to the most spammers; deepbp above bp with informative
features (every spammer count); deepbp within 1 point of bp with noise features (every spammer count).

``--threads N`` runs torch on N threads (default 1: the machine is shared); ``--json FILE`` writes every fit, and
``--from-json FILE`` prints that file's tables and verdicts again without a fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from functools import cache
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_graph import oracle_accuracy  # noqa: E402
from bench_train import cell, table  # noqa: E402

#: The table's columns: the paper's two trainers, their answers-only aggregators (bp's default one-coin model, and
#: the Dirichlet-row confusion model deepbp's messages use), then context.  ``NAME:P=V:...`` is a method with its
#: own parameter values.
METHODS = ("deepbp", "deepmf", "bp", "bp:worker_model=confusion", "mf", "raykar", "ds-then-train", "mv")
#: The two feature settings of each row.
FEATURES = ("informative", "noise")
#: The true worker prior: one-coin accuracy ~ Beta(2, 1) (deepBP's Dir(2, 1)).
WORKER_PRIOR = (2.0, 1.0)
#: The paired differences the issue asks for: (method, rival).
PAIRS = (("deepbp", "deepmf"), ("deepbp", "bp"))
#: "within 1 point": deepbp against bp on noise features.
NOISE_TOLERANCE = 0.01
#: Where two trainers tie (informative features: both follow the classifier), a row's mean difference is noise: the
#: "at least as accurate" and "loses less" verdicts allow a row below by at most this many standard errors.
TIE_SE = 2.0
ORACLE = "MAP, true accuracies"
#: The paper's settings of its synthetic figures (Table 2: Adam at 1e-4, 200 full-batch epochs), given to its two
#: trainers unless ``--declared`` (their declared lr, 1e-2, is for real data sets of thousands of tasks, where 200
#: steps at 1e-4 under-fit).  At 1e-2 a classifier on noise features memorises the labels it is given and, its
#: clipped output the next epoch's prior, holds BP to its own guesses.
PAPER = {"deepbp": {"lr": "1e-4"}, "deepmf": {"lr": "1e-4"}}
#: --quick: one seed, a small crowd, two epochs, no spammer and one.
QUICK = {"seeds": [0], "spammers": [0, 1], "tasks": 200, "epochs": 2}


# --------------------------------------------------------------------------------------------------- data
@cache
def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as (features (1797, 64) float32, class: 0 even, 1 odd)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.data.astype(np.float32), (d.target % 2).astype(np.int64)


def crowds(seed: int, n_tasks: int, spammers: list[int]) -> dict[int, object]:
    """deepBP's crowd at ``seed`` with each number of extreme spammers in ``spammers``: ``{e: SimulatedCrowd}``.

    One crowd with ``max(spammers)`` is drawn; the crowd with ``e`` keeps the regular workers and the first ``e``
    extreme spammers (the simulator appends them last), so the rows share everything but the spammers' answers.
    """
    from crowdagg.simulate import simulate

    full = simulate(n_tasks, scenario="deepbp", worker_prior=WORKER_PRIOR, extreme_spammers=max(spammers), seed=seed)
    regular = full.n_workers - max(spammers)
    out = {}
    for e in spammers:
        keep = full.worker < regular + e
        out[e] = dataclasses.replace(
            full, task=full.task[keep], worker=full.worker[keep], label=full.label[keep],
            confusion=full.confusion[:regular + e], worker_kind=full.worker_kind[:regular + e],
            copy_of=full.copy_of[:regular + e])
    return out


def features(truth: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """The tasks' features at ``seed``: ``informative`` (row n an even/odd digit of class ``truth[n]``, drawn
    without replacement), ``noise`` (N(0, 1), the same shape), and the held-out digits ``test_x``, ``test_y``."""
    x, y = digits()
    rng = np.random.default_rng([seed, 0xDB9])
    rows = np.empty(truth.shape[0], dtype=np.int64)
    for k in (0, 1):
        pool = rng.permutation(np.flatnonzero(y == k))
        want = np.flatnonzero(truth == k)
        if want.size > pool.size:
            raise SystemExit(f"seed {seed}: {want.size} tasks of class {k} but {pool.size} such digits; use fewer "
                             "--tasks")
        rows[want] = pool[:want.size]
    held = np.setdiff1d(np.arange(y.shape[0]), rows)
    noise = rng.standard_normal((truth.shape[0], x.shape[1])).astype(np.float32)
    return {"informative": x[rows], "noise": noise, "test_x": x[held], "test_y": y[held]}


# --------------------------------------------------------------------------------------------------- fits
def split(column: str) -> tuple[str, dict[str, str]]:
    """A column ``NAME:P=V:...`` as (the method's name, its own parameters as text)."""
    name, *given = column.split(":")
    own = dict(g.partition("=")[::2] for g in given)
    return name, own


def declaration(column: str):
    """The registry's declaration of ``column``'s method, a trainer or an aggregator (``None`` where this checkout
    lacks it)."""
    from crowdagg.methods.registry import METHODS as AGGREGATORS
    from crowdagg.methods.registry import TRAINERS

    name = split(column)[0]
    if name in TRAINERS:
        return TRAINERS[name]
    return AGGREGATORS[name] if name in AGGREGATORS else None


def is_trainer(column: str) -> bool:
    return declaration(column).kind == "trainer"


def params_of(column: str, seed: int, opts) -> dict:
    """``column``'s parameters: the seed, the trainers' ``--epochs``, each ``--param`` its method declares, then the
    column's own (each parsed by the declaration, as ``-p`` is; an undeclared one of the column's own is the
    library's error)."""
    spec = declaration(column)
    declared = {p.name: p for p in spec.params}
    own = split(column)[1]
    paper = {} if opts.declared else PAPER.get(split(column)[0], {})
    params = {name: declared[name].parse(text) for name, text in {**paper, **opts.param}.items() if name in declared}
    if "seed" in declared:
        params["seed"] = seed
    if spec.kind == "trainer" and opts.epochs is not None:
        params["epochs"] = opts.epochs
    for name, text in own.items():
        params[name] = declared[name].parse(text) if name in declared else text
    return params


def fit(method: str, crowd, x: np.ndarray | None, test: tuple[np.ndarray, np.ndarray] | None, seed: int,
        opts) -> dict:
    """``{"labels": accuracy on the training tasks, "test": accuracy on the held-out digits or None, "seconds"}``
    of ``method`` on ``crowd`` (a trainer on features ``x``, row n the task ``t<n>``)."""
    import crowdagg

    data = crowd.to_annotations()
    params = params_of(method, seed, opts)
    method = split(method)[0]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the table is the point
        if x is None:
            result, model = crowdagg.aggregate(data, method, **params), None
        else:
            model = crowdagg.train(x, data, method=method, tasks=crowd.task_names(), **params)
            result = model.result
    seconds = time.perf_counter() - start
    classes = np.array([int(c) for c in result.data.classes])  # simulated classes are "0", "1"
    rows = np.array([int(t[1:]) for t in result.data.task_names])  # simulated task names are t<n>
    got = {"labels": float(np.mean(classes[result.labels] == crowd.truth[rows])), "test": None, "seconds": seconds}
    if model is not None and test is not None:
        got["test"] = float(np.mean(classes[model.predict_proba(test[0]).argmax(axis=1)] == test[1]))
    return got


def run(methods: list[str], opts) -> dict:
    """Every fit: ``{features: {spammers: {method: [per-seed fit dicts]}}}``, the oracle as a method."""
    got: dict = {f: {e: {m: [] for m in [*methods, ORACLE]} for e in opts.spammers} for f in FEATURES}
    for seed in opts.seeds:
        drawn = crowds(seed, opts.tasks, opts.spammers)
        feats = features(drawn[opts.spammers[0]].truth, seed)
        for e in opts.spammers:
            crowd = drawn[e]
            oracle = {"labels": oracle_accuracy(crowd), "test": None, "seconds": 0.0, "answers": crowd.n_answers}
            for method in methods:
                for f in FEATURES:
                    if not is_trainer(method) and f != FEATURES[0]:  # answers only: the same fit for both rows
                        got[f][e][method].append(got[FEATURES[0]][e][method][-1])
                        continue
                    x = feats[f] if is_trainer(method) else None
                    test = (feats["test_x"], feats["test_y"]) if f == "informative" else None
                    one = fit(method, crowd, x, test, seed, opts)
                    got[f][e][method].append(one)
                    if opts.verbose:
                        print(f"seed {seed} spammers {e} {f} {method}: labels {one['labels']:.3f}"
                              + (f" test {one['test']:.3f}" if one["test"] is not None else "")
                              + f" ({one['seconds']:.1f} s)", file=sys.stderr, flush=True)
            for f in FEATURES:
                got[f][e][ORACLE].append(oracle)
    return got


# --------------------------------------------------------------------------------------------------- report
def values(fits: list[dict], what: str = "labels") -> np.ndarray:
    return np.array([f[what] for f in fits], dtype=float)


def difference(got: dict, f: str, e: int, a: str, b: str) -> np.ndarray:
    """Per-seed ``a - b`` (training-label accuracy) in row (``f``, ``e``)."""
    return values(got[f][e][a]) - values(got[f][e][b])


def paired(d: np.ndarray) -> str:
    """mean ± std of per-seed differences, and on how many seeds the first method is at least as accurate."""
    sd = d.std(ddof=1) if d.size > 1 else 0.0
    return f"{d.mean():+.3f} ± {sd:.3f} ({int((d >= 0).sum())}/{d.size})"


def se(d: np.ndarray) -> float:
    """The standard error of the mean of per-seed differences ``d`` (0 for one seed)."""
    return float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else 0.0


def mean_se(d: np.ndarray) -> str:
    """``+m ± se``: a paired difference's mean and standard error over the seeds."""
    return f"{d.mean():+.3f} ± {se(d):.3f}"


def verdicts(got: dict, methods: list[str], spammers: list[int]) -> list[str]:
    """Issue 31's four checks on deepBP's scenarios, one line each: ``met``, ``NOT met`` or ``not checked``; each
    figure a paired per-seed difference, mean ± its standard error.

    deepbp against deepmf: *at least as accurate* -- the mean over every row and seed at least 0, and no row's mean
    below 0 by more than ``TIE_SE`` standard errors (with informative features both follow the classifier and
    their rows differ by noise); *loses less* -- in each feature setting deepbp's loss from the fewest to the most
    spammers exceeds deepmf's by at most ``TIE_SE`` standard errors, and in one it is smaller by more.  deepbp
    against bp reads the means alone: above 0 (informative), within ``NOISE_TOLERANCE`` (noise).
    """
    lines = []

    def line(claim: str, needs: tuple[str, ...], check) -> None:
        missing = [m for m in needs if m not in methods]
        if missing:
            lines.append(f"not checked ({', '.join(missing)} not run): {claim}")
        else:
            ok, detail = check()
            lines.append(f"{'met' if ok else 'NOT met'}: {claim}: {detail}")

    def by_count(f: str, rival: str) -> tuple[list[float], str]:
        d = [difference(got, f, e, "deepbp", rival) for e in spammers]
        return [x.mean() for x in d], f"deepbp − {rival} by spammers " + ", ".join(
            f"{e}: {mean_se(x)}" for e, x in zip(spammers, d))

    def at_least() -> tuple[bool, str]:
        d = {(f, e): difference(got, f, e, "deepbp", "deepmf") for f in FEATURES for e in spammers}
        below = [f"{f}/{e} {mean_se(x)}" for (f, e), x in d.items() if x.mean() < 0]
        far = [k for k, x in d.items() if x.mean() < -TIE_SE * se(x)]
        overall = np.concatenate(list(d.values()))
        return overall.mean() >= 0 and not far, (
            f"deepbp − deepmf over every row and seed {mean_se(overall)}; rows below 0: "
            f"{', '.join(below) or 'none'}; beyond {TIE_SE:g} standard errors: "
            f"{', '.join(f'{f}/{e}' for f, e in far) or 'none'}")

    def drops() -> tuple[bool, str]:
        lo, hi = spammers[0], spammers[-1]
        worse, better, parts = False, False, []
        for f in FEATURES:
            drop = {m: values(got[f][lo][m]) - values(got[f][hi][m]) for m in ("deepbp", "deepmf")}
            d = drop["deepbp"] - drop["deepmf"]
            worse |= bool(d.mean() > TIE_SE * se(d))
            better |= bool(d.mean() < -TIE_SE * se(d))
            parts.append(f"{f}: deepbp {drop['deepbp'].mean():+.3f}, deepmf {drop['deepmf'].mean():+.3f} "
                         f"(paired deepbp − deepmf {mean_se(d)})")
        return better and not worse, f"accuracy lost from {lo} to {hi} spammers, " + "; ".join(parts)

    def above() -> tuple[bool, str]:
        means, detail = by_count("informative", "bp")
        return min(means) > 0, detail

    def within() -> tuple[bool, str]:
        means, detail = by_count("noise", "bp")
        return max(abs(d) for d in means) <= NOISE_TOLERANCE, detail

    line("deepbp at least as accurate as deepmf on average", ("deepbp", "deepmf"), at_least)
    if len(spammers) > 1:
        line("deepbp loses less than deepmf as spammers are added", ("deepbp", "deepmf"), drops)
    else:
        lines.append("not checked (one spammer count): deepbp loses less than deepmf as spammers are added")
    line("deepbp above bp with informative features (every spammer count)", ("deepbp", "bp"), above)
    line(f"deepbp within {NOISE_TOLERANCE * 100:g} point of bp with noise features (every spammer count)",
         ("deepbp", "bp"), within)
    for rival in methods:
        if "deepbp" in methods and rival.startswith("bp:"):  # context, not a verdict: bp with other parameters
            lines.append(f"for reference, noise features: {by_count('noise', rival)[1]}")
    return lines


def report(got: dict, methods: list[str], trainers: list[str], opts, seconds: float) -> None:
    """The tables and the verdicts of ``got`` (:func:`run`'s), ``trainers`` the methods among ``methods`` that
    train a classifier."""
    n = len(opts.seeds)
    pairs = [p for p in PAIRS if p[0] in methods and p[1] in methods]
    print(f"deepBP §4 on digits (even/odd): N = {opts.tasks:,} tasks, l = 3, r = 4, worker prior Beta(2, 1), "
          f"extreme spammers {' '.join(map(str, opts.spammers))}; epochs {opts.epochs or 'declared'}, params "
          f"{opts.param or 'declared'}, torch threads {opts.threads}, seeds {' '.join(map(str, opts.seeds))}; "
          f"{seconds:.0f} s\n")
    print(f"Accuracy of the inferred training labels (mean ± std over {n} seeds); deepbp - rival: the paired "
          "per-seed difference (seeds where deepbp is at least as accurate)\n")
    head = ["spammers", "features", *methods, *(f"{a} − {b}" for a, b in pairs), ORACLE]
    rows = []
    for e in opts.spammers:
        for f in FEATURES:
            r = got[f][e]
            rows.append([str(e), f, *(cell(values(r[m])) for m in methods),
                         *(paired(difference(got, f, e, a, b)) for a, b in pairs), cell(values(r[ORACLE]))])
    print(table(head, rows))
    if trainers:
        held = digits()[1].shape[0] - opts.tasks
        print(f"\nThe classifier on the {held:,} held-out digits (informative features; mean ± std "
              f"over {n} seeds)\n")
        print(table(["spammers", *trainers],
                    [[str(e), *(cell(values(got["informative"][e][m], "test")) for m in trainers)]
                     for e in opts.spammers]))
    print("\nIssue 31's acceptance (deepBP's scenarios):\n")
    for v in verdicts(got, methods, opts.spammers):
        print(f"- {v}")
    total = {m: sum(x["seconds"] for f in FEATURES for e in opts.spammers for x in got[f][e][m]
                    if m in trainers or f == FEATURES[0]) for m in methods}
    print("\nFit seconds, all rows and seeds: " + ", ".join(f"{m} {s:.1f}" for m, s in total.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", nargs="+", default=list(METHODS),
                    help="trainers and aggregators, in column order; NAME:P=V:... a method with its own parameter "
                    "values (default: %(default)s)")
    ap.add_argument("--seeds", nargs="+", type=int, help="seeds (default 0-9; --quick: 0)")
    ap.add_argument("--spammers", nargs="+", type=int, help="numbers of extreme spammers (default 0 1 2 3)")
    ap.add_argument("--tasks", type=int, help="N, the training tasks (default 1000; the rest of the 1,797 digits "
                    "are the held-out test)")
    ap.add_argument("--epochs", type=int, help="every trainer's epochs (default: its declared default)")
    ap.add_argument("--param", nargs="+", default=[], metavar="NAME=VALUE",
                    help="a parameter given to every method that declares it, as text (-p's syntax: prior=2,1)")
    ap.add_argument("--declared", action="store_true", help="deepbp and deepmf with their declared lr (1e-2), "
                    "not the paper's 1e-4 of its synthetic figures")
    ap.add_argument("--threads", type=int, default=1, help="torch's threads (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="smoke run: seed 0, 200 tasks, 0 and 1 spammer, 2 epochs "
                    "(each overridable)")
    ap.add_argument("--json", help="write every fit here")
    ap.add_argument("--from-json", metavar="FILE", help="print the tables and verdicts of an earlier --json FILE "
                    "(no fit; the other options are ignored)")
    ap.add_argument("--verbose", action="store_true", help="each fit's figures on stderr as they come")
    opts = ap.parse_args(argv)
    if opts.from_json:
        saved = json.loads(Path(opts.from_json).read_text())
        got = {f: {int(e): row for e, row in saved["results"][f].items()} for f in FEATURES}
        report(got, saved["methods"], saved["trainers"], argparse.Namespace(**saved["options"]), saved["seconds"])
        return 0
    defaults = QUICK if opts.quick else {"seeds": list(range(10)), "spammers": [0, 1, 2, 3], "tasks": 1000,
                                         "epochs": None}
    for name, value in defaults.items():
        if getattr(opts, name) is None:
            setattr(opts, name, value)
    opts.spammers = sorted(set(opts.spammers))
    if opts.spammers[0] < 0 or not 8 <= opts.tasks <= 1700:
        ap.error("--spammers must be >= 0 and --tasks in 8..1700 (the digits hold 891 even and 906 odd images)")
    given = {}
    for text in opts.param:
        name, sep, value = text.partition("=")
        if not sep:
            ap.error(f"--param takes NAME=VALUE, got {text!r}")
        given[name] = value
    opts.param = given

    from crowdagg.core import threads
    from crowdagg.errors import CrowdaggError

    threads.set_threads(opts.threads)
    methods = []
    for m in dict.fromkeys(opts.methods):
        spec = declaration(m)
        if spec is None:
            print(f"not declared in this checkout (left out): {m}")
            continue
        try:
            spec.load()  # a declaration whose module has not landed, or whose extra is missing
        except CrowdaggError as exc:
            print(f"declared but not loadable (left out): {m}: {exc}")
            continue
        methods.append(m)
    if not methods:
        print("no method to run")
        return 0
    print()
    start = time.perf_counter()
    try:
        got = run(methods, opts)
    except CrowdaggError as exc:  # a bad --param value: the library's one line, as the CLI says it
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    trainers = [m for m in methods if is_trainer(m)]
    report(got, methods, trainers, opts, seconds)
    if opts.json:
        Path(opts.json).write_text(json.dumps(
            {"options": {k: v for k, v in vars(opts).items() if k not in ("json", "from_json")}, "methods": methods,
             "trainers": trainers, "seconds": seconds,
             "results": {f: {str(e): got[f][e] for e in opts.spammers} for f in FEATURES}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
