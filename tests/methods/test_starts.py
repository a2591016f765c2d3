"""Start strategies (crowdagg.methods.starts): init = soft-vote, hard-vote, a posterior, another method."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crowdagg import load_annotations
from crowdagg.engine import LocalEngine
from crowdagg.errors import UsageError
from crowdagg.methods.api import aggregate
from crowdagg.methods.blocks import full_m_step, hard_majority_vote, soft_majority_vote
from crowdagg.methods.em.ds import EMState
from crowdagg.methods.em.onecoin import one_coin_m_step


@pytest.fixture(scope="module")
def bluebird():
    return load_annotations("example:bluebird")


def free(data):
    return np.full(data.n_tasks, -1, dtype=np.int64)


def by_hand(data, post, m_step, smoothing, n_iter, params=None):
    """EM from a posterior (or from parameters), ``n_iter`` M+E steps: the posteriors and the objective trace."""
    state = EMState(LocalEngine(data), None if post is None else post.copy(), free(data), m_step, smoothing,
                    params=params)
    trace = [state.iterate() for _ in range(n_iter)]
    return state.posteriors(), trace


def test_the_default_start_is_soft_vote(bluebird):
    res = aggregate(bluebird, "ds", max_iter=3, tol=0.0)
    same = aggregate(bluebird, "ds", init="soft-vote", max_iter=3, tol=0.0)
    post, trace = by_hand(bluebird, soft_majority_vote(bluebird), full_m_step, 0.0, 3)
    np.testing.assert_array_equal(res.posteriors, post)
    np.testing.assert_array_equal(res.objective, trace)
    np.testing.assert_array_equal(same.posteriors, post)


@pytest.mark.parametrize("method, m_step, smoothing", [("ds", full_m_step, 0.0), ("onecoin", one_coin_m_step, 1.0)])
def test_hard_vote_starts_from_one_hot_majority_labels(bluebird, method, m_step, smoothing):
    res = aggregate(bluebird, method, init="hard-vote", seed=5, max_iter=2, tol=0.0)
    start = hard_majority_vote(bluebird, 5)
    assert set(np.unique(start)) == {0.0, 1.0} and np.all(start.sum(axis=1) == 1.0)
    post, trace = by_hand(bluebird, start, m_step, smoothing, 2)
    np.testing.assert_array_equal(res.posteriors, post)
    np.testing.assert_array_equal(res.objective, trace)
    soft = aggregate(bluebird, method, max_iter=2, tol=0.0)
    assert not np.array_equal(soft.posteriors, res.posteriors)


def test_a_given_posterior_is_used_and_not_changed(bluebird):
    rng = np.random.default_rng(3)
    given = rng.dirichlet(np.ones(2), size=bluebird.n_tasks)
    kept = given.copy()
    res = aggregate(bluebird, "ds", init=given, max_iter=2, tol=0.0, gold={bluebird.tasks[0]: "1"})
    np.testing.assert_array_equal(given, kept)  # the start is clamped on a copy
    start = given.copy()
    start[0] = [0.0, 1.0]
    state = EMState(LocalEngine(bluebird), start, np.r_[1, free(bluebird)[1:]], full_m_step, 0.0)
    state.iterate()
    state.iterate()
    np.testing.assert_array_equal(res.posteriors, state.posteriors())


def test_onecoin_init_ds_starts_from_ds_s_posterior(bluebird):
    """onecoin and ds share no worker-model form (onecoin's is an accuracy): onecoin starts from ds's posteriors."""
    ds = aggregate(bluebird, "ds")
    res = aggregate(bluebird, "onecoin", init="ds", max_iter=4, tol=0.0)
    post, trace = by_hand(bluebird, ds.posteriors, one_coin_m_step, 1.0, 4)
    np.testing.assert_array_equal(res.posteriors, post)
    np.testing.assert_array_equal(res.objective, trace)
    full = aggregate(bluebird, "onecoin", init="ds")
    np.testing.assert_array_equal(full.posteriors, aggregate(bluebird, "onecoin", init=ds.posteriors).posteriors)


def test_ds_init_onecoin_starts_from_its_parameters_with_an_e_step(bluebird):
    """ds reads onecoin's matrices as confusions: an E-step on onecoin's prior and matrices, then EM."""
    oc = aggregate(bluebird, "onecoin")
    res = aggregate(bluebird, "ds", init="onecoin", max_iter=3, tol=0.0)
    params = (oc.prior, np.ascontiguousarray(oc.confusion.transpose(0, 2, 1)))
    state = EMState(LocalEngine(bluebird), None, free(bluebird), full_m_step, 0.0, params=params)
    np.testing.assert_allclose(state.posteriors(), oc.posteriors, rtol=0, atol=1e-12)  # onecoin ends on an E-step
    trace = [state.iterate() for _ in range(3)]
    np.testing.assert_array_equal(res.posteriors, state.posteriors())
    np.testing.assert_array_equal(res.objective, trace)
    from_posterior = aggregate(bluebird, "ds", init=oc.posteriors, max_iter=3, tol=0.0)
    assert not np.array_equal(from_posterior.objective, res.objective)  # one M+E step apart


def test_init_method_runs_with_the_same_seed(bluebird):
    a = aggregate(bluebird, "ds", init="mv", seed=11, max_iter=2, tol=0.0)
    mv = aggregate(bluebird, "mv", seed=11)
    post, _ = by_hand(bluebird, mv.posteriors, full_m_step, 0.0, 2)
    np.testing.assert_array_equal(a.posteriors, post)


def test_restarts_blend_the_start(bluebird):
    """n_init > 1: start 0 is the init; each later start blends it with a seeded Dirichlet draw."""
    a = aggregate(bluebird, "ds", init="hard-vote", n_init=3, seed=2)
    b = aggregate(bluebird, "ds", init="hard-vote", n_init=3, seed=2)
    np.testing.assert_array_equal(a.posteriors, b.posteriors)
    one = aggregate(bluebird, "ds", init="hard-vote", seed=2)
    assert a.objective[-1] >= one.objective[-1]


@pytest.mark.parametrize("init, message", [
    ("ds", r"ds cannot start from its own output"),
    ("nope", r"init must be soft-vote, hard-vote or a method \(mv, wmv, wawa, ds, onecoin.*\), got 'nope'"),
    (3, r"init must be soft-vote, hard-vote or a method \(.*\), got 3"),
    (np.ones((3, 2)) / 2, r"init: a posterior must have shape \(n_tasks, n_classes\) = \(108, 2\), got \(3, 2\)"),
    (np.full((108, 2), 0.6), r"each row of a posterior must sum to 1; row 0 \(task '11573'\) sums to 1.2"),
    (np.tile([-0.5, 1.5], (108, 1)), r"finite probabilities"),
    (np.full((108, 2), np.nan), r"finite probabilities"),
])
def test_bad_starts_are_refused(bluebird, init, message):
    with pytest.raises(UsageError, match=message):
        aggregate(bluebird, "ds", init=init)


def test_a_method_that_is_not_a_categorical_aggregator_is_refused(bluebird, monkeypatch):
    import dataclasses

    from crowdagg.methods import registry

    numeric = dataclasses.replace(registry.METHODS["mv"], name="means", target=f"{__name__}:NeverLoaded")
    object.__setattr__(numeric, "kind", "numeric")  # a numeric aggregator: numeric answers -> one value per task
    monkeypatch.setitem(registry.METHODS, "means", numeric)
    with pytest.raises(UsageError, match=r"init='means': means is not a categorical aggregator"):
        aggregate(bluebird, "ds", init="means")


def test_methods_without_init_refuse_it(bluebird):
    with pytest.raises(UsageError, match="does not take init"):
        aggregate(bluebird, "mv", init="hard-vote")


def test_cli_init_method():
    from typer.testing import CliRunner

    from crowdagg.cli import app

    runner = CliRunner()
    lib = aggregate("example:bluebird", "onecoin", init="ds")
    out = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "onecoin", "-p", "init=ds", "--format", "csv"])
    assert out.exit_code == 0, out.output
    rows = [line.split(",") for line in out.stdout.splitlines()[1:]]
    assert [r[1] for r in rows] == list(lib.labels_series().astype(str))
    bad = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "onecoin", "-p", "init=onecoin"])
    assert bad.exit_code == 2 and "onecoin cannot start from its own output" in bad.output


# --------------------------------------------------------------------------- hostile
@pytest.mark.parametrize("given", [
    lambda n: np.full((n, 2), 0.5 + 0.0j),      # complex: numpy would drop the imaginary part with a warning
    lambda n: np.full((n, 2), "0.5"),            # text that numpy would parse as numbers
    lambda n: np.full((n, 2), 0.5, dtype=object),
])
def test_a_posterior_that_is_not_real_numbers_is_refused(bluebird, given):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy ComplexWarning on the way
        with pytest.raises(UsageError, match=r"init: a posterior must hold real numbers, got dtype"):
            aggregate(bluebird, "ds", init=given(bluebird.n_tasks))


@pytest.fixture(scope="module")
def with_an_empty_task(tmp_path_factory):
    path = tmp_path_factory.mktemp("empty") / "answers.csv"
    path.write_text("task,worker,label\na,w1,x\na,w2,x\nb,w1,y\nb,w2,x\nc,w1,y\nc,w2,y\nd,w1,\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the blank label's warning
        return load_annotations(str(path))


def test_the_built_in_starts_are_accepted_as_given_posteriors(with_an_empty_task):
    """soft_majority_vote / hard_majority_vote leave the rows of tasks without answers at 0: given as ``init``
    they are accepted and give the same fit as the named start."""
    data = with_an_empty_task
    assert data.n_tasks == 4 and data.answers_per_task[3] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, post in (("soft-vote", soft_majority_vote(data)), ("hard-vote", hard_majority_vote(data, 0))):
            assert post[3].sum() == 0.0
            np.testing.assert_array_equal(aggregate(data, "ds", init=post).posteriors,
                                          aggregate(data, "ds", init=name).posteriors)
    # an answered task's row must still sum to 1
    bad = soft_majority_vote(data)
    bad[1] = 0.0
    with pytest.raises(UsageError, match=r"row 1 \(task 'b'\) sums to 0"):
        aggregate(data, "ds", init=bad)


def test_the_start_s_own_warnings_are_not_repeated_or_misattributed(with_an_empty_task):
    """init=METHOD runs another fit on the same data: its data warnings (tasks without answers, gold tasks not in
    the answers) are the outer fit's too and come once; its verdict on its own result (a collapse, advising to
    "try ds" to a user who runs ds) is not the result the user gets."""
    data = with_an_empty_task
    gold = {"a": "x", "zz": "y"}
    for method, init in (("ds", "onecoin"), ("onecoin", "ds"), ("ds", "mv")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            aggregate(data, method, init=init, gold=gold)
        texts = [str(w.message) for w in caught]
        assert sum("have no answers" in t for t in texts) == 1, texts
        assert sum("gold task(s) are not in the answers" in t for t in texts) == 1, texts
        assert not any(t.startswith(f"{init}:") for t in texts), texts


def test_init_naming_the_method_itself_is_refused_before_any_data(tmp_path):
    """The CLI checks settings before reading the input: -p init=ds on ds is refused without reading it."""
    from crowdagg.methods.api import get_method

    with pytest.raises(UsageError, match="ds cannot start from its own output"):
        get_method("ds")(init="ds").check_params()
    with pytest.raises(UsageError, match="onecoin cannot start from its own output"):
        get_method("onecoin")(init="onecoin").check_params()
    import subprocess
    import sys

    missing = tmp_path / "nope.csv"
    out = subprocess.run([sys.executable, "-m", "crowdagg._entry", "aggregate", str(missing), "-m", "ds",
                          "-p", "init=ds"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("Error: -p init='ds': ds cannot start from its own output; use soft-vote, "
                                  "hard-vote or another method")


def test_a_start_that_did_not_converge_is_said_once_as_the_start_s(bluebird, monkeypatch):
    """The start runs with its own defaults: its non-convergence is worded as the start's, once, without the
    advice to raise max_iter (the user's max_iter is this fit's, not the start's)."""
    import dataclasses

    from crowdagg.errors import ConvergenceWarning
    from crowdagg.methods import registry

    ds = registry.METHODS["ds"]
    short = tuple(dataclasses.replace(p, default=2) if p.name == "max_iter" else p for p in ds.params)
    monkeypatch.setitem(registry.METHODS, "ds", dataclasses.replace(ds, params=short))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = aggregate(bluebird, "onecoin", init="ds")
    texts = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert texts == ["init=ds: ds (the start, run with its own defaults) stopped before converging; onecoin goes "
                     "on from where it stopped"]
    assert res.converged


def test_a_fitted_result_starts_as_its_method_name_would(bluebird):
    onecoin = aggregate(bluebird, "onecoin")
    from_result = aggregate(bluebird, "ds", init=onecoin)
    from_name = aggregate(bluebird, "ds", init="onecoin")
    np.testing.assert_array_equal(from_result.posteriors, from_name.posteriors)
    assert from_result.n_iter == from_name.n_iter
    mv = aggregate(bluebird, "mv")  # no shared worker form: its posteriors only
    np.testing.assert_array_equal(aggregate(bluebird, "ds", init=mv).posteriors,
                                  aggregate(bluebird, "ds", init="mv").posteriors)


def test_a_result_of_other_data_or_of_the_method_itself_is_refused(bluebird):
    ds = aggregate(bluebird, "ds", max_iter=2)
    with pytest.raises(UsageError, match="cannot start from its own output"):
        aggregate(bluebird, "ds", init=ds)
    from crowdagg.data.annotations import AnnotationSet

    small = AnnotationSet.from_codes([0, 0, 1], [0, 1, 1], [0, 1, 1], n_workers=2, n_classes=2)
    with pytest.raises(UsageError, match="fitted on other data"):
        aggregate(small, "ds", init=aggregate(bluebird, "onecoin"))
