"""The ``em-trap`` scenario: its crowd, and that Dawid--Skene EM from majority vote is trapped on it.

The moment methods' side (they escape the trap) is the acceptance test
tests/methods/moments/test_trap.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crowdagg import aggregate
from crowdagg.errors import UsageError
from crowdagg.methods.em.ds import DawidSkene
from crowdagg.simulate import simulate
from crowdagg.simulate.assignment import team_batches
from crowdagg.simulate.scenarios import trap_matrices


def test_workers_are_three_teams_then_the_crowd() -> None:
    conf, kinds = trap_matrices()
    assert conf.shape == (39, 3, 3)
    np.testing.assert_allclose(conf.sum(axis=2), 1.0)
    assert kinds == ["swapping_team"] * 6 + ["team"] * 3 + ["onecoin"] * 30
    answers = np.argmax(conf, axis=2)  # the class each worker gives most for true 0, 1, 2
    np.testing.assert_array_equal(answers[0:3], [[1, 0, 2]] * 3)  # team 0 swaps classes 0 and 1
    np.testing.assert_array_equal(answers[3:6], [[0, 2, 1]] * 3)  # team 1 swaps classes 1 and 2
    np.testing.assert_array_equal(answers[6:], [[0, 1, 2]] * 33)
    np.testing.assert_allclose(conf[:9].max(axis=2), 0.9)
    np.testing.assert_allclose(np.diagonal(conf[9:], axis1=1, axis2=2), 0.6)
    # what the moment methods need: the workers' average confusion is diagonally dominant, by a margin
    mean = conf.mean(axis=0)
    off = mean + np.diag(np.full(3, -np.inf))
    assert np.all(np.diag(mean) > off.max(axis=0) + 0.2) and np.all(np.diag(mean) > off.max(axis=1) + 0.2)


def test_team_batches_keep_each_team_on_its_batch() -> None:
    n, m = 3000, 3 * 3 + 30
    task, worker = team_batches(np.random.default_rng(4), n, 3, 3, 0.7, 30, 0.07)
    assert task.dtype == worker.dtype == np.int32 and np.all(np.diff(task) >= 0)
    assert np.unique(task.astype(np.int64) * m + worker).size == task.size
    assert np.all(np.bincount(task, minlength=n) >= 1)
    batch_of = [set(task[worker == w].tolist()) for w in range(9)]
    for a, b in itertools.combinations(range(9), 2):  # teams of different batches share no task
        assert (a // 3 == b // 3) or not (batch_of[a] & batch_of[b])
    team_tasks = set().union(*batch_of)
    assert abs(len(team_tasks) / n - (1 - 0.3**3)) < 0.03  # a task is its team's unless all three skip it
    for w in range(9):  # each team worker labels 70% of its batch (about a third of the tasks)
        assert abs(len(batch_of[w]) / n - 0.7 / 3) < 0.03
    crowd_share = np.bincount(worker, minlength=m)[9:] / n
    assert np.all(np.abs(crowd_share - 0.07) < 0.02)


def test_scenario_is_reproducible_and_fixes_its_sizes() -> None:
    a = simulate(scenario="em-trap", seed=3, n_tasks=500)
    b = simulate(scenario="em-trap", seed=3, n_tasks=500)
    for field in ("task", "worker", "label", "truth"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert list(a.worker_kind[:9]) == ["swapping_team"] * 6 + ["team"] * 3
    p = simulate(scenario="em-trap", seed=3, n_tasks=4000, prior=[0.5, 0.3, 0.2])
    np.testing.assert_allclose(np.bincount(p.truth) / 4000, [0.5, 0.3, 0.2], atol=0.03)
    with pytest.raises(UsageError, match="fixes n_workers=39"):
        simulate(scenario="em-trap", n_workers=40)
    with pytest.raises(UsageError, match="fixes n_classes=3"):
        simulate(scenario="em-trap", n_classes=4)
    with pytest.raises(UsageError, match="does not use per_task"):
        simulate(scenario="em-trap", per_task=3)


def test_majority_vote_started_ds_is_trapped_in_a_worse_local_optimum() -> None:
    crowd = simulate(scenario="em-trap", seed=0)
    data = crowd.to_annotations()
    truth = crowd.truth

    def accuracy(labels: np.ndarray) -> float:
        return float(np.mean(labels == truth))

    ds = aggregate(data, "ds", seed=0)
    from_truth = DawidSkene(seed=0, init=np.eye(3)[truth]).fit(data)
    assert ds.converged and from_truth.converged
    assert accuracy(ds.labels) < 0.6 and accuracy(from_truth.labels) > 0.92
    # a genuine local optimum, far below the one EM finds from the truth ...
    assert from_truth.objective[-1] - ds.objective[-1] > 1000
    # ... not a relabelling of it: no permutation of ds's classes comes near
    for perm in itertools.permutations(range(3)):
        assert accuracy(np.asarray(perm)[ds.labels]) < accuracy(from_truth.labels) - 0.25
    # ... and not an early stop: a thousand more iterations from where it stopped leave it there
    longer = DawidSkene(seed=0, init=ds.posteriors, max_iter=1000, tol=1e-12).fit(data)
    assert abs(accuracy(longer.labels) - accuracy(ds.labels)) < 0.005
    assert longer.objective[-1] - ds.objective[-1] < 1.0
    # the crowd alone is not the trap: majority vote is right on the honest team's batch only
    mv = aggregate(data, "mv", seed=0)
    assert 0.55 < accuracy(mv.labels) < 0.7


def test_cli_writes_the_scenario_and_ds_on_it_is_trapped(tmp_path) -> None:
    import pandas as pd
    from typer.testing import CliRunner

    from crowdagg.cli import app

    runner = CliRunner()
    out = tmp_path / "trap"
    made = runner.invoke(app, ["simulate", "--scenario", "em-trap", "--tasks", "3000", "--seed", "0", "-o", str(out)])
    assert made.exit_code == 0, made.output
    crowd = simulate(scenario="em-trap", n_tasks=3000, seed=0)
    labels = pd.read_csv(out / "labels.csv")
    assert len(labels) == crowd.n_answers and labels["worker"].nunique() == 39
    fitted = runner.invoke(app, ["aggregate", str(out / "labels.csv"), "--method", "ds"])
    assert fitted.exit_code == 0, fitted.output
    from io import StringIO

    got = pd.read_csv(StringIO(fitted.stdout)).set_index("task")["label"]
    truth = pd.read_csv(out / "truth.csv").set_index("task")["label"]
    assert (got.loc[truth.index] == truth).mean() < 0.65
