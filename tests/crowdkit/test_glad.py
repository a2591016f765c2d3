"""crowdagg.crowdkit.GLAD: crowd-kit 1.4.2's own GLAD tests restated, a slow reference of its model, and crowd-kit
itself on the real datasets and its own crowds."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_index_equal, assert_series_equal

from crowdagg import crowdkit as ours
from crowdagg.crowdkit import GLAD

from .crowds import SIMPLE_TRUTH, TOY_TRUTH, P, labels_equal, simple_frame, toy_frame, truth
from .oracle import SMALL, ck, quiet, same_frame, same_labels, same_series


# --------------------------------------------------------------------------- GLAD
# crowd-kit's tests/aggregation/test_glad_aggregation.py: the toy and simple crowds recovered exactly (to convergence
# and with tol=0), the first E-step on one task, and Q's gradient against finite differences; then what its code
# does that those tests leave unchecked, against a slow reference of crowd-kit's model written from its definition.
def slow_glad_e_step(frame: pd.DataFrame, alphas: pd.Series, log_betas: pd.Series, priors: pd.Series) -> pd.DataFrame:
    """Posteriors (tasks × the prior's labels) from α and log β, one answer at a time."""
    k = len(priors)
    scores = pd.DataFrame(np.log(priors.to_numpy(dtype=float)), index=priors.index, columns=["s"]).T
    scores = pd.concat([scores] * frame["task"].nunique(), ignore_index=True)
    scores.index = pd.unique(frame["task"])
    for task, worker, label in frame[["task", "worker", "label"]].itertuples(index=False):
        right = 1.0 / (1.0 + np.exp(-alphas[worker] * np.exp(log_betas[task])))
        for c in priors.index:
            scores.loc[task, c] += np.log(right) if c == label else np.log((1.0 - right) / (k - 1))
    post = np.exp(scores.to_numpy() - scores.to_numpy().max(axis=1, keepdims=True))
    return pd.DataFrame(post / post.sum(axis=1, keepdims=True), index=scores.index, columns=priors.index)


def slow_glad_q(frame: pd.DataFrame, post: pd.DataFrame, alphas: pd.Series, log_betas: pd.Series,
                alpha_mean: float | pd.Series = 1.0, beta_mean: float | pd.Series = 1.0) -> float:
    """crowd-kit's Q: Σ over (answer, class) of post × log P(answer | class), plus the log N(0, 1) densities of
    α - μ_α and log β - μ_β; not divided."""
    k = post.shape[1]
    q = 0.0
    for task, worker, label in frame[["task", "worker", "label"]].itertuples(index=False):
        right = 1.0 / (1.0 + np.exp(-alphas[worker] * np.exp(log_betas[task])))
        for c in post.columns:
            q += post.loc[task, c] * (np.log(right) if c == label else np.log((1.0 - right) / (k - 1)))
    log_pdf = -0.5 * np.log(2 * np.pi)
    return float(q + (log_pdf - 0.5 * (alphas - alpha_mean) ** 2).sum() + (log_pdf - 0.5 * (log_betas - beta_mean) ** 2).sum())


def uniform(frame: pd.DataFrame) -> pd.Series:
    labels = pd.unique(frame["label"])
    return pd.Series(1.0 / len(labels), index=labels)


EEC = P + "eec"  # the "simple" task of crowd-kit's E-step test: three geese and a parrot


@pytest.mark.parametrize(("n_iter", "tol"), [(100, 0), (100500, 1e-5)])
@pytest.mark.parametrize("dataset", ["toy", "simple"])
def test_glad_recovers_crowd_kits_toy_and_simple_crowds(toy, simple, dataset, n_iter, tol):
    data, expected = (toy, truth(TOY_TRUTH)) if dataset == "toy" else (simple, truth(SIMPLE_TRUTH, P))
    glad = GLAD(n_iter=n_iter, tol=tol)
    labels = glad.fit_predict(data)
    labels_equal(labels, expected)
    assert labels is glad.labels_ and glad.fit_predict_proba(data) is glad.probas_
    if tol:  # stopped by its rule, well before the cap (tol=0 stops only on a fall: a plateau runs on)
        assert 1 < len(glad.loss_history_) < 100


def test_glad_first_e_step_on_one_task(simple):
    """crowd-kit's E-step test: at α = 1, log β = 1 three geese against a parrot give goose σ(2e) = 0.995664."""
    one = simple[simple["task"] == EEC]
    probas = GLAD(n_iter=0).fit(one).probas_
    assert list(probas.columns) == ["goose", "parrot"]
    expected = 1.0 / (1.0 + np.exp(-2 * np.e))  # log-odds 3·log σ(e) + log(1 − σ(e)) minus the reverse = 2e
    np.testing.assert_allclose(probas.to_numpy(), [[expected, 1 - expected]], rtol=1e-13)
    np.testing.assert_allclose(probas.to_numpy(), [[0.995664, 0.004336]], atol=1e-6)  # crowd-kit's figures


@pytest.mark.parametrize("dataset", ["one task", "toy"])
def test_glad_q_and_its_gradient(toy, simple, dataset):
    """crowd-kit's derivative test, and more: Q (kernel + priors) equals the slow reference at the start and at a
    random point, and its gradient equals finite differences of it."""
    from scipy.optimize import approx_fprime

    from crowdagg.crowdkit._answers import Answers
    from crowdagg.crowdkit.glad import _glad_log_prior, _GladEM

    data = simple[simple["task"] == EEC] if dataset == "one task" else toy
    ans = Answers(data)
    d = ans.data
    rng = np.random.default_rng(5)
    means = rng.normal(1.0, 0.5, d.n_workers + d.n_tasks)
    em = _GladEM(d, _glad_log_prior(ans, None), means, 25, 1e-2)
    state, q0 = em.start(0, rng)
    ones = pd.Series(1.0, index=ans.workers), pd.Series(1.0, index=ans.tasks)
    post = slow_glad_e_step(data, *ones, uniform(data))
    mean_a, mean_b = pd.Series(means[:d.n_workers], ans.workers), pd.Series(means[d.n_workers:], ans.tasks)
    assert q0 == pytest.approx(slow_glad_q(data, post, *ones, mean_a, mean_b), rel=1e-13)
    for x in (np.ones(d.n_workers + d.n_tasks), rng.normal(0.5, 1.0, d.n_workers + d.n_tasks)):
        value, grad = em.q_value(state, x)
        a, b = pd.Series(x[:d.n_workers], ans.workers), pd.Series(x[d.n_workers:], ans.tasks)
        assert value == pytest.approx(slow_glad_q(data, post, a, b, mean_a, mean_b), rel=1e-13)
        numeric = approx_fprime(x, lambda y: em.q_value(state, y)[0], 1e-7)
        np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)


