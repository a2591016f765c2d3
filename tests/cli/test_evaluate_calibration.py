"""``crowdagg evaluate`` on predictions with posteriors: ECE, Brier score, the reliability table (``--reliability``)
and diagram (``--plot``), the confidence column's fallback, and bad probabilities refused naming the line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.cli.test_cli import ROOT, _env, _on_terminal, assert_one_error_line, invoke, ok

PNG = b"\x89PNG\r\n\x1a\n"
# What `aggregate --proba` writes.  Confidences of the labels: .9 (right), .8 (wrong), .6 (right), .7 (right);
# t5 has no truth, t9 no prediction.
PRED = ("task,label,confidence,n_answers,p_a,p_b\n"
        "t1,a,0.9,3,0.9,0.1\nt2,b,0.8,3,0.2,0.8\nt3,a,0.6,3,0.6,0.4\nt4,b,0.7,3,0.3,0.7\nt5,a,0.5,2,0.5,0.5\n")
TRUTH = "task,label\nt1,a\nt2,a\nt3,a\nt4,b\nt9,b\n"
# 4 compared tasks in 15 bins: one a bin.  ECE = (|1-.6| + |1-.7| + |0-.8| + |1-.9|) / 4 = .4;
# Brier = ((.01+.01) + (.64+.64) + (.16+.16) + (.09+.09)) / 4 = .45
HAND = {"accuracy": 0.75, "ece": 0.4, "brier": 0.45}


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    p, t = tmp_path / "pred.csv", tmp_path / "truth.csv"
    p.write_text(PRED)
    t.write_text(TRUTH)
    return p, t


def metrics(stdout: str) -> dict[str, float]:
    frame = pd.read_csv(io.StringIO(stdout))
    return dict(zip(frame["metric"], frame["value"], strict=True))


@pytest.mark.quick
def test_posteriors_give_ece_brier_and_reliability_by_hand(runner, files, tmp_path):
    pred, truth = files
    rel = tmp_path / "rel.csv"
    result = invoke(runner, "evaluate", pred, "--truth", truth, "--reliability", rel)
    ok(result)
    values = metrics(result.stdout)
    for key, want in HAND.items():
        assert values[key] == pytest.approx(want), key
    # the rows a script read before stay first, in their order; ece and brier after them
    assert list(values)[:7] == ["accuracy", "macro_f1", "recall[a]", "recall[b]", "n_compared", "n_without_truth",
                                "n_truth_unpredicted"]
    table = pd.read_csv(rel)
    assert list(table.columns) == ["bin", "count", "confidence_low", "confidence_high", "confidence", "accuracy"]
    assert table["count"].tolist() == [1, 1, 1, 1]
    assert table["bin"].tolist() == [1, 2, 3, 4]
    assert table["confidence"].tolist() == pytest.approx([0.6, 0.7, 0.8, 0.9])
    assert table["accuracy"].tolist() == [1.0, 1.0, 0.0, 1.0]
    assert "note" not in result.stderr


def test_json_holds_the_reliability_table(runner, files):
    pred, truth = files
    result = invoke(runner, "evaluate", pred, "--truth", truth, "-f", "json")
    ok(result)
    obj = json.loads(result.stdout)
    assert obj["ece"] == pytest.approx(0.4) and obj["brier"] == pytest.approx(0.45) and obj["n_bins"] == 15
    assert obj["calibrated_from"] == "posteriors"
    assert [(b["bin"], b["confidence"], b["accuracy"]) for b in obj["reliability"]] == [
        (1, pytest.approx(0.6), 1.0), (2, pytest.approx(0.7), 1.0), (3, pytest.approx(0.8), 0.0),
        (4, pytest.approx(0.9), 1.0)]


def test_the_label_column_is_scored_not_the_argmax(runner, tmp_path):
    # t1 labelled b though p_a is .9: its confidence is p_b = .1 and it is wrong
    pred, truth = tmp_path / "pred.csv", tmp_path / "truth.csv"
    pred.write_text(PRED.replace("t1,a,0.9,3,0.9,0.1", "t1,b,0.1,3,0.9,0.1"))
    truth.write_text(TRUTH)
    values = metrics(invoke(runner, "evaluate", pred, "--truth", truth).stdout)
    # confidences .1 (wrong) .6 (right) .7 (right) .8 (wrong): ECE (.1 + .4 + .3 + .8) / 4
    assert values["accuracy"] == 0.5 and values["ece"] == pytest.approx(0.4)


def test_confidence_column_alone_gives_ece_and_says_brier_is_missing(runner, tmp_path, files):
    _, truth = files
    pred = tmp_path / "plain.csv"
    pred.write_text("task,label,confidence\nt1,a,0.9\nt2,b,0.8\nt3,a,0.6\nt4,b,0.7\n")
    result = invoke(runner, "evaluate", pred, "--truth", truth)
    ok(result)
    values = metrics(result.stdout)
    assert values["ece"] == pytest.approx(0.4) and "brier" not in values
    assert "no p_<class> columns" in result.stderr and "Brier score needs" in result.stderr


def test_no_scores_say_calibration_needs_proba(runner, tmp_path, files):
    _, truth = files
    pred = tmp_path / "labels_only.csv"
    pred.write_text("task,label\nt1,a\nt2,b\n")
    result = invoke(runner, "evaluate", pred, "--truth", truth)
    ok(result)
    assert "ece" not in metrics(result.stdout)
    assert "calibration (ECE, Brier score, reliability) needs the output of aggregate --proba" in result.stderr
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--reliability",
                                       tmp_path / "rel.csv"), 1)
    assert "neither p_<class> columns nor a confidence column" in err
    assert not (tmp_path / "rel.csv").exists()


@pytest.mark.parametrize(("row", "message"), [
    ("t3,a,0.6,3,0.6,0.5", "line 4: the posterior columns (p_a, p_b) sum to 1.1, not 1"),
    ("t3,a,0.6,3,nan,0.4", "line 4: column 'p_a' holds 'nan', not a probability in [0, 1]"),
    ("t3,a,0.6,3,-0.4,1.4", "line 4: column 'p_a' holds '-0.4', not a probability in [0, 1]"),
    ("t3,a,0.6,3,,0.4", "line 4: column 'p_a' holds a blank, not a probability in [0, 1]"),
    ("t3,a,0.6,3,high,0.4", "line 4: column 'p_a' holds 'high', not a probability in [0, 1]"),
    ("t3,c,0.6,3,0.6,0.4", "line 4: label 'c' has no p_c column (the posterior columns: p_a, p_b)"),
    ("t3,a,1.5,3,0.6,0.4", "line 4: column 'confidence' holds '1.5', not a probability in [0, 1]"),
])
def test_bad_probabilities_are_one_error_naming_file_line_and_value(runner, tmp_path, files, row, message):
    _, truth = files
    pred = tmp_path / "bad.csv"
    pred.write_text(PRED.replace("t3,a,0.6,3,0.6,0.4", row))
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth), 1)
    assert err == f"Error: {pred} {message}", err


def test_a_true_class_without_a_posterior_column_is_refused(runner, tmp_path, files):
    pred, _ = files
    truth = tmp_path / "truth_c.csv"
    truth.write_text("task,label\nt1,a\nt2,c\n")
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth), 1)
    assert err == (f"Error: --truth {truth}: task 't2' has the true label 'c', which has no p_c column in {pred} "
                   "(its classes: a, b)")


def test_odd_class_names_are_read_from_their_columns(runner, tmp_path):
    # a class with a comma and quotes: aggregate writes the header field quoted, p_ followed by the name as it is
    from crowdagg.io.render import render_table

    cols = {"task": np.array(["t1", "t2"], dtype=object), "label": np.array(['x, "y"', "z"], dtype=object),
            "confidence": np.array([0.75, 0.5]), 'p_x, "y"': np.array([0.75, 0.5]), "p_z": np.array([0.25, 0.5])}
    pred, truth = tmp_path / "pred.csv", tmp_path / "truth.csv"
    pred.write_bytes(render_table(cols, "csv"))
    truth.write_bytes(render_table({"task": cols["task"], "label": np.array(['x, "y"', 'x, "y"'], dtype=object)},
                                   "csv"))
    values = metrics(invoke(runner, "evaluate", pred, "--truth", truth).stdout)
    # t1: right at .75; t2: z at .5, wrong -> ECE (.25 + .5) / 2; Brier ((.25² + .25²) + (.5² + .5²)) / 2
    assert values["ece"] == pytest.approx(0.375) and values["brier"] == pytest.approx(0.3125)


def test_plot_draws_the_reliability_diagram(runner, files, tmp_path):
    pytest.importorskip("matplotlib")
    pred, truth = files
    png = tmp_path / "reliability.png"
    ok(invoke(runner, "evaluate", pred, "--truth", truth, "--plot", png))
    assert png.read_bytes().startswith(PNG)


def test_plot_and_reliability_outputs_are_checked_before_reading(runner, files, tmp_path, monkeypatch):
    pred, truth = files
    before = pred.read_bytes()
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--plot", tmp_path / "r.jpg"), 2)
    assert "name it .png" in err
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--reliability", pred), 2)
    assert "is also an input (PREDICTIONS" in err and pred.read_bytes() == before
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--reliability", truth), 2)
    assert "is also an input (--truth" in err
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--reliability", tmp_path / "r.xlsx"),
                                2)
    assert "unknown output extension" in err
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--reliability", "-"), 2)
    assert "standard output and --reliability" in err  # the scores go there
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--plot", tmp_path / "r.png"), 2)
    assert err == "Error: the figures need matplotlib: pip install 'crowdagg[plot]'"


def test_a_failed_run_writes_no_file(runner, tmp_path, files):
    pred, truth = files
    bad = tmp_path / "bad.csv"
    bad.write_text(PRED.replace("t3,a,0.6,3,0.6,0.4", "t3,a,0.6,3,0.6,0.6"))
    rel = tmp_path / "rel.csv"
    assert_one_error_line(invoke(runner, "evaluate", bad, "--truth", truth, "--reliability", rel), 1)
    assert not rel.exists()


def test_terminal_table_shows_ece_and_the_reliability_bins(files):
    pred, truth = files
    code, shown, _ = _on_terminal(["evaluate", str(pred), "--truth", str(truth)])
    text = shown.decode("utf-8", "replace")
    assert code == 0 and "ece" in text and "brier" in text and "0.4000" in text and "0.4500" in text
    assert "reliability (4 equal-mass bins of the posteriors)" in text
    assert "0.8000 to 0.8000" in text  # bin 3's confidence range


def test_aggregate_proba_then_evaluate_with_plot_in_subprocesses(tmp_path):
    """Majority vote on 3 tasks, by hand: t1 a,a,b -> a at 2/3 (right); t2 b,b,b -> b at 1 (right); t3 a,b,b -> b
    at 2/3 (truth a: wrong).  ECE (one task a bin) = (1/3 + 0 + 2/3) / 3 = 1/3; Brier = (2/9 + 0 + 8/9) / 3."""
    answers, truth, agg, png = (tmp_path / n for n in ("answers.csv", "truth.csv", "agg.csv", "rel.png"))
    answers.write_text("task,worker,label\n" + "".join(
        f"{t},w{i + 1},{y}\n" for t, ys in (("t1", "aab"), ("t2", "bbb"), ("t3", "abb")) for i, y in enumerate(ys)))
    truth.write_text("task,label\nt1,a\nt2,b\nt3,a\n")

    def run(*args: object) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "crowdagg", *map(str, args)], capture_output=True, text=True,
                              env=_env(), cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc

    run("aggregate", answers, "-m", "mv", "--proba", "-o", agg)
    plot = ["--plot", png] if _has_matplotlib() else []
    values = metrics(run("evaluate", agg, "--truth", truth, *plot).stdout)
    assert values["accuracy"] == pytest.approx(2 / 3)
    assert values["ece"] == pytest.approx(1 / 3)
    assert values["brier"] == pytest.approx((2 / 9 + 8 / 9) / 3)
    if plot:
        assert png.read_bytes().startswith(PNG)


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


@pytest.mark.parametrize(("header", "twice"), [
    ("task,label,p_a,p_b,p_a", "p_a"),
    ("task,label,confidence,p_a,p_b,confidence", "confidence"),
])
def test_a_posterior_or_confidence_column_twice_in_the_header_is_named(runner, tmp_path, header, twice):
    """Two p_a columns were both read as class a (an error saying the row sums to 1.5, or, summing to 1 by
    chance, a class counted twice); now one line naming the column, as for a repeated task column."""
    pred, truth = tmp_path / "pred.csv", tmp_path / "truth.csv"
    cells = {"task": "t1", "label": "a", "p_a": "0.9", "p_b": "0.1", "confidence": "0.9"}
    pred.write_text(header + "\n" + ",".join(cells[h] for h in header.split(",")) + "\n")
    truth.write_text(TRUTH)
    err = assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth), 1)
    assert f"pred.csv: column '{twice}' appears 2 times in the header" in err
