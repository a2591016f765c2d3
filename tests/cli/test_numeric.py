"""``crowdagg aggregate --numeric``: numeric answers in, one value per task out."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app

ANSWERS = "task,worker,value\nt2,a,10\nt2,b,14\nt2,c,30\nt1,a,1.5\nt1,b,2.5\nt3,c,7\n"


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner, *args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def one_error(result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.stderr)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and result.stdout == "", result.stderr
    return lines[0]


@pytest.fixture
def answers(tmp_path):
    p = tmp_path / "answers.csv"
    p.write_text(ANSWERS)
    return p


@pytest.mark.quick
def test_the_default_is_the_mean_one_row_per_task_in_input_order(runner, answers):
    result = invoke(runner, "aggregate", answers, "--numeric")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "task,value\nt2,18.0\nt1,2.0\nt3,7.0\n"


@pytest.mark.parametrize(("method", "t2"), [("median", 14.0), ("mean", 18.0)])
def test_stdin_and_the_averages(runner, method, t2):
    result = invoke(runner, "aggregate", "-", "--numeric", "-m", method, "--format", "jsonl", input=ANSWERS)
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["task"] for r in rows] == ["t2", "t1", "t3"] and rows[0]["value"] == t2


@pytest.mark.parametrize(("method", "columns"), [("catd", ["worker", "weight", "variance", "deviation", "n_answers"]),
                                                 ("crh", ["worker", "weight", "loss", "deviation", "n_answers"]),
                                                 ("median", ["worker", "deviation", "n_answers"])])
def test_workers_writes_the_weights(runner, answers, tmp_path, method, columns):
    out, workers = tmp_path / "values.parquet", tmp_path / "workers.csv"
    result = invoke(runner, "aggregate", answers, "--numeric", "-m", method, "-o", out, "--workers", workers)
    assert result.exit_code == 0 and result.stdout == "", result.stderr
    values = pd.read_parquet(out)
    assert values["task"].tolist() == ["t2", "t1", "t3"] and np.isfinite(values["value"]).all()
    table = pd.read_csv(workers)
    assert list(table.columns) == columns and table["worker"].tolist() == ["a", "b", "c"]
    assert table["n_answers"].tolist() == [2, 2, 2]


def test_a_task_without_answers_is_an_empty_cell(runner):
    result = invoke(runner, "aggregate", "-", "--numeric", input="task,worker,value\nt1,a,1\nt2,a,\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "task,value\nt1,1.0\nt2,\n"
    assert "1 task(s) have no answers" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["-m", "crh"], "method 'crh' aggregates numeric answers: give --numeric (numeric methods: mean, median, catd, "
                    "crh)"),
    (["--numeric", "-m", "ds"], "method 'ds' is categorical: numeric answers take a numeric method (mean, median, "
                                "catd, crh)"),
    (["--numeric", "--proba"], "--proba does not apply to --numeric"),
    (["--numeric", "--classes", "a,b"], "--classes does not apply to --numeric"),
    (["--numeric", "--no-near-chance", "--truth-task-col", "t"], "--truth-task-col and --no-near-chance do not apply "
                                                                 "to --numeric"),
    (["--numeric", "--seed", "3"], "--seed does not apply to method 'mean'"),
    (["--numeric", "-m", "catd", "-p", "alpha=2"], "-p alpha must be"),
])
def test_usage_errors_exit_2_before_reading(runner, answers, tmp_path, args, message):
    before = sorted(p.name for p in tmp_path.iterdir())
    err = one_error(invoke(runner, "aggregate", answers, *args, "-o", tmp_path / "o.csv"), 2)
    assert message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_bad_value_exits_1_naming_file_and_line_and_writes_nothing(runner, tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("task,worker,value\nt1,a,1\nt1,b,inf\n")
    err = one_error(invoke(runner, "aggregate", p, "--numeric", "-o", tmp_path / "o.csv"), 1)
    assert err == f"Error: value 'inf' at {p} line 3 is not finite: numeric answers are finite numbers (1 answer(s) " \
                  "in all hold such values)"
    assert not (tmp_path / "o.csv").exists()


def test_the_categorical_refusal_points_to_numeric(runner, tmp_path):
    p = tmp_path / "scores.csv"
    p.write_text("task,worker,label\n" + "".join(f"t{i},w{i % 3},{i * 1.5}\n" for i in range(30)))
    err = one_error(invoke(runner, "aggregate", p), 1)
    assert "aggregate them with --numeric and a numeric method (mean, median, catd, crh)" in err
    result = invoke(runner, "aggregate", p, "--numeric", "-m", "median")
    assert result.exit_code == 0
    assert pd.read_csv(io.StringIO(result.stdout))["value"].tolist() == [i * 1.5 for i in range(30)]


def test_evaluate_numeric_scores_aggregates_values(runner, answers, tmp_path):
    values, truth = tmp_path / "values.csv", tmp_path / "truth.csv"
    assert invoke(runner, "aggregate", answers, "--numeric", "-o", values).exit_code == 0
    truth.write_text("task,label\nt1,2\nt2,20\nt4,0\n")
    result = invoke(runner, "evaluate", values, "--numeric", "--truth", truth, "--format", "json")
    assert result.exit_code == 0, result.stderr
    scores = json.loads(result.stdout)
    assert scores["mae"] == pytest.approx(1.0) and scores["rmse"] == pytest.approx(np.sqrt(2.0))
    assert scores["pearson"] == pytest.approx(1.0) and scores["bias"] == pytest.approx(-1.0)
    assert (scores["n_compared"], scores["n_without_truth"], scores["n_truth_unpredicted"]) == (2, 1, 1)
    err = one_error(invoke(runner, "evaluate", values, "--numeric", "--truth", truth, "--plot", tmp_path / "p.png"),
                    2)
    assert "--plot (calibration of class probabilities) does not apply to --numeric" in err
    err = one_error(invoke(runner, "evaluate", values, "--numeric", "--truth", truth, "--plot", tmp_path / "p.png",
                           "--reliability", tmp_path / "r.csv"), 2)
    assert "--reliability and --plot (calibration of class probabilities) do not apply to --numeric" in err


def test_the_workers_report_points_numeric_methods_to_aggregate(runner, answers):
    err = one_error(invoke(runner, "workers", answers, "-m", "catd"), 2)
    assert "`crowdagg aggregate --numeric -m catd --workers FILE` writes its workers' weights" in err


@pytest.mark.parametrize("method", ["mean", "median", "catd", "crh"])
def test_answers_near_the_largest_float_are_aggregated_not_written_missing(runner, tmp_path, method):
    """Hostile input: 'aggregate --numeric' on answers near 1e308 overflowed and wrote a task that has
    answers as an empty cell, and its workers' deviations too; every answer equal made catd write nothing
    after an odd --max-iter (its weights were inf)."""
    p = tmp_path / "big.csv"
    p.write_text("task,worker,value\nt1,a,1e308\nt1,b,1.5e308\nt2,a,-1e308\nt2,b,1e308\nt2,c,5\nt3,c,1\n")
    w = tmp_path / "w.csv"
    result = invoke(runner, "aggregate", p, "--numeric", "-m", method, "--workers", w)
    assert result.exit_code == 0, result.stderr
    values = pd.read_csv(io.StringIO(result.stdout)).set_index("task")["value"]
    assert values["t1"] == 1.25e308 and values["t3"] == 1.0 and np.isfinite(values).all()
    workers = pd.read_csv(w).set_index("worker")
    assert np.isfinite(workers["deviation"]).all() and workers.loc["a", "deviation"] > 1e307
    equal = tmp_path / "equal.csv"
    equal.write_text("task,worker,value\nt1,a,5\nt1,b,5\nt2,a,5\n")
    result = invoke(runner, "aggregate", equal, "--numeric", "-m", method, *(["-p", "max_iter=3"] if method in (
        "catd", "crh") else []))
    assert result.exit_code == 0 and result.stdout == "task,value\nt1,5.0\nt2,5.0\n", (result.stdout, result.stderr)
    assert "Warning" not in result.stderr


def test_evaluate_numeric_never_writes_inf(runner, tmp_path):
    """Hostile input: predictions near 1e300 made evaluate --numeric print 'rmse,inf' (and pearson -0.0);
    errors past the largest float are one Error line, exit 1."""
    pred, truth = tmp_path / "pred.csv", tmp_path / "truth.csv"
    pred.write_text("task,value\nt1,1e300\nt2,-1e300\n")
    truth.write_text("task,value\nt1,1\nt2,3\n")
    result = invoke(runner, "evaluate", pred, "--numeric", "--truth", truth)
    assert result.exit_code == 0 and "inf" not in result.stdout, result.stdout
    scores = pd.read_csv(io.StringIO(result.stdout)).set_index("metric")["value"]
    assert float(scores["rmse"]) == pytest.approx(1e300) and float(scores["pearson"]) == pytest.approx(-1.0)
    truth.write_text("task,value\nt1,-1.7e308\nt2,1.7e308\n")
    pred.write_text("task,value\nt1,1.7e308\nt2,-1.7e308\n")
    assert "exceed the largest float" in one_error(invoke(runner, "evaluate", pred, "--numeric", "--truth", truth), 1)