def test_glad_probas_come_from_the_e_step_before_the_last_m_step(toy):
    """n_iter=1: the start's E-step (the same as n_iter=0's) with α, log β after one M-step; n_iter=2: the E-step
    at n_iter=1's α, log β; loss_history_[-1] is Q at the fitted α, log β over those posteriors, per (answer, class)."""
    zero, one, two = (GLAD(n_iter=n, tol=-np.inf).fit(toy) for n in (0, 1, 2))
    assert_frame_equal(one.probas_, zero.probas_)
    assert (zero.alphas_ == 1).all() and (zero.betas_ == 1).all() and not (one.alphas_ == 1).any()
    expected = slow_glad_e_step(toy, one.alphas_, one.betas_, uniform(toy))
    np.testing.assert_allclose(two.probas_.to_numpy(), expected.loc[two.probas_.index, two.probas_.columns].to_numpy(),
                               rtol=1e-12)
    for fit in (one, two):
        q = slow_glad_q(toy, fit.probas_, fit.alphas_, fit.betas_)
        assert fit.loss_history_[-1] == pytest.approx(q / (len(toy) * 2), rel=1e-12)
    assert two.loss_history_[0] == one.loss_history_[0]


def test_glad_first_comparison_is_against_the_undivided_start(toy):
    """crowd-kit sets Q = Q_start (not divided) before its loop, so its first iteration stops only when
    Q_1 / (n_answers K) − Q_start < tol: with the divided start it would stop at a tol 100 times smaller."""
    ones = pd.Series(1.0, index=pd.unique(toy["worker"])), pd.Series(1.0, index=pd.unique(toy["task"]))
    q_start = slow_glad_q(toy, slow_glad_e_step(toy, *ones, uniform(toy)), *ones)
    q_1 = GLAD(n_iter=1).fit(toy).loss_history_[0]
    gain = q_1 - q_start
    assert gain > 100 * (q_1 - q_start / (len(toy) * 2)) > 0
    assert len(GLAD(n_iter=50, tol=gain * 1.001).fit(toy).loss_history_) == 1
    assert len(GLAD(n_iter=50, tol=gain * 0.999).fit(toy).loss_history_) > 1


