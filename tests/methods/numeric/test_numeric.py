"""The numeric methods (mean, median, catd, crh): their contract, recovery of known worker noise, the papers'
formulas by hand, the errors, and the emotion data set."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2, spearmanr

from crowdagg import aggregate, load_annotations, load_numeric
from crowdagg.data.annotations import AnnotationSet
from crowdagg.data.numeric import NumericAnswers
from crowdagg.errors import ConvergenceWarning, CrowdaggWarning, DataError, UsageError
from crowdagg.methods.numeric.catd import catd_weights, chi2_lower
from crowdagg.methods.numeric.crh import crh_weights
from crowdagg.methods.registry import METHODS
from tests.tiers import quick_case

NUMERIC = [name for name, m in METHODS.items() if m.kind == "numeric"]
ITERATIVE = ["catd", "crh"]


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        return aggregate(*args, **kwargs)


def noisy_crowd(rng, n_tasks=300, sigmas=(1, 1, 2, 2, 4, 4, 8, 8, 16, 30), per_task=5):
    """Continuous answers: truth ~ N(50, 20²), worker m answers truth + N(0, sigma_m²); (data, truth, sigmas)."""
    sigmas = np.asarray(sigmas, dtype=float)
    truth = rng.normal(50, 20, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(len(sigmas), per_task, replace=False) for _ in range(n_tasks)])
    value = truth[task] + rng.normal(0, 1, len(task)) * sigmas[worker]
    return NumericAnswers.from_codes(task, worker, value, n_workers=len(sigmas)), truth, sigmas


def edge_crowd(rng) -> NumericAnswers:
    """A random crowd plus a task with one answer, a worker with one answer and a task without answers."""
    data, _, _ = noisy_crowd(rng, n_tasks=40, per_task=4)
    task = np.concatenate([data.task, [40, 3]])
    worker = np.concatenate([data.worker, [0, 10]])
    value = np.concatenate([data.value, [7.5, 61.0]])
    return NumericAnswers.from_codes(task, worker, value, n_tasks=42, n_workers=11)


# --------------------------------------------------------------------------- the contract of every numeric method
@pytest.mark.quick
@pytest.mark.parametrize("method", NUMERIC)
def test_contract(method, rng):
    data = edge_crowd(rng)
    before = data.value.copy()
    with pytest.warns(CrowdaggWarning, match=r"1 task\(s\) have no answers: their value is NaN"):
        res = aggregate(data, method, **METHODS[method].quick_params)
    n, m = data.n_tasks, data.n_workers
    assert res.method == method and res.values.shape == (n,)
    assert np.isnan(res.values[41]) and np.all(np.isfinite(res.values[:41]))
    assert res.values[40] == pytest.approx(7.5, rel=1e-12)  # the task with one answer gets it
    lo, hi = np.minimum.reduceat(data.value, data.task_ptr[:-2]), np.maximum.reduceat(data.value, data.task_ptr[:-2])
    assert np.all((res.values[:41] >= lo - 1e-9) & (res.values[:41] <= hi + 1e-9))  # an average of the answers
    for name, v in res.worker_params.items():
        assert v.shape == (m,) and np.all(np.isfinite(v)), name
    if "weight" in res.worker_params:
        assert np.all(res.worker_params["weight"] >= 0)
    frame = res.to_frame()
    assert frame["task"].tolist() == list(data.task_names) and frame["task"].is_unique
    workers = res.workers_frame()
    assert list(workers.columns) == ["worker", *res.worker_params, "deviation", "n_answers"]
    assert workers["n_answers"].tolist() == data.answers_per_worker.tolist()
    np.testing.assert_array_equal(data.value, before)  # the input is not changed
    again = quiet(data, method, **METHODS[method].quick_params)
    np.testing.assert_array_equal(again.values, res.values)


@pytest.mark.parametrize("method", NUMERIC)
def test_row_order_does_not_change_any_task_value(method, rng):
    data, _, _ = noisy_crowd(rng, n_tasks=60)
    names_t = [f"t{t}" for t in data.task]
    names_w = [f"w{w}" for w in data.worker]
    frame = pd.DataFrame({"task": names_t, "worker": names_w, "value": data.value})
    a = aggregate(frame, method, numeric=True)
    b = aggregate(frame.sample(frac=1.0, random_state=3), method, numeric=True)
    np.testing.assert_allclose(b.values_series()[a.values_series().index], a.values_series(), rtol=1e-12)


# --------------------------------------------------------------------------- mean and median against numpy
@pytest.mark.quick
@pytest.mark.parametrize("duplicates", ["keep", "last"])
def test_mean_and_median_are_numpys_per_task(rng, duplicates):
    n_tasks = 200
    lengths = rng.integers(1, 9, n_tasks)  # odd and even counts
    task = np.repeat(np.arange(n_tasks), lengths)
    worker = rng.integers(0, 6, len(task))  # repeats: the same worker twice on a task
    value = np.round(rng.normal(0, 10, len(task)), 1)  # ties among the values too
    perm = rng.permutation(len(task))
    task, worker, value = task[perm], worker[perm], value[perm]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        data = NumericAnswers.from_codes(task, worker, value, duplicates=duplicates)
    frame = pd.DataFrame({"t": task, "w": worker, "v": value})
    if duplicates == "last":
        frame = frame.drop_duplicates(["t", "w"], keep="last")
    want_mean = frame.groupby("t")["v"].apply(np.mean).to_numpy()
    want_median = frame.groupby("t")["v"].apply(np.median).to_numpy()
    np.testing.assert_allclose(aggregate(data, "mean").values, want_mean, rtol=1e-13)
    np.testing.assert_array_equal(aggregate(data, "median").values, want_median)


# --------------------------------------------------------------------------- recovery of known noise
@pytest.mark.quick
@pytest.mark.parametrize("method", ITERATIVE)
def test_the_noise_ranking_is_recovered_and_beats_the_mean(method):
    rng = np.random.default_rng(7)
    data, truth, sigmas = noisy_crowd(rng)
    res = aggregate(data, method)
    assert res.converged
    rho = spearmanr(res.worker_params["weight"], -sigmas).statistic
    assert rho > 0.9, rho
    if method == "catd":  # its variance estimates sigma²: the right size -- but for the heaviest worker, whose own
        # answers become the estimates where they answer, so that their error, and variance, go to 0 (a fixed point
        # of the paper's iteration; the ranking and the estimates survive it)
        ratio = res.worker_params["variance"] / sigmas**2
        top = int(np.argmax(res.worker_params["weight"]))
        assert sigmas[top] == sigmas.min() and ratio[top] < 0.1
        rest = np.delete(ratio, top)
        assert np.all((rest > 0.5) & (rest < 3.0)), ratio
    err = {m: float(np.sqrt(np.mean((aggregate(data, m).values - truth) ** 2))) for m in ("mean", "median")}
    mine = float(np.sqrt(np.mean((res.values - truth) ** 2)))
    assert mine < 0.8 * err["mean"] and mine < err["median"], (mine, err)


# --------------------------------------------------------------------------- the papers' formulas by hand
def test_one_catd_step_by_hand():
    # tasks 0, 1; workers a (2 answers), b (2 answers), c (1 answer)
    data = NumericAnswers.from_codes([0, 0, 0, 1, 1], [0, 1, 2, 0, 1], [10.0, 12.0, 20.0, 5.0, 9.0])
    res = aggregate(data, "catd", max_iter=1, tol=0.0)
    start = np.array([12.0, 7.0])  # the medians
    err = np.array([(10 - 12) ** 2 + (5 - 7) ** 2, 0 + (9 - 7) ** 2, (20 - 12) ** 2])
    q = np.array([chi2.ppf(0.025, 2), chi2.ppf(0.025, 2), chi2.ppf(0.025, 1)])
    w = q / err
    np.testing.assert_allclose(res.worker_params["weight"], w, rtol=1e-12)
    np.testing.assert_allclose(res.worker_params["variance"], err / q, rtol=1e-12)
    want = [(w[0] * 10 + w[1] * 12 + w[2] * 20) / w.sum(), (w[0] * 5 + w[1] * 9) / (w[0] + w[1])]
    np.testing.assert_allclose(res.values, want, rtol=1e-12)
    assert start.tolist() == aggregate(data, "median").values.tolist()


def test_catd_trusts_few_answers_less_as_the_paper_does_not_as_spark_crowd():
    """The paper's weight is the reciprocal of the variance's *upper* bound, chi2.ppf(alpha/2, N) / error sum:
    a worker with one answer weighs ~1/750 of one with 100 answers of the same error.  spark-crowd's
    chi2.ppf(1 - alpha/2, N) -- the variance's lower bound -- gives that lucky one-answer worker 3.9 times the
    weight of the proven one, the opposite of the method's point."""
    per_answer = 4.0
    w, _ = catd_weights(np.array([per_answer, 100 * per_answer]), np.array([1, 100]), 0.05, 0.0)
    assert w[0] / w[1] == pytest.approx(chi2.ppf(0.025, 1) / (chi2.ppf(0.025, 100) / 100))
    assert w[0] / w[1] < 1 / 500
    spark = chi2.ppf(0.975, 1) / (chi2.ppf(0.975, 100) / 100)
    assert spark > 3.5
    assert chi2_lower(np.array([0, 3]), 0.1).tolist() == [0.0, pytest.approx(chi2.ppf(0.05, 3))]


