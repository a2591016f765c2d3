"""``--workers`` and ``--task-params``: each method's own parameters, in the layout the result's parameters give.

A test-only method (registered for the test) whose worker model is not a
confusion: its ``--workers`` is one row per worker, its ``--task-params``
one row per task; the methods of today keep their bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app
from crowdagg.methods.base import Aggregator, make_result
from crowdagg.methods.blocks import soft_majority_vote
from crowdagg.methods.registry import METHODS, Method

SMALL = ("task,worker,label\nt3,w1,a\nt1,w1,b\nt3,w2,a\nt4,w1,c\nt1,w2,b\nt2,w3,a\nt4,w3,c\nt2,w2,a\nt3,w3,b\n"
         "t1,w3,b\nt4,w2,c\nt2,w1,b\n")


class Tilt(Aggregator):
    """The vote, each worker's ``alpha`` its share of answers agreeing with it, each task's ``beta`` the vote
    share of its label; beside them a per-worker and a per-task array that are not one number (no column)."""

    name = "tilt"
    worker_param_names = ("alpha",)
    task_param_names = ("beta",)

    def _fit(self, data, checked, callback):
        post = soft_majority_vote(data)
        labels = post.argmax(axis=1)
        task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
        alpha = np.bincount(data.worker, weights=data.label == labels[task], minlength=data.n_workers)
        alpha /= data.answers_per_worker
        return make_result(self.name, data, post, labels, post.mean(axis=0),
                           worker_params={"alpha": alpha, "per_class": np.ones((data.n_workers, data.n_classes))},
                           task_params={"beta": post.max(axis=1), "shares": post},
                           model_params={"note": "test"})


@pytest.fixture
def tilt(monkeypatch):
    monkeypatch.setitem(METHODS, "tilt", Method("tilt", f"{__name__}:Tilt", "test", "test", "test"))
    return Tilt


@pytest.fixture
def small(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "small.csv"
    path.write_text(SMALL)
    return path


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


WORKERS = "worker,alpha,n_answers\nw1,0.75,4\nw2,1.0,4\nw3,0.75,4\n"
TASKS = "task,beta,n_answers\nt3,0.6666666666666666,3\nt1,1.0,3\nt4,1.0,3\nt2,0.6666666666666666,3\n"


def test_a_worker_model_that_is_not_a_confusion_writes_one_row_per_worker(tilt, small, tmp_path):
    r = run("aggregate", small, "-m", "tilt", "--workers", tmp_path / "w.csv", "--task-params", tmp_path / "t.csv")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "w.csv").read_text() == WORKERS  # worker, each one-number parameter, n_answers
    assert (tmp_path / "t.csv").read_text() == TASKS
    assert r.stdout.splitlines()[0] == "task,label,confidence"
    r = run("aggregate", small, "-m", "tilt", "--task-params", tmp_path / "t.jsonl")
    assert r.exit_code == 0, r.stderr
    first = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert first == {"task": "t3", "beta": 0.6666666666666666, "n_answers": 3}


def test_a_method_without_task_parameters_writes_task_and_n_answers(small, tmp_path):
    plain = run("aggregate", small, "-m", "ds")
    r = run("aggregate", small, "-m", "ds", "--task-params", tmp_path / "t.csv", "--workers", tmp_path / "w.csv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == plain.stdout
    assert (tmp_path / "t.csv").read_text() == "task,n_answers\nt3,3\nt1,3\nt4,3\nt2,3\n"
    assert (tmp_path / "w.csv").read_text().splitlines()[0] == ("worker,true_label,observed_label,probability,"
                                                                "accuracy,n_answers")


@pytest.mark.parametrize("method", ["tilt", "ds"])
def test_a_rerun_into_the_input_directory_leaves_its_earlier_outputs_out(tilt, small, method):
    folder = small.parent
    args = ("aggregate", folder, "-m", method, "-o", folder / "out.csv", "--workers", folder / "w.csv",
            "--task-params", folder / "t.csv")
    first = run(*args)
    assert first.exit_code == 0, first.stderr
    again = run(*args)
    assert again.exit_code == 0, again.stderr  # not read as answers, not refused as an input
    assert (folder / "t.csv").read_text() == (TASKS if method == "tilt" else "task,n_answers\nt3,3\nt1,3\nt4,3\nt2,3\n")
    assert "t.csv" in again.stderr and "w.csv" in again.stderr  # said on stderr


def test_task_params_is_an_output_like_the_others(tilt, small, tmp_path):
    r = run("aggregate", small, "-m", "tilt", "--task-params", small)
    assert r.exit_code == 2 and r.stdout == "" and "is also an input" in r.stderr
    assert small.read_text() == SMALL
    r = run("aggregate", small, "-m", "tilt", "-o", tmp_path / "o.csv", "--task-params", tmp_path / "o.csv")
    assert r.exit_code == 2 and "same file" in r.stderr
    r = run("aggregate", small, "-m", "tilt", "--task-params", "")
    assert r.exit_code == 2 and r.stderr.startswith("Error: ") and "--task-params" in r.stderr
    # All or nothing: -o cannot be written, so --task-params is not either.
    r = run("aggregate", small, "-m", "tilt", "--task-params", tmp_path / "t.csv", "-o", tmp_path / "no" / "o.csv")
    assert r.exit_code != 0 and not (tmp_path / "t.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_a_result_that_disagrees_with_its_declaration_writes_nothing(tilt, small, tmp_path, monkeypatch):
    monkeypatch.setattr(Tilt, "task_param_names", ("gamma",))
    r = run("aggregate", small, "-m", "tilt", "-o", tmp_path / "o.csv", "--task-params", tmp_path / "t.csv")
    assert r.exit_code != 0
    assert "declares the --task-params columns task, gamma, n_answers but its result has task, beta, n_answers" in \
        repr(r.exception) + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