def test_glad_stops_by_crowd_kits_signed_rule(toy):
    """Q − Q_prev < tol: a fall stops it, tol=-inf never stops (n_iter is a budget: no warning)."""

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capped = GLAD(n_iter=7, tol=-np.inf).fit(toy)
    assert len(capped.loss_history_) == 7
    fitted = GLAD(n_iter=100).fit(toy)
    rises = np.diff(fitted.loss_history_)
    assert rises[-1] < 1e-5 and (rises[:-1] >= 1e-5).all()


def test_glad_layout_is_crowd_kits(toy):
    glad = GLAD(n_iter=3).fit(toy.iloc[::-1])  # tasks and workers first seen in reverse order
    assert glad.probas_.index.tolist() == ["t1", "t2", "t3", "t4", "t5"] and glad.probas_.index.name == "task"
    assert glad.probas_.columns.tolist() == ["no", "yes"] and glad.probas_.columns.name == "variable"
    assert glad.alphas_.index.tolist() == ["w5", "w4", "w3", "w2", "w1"] and glad.alphas_.index.name == "worker"
    assert glad.betas_.index.tolist() == ["t5", "t4", "t3", "t2", "t1"] and glad.betas_.index.name == "task"
    assert (glad.labels_.name, glad.alphas_.name, glad.betas_.name) == ("agg_label", "alpha", "beta")
    assert glad.priors_.index.tolist() == ["no", "yes"] and glad.priors_.tolist() == [0.5, 0.5]  # first appearance
    start = GLAD(n_iter=0).fit(toy)  # crowd-kit's starting Series carry no index name
    assert start.alphas_.index.name is None and start.betas_.index.name is None and start.loss_history_ == []
    # labels_ infers like idxmax; object ids holding numbers keep pd.unique's object dtype in alphas_/betas_
    data = pd.DataFrame({"task": pd.Series([1, 1, 2], dtype=object), "worker": ["a", "b", "a"], "label": [0, 1, 0]})
    glad = GLAD(n_iter=2).fit(data)
    assert glad.labels_.dtype == np.int64 and glad.betas_.index.dtype == object
    assert glad.probas_.index.dtype == np.int64 and glad.probas_.columns.dtype == np.int64


def test_glad_counts_a_repeated_answer_twice(toy):
    """crowd-kit keeps repeated (task, worker) rows: one more answer each, in the E-step and in Q."""
    twice = pd.concat([toy, toy.iloc[[0, 0]]], ignore_index=True)
    ones = pd.Series(1.0, index=pd.unique(toy["worker"])), pd.Series(1.0, index=pd.unique(toy["task"]))
    probas = GLAD(n_iter=0).fit(twice).probas_
    expected = slow_glad_e_step(twice, *ones, uniform(twice))
    np.testing.assert_allclose(probas.to_numpy(), expected.loc[probas.index, probas.columns].to_numpy(), rtol=1e-12)
    assert not np.allclose(probas.to_numpy(), GLAD(n_iter=0).fit(toy).probas_.to_numpy())
    one = GLAD(n_iter=1).fit(twice)
    assert one.loss_history_[0] == pytest.approx(
        slow_glad_q(twice, one.probas_, one.alphas_, one.betas_) / (len(twice) * 2), rel=1e-12)