def test_one_crh_step_by_hand():
    data = NumericAnswers.from_codes([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [10.0, 12.0, 20.0, 5.0, 9.0, 6.0])
    res = aggregate(data, "crh", max_iter=1, tol=0.0)
    med = np.array([12.0, 6.0])
    std = np.array([np.std([10, 12, 20], ddof=1), np.std([5, 9, 6], ddof=1)])
    x = np.array([[10.0, 12.0, 20.0], [5.0, 9.0, 6.0]])
    loss = ((x - med[:, None]) ** 2 / std[:, None]).sum(axis=0)
    w = -np.log(loss / loss.sum())
    np.testing.assert_allclose(res.worker_params["loss"], loss, rtol=1e-12)
    np.testing.assert_allclose(res.worker_params["weight"], w, rtol=1e-12)
    np.testing.assert_allclose(res.values, (x * w).sum(axis=1) / w.sum(), rtol=1e-12)


def test_crh_weights_edge_cases():
    assert crh_weights(np.array([0.0, 0.0]), np.array([3, 3])).tolist() == [0.0, 0.0]  # every task unanimous
    w = crh_weights(np.array([0.0, 1.0, 5.0, 5.0]), np.array([2, 0, 4, 4]))
    assert w[1] == 0.0  # no answers: weight 0, its (nonsense) loss left out of the total
    assert w[0] == pytest.approx(-np.log(1e-12)) and w[2] == w[3] == pytest.approx(np.log(2))  # no loss: capped


def test_one_worker_alone_gets_the_plain_mean():
    data = NumericAnswers.from_codes([0, 0, 1], [0, 0, 0], [1.0, 3.0, 5.0])
    for method in ITERATIVE:
        np.testing.assert_allclose(aggregate(data, method).values, [2.0, 5.0])


def test_not_converging_warns_naming_max_iter():
    rng = np.random.default_rng(1)
    data, _, _ = noisy_crowd(rng, n_tasks=50)
    with pytest.warns(ConvergenceWarning, match=r"catd: did not converge in max_iter=1 iterations"):
        aggregate(data, "catd", max_iter=1, tol=1e-12)


# --------------------------------------------------------------------------- errors
def test_categorical_and_numeric_are_never_mixed(rng):
    data, _, _ = noisy_crowd(rng, n_tasks=10)
    cats = AnnotationSet.from_codes([0, 0, 1], [0, 1, 0], [0, 1, 1])
    with pytest.raises(UsageError, match=r"method 'ds' is categorical: numeric answers take a numeric method "
                                         r"\(mean, median, catd, crh\)"):
        aggregate(data, "ds")
    with pytest.raises(UsageError, match=r"ds.fit\(data\): numeric answers take a numeric method"):
        from crowdagg.methods.api import get_method

        get_method("ds")().fit(data)
    with pytest.raises(UsageError, match=r"method 'crh' aggregates numeric answers: give numeric"):
        aggregate(cats, "crh")
    with pytest.raises(UsageError, match=r"numeric=True does not fit categorical answers"):
        aggregate(cats, "mean", numeric=True)
    with pytest.raises(UsageError, match=r"catd.fit\(data\) takes numeric answers"):
        from crowdagg.methods.numeric.catd import CATD

        CATD().fit(cats)
    assert aggregate(data).method == "mean"  # the default of numeric answers
    with pytest.raises(UsageError, match="alpha must be"):
        aggregate(data, "catd", alpha=1.5)
    with pytest.raises(UsageError, match="does not take seed"):
        aggregate(data, "mean", seed=1)


def test_a_numeric_column_read_as_classes_names_the_numeric_path(tmp_path):
    p = tmp_path / "scores.csv"
    p.write_text("task,worker,label\n" + "".join(f"t{i},w{i % 3},{i * 1.5}\n" for i in range(30)))
    with pytest.raises(DataError, match=r"aggregate them with numeric and a numeric method \(mean, median, catd, "
                                        r"crh\)"):
        load_annotations(p)
    assert aggregate(str(p), "median", numeric=True).values[3] == 4.5


# --------------------------------------------------------------------------- the emotion data set
#: Mean absolute error and Pearson correlation against the truth on emotion (700 tasks, 10 answers each, on
#: -100 .. 100), measured with load_numeric(duplicates="last").
EMOTION = {"mean": (12.022, 0.7255), "median": (13.529, 0.6344), "catd": (12.137, 0.6981), "crh": (11.927, 0.7212)}


@pytest.mark.parametrize("method", quick_case(EMOTION, "crh", *NUMERIC))
def test_emotion_error_and_correlation(datasets_dir, method):
    path = datasets_dir / "emotion"
    data = load_numeric(path / "labels.csv", duplicates="last")
    truth = pd.read_csv(path / "truth.csv", dtype={"task": str}).set_index("task")["label"]
    res = aggregate(data, method)
    pred = pd.Series(res.values, index=data.task_names)
    scored = truth.index.intersection(pred.index)
    assert len(scored) == 700
    mae = float(np.mean(np.abs(pred[scored] - truth[scored])))
    r = float(np.corrcoef(pred[scored], truth[scored])[0, 1])
    want_mae, want_r = EMOTION[method]
    assert mae == pytest.approx(want_mae, abs=5e-3) and r == pytest.approx(want_r, abs=5e-4)
    if method == "crh":  # the best of the four on this set, by both measures but mean's correlation
        assert mae < min(e[0] for m, e in EMOTION.items() if m != "crh")


def test_the_data_layer_names_the_registrys_numeric_methods():
    # crowdagg.data names them in its refusals without importing the methods (imports run downwards)
    from crowdagg.data.annotations import NUMERIC_METHODS

    assert NUMERIC_METHODS == tuple(NUMERIC)


@pytest.mark.quick
@pytest.mark.parametrize("max_iter", [1, 3, 100])
def test_catd_on_answers_that_all_agree_keeps_their_value(max_iter):
    """Hostile input: every answer the same (a scale everyone rated 5).  CATD floored the zero errors at
    1e-9 × the answers' variance -- 0 here -- and its weights overflowed to inf: every estimate came back NaN
    after an odd number of iterations (missing in the output) and a ConvergenceWarning after an even one."""
    data = NumericAnswers.from_codes([0, 0, 1, 1, 1, 2], [0, 1, 0, 1, 2, 2], [5.0] * 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = aggregate(data, "catd", numeric=True, max_iter=max_iter)
    np.testing.assert_array_equal(result.values, [5.0, 5.0, 5.0])
    assert result.converged and result.n_iter == 1
    weight = result.worker_params["weight"]
    assert np.isfinite(weight).all() and (weight > 0).all() and np.ptp(weight) == 0  # two answers each
    assert np.isfinite(result.objective).all()


@pytest.mark.quick
@pytest.mark.parametrize("method", NUMERIC)
@pytest.mark.parametrize("exp", [1000, -990])
def test_answers_near_the_ends_of_the_float_range_are_fitted_as_rescaled_ones(method, exp, rng):
    """Hostile input: answers near 1e308 made the mean and median overflow (a task with answers written as
    missing) and so did every squared error; near 1e-300 the squares underflowed to 0 and CATD's weights
    became inf (every value NaN).  Answers are now fitted divided by a power of two, which is exact: the fit
    is the one on ordinary answers, multiplied back."""
    data, _, _ = noisy_crowd(rng, n_tasks=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = aggregate(data, method, numeric=True)
        far = aggregate(data.with_values(np.ldexp(data.value, exp)), method, numeric=True)
    np.testing.assert_array_equal(far.values, np.ldexp(plain.values, exp))
    assert np.isfinite(far.values).all()
    np.testing.assert_allclose(far.deviation, np.ldexp(plain.deviation, exp), rtol=1e-14)
    units = dict(weight=-2 if method == "catd" else 0, variance=2, loss=1)
    for name, v in far.worker_params.items():
        with np.errstate(over="ignore"):
            expected = np.ldexp(plain.worker_params[name], units[name] * exp)
        np.testing.assert_array_equal(v, expected)  # inf / 0 where the parameter itself leaves the range
    assert far.n_iter == plain.n_iter and far.data is not plain.data and far.data.value[0] == np.ldexp(data.value[0], exp)
    if method in ITERATIVE:  # the progress callback is told the objective in the answers' unit, as the result holds it
        told: list[float] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            aggregate(far.data, method, numeric=True, callback=lambda _, f: told.append(f))
        assert told == far.objective


@pytest.mark.quick
def test_a_parameter_the_averages_do_not_take_says_they_take_none():
    """The library's message ended in 'it takes: ' and nothing for mean and median."""
    from crowdagg.methods.numeric.averages import Mean

    with pytest.raises(UsageError, match=r"method 'mean' does not take max_iter; it takes: no parameters$"):
        Mean(max_iter=3)
    with pytest.raises(UsageError, match=r"it takes: no parameters$"):
        METHODS["median"].param("tol")


@pytest.mark.quick
def test_the_chi_square_quantile_computed_on_distinct_counts_is_scipys_per_worker(rng):
    """chi2_lower evaluates the quantile once per distinct answer count (a long tail of 200k workers took
    0.09 s per iteration, 4.4x CATD's whole fit); it must still be scipy's value for every worker."""
    n = rng.integers(0, 40, 5000)
    expected = np.where(n > 0, chi2.ppf(0.025, np.maximum(n, 1)), 0.0)
    np.testing.assert_array_equal(chi2_lower(n, 0.05), expected)
    assert chi2_lower(np.array([], dtype=int), 0.05).shape == (0,)


@pytest.mark.quick
@pytest.mark.parametrize("method", NUMERIC)
def test_every_worker_parameter_declares_its_unit(method):
    """A fit on rescaled answers multiplies each worker parameter back by the power of the unit it declares
    (worker_param_units): a method that declares a parameter must declare its unit too."""
    cls = METHODS[method].load()
    assert len(cls.worker_param_units) == len(cls.worker_param_names)
