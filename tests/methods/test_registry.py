"""The method registry: declared parameters, restarts, and a method added through the registry alone (wawa)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg import load_annotations
from crowdagg.cli import app
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import UsageError
from crowdagg.methods.api import aggregate, get_method
from crowdagg.methods.registry import METHODS, Param, get
from tests import reference

BLUEBIRD = "example:bluebird"


@pytest.fixture(scope="module")
def bluebird() -> AnnotationSet:
    return load_annotations(BLUEBIRD)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_declared_method_loads_and_its_defaults_are_valid(name, bluebird):
    spec = get(name)
    cls = spec.load()
    assert cls.name == name and cls.params() == spec.param_names
    assert "seed" in spec.param_names
    defaults = cls().check_params()
    assert defaults == {p.name: p.default for p in spec.params}
    result = cls().fit(bluebird)
    assert result.method == name and result.posteriors.shape == (bluebird.n_tasks, bluebird.n_classes)


@pytest.mark.parametrize(("name", "p"), [(m.name, p) for m in METHODS.values() for p in m.params])
def test_out_of_range_values_are_refused_naming_the_parameter(name, p: Param):
    cls = get(name).load()
    bad = []
    if math.isfinite(p.low):
        bad.append(p.low - 1 if p.kind is int else p.low - 1e-3)
    if math.isfinite(p.high):
        bad.append(p.high + 1 if p.kind is int else p.high * 2 + 1)
    bad.append("x")
    for value in bad:
        with pytest.raises(UsageError, match=rf"^{p.name} must be"):
            cls(**{p.name: value}).check_params()
    with pytest.raises(UsageError, match=rf"^{p.name} must be"):
        p.parse("not-a-number")


def test_a_parameter_the_method_does_not_take_names_the_ones_it_does():
    with pytest.raises(UsageError, match=r"method 'mv' does not take smoothing; it takes: seed"):
        aggregate(load_annotations(BLUEBIRD), "mv", smoothing=1.0)
    with pytest.raises(UsageError, match="unknown method 'nope'; valid methods: mv, wmv, wawa, ds, onecoin"):
        get_method("nope")


def test_restarts_are_never_worse_than_one_start(bluebird):
    one = aggregate(bluebird, "ds", tol=1e-8)
    many = aggregate(bluebird, "ds", tol=1e-8, n_init=4, seed=3)
    assert many.log_likelihood[-1] >= one.log_likelihood[-1] - 1e-9
    again = aggregate(bluebird, "ds", tol=1e-8, n_init=4, seed=3)
    np.testing.assert_array_equal(many.posteriors, again.posteriors)  # seeded
    first = aggregate(bluebird, "ds", tol=1e-8, n_init=1, seed=3)
    np.testing.assert_array_equal(first.posteriors, one.posteriors)  # start 0 is soft MV, whatever the seed


def test_later_starts_are_seeded_draws_around_majority_vote(bluebird):
    from crowdagg.methods.em.ds import starting_posteriors
    from crowdagg.methods.votes.mv import soft_majority_vote

    mv = soft_majority_vote(bluebird)
    np.testing.assert_array_equal(starting_posteriors(bluebird, 0, np.random.default_rng(1)), mv)
    a = starting_posteriors(bluebird, 1, np.random.default_rng([7, 1]))
    b = starting_posteriors(bluebird, 1, np.random.default_rng([7, 1]))
    c = starting_posteriors(bluebird, 1, np.random.default_rng([8, 1]))
    np.testing.assert_array_equal(a, b)  # seeded
    assert not np.array_equal(a, c) and not np.array_equal(a, mv)
    np.testing.assert_allclose(a.sum(axis=1), 1.0)
    assert (np.abs(a - mv) <= 0.5 + 1e-12).all()  # half majority vote, half a Dirichlet draw


def test_wawa_matches_its_definition(rng):
    # K = 2 and 9 answers a task: the majority vote has no ties, so the reference's argmax agrees with ours.
    n_tasks, n_workers, k = 400, 25, 2
    acc = rng.uniform(0.4, 0.95, n_workers)
    truth = rng.integers(0, k, n_tasks)
    task, worker, label = [], [], []
    for t in range(n_tasks):
        for w in rng.choice(n_workers, 9, replace=False):
            task.append(t), worker.append(w), label.append(truth[t] if rng.random() < acc[w] else 1 - truth[t])
    data = AnnotationSet.from_codes(task, worker, label, n_workers=n_workers, n_classes=k)
    ref_labels, ref_post, ref_skills = reference.wawa(data.task, data.worker, data.label, n_tasks, n_workers, k)
    result = aggregate(data, "wawa")
    np.testing.assert_allclose(result.worker_params["accuracy"], ref_skills, rtol=0, atol=1e-15)
    np.testing.assert_allclose(result.posteriors, ref_post, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(result.labels, ref_labels)
    # the skills order the workers as their accuracies do (agreement with a noisy vote is biased towards it)
    assert np.corrcoef(result.worker_params["accuracy"], acc)[0, 1] > 0.8


def test_wawa_was_added_without_touching_the_cli():
    out = subprocess.run(["git", "log", "--format=%H", "-1", "--", "crowdagg/aggregators/wawa.py"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        pytest.skip("not a git checkout, or wawa not committed yet")
    changed = subprocess.run(["git", "show", "--name-only", "--format=", out.stdout.strip()],
                             capture_output=True, text=True, check=True).stdout.split()
    assert "crowdagg/cli.py" not in changed


# --------------------------------------------------------------------------- CLI
def test_cli_param_option_and_methods_name():
    runner = CliRunner()
    a = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "onecoin", "--smoothing", "2"])
    b = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "onecoin", "-p", "smoothing=2"])
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout  # --smoothing is an alias
    c = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "onecoin", "-p", "smoothing=2", "--smoothing", "2"])
    assert c.exit_code == 2 and "given twice" in c.stderr
    d = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", "n_init=0"])
    assert d.exit_code == 2 and "Error: -p n_init must be an integer in [1, 1000], got 0" in d.stderr
    e = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "mv", "-p", "n_init=2"])
    assert e.exit_code == 2 and "method 'mv' does not take -p n_init; it takes: --seed" in e.stderr
    f = runner.invoke(app, ["methods", "ds"])
    assert f.exit_code == 0 and "doi:10.2307/2346806" in f.stdout and "n_init (int, default 1" in f.stdout
    g = runner.invoke(app, ["methods", "ds", "--format", "csv"])
    assert g.exit_code == 0 and g.stdout.splitlines()[0] == "parameter,type,default,range,paper,help"
    h = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "wawa"])
    assert h.exit_code == 0 and h.stdout.startswith("task,label,confidence\n")


def test_listing_methods_imports_no_method_code():
    code = ("import sys; from crowdagg._entry import main; main(['methods']); "
            "print(sorted(m for m in sys.modules if m.startswith(('numpy', 'numba', 'crowdagg.methods.api'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_parameter_given_twice_is_refused():
    runner = CliRunner()
    a = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "--seed", "3", "-p", "seed=5"])
    assert a.exit_code == 2 and "seed is given twice" in a.stderr
    b = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", "n_init=2", "-p", "n_init=3"])
    assert b.exit_code == 2 and "n_init is given twice (-p n_init= twice)" in b.stderr
    for bad in ("n_init=1_0", "n_init=\u0663"):
        c = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", bad])
        assert c.exit_code == 2 and "must be an integer" in c.stderr


def test_none_stands_for_the_default(bluebird):
    assert get_method("onecoin")(smoothing=None).check_params()["smoothing"] == 1.0
    with pytest.raises(UsageError, match="it takes: seed, max_iter, tol, smoothing, n_init, init, gold, init_workers"):
        aggregate(bluebird, "ds", bogus=1)