def test_glad_labels_priors(toy):
    """A fixed class prior in the E-step; a label no answer used is one more class (K = 3 in Q's 1/(K − 1))."""
    priors = pd.Series({"yes": 0.2, "no": 0.5, "maybe": 0.3})
    start = GLAD(n_iter=0, labels_priors=priors).fit(toy)
    assert start.probas_.columns.tolist() == ["maybe", "no", "yes"] and start.priors_ is priors
    ones = pd.Series(1.0, index=pd.unique(toy["worker"])), pd.Series(1.0, index=pd.unique(toy["task"]))
    expected = slow_glad_e_step(toy, *ones, priors)
    np.testing.assert_allclose(start.probas_.to_numpy(), expected[start.probas_.columns].to_numpy(), rtol=1e-12)
    one = GLAD(n_iter=1, labels_priors=priors).fit(toy)
    assert one.loss_history_[0] == pytest.approx(
        slow_glad_q(toy, one.probas_, one.alphas_, one.betas_) / (len(toy) * 3), rel=1e-12)
    # a zero prior: that class is never the label
    never = GLAD(n_iter=5, labels_priors=pd.Series({"yes": 0.0, "no": 1.0})).fit(toy)
    assert (never.labels_ == "no").all() and (never.probas_["yes"] == 0).all()


def test_glad_priors_on_alpha_and_log_beta(toy):
    """The M-step maximises Q with the priors' means: run to convergence, Q's gradient there is 0 -- the data's
    pull on each α balances α − μ (a number, or a Series by worker / by task)."""
    means = pd.Series({"w1": -1.0, "w2": 2.0, "w3": 0.0, "w4": 3.0, "w5": 1.0})
    glad = GLAD(n_iter=1, alphas_priors_mean=means, betas_priors_mean=0.5, m_step_max_iter=1000,
                m_step_tol=1e-10).fit(toy)
    x = np.concatenate([glad.alphas_.to_numpy(), glad.betas_.to_numpy()])
    n_w = len(glad.alphas_)

    def q(y: np.ndarray) -> float:
        a, b = pd.Series(y[:n_w], glad.alphas_.index), pd.Series(y[n_w:], glad.betas_.index)
        return slow_glad_q(toy, glad.probas_, a, b, means, 0.5)

    from scipy.optimize import approx_fprime

    np.testing.assert_allclose(approx_fprime(x, q, 1e-6), 0.0, atol=1e-5)
    plain = GLAD(n_iter=1, m_step_max_iter=1000, m_step_tol=1e-10).fit(toy)
    assert (glad.alphas_ - plain.alphas_).abs().max() > 0.1  # the means moved the abilities
    # with one label the answers say nothing of α, log β (crowd-kit's data term is NaN, skipped): only the priors
    one_label = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["a", "b", "a"], "label": ["x", "x", "x"]})
    fit = GLAD(n_iter=5).fit(one_label)
    assert (fit.probas_["x"] == 1).all() and fit.labels_.tolist() == ["x", "x"]
    assert (fit.alphas_ == 1).all() and (fit.betas_ == 1).all()
    assert fit.loss_history_ == pytest.approx([-2 * np.log(2 * np.pi) / 3] * 2, rel=1e-14)  # 4 log N(0) / 3 rows
    moved = GLAD(n_iter=5, alphas_priors_mean=3.0).fit(one_label)
    np.testing.assert_allclose(moved.alphas_, 3.0, rtol=1e-12)


