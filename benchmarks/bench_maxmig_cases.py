"""Max-MIG's three information structures on real features: which trainers keep their accuracy when experts copy.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_maxmig_cases.py --threads 1
    PYTHONPATH=. .venv/bin/python benchmarks/bench_maxmig_cases.py --methods maxmig raykar --seeds 0 --epochs 10

Cao, Xu, Kong & Wang (ICLR 2019), "Max-MIG", arXiv:1905.13436, §4 and App. B (ALGORITHMS.md §14.1): the
paper's cases 4.1 (independent mistakes), 4.2 (naive majority: juniors label everything class 0) and 4.3
(correlated mistakes: juniors copy a senior), every expert labelling every item, the same seniors in all three
(:func:`crowdagg.simulate.maxmig.maxmig_case`; the CIFAR-10 experts, (H) by default).  The items: scikit-learn's
bundled digits (1,797 8×8 images, 64 features, 10 classes), split by a seeded draw into ``--train`` training
items (default 1,200) and the rest for test.  Each row is a trainer (``maxmig`` twice: its classifier's labels
and, as ``maxmig (forecaster)``, the data-crowds forecaster's), each column pair a case: the accuracy of the
labels it infers for the training items (what ``crowdagg train`` writes) and of its classifier on the test
items, mean ± std over ``--seeds`` (default 0 1 2: the crowd's draw, the split's and the trainer's).  Every
trainer runs with its declared defaults but ``--epochs`` and ``--param NAME=VALUE`` (given to every method
declaring NAME); truth is read only to score.  The last columns: each trainer's largest drop from its
independent-case accuracy, training labels and test.

``--threads N`` runs torch on N threads (1 is fastest on a shared machine); ``--json FILE`` writes every cell.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_train import cell, parse_param, table  # noqa: E402

METHODS = ("maxmig", "maxmig (forecaster)", "raykar", "crowdlayer", "ds-then-train")
FORECASTER = " (forecaster)"


def digits(n_train: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits split by ``seed``: (train x, train truth, test x, test truth)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng([seed, 0xD1]).permutation(d.target.shape[0])
    x, y = d.data.astype(np.float32), d.target.astype(np.int64)
    return x[order[:n_train]], y[order[:n_train]], x[order[n_train:]], y[order[n_train:]]


def fit(method: str, case: str, seed: int, opts) -> tuple[float, float]:
    """(training-label accuracy, test accuracy) of ``method`` on ``case`` at ``seed``."""
    from crowdagg.methods.registry import get_trainer
    from crowdagg.simulate.maxmig import maxmig_case

    x, y, test_x, test_y = digits(opts.train, seed)
    crowd = maxmig_case(x, y, case, expertise=opts.expertise, seed=seed)
    data = crowd.to_annotations()
    rows = np.array([int(t[1:]) for t in data.task_names])  # simulated task names are t<index>
    classes = np.array([int(c) for c in data.classes])
    name = method.removesuffix(FORECASTER)
    declared = {p.name for p in get_trainer(name).params}
    params = {k: v for k, v in opts.param.items() if k in declared}
    params["seed"] = seed
    if opts.epochs is not None:
        params["epochs"] = opts.epochs
    if method.endswith(FORECASTER):
        params["forecaster"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = get_trainer(name).load()(**params).fit(data, x[rows])
    model = result.model_params["model"]
    test = classes[model.predict_proba(test_x).argmax(axis=1)]
    return float(np.mean(classes[result.labels] == y[rows])), float(np.mean(test == test_y))


def main(argv: list[str] | None = None) -> int:
    from crowdagg.simulate.maxmig import CASES, EXPERTISE

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", nargs="+", default=list(METHODS),
                    help="trainers; NAME (forecaster) for a trainer's forecaster labels (default: %(default)s)")
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--expertise", choices=EXPERTISE, default="H")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, help="every trainer's epochs (default: its declared default)")
    ap.add_argument("--train", type=int, default=1200, help="training items (the rest of the 1,797 are the test)")
    ap.add_argument("--param", nargs="+", type=parse_param, default=[], metavar="NAME=VALUE",
                    help="a trainer parameter given to every method that declares it")
    ap.add_argument("--threads", type=int, help="torch's threads (CROWDAGG_THREADS; default: the policy's)")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--verbose", action="store_true", help="each fit's figures on stderr as they come")
    opts = ap.parse_args(argv)
    opts.param = dict(opts.param)
    if opts.threads is not None:
        from crowdagg.core import threads

        threads.set_threads(opts.threads)
    got: dict[str, dict[str, list[tuple[float, float]]]] = {}
    t0 = time.perf_counter()
    for method in opts.methods:
        for case in opts.cases:
            for seed in opts.seeds:
                start = time.perf_counter()
                labels, test = fit(method, case, seed, opts)
                got.setdefault(method, {}).setdefault(case, []).append((labels, test))
                if opts.verbose:
                    print(f"{method} {case} seed {seed}: labels {labels:.3f} test {test:.3f} "
                          f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    head = ["method"] + [f"{case} {what}" for case in opts.cases for what in ("labels", "test")]
    if "independent" in opts.cases and len(opts.cases) > 1:
        head += ["largest drop: labels", "test"]
    rows = []
    for method, cases in got.items():
        row = [method] + [cell([v[i] for v in cases[case]]) for case in opts.cases for i in (0, 1)]
        if len(head) > len(row):
            base = [float(np.mean([v[i] for v in cases["independent"]])) for i in (0, 1)]
            row += [f"{max(base[i] - float(np.mean([v[i] for v in cases[c]])) for c in opts.cases):+.3f}"
                    for i in (0, 1)]
        rows.append(row)
    print(f"digits: {opts.train:,} training items (the rest test), expertise ({opts.expertise}), "
          f"epochs {opts.epochs or 'declared'}, seeds {' '.join(map(str, opts.seeds))}, params {opts.param or 'declared'}; "
          f"{time.perf_counter() - t0:.0f} s\n")
    print(table(head, rows))
    if opts.json:
        Path(opts.json).write_text(json.dumps({"options": {k: v for k, v in vars(opts).items() if k != "json"},
                                               "results": got}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
