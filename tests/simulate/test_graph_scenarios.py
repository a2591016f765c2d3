"""The graph-inference scenarios of issue 17: deepBP's worker prior (Fig. 2) and the dense crowd with a heavy worker."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from crowdagg.cli import app
from crowdagg.errors import UsageError
from crowdagg.simulate import SCENARIOS, simulate
from crowdagg.simulate.assignment import heavy_worker

ARRAYS = ("task", "worker", "label", "truth", "confusion", "prior")


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, x), getattr(b, x)) for x in ARRAYS) and np.array_equal(
        a.worker_kind, b.worker_kind
    )


# ---------------------------------------------------------------- deepbp worker_prior
@pytest.mark.parametrize("alpha1", [0.2, 0.5, 1.0, 2.0])
def test_deepbp_accuracies_follow_the_given_beta_prior(alpha1: float) -> None:
    # deepBP Fig. 2: Beta(alpha1, alpha1/2); every such prior has mean 2/3, so the spread tells them apart
    a, b = alpha1, alpha1 / 2
    c = simulate(12_000, scenario="deepbp", worker_prior=(a, b), seed=11)  # 9,000 workers
    q = c.confusion[:, 0, 0]
    np.testing.assert_array_equal(c.confusion[:, 1, 1], q)
    np.testing.assert_allclose(c.confusion[:, 0, 1], 1.0 - q)
    assert q.shape == (9000,)
    sd = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    assert abs(q.mean() - 2 / 3) < 4 * sd / np.sqrt(q.size)
    var = sd**2
    assert abs(q.var() - var) < 0.1 * var
    # the whole distribution, not two moments: Kolmogorov-Smirnov against Beta(a, b)
    assert stats.kstest(q, stats.beta(a, b).cdf).pvalue > 1e-3
    if alpha1 < 1:  # sparse: most workers are near-perfect hammers or adversaries (U-shaped density)
        assert np.mean((q < 0.1) | (q > 0.9)) > 0.5
    np.testing.assert_array_equal(np.bincount(c.task), 3)


def test_deepbp_default_prior_is_beta_2_1_and_equals_an_explicit_one() -> None:
    assert _same(simulate(scenario="deepbp", seed=3), simulate(scenario="deepbp", worker_prior=(2, 1), seed=3))
    other = simulate(scenario="deepbp", worker_prior=(1, 0.5), seed=3)
    assert not np.array_equal(other.confusion, simulate(scenario="deepbp", seed=3).confusion)


def test_deepbp_worker_prior_is_deterministic_and_keeps_extreme_spammers() -> None:
    kw = dict(scenario="deepbp", worker_prior=(0.5, 0.25), extreme_spammers=3)
    c = simulate(400, seed=9, **kw)
    assert _same(c, simulate(400, seed=9, **kw))
    assert not np.array_equal(c.label, simulate(400, seed=10, **kw).label)
    assert list(c.worker_kind[-3:]) == ["extreme_spammer"] * 3
    np.testing.assert_array_equal(np.bincount(c.worker)[-3:], 400)
    np.testing.assert_array_equal(c.confusion[-3:], 0.5)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"worker_prior": (2, 1)}, "worker_prior is only used with scenario='deepbp', got scenario=None"),
        ({"scenario": "tutorial-spammers", "worker_prior": (2, 1)}, "scenario='tutorial-spammers'"),
        ({"scenario": "deepbp", "worker_prior": (0, 1)}, "finite positive"),
        ({"scenario": "deepbp", "worker_prior": (1, float("nan"))}, "finite positive"),
        ({"scenario": "deepbp", "worker_prior": (1, float("inf"))}, "finite positive"),
        ({"scenario": "deepbp", "worker_prior": (1, 2, 3)}, "a pair"),
        ({"scenario": "deepbp", "worker_prior": "ab"}, "a pair"),
    ],
)
def test_worker_prior_is_refused_when_wrong(kwargs: dict, needle: str) -> None:
    with pytest.raises(UsageError) as info:
        simulate(**kwargs)
    assert needle in str(info.value)


def test_cli_worker_prior_writes_the_library_crowd(tmp_path) -> None:
    runner = CliRunner()
    args = ["simulate", "--scenario", "deepbp", "--tasks", "200", "--worker-prior", "0.5,0.25", "--seed", "4"]
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "s")])
    assert result.exit_code == 0, result.stderr
    lib = simulate(200, scenario="deepbp", worker_prior=(0.5, 0.25), seed=4)
    lines = (tmp_path / "s" / "labels.csv").read_text().splitlines()
    assert len(lines) == 1 + lib.n_answers
    assert lines[1] == f"t{lib.task[0]},w{lib.worker[0]},{lib.label[0]}"
    for bad, needle in ((["--worker-prior", "1"], "--worker-prior must be a pair"),
                        (["--worker-prior", "x,1"], "--worker-prior must be A,B"),
                        (["--worker-prior", "1,1"], "--worker-prior is only used with --scenario='deepbp'")):
        base = ["simulate", "--tasks", "20"] if "only used" in needle else ["simulate", "--scenario", "deepbp"]
        result = runner.invoke(app, [*base, *bad, "-o", str(tmp_path / "bad")])
        assert result.exit_code == 2, (bad, result.stderr)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0], (bad, result.stderr)
    assert not (tmp_path / "bad").exists()


# ---------------------------------------------------------------- dense-heavy
@pytest.fixture(scope="module")
def dense() -> object:
    return simulate(20_000, 100, scenario="dense-heavy", seed=2)


def test_dense_heavy_worker_answers_a_tenth_of_the_tasks(dense) -> None:
    c = dense
    assert (c.n_tasks, c.n_workers, c.n_classes, c.n_answers) == (20_000, 100, 2, 100_000)
    np.testing.assert_array_equal(np.bincount(c.task), 5)  # every task 5 distinct workers
    keys = c.task.astype(np.int64) * c.n_workers + c.worker
    assert np.unique(keys).size == c.n_answers and np.all(np.diff(c.task) >= 0)
    counts = np.bincount(c.worker, minlength=c.n_workers)
    assert counts[0] == 2000  # exactly 10% of the tasks
    # the others share the remaining 98,000 answers evenly: 98,000 / 99 = 989.9 each, binomial spread ~31
    rest = counts[1:]
    assert rest.sum() == 98_000 and abs(rest.mean() - 98_000 / 99) < 1e-9
    assert rest.min() > 989.9 - 5 * 31.5 and rest.max() < 989.9 + 5 * 31.5
    # worker 0 is a uniform spammer, the others one-coin in the default skill range
    assert c.worker_kind[0] == "heavy_spammer" and set(c.worker_kind[1:]) == {"onecoin"}
    np.testing.assert_array_equal(c.confusion[0], 0.5)
    acc = c.confusion[1:, 0, 0]
    np.testing.assert_array_equal(c.confusion[1:, 1, 1], acc)
    assert acc.min() >= 0.6 and acc.max() <= 0.9
    mine = c.worker == 0
    assert abs(np.mean(c.label[mine] == c.truth[c.task[mine]]) - 0.5) < 0.05  # 2,000 answers: sd 0.011
    others = np.mean(c.label[~mine] == c.truth[c.task[~mine]])
    assert abs(others - acc @ rest / rest.sum()) < 0.01


def test_dense_heavy_default_is_the_issue_crowd_and_is_deterministic() -> None:
    c = simulate(scenario="dense-heavy", seed=0)
    assert (c.n_tasks, c.n_workers, c.n_answers) == (200_000, 1000, 1_000_000)
    counts = np.bincount(c.worker)
    assert counts[0] == 20_000 and np.bincount(c.task[c.worker == 0]).max() == 1
    assert 800 < counts[1:].min() and counts[1:].max() < 1200  # ~980 each (binomial sd ~31)
    assert f"N={c.n_tasks}" in SCENARIOS["dense-heavy"] and "10%" in SCENARIOS["dense-heavy"]
    again = simulate(scenario="dense-heavy", seed=0)
    assert _same(c, again)


def test_dense_heavy_honours_sizes_spammers_and_extreme_spammers() -> None:
    c = simulate(300, 12, 3, 4, scenario="dense-heavy", spammers=0.25, extreme_spammers=1, skill=(0.7, 0.8), seed=5)
    assert (c.n_tasks, c.n_workers, c.n_classes) == (300, 13, 3)
    np.testing.assert_array_equal(np.bincount(c.task), 4 + 1)
    assert np.bincount(c.worker)[0] == 30
    kinds = list(c.worker_kind)
    assert kinds[0] == "heavy_spammer" and kinds[-1] == "extreme_spammer" and kinds.count("spammer") == 3
    with pytest.raises(UsageError, match="does not use tasks_per_worker"):
        simulate(scenario="dense-heavy", tasks_per_worker=4)
    with pytest.raises(UsageError, match="n_workers must exceed 5, got 5"):
        simulate(100, 5, scenario="dense-heavy")


def test_heavy_worker_graph_is_uniform_over_who_gives_way() -> None:
    # which of a task's workers makes room for worker 0 is chosen at random: no worker id loses more than its share
    rng = np.random.default_rng(0)
    task, worker = heavy_worker(rng, 40_000, 9, 4, 0.5)
    counts = np.bincount(worker, minlength=9)
    assert counts[0] == 20_000 and task.shape == (160_000,)
    # each of workers 1..8 is on 4/8 of the tasks, and gives way on a quarter of the heavy half: 20,000 - 2,500 each
    np.testing.assert_allclose(counts[1:], 17_500, atol=5 * 120)