def test_glad_m_step_is_scipys_conjugate_gradient_from_the_current_point(toy, monkeypatch):
    import scipy.optimize

    calls = []
    real = scipy.optimize.minimize

    def spy(fun, x0, **kwargs):
        calls.append((x0.copy(), kwargs))
        result = real(fun, x0, **kwargs)
        calls[-1] += (result.x.copy(),)
        return result

    monkeypatch.setattr(scipy.optimize, "minimize", spy)
    glad = GLAD(n_iter=3, tol=-np.inf, m_step_max_iter=7, m_step_tol=0.5).fit(toy)
    assert len(calls) == 3
    np.testing.assert_array_equal(calls[0][0], 1.0)  # α = 1, log β = 1 to start
    for (x0, _, _), (_, _, previous) in zip(calls[1:], calls[:-1]):
        np.testing.assert_array_equal(x0, previous)
    for _, kwargs, _ in calls:
        assert kwargs["method"] == "CG" and kwargs["jac"] is True and kwargs["tol"] == 0.5
        assert kwargs["options"]["maxiter"] == 7
    np.testing.assert_array_equal(np.concatenate([glad.alphas_, glad.betas_]), calls[-1][2])


def test_glad_runs_in_crowdaggs_loop_on_the_glad_kernels(loop_runs, toy, monkeypatch):
    from crowdagg.kernels import glad as kernels
    from crowdagg.methods.loop import MAXIMISE, AbsoluteGain

    passes = {"e_step": 0, "objective": 0}
    for name in passes:
        real = getattr(kernels, f"_{name}")

        def counted(*args, _real=real, _name=name):
            passes[_name] += 1
            return _real(*args)

        monkeypatch.setattr(kernels, f"_{name}", counted)
    glad = GLAD(n_iter=100).fit(toy)
    [(rule, direction, run)] = loop_runs
    assert isinstance(rule, AbsoluteGain) and direction == MAXIMISE and run.converged
    assert glad.loss_history_ is run.trace
    # one E-step to start, one per later iteration (the first reuses the start's), Q and its gradient by the kernel
    assert passes["e_step"] == len(run.trace) and passes["objective"] > 2 * len(run.trace)


def test_glad_edge_cases_and_checks(toy):
    empty = GLAD().fit(pd.DataFrame([], columns=["task", "worker", "label"]))  # crowd-kit: ZeroDivisionError
    assert empty.probas_.empty and empty.labels_.empty and empty.alphas_.empty and empty.loss_history_ == []
    assert (empty.labels_.name, empty.alphas_.name, empty.betas_.name) == ("agg_label", "alpha", "beta")
    assert len(empty.tasks_) == len(empty.workers_) == len(empty.prior_labels_) == 0
    assert empty.alphas_priors_mean_.empty and empty.betas_priors_mean_.empty
    flags = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["a", "b", "a"], "label": [True, False, True]})
    assert GLAD(n_iter=5).fit_predict(flags).dtype == bool  # crowd-kit: "Item wrong length"
    nan = toy.assign(label=toy["label"].where(toy.index != 0))  # a NaN label is no answer
    assert_frame_equal(GLAD(n_iter=5).fit(nan).probas_, GLAD(n_iter=5).fit(toy.iloc[1:]).probas_)
    for bad in ({"n_iter": -1}, {"n_iter": 2.0}, {"tol": np.nan}, {"m_step_max_iter": True}, {"m_step_tol": None}):
        with pytest.raises(ValueError, match="n_iter|tol|m_step"):
            GLAD(**bad).fit(toy)
    with pytest.raises(ValueError, match=r"no prior for the label\(s\) \['yes'\]"):  # crowd-kit: NaN alphas
        GLAD(labels_priors=pd.Series({"no": 1.0})).fit(toy)
    for priors in (pd.Series({"no": -0.5, "yes": 1.5}), pd.Series({"no": 0.0, "yes": 0.0}), {"no": 0.5, "yes": 0.5}):
        with pytest.raises(ValueError, match="labels_priors"):
            GLAD(labels_priors=priors).fit(toy)
    for missing in (np.nan, None, pd.NA):  # crowd-kit counts it in K but drops its column; pandas' reindex raised
        with pytest.raises(ValueError, match="labels_priors names a missing label"):
            GLAD(labels_priors=pd.Series([0.5, 0.5, 0.0], index=pd.Index(["no", "yes", missing], dtype=object))).fit(toy)
    with pytest.raises(ValueError, match="alphas_priors_mean has no finite value for 1 worker.*'w5'"):
        GLAD(alphas_priors_mean=pd.Series({"w1": 1.0, "w2": 1.0, "w3": 1.0, "w4": 1.0})).fit(toy)
    with pytest.raises(ValueError, match="betas_priors_mean must be finite"):
        GLAD(betas_priors_mean=np.inf).fit(toy)
    assert repr(GLAD(n_iter=3)).startswith("GLAD(n_iter=3, tol=1e-05, silent=True, labels_priors=None")


def test_glad_prior_means_of_ids_without_answers_are_not_used(toy):
    """crowd-kit aligns a mean for an unknown worker or task into its Q (-inf, a line search on -inf); a
    table of means wider than the answers is used at the answers' ids only."""
    workers, tasks = pd.unique(toy["worker"]), pd.unique(toy["task"])
    alphas = pd.Series(np.linspace(0.5, 2.0, len(workers)), index=workers)
    betas = pd.Series(np.linspace(-0.5, 1.5, len(tasks)), index=tasks)
    wide = GLAD(n_iter=3, alphas_priors_mean=pd.concat([alphas, pd.Series({"nobody": 9.0})]),
                betas_priors_mean=pd.concat([pd.Series({"no task": -9.0}), betas])).fit(toy)
    exact = GLAD(n_iter=3, alphas_priors_mean=alphas, betas_priors_mean=betas).fit(toy)
    assert np.isfinite(wide.loss_history_).all()
    assert wide.loss_history_ == exact.loss_history_
    assert_series_equal(wide.alphas_, exact.alphas_)
    assert_frame_equal(wide.probas_, exact.probas_)


def test_glad_priors_given_as_text_are_refused(toy):
    """"0.5" is no number: crowd-kit's arithmetic raises on it; ``to_numpy(float)`` read it as 0.5."""
    workers = pd.unique(toy["worker"])
    with pytest.raises(ValueError, match="labels_priors must hold numbers"):
        GLAD(labels_priors=pd.Series({"no": "0.5", "yes": "0.5"})).fit(toy)
    with pytest.raises(ValueError, match="labels_priors must hold numbers"):
        GLAD(labels_priors=pd.Series({"no": 0.5, "yes": "0.5"}, dtype=object)).fit(toy)
    with pytest.raises(ValueError, match="alphas_priors_mean must hold numbers"):
        GLAD(alphas_priors_mean=pd.Series("1", index=workers)).fit(toy)
    numbers = pd.Series([0.5, 0.5], index=["no", "yes"], dtype=object)  # numbers in an object column are numbers
    assert_frame_equal(GLAD(n_iter=2, labels_priors=numbers).fit(toy).probas_,
                       GLAD(n_iter=2, labels_priors=numbers.astype(float)).fit(toy).probas_)


# ----------------------------------------------------------------------------- GLAD
# crowd-kit's GLAD stops each M-step after 25 conjugate-gradient iterations, far from converged, and its line
# search's decisions make the result sensitive to the last bit of Q: multiplying its Q and gradient by 1 + 1e-15
# moves its own bluebird alphas_ by 7e-12 after one EM iteration, 6e-6 after three and 6e-3 after six (probas_
# by 9e-4).  The adapter runs the same optimiser on crowdagg's kernels, which sum in another order, so on real
# data the two agree to rounding (amplified: at most 5e-6 here, temp's alphas_) over two iterations -- crowd-kit's
# start, E-step, M-step, Q and layouts, step for step -- and to ~1e-3 .. 1e-1 at its n_iter=20, where a label at a
# near-tie may differ (benchmarks/crowdkit_glad_reference.py reports that on every dataset).  The small frames
# above and crowd-kit's own crowds below run to convergence, where the two agree to 1e-11.
GLAD_DATASETS = ["bluebird", "dog", "rte", "temp"]
GLAD_STEPS = 2
GLAD_TOL = {"rtol": 0.0, "atol": 1e-4}


@pytest.fixture(scope="module")
def crowd_kit_glad(answers):
    """crowd-kit's GLAD(n_iter=GLAD_STEPS) on a dataset, duplicates dropped keeping the last: fitted once."""
    fits: dict = {}

    def fit(name: str):
        if name not in fits:
            data = answers(name).drop_duplicates(["task", "worker"], keep="last").reset_index(drop=True)
            fits[name] = data, quiet(lambda: ck.GLAD(n_iter=GLAD_STEPS).fit(data))
        return fits[name]

    return fit


@pytest.mark.parametrize("name", GLAD_DATASETS)
def test_glad_as_crowd_kit(crowd_kit_glad, name):
    data, theirs = crowd_kit_glad(name)
    mine = ours.GLAD(n_iter=GLAD_STEPS).fit(data)
    assert mine.loss_history_ == pytest.approx(theirs.loss_history_, rel=1e-6)  # temp's second: 3e-8
    same_labels(mine.labels_, theirs.labels_)
    assert_index_equal(mine.probas_.index, theirs.probas_.index, exact=True)
    assert_index_equal(mine.probas_.columns, theirs.probas_.columns, exact=True)
    assert_frame_equal(mine.probas_, theirs.probas_, check_exact=False, **GLAD_TOL)
    for attribute in ("alphas_", "betas_"):
        assert_index_equal(getattr(mine, attribute).index, getattr(theirs, attribute).index, exact=True)
        assert_series_equal(getattr(mine, attribute), getattr(theirs, attribute), check_exact=False, **GLAD_TOL)


@pytest.mark.parametrize("n_iter", [0, 100])
@pytest.mark.parametrize("crowd", ["toy", "simple"])
def test_glad_on_crowd_kits_own_crowds_as_crowd_kit(crowd, n_iter):
    """crowd-kit's GLAD tests' crowds, to convergence (crowd-kit's default tol) and at the start alone."""
    data = toy_frame() if crowd == "toy" else simple_frame()
    mine, theirs = ours.GLAD(n_iter=n_iter).fit(data), quiet(lambda: ck.GLAD(n_iter=n_iter).fit(data))
    assert mine.loss_history_ == pytest.approx(theirs.loss_history_, rel=1e-9)
    same_labels(mine.labels_, theirs.labels_)
    same_frame(mine.probas_, theirs.probas_)
    same_series(mine.alphas_, theirs.alphas_)
    same_series(mine.betas_, theirs.betas_)
    assert_series_equal(mine.priors_, theirs.priors_)


# crowd-kit's E-step compares each answer's label with each class (``label == variable``) and adds the log of
# its class prior: a nullable value on either side (text of pd.NA in Python storage, a nullable prior) makes the
# posteriors pandas' ``Float64``, and the log is taken in the prior's own precision (float16 for int8).
NULLABLE_GLAD = {
    "python text labels": (SMALL["text"].astype({"label": "string[python]"}), None),
    "Int64 prior": (SMALL["text"], pd.Series({"x": 1, "y": 1, "z": 2}, dtype="Int64")),
    "Float64 prior": (SMALL["text"], pd.Series({"x": 0.2, "y": 0.5, "z": 0.3}, dtype="Float64")),
    "Float32 prior": (SMALL["text"], pd.Series({"x": 0.2, "y": 0.5, "z": 0.3}, dtype="Float32")),
    "float32 prior": (SMALL["text"], pd.Series({"x": 0.2, "y": 0.5, "z": 0.3}, dtype="float32")),
    "float16 prior": (SMALL["text"], pd.Series({"x": 0.2, "y": 0.5, "z": 0.3}, dtype="float16")),
    "int8 prior": (SMALL["text"], pd.Series({"x": 1, "y": 3, "z": 2}, dtype="int8")),
    "Int8 prior": (SMALL["text"], pd.Series({"x": 1, "y": 3, "z": 2}, dtype="Int8")),
}


@pytest.mark.parametrize("n_iter", [0, 2])
@pytest.mark.parametrize("kind", sorted(NULLABLE_GLAD))
def test_glad_nullable_labels_and_priors_as_crowd_kit(kind, n_iter):
    data, priors = NULLABLE_GLAD[kind]
    mine = ours.GLAD(n_iter=n_iter, labels_priors=priors).fit(data)
    theirs = quiet(lambda: ck.GLAD(n_iter=n_iter, labels_priors=priors).fit(data))
    same_frame(mine.probas_, theirs.probas_)
    same_labels(mine.labels_, theirs.labels_)
    same_series(mine.alphas_, theirs.alphas_)
    same_series(mine.betas_, theirs.betas_)


@pytest.mark.parametrize("means", [None, "series"])
@pytest.mark.parametrize("kind", ["text", "int", "mixed ids", "nullable int"])
def test_glad_fitted_ids_and_prior_means_as_crowd_kit(kind, means):
    """crowd-kit's GLAD also leaves ``tasks_``, ``workers_`` (``pd.unique`` of the columns), ``prior_labels_``
    and the priors' means it used (``alphas_priors_mean_``, ``betas_priors_mean_``: 1 by id unless given)."""
    data = SMALL[kind]
    params = {}
    if means:
        params = {"alphas_priors_mean": pd.Series(2.0, index=pd.unique(data["worker"])[::-1]),
                  "betas_priors_mean": 0.5, "labels_priors": pd.Series(1.0, index=pd.unique(data["label"])[::-1])}
    mine = ours.GLAD(n_iter=1, **params).fit(data)
    theirs = quiet(lambda: ck.GLAD(n_iter=1, **params).fit(data))
    for name in ("tasks_", "workers_"):
        np.testing.assert_array_equal(getattr(mine, name), getattr(theirs, name))
        assert type(getattr(mine, name)) is type(getattr(theirs, name))
        assert getattr(mine, name).dtype == getattr(theirs, name).dtype
    if means:
        assert_index_equal(mine.prior_labels_, theirs.prior_labels_, exact=True)
        assert_series_equal(mine.alphas_priors_mean_, theirs.alphas_priors_mean_)
        assert mine.betas_priors_mean_ == theirs.betas_priors_mean_ == 0.5
    else:
        np.testing.assert_array_equal(mine.prior_labels_, theirs.prior_labels_)
        assert type(mine.prior_labels_) is type(theirs.prior_labels_)
        assert_series_equal(mine.alphas_priors_mean_, theirs.alphas_priors_mean_)
        assert_series_equal(mine.betas_priors_mean_, theirs.betas_priors_mean_)


@pytest.mark.parametrize("missing", [["task"], ["worker"], ["label"], ["task", "label"]])
def test_glad_missing_columns_raise_as_crowd_kit(missing):
    """crowd-kit's GLAD reads ``data.worker`` and ``data.task`` (an AttributeError without them), then
    ``data["label"]`` (a KeyError); ours is a KeyError too, as the other classes'."""
    data = SMALL["text"].drop(columns=missing)
    with pytest.raises(Exception) as theirs:
        quiet(lambda: ck.GLAD(n_iter=1).fit(data))
    with pytest.raises(type(theirs.value)):
        ours.GLAD(n_iter=1).fit(data)
    with pytest.raises(KeyError):
        ours.GLAD(n_iter=1).fit(data)


def test_glad_with_no_iteration_labels_every_task(simple):
    """crowd-kit's test_zero_iter (GLAD(n_iter=0)): the start's E-step alone labels every task of the crowd, and no
    iteration is recorded."""
    labels = GLAD(n_iter=0).fit_predict(simple)
    assert sorted(labels.index) == sorted(P + t for t in SIMPLE_TRUTH)
    assert GLAD(n_iter=0).fit(simple).loss_history_ == []


@pytest.mark.quick
def test_glad_answers_that_are_no_dataframe_are_the_packages_type_error():
    """As every other class of the package (Answers.columns_of): an array or a dict is a TypeError naming what was
    given, not a missing column."""
    for value in (np.zeros((3, 3)), {"task": [1], "worker": [1], "label": [1]}):
        with pytest.raises(TypeError, match="the answers must be a pandas DataFrame"):
            GLAD(n_iter=1).fit(value)
