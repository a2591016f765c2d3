"""The ``crowdagg`` command line, through typer's CliRunner and a few real subprocesses.

stdout must carry data only and stderr the messages, so every test looks at
``result.stdout`` and ``result.stderr`` separately (typer's runner captures
them apart).  Errors must be exactly one ``Error: ...`` line, exit 1 for bad
data and 2 for bad usage, and must leave no output file (nor temporary file)
behind.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "crowdagg" / "examples"
BLUEBIRD = EXAMPLES / "bluebird_labels.csv"
BLUEBIRD_TRUTH = EXAMPLES / "bluebird_truth.csv"
REQUIRED_METHODS = ("mv", "wmv", "ds", "onecoin")

# A small crowd: 4 tasks (first seen in the order t3, t1, t4, t2), 3 workers,
# classes a/b/c with no ties and no duplicates.
SMALL_ROWS = [
    ("t3", "w1", "a"),
    ("t1", "w1", "b"),
    ("t3", "w2", "a"),
    ("t4", "w1", "c"),
    ("t1", "w2", "b"),
    ("t2", "w3", "a"),
    ("t4", "w3", "c"),
    ("t2", "w2", "a"),
    ("t3", "w3", "b"),
    ("t1", "w3", "b"),
    ("t4", "w2", "c"),
    ("t2", "w1", "b"),
]
SMALL_ORDER = ["t3", "t1", "t4", "t2"]
SMALL_MV = {"t3": "a", "t1": "b", "t4": "c", "t2": "a"}


def _csv(rows, header=("task", "worker", "label"), sep=","):
    return "\n".join(sep.join(r) for r in [header, *rows]) + "\n"


SMALL_CSV = _csv(SMALL_ROWS)


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    p = tmp_path / "small.csv"
    p.write_text(SMALL_CSV)
    return p


@pytest.fixture(scope="module")
def shuffled_bluebird(tmp_path_factory) -> Path:
    """Bluebird with its rows shuffled, so input order != any sorted order."""
    frame = pd.read_csv(BLUEBIRD, dtype=str).sample(frac=1.0, random_state=7)
    p = tmp_path_factory.mktemp("bb") / "bluebird_shuffled.csv"
    frame.to_csv(p, index=False)
    return p


def invoke(runner: CliRunner, *args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def ok(result) -> None:
    """Exit 0; on failure show both streams."""
    assert result.exit_code == 0, (
        f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}\n{result.exception!r}"
    )


def read_csv_out(text: str, sep: str = ",") -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text), sep=sep, dtype={"task": str, "label": str})


def assert_one_error_line(result, code: int) -> str:
    """Exactly one non-empty stderr line, starting ``Error: ``; no traceback; no stdout."""
    assert result.exit_code == code, f"exit {result.exit_code}, wanted {code}\nstderr:\n{result.stderr}"
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one stderr line, got:\n{result.stderr}"
    assert lines[0].startswith("Error: "), lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    return lines[0]


def listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# --------------------------------------------------------------------------- aggregate: output shape
def test_aggregate_ds_one_row_per_task_in_input_order(runner, shuffled_bluebird):
    result = invoke(runner, "aggregate", shuffled_bluebird, "--method", "ds")
    ok(result)
    assert result.stdout.splitlines()[0] == "task,label,confidence"
    out = read_csv_out(result.stdout)
    assert list(out.columns) == ["task", "label", "confidence"]
    first_seen = pd.read_csv(shuffled_bluebird, dtype=str)["task"].drop_duplicates().tolist()
    assert out["task"].tolist() == first_seen
    assert out["task"].is_unique
    assert set(out["label"]) <= {"0", "1"}
    assert ((out["confidence"] >= 0.5 - 1e-9) & (out["confidence"] <= 1 + 1e-9)).all()
    assert "Warning" not in result.stdout and "Error" not in result.stdout


def test_aggregate_mv_small_known_labels(runner, small_csv):
    result = invoke(runner, "aggregate", small_csv, "--method", "mv")
    ok(result)
    out = read_csv_out(result.stdout)
    assert out["task"].tolist() == SMALL_ORDER
    assert dict(zip(out["task"], out["label"], strict=True)) == SMALL_MV
    assert out["confidence"].tolist() == pytest.approx([2 / 3, 1.0, 1.0, 2 / 3], abs=1e-5)


@pytest.mark.parametrize("method", REQUIRED_METHODS)
def test_aggregate_proba_rows_sum_to_one(runner, method):
    result = invoke(runner, "aggregate", BLUEBIRD, "--method", method, "--proba")
    ok(result)
    out = read_csv_out(result.stdout)
    assert list(out.columns) == ["task", "label", "confidence", "n_answers", "p_0", "p_1"]
    assert (out["n_answers"] == 39).all()  # every worker labelled every image
    p = out[["p_0", "p_1"]].to_numpy()
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)
    # the label is the most probable class and confidence is its probability
    chosen = out["label"].map({"0": 0, "1": 1}).to_numpy()
    np.testing.assert_allclose(p[np.arange(len(p)), chosen], out["confidence"], atol=1e-5)
    assert len(out) == out["task"].nunique() == 108


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "json"])
def test_aggregate_formats_parse(runner, small_csv, fmt):
    result = invoke(runner, "aggregate", small_csv, "-m", "mv", "--proba", "--format", fmt)
    ok(result)
    text = result.stdout
    if fmt == "csv":
        frame = pd.read_csv(io.StringIO(text), dtype={"task": str, "label": str})
    elif fmt == "tsv":
        frame = pd.read_csv(io.StringIO(text), sep="\t", dtype={"task": str, "label": str})
    elif fmt == "jsonl":
        frame = pd.DataFrame([json.loads(line) for line in text.splitlines()])
    else:
        records = json.loads(text)
        assert isinstance(records, list)
        frame = pd.DataFrame(records)
    assert list(frame.columns) == ["task", "label", "confidence", "n_answers", "p_a", "p_b", "p_c"]
    assert frame["task"].astype(str).tolist() == SMALL_ORDER
    assert dict(zip(frame["task"].astype(str), frame["label"].astype(str), strict=True)) == SMALL_MV


@pytest.mark.parametrize(
    ("name", "reader"),
    [
        ("out.csv", lambda p: pd.read_csv(p, dtype=str)),
        ("out.tsv", lambda p: pd.read_csv(p, sep="\t", dtype=str)),
        ("out.jsonl", lambda p: pd.DataFrame([json.loads(x) for x in p.read_text().splitlines()])),
        ("out.json", lambda p: pd.DataFrame(json.loads(p.read_text()))),
        ("out.csv.gz", lambda p: pd.read_csv(io.BytesIO(gzip.decompress(p.read_bytes())), dtype=str)),
    ],
)
def test_aggregate_output_file_format_from_extension(runner, small_csv, tmp_path, name, reader):
    out_path = tmp_path / name
    result = invoke(runner, "aggregate", small_csv, "-m", "mv", "-o", out_path)
    ok(result)
    assert result.stdout == ""
    assert result.stderr == ""
    frame = reader(out_path)
    assert frame["task"].astype(str).tolist() == SMALL_ORDER
    assert dict(zip(frame["task"].astype(str), frame["label"].astype(str), strict=True)) == SMALL_MV
    assert listing(tmp_path) == {"small.csv", name}  # no temporary file left over


def test_aggregate_format_overrides_extension(runner, small_csv, tmp_path):
    out_path = tmp_path / "out.csv"
    ok(invoke(runner, "aggregate", small_csv, "-m", "mv", "-o", out_path, "--format", "jsonl"))
    lines = out_path.read_text().splitlines()
    assert [json.loads(x)["task"] for x in lines] == SMALL_ORDER


@pytest.mark.parametrize("method", ["ds", "mv"])
def test_aggregate_workers_file(runner, tmp_path, method):
    wpath = tmp_path / "workers.csv"
    result = invoke(runner, "aggregate", BLUEBIRD, "-m", method, "--workers", wpath)
    ok(result)
    # stdout still carries the labels
    assert len(read_csv_out(result.stdout)) == 108
    w = pd.read_csv(wpath, dtype={"worker": str, "true_label": str, "observed_label": str})
    assert list(w.columns) == ["worker", "true_label", "observed_label", "probability", "accuracy", "n_answers"]
    sums = w.groupby(["worker", "true_label"])["probability"].sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0, atol=1e-5)
    assert len(sums) == 39 * 2
    assert ((w["accuracy"] >= 0) & (w["accuracy"] <= 1)).all()
    per_worker = pd.read_csv(BLUEBIRD, dtype=str)["worker"].value_counts()
    n_ans = w.groupby("worker")["n_answers"].first()
    assert n_ans.to_dict() == per_worker.to_dict()


def test_aggregate_workers_and_output_files(runner, small_csv, tmp_path):
    ok(
        result := invoke(
            runner, "aggregate", small_csv, "-m", "ds", "-o", tmp_path / "l.jsonl", "--workers", tmp_path / "w.tsv"
        )
    )
    assert result.stdout == ""
    w = pd.read_csv(tmp_path / "w.tsv", sep="\t")
    assert list(w.columns)[:3] == ["worker", "true_label", "observed_label"]
    assert len((tmp_path / "l.jsonl").read_text().splitlines()) == 4


# --------------------------------------------------------------------------- aggregate: inputs
def _small_records():
    return [{"task": t, "worker": w, "label": y} for t, w, y in SMALL_ROWS]


def _write_input(tmp_path: Path, kind: str) -> Path:
    if kind == "tsv":
        p = tmp_path / "in.tsv"
        p.write_text(_csv(SMALL_ROWS, sep="\t"))
    elif kind == "csv.gz":
        p = tmp_path / "in.csv.gz"
        p.write_bytes(gzip.compress(SMALL_CSV.encode()))
    elif kind == "json-records":
        p = tmp_path / "in.json"
        p.write_text(json.dumps(_small_records(), indent=1))
    elif kind == "json-mapping":
        mapping: dict[str, dict[str, str]] = {}
        for t, w, y in SMALL_ROWS:
            mapping.setdefault(t, {})[w] = y
        p = tmp_path / "in.json"
        p.write_text(json.dumps(mapping))
    elif kind == "jsonl":
        p = tmp_path / "in.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in _small_records()))
    elif kind == "aliases":
        p = tmp_path / "in.csv"
        p.write_text(_csv(SMALL_ROWS, header=("item", "annotator", "answer")))
    elif kind == "aliases2":
        p = tmp_path / "in.csv"
        p.write_text(_csv(SMALL_ROWS, header=("Question", "rater", "response")))
    else:  # pragma: no cover
        raise AssertionError(kind)
    return p


@pytest.mark.parametrize("kind", ["tsv", "csv.gz", "json-records", "json-mapping", "jsonl", "aliases", "aliases2"])
def test_aggregate_input_formats_agree(runner, tmp_path, kind):
    path = _write_input(tmp_path, kind)
    result = invoke(runner, "aggregate", path, "-m", "mv", "--proba")
    ok(result)
    out = read_csv_out(result.stdout)
    assert out["task"].tolist() == SMALL_ORDER
    assert dict(zip(out["task"], out["label"], strict=True)) == SMALL_MV
    assert list(out.columns)[3:] == ["n_answers", "p_a", "p_b", "p_c"]


def test_aggregate_json_mapping_with_ds(runner, tmp_path):
    path = _write_input(tmp_path, "json-mapping")
    ok(result := invoke(runner, "aggregate", path, "-m", "ds"))
    assert read_csv_out(result.stdout)["task"].tolist() == SMALL_ORDER


def test_aggregate_stdin_csv(runner, small_csv):
    from_file = invoke(runner, "aggregate", small_csv, "-m", "mv")
    from_stdin = invoke(runner, "aggregate", "-", "-m", "mv", input=SMALL_CSV)
    ok(from_stdin)
    assert from_stdin.stdout == from_file.stdout


def test_aggregate_stdin_jsonl(runner, small_csv):
    text = "".join(json.dumps(r) + "\n" for r in _small_records())
    result = invoke(runner, "aggregate", "-", "-m", "mv", "--format", "jsonl", input=text)
    ok(result)
    rows = [json.loads(x) for x in result.stdout.splitlines()]
    assert [r["task"] for r in rows] == SMALL_ORDER
    assert {r["task"]: r["label"] for r in rows} == SMALL_MV


def test_aggregate_stdin_tsv_sniffed(runner):
    result = invoke(runner, "aggregate", "-", "-m", "mv", input=_csv(SMALL_ROWS, sep="\t"))
    ok(result)
    assert dict(zip(*(read_csv_out(result.stdout)[c] for c in ("task", "label")), strict=True)) == SMALL_MV


def test_aggregate_explicit_columns(runner, tmp_path):
    p = tmp_path / "odd.csv"
    # extra column, and names matching no alias
    rows = [(t, w, y, "x") for t, w, y in SMALL_ROWS]
    p.write_text(_csv(rows, header=("q", "who", "said", "note")))
    result = invoke(runner, "aggregate", p, "-m", "mv", "--task-col", "q", "--worker-col", "who", "--label-col", "said")
    ok(result)
    assert dict(zip(*(read_csv_out(result.stdout)[c] for c in ("task", "label")), strict=True)) == SMALL_MV
    # without the options the columns are not recognised, and the message lists those found
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv"), 1)
    for col in ("q", "who", "said", "note"):
        assert repr(col) in err


def test_aggregate_explicit_column_missing(runner, small_csv):
    err = assert_one_error_line(invoke(runner, "aggregate", small_csv, "--label-col", "nope"), 1)
    assert "'nope'" in err and "'task'" in err and "'label'" in err


def test_aggregate_ids_stay_strings(runner, tmp_path):
    p = tmp_path / "ids.csv"
    p.write_text("task,worker,label\n007,1,yes\n007,2,yes\n1.0,1,no\n1.0,2,no\n")
    ok(result := invoke(runner, "aggregate", p, "-m", "mv"))
    assert read_csv_out(result.stdout)["task"].tolist() == ["007", "1.0"]


def test_json_numbers_keep_their_text(runner, tmp_path):
    # a record without the label key must not turn the others' 1 into "1.0"
    p = tmp_path / "nums.json"
    p.write_text(
        json.dumps(
            [
                {"task": 1, "worker": 7, "label": 1},
                {"task": 1, "worker": 8, "label": 1},
                {"task": 2, "worker": 7, "label": 0},
                {"task": 2, "worker": 8, "label": 0, "note": "x"},
            ]
        )
    )
    ok(result := invoke(runner, "aggregate", p, "-m", "mv", "--proba"))
    out = read_csv_out(result.stdout)
    assert out["task"].tolist() == ["1", "2"] and out["label"].tolist() == ["1", "0"]
    assert list(out.columns)[3:] == ["n_answers", "p_0", "p_1"]


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        ("miss.json", '[{"task": "1", "worker": "a", "label": "x"}, {"task": "2", "worker": "b"}]', "record 2"),
        (
            "null.json",
            '[{"task": "1", "worker": "a", "label": 1}, {"task": "2", "worker": "b", "label": null}]',
            "record 2",
        ),
        ("miss.jsonl", '{"task": "1", "worker": "a", "label": "x"}\n\n{"task": "2", "label": "y"}\n', "line 3"),
        (
            "null.jsonl",
            '{"task": "1", "worker": "a", "label": 1}\n{"task": "2", "worker": "b", "label": null}\n',
            "line 2",
        ),
        ("null.json", '{"t1": {"w1": "x", "w2": null}}', "answer 2"),
    ],
)
def test_json_missing_or_null_is_blank(runner, tmp_path, name, content, where):
    p = tmp_path / name
    p.write_text(content)
    err = assert_one_error_line(invoke(runner, "aggregate", p, "--blank-labels", "error"), 1)
    assert "blank" in err and where in err
    assert "NaN" not in err


def test_json_empty_list(runner, tmp_path):
    p = tmp_path / "empty.json"
    p.write_text("[]")
    err = assert_one_error_line(invoke(runner, "aggregate", p), 1)
    assert "no answers" in err


def test_csv_blank_lines_keep_line_numbers(runner, tmp_path):
    p = tmp_path / "gaps.csv"
    p.write_text("task,worker,label\n1,a,x\n\n2,b,y\n\n3,,y\n")
    err = assert_one_error_line(invoke(runner, "aggregate", p), 1)
    assert "line 6" in err


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_csv_quoted_newlines_keep_line_numbers(runner, tmp_path, eol):
    # a free-text column whose quoted cells span lines
    text = eol.join(
        ["task,worker,label,comment", '1,a,x,"two', 'lines"', "2,b,y,ok", '3,a,y,"three', "", 'lines"', "3,,y,x", ""]
    )
    p = tmp_path / "quoted.csv"
    p.write_bytes(text.encode())
    err = assert_one_error_line(invoke(runner, "aggregate", p), 1)
    assert "blank worker" in err and "line 8" in err
    dup = tmp_path / "dup.csv"
    dup.write_bytes(text.replace("3,,y,x", "1,a,y,x").encode())
    err = assert_one_error_line(invoke(runner, "aggregate", dup, "--duplicates", "error"), 1)
    assert "line 8" in err


def test_embedded_example(runner):
    ok(result := invoke(runner, "aggregate", "example:bluebird", "-m", "mv", "--truth", "example:bluebird"))
    assert len(read_csv_out(result.stdout)) == 108
    assert "accuracy" in result.stderr
    err = assert_one_error_line(invoke(runner, "aggregate", "example:nope"), 1)
    assert "example:bluebird" in err


# --------------------------------------------------------------------------- --classes
def test_classes_adds_unchosen_class(runner, tmp_path):
    p = tmp_path / "ab.csv"
    p.write_text(_csv([("t1", "w1", "a"), ("t1", "w2", "a"), ("t2", "w1", "b"), ("t2", "w2", "b")]))
    for method in ("mv", "ds"):
        result = invoke(runner, "aggregate", p, "-m", method, "--classes", "a,b,c", "--proba")
        ok(result)
        out = read_csv_out(result.stdout)
        assert list(out.columns) == ["task", "label", "confidence", "n_answers", "p_a", "p_b", "p_c"]
        np.testing.assert_allclose(out[["p_a", "p_b", "p_c"]].sum(axis=1), 1.0, atol=1e-5)
        assert out["label"].tolist() == ["a", "b"]


def test_classes_rejects_label_outside(runner, tmp_path):
    p = tmp_path / "abc.csv"
    p.write_text(_csv([("t1", "w1", "a"), ("t1", "w2", "b"), ("t2", "w1", "zebra"), ("t2", "w2", "a")]))
    out = tmp_path / "out.csv"
    before = listing(tmp_path)
    err = assert_one_error_line(invoke(runner, "aggregate", p, "--classes", "a,b", "-o", out), 1)
    assert "'zebra'" in err
    assert "line 4" in err
    assert listing(tmp_path) == before


# --------------------------------------------------------------------------- duplicates
DUP_ROWS = [
    ("t1", "w1", "a"),  # line 2
    ("t2", "w1", "b"),  # line 3
    ("t2", "w2", "b"),  # line 4
    ("t1", "w1", "b"),  # line 5: repeats (t1, w1)
    ("t3", "w2", "a"),  # line 6
    ("t3", "w2", "a"),  # line 7: repeats (t3, w2)
]


@pytest.fixture
def dup_csv(tmp_path: Path) -> Path:
    p = tmp_path / "dup.csv"
    p.write_text(_csv(DUP_ROWS))
    return p


def test_duplicates_kept_by_default_with_warning(runner, dup_csv):
    result = invoke(runner, "aggregate", dup_csv, "-m", "mv", "--proba")
    ok(result)
    assert "Warning" in result.stderr and "2 duplicate" in result.stderr and "kept" in result.stderr
    out = read_csv_out(result.stdout)  # stdout is pure data despite the warning
    assert out["task"].tolist() == ["t1", "t2", "t3"]
    # both of w1's votes on t1 count: a 1-1 split
    assert out.loc[out["task"] == "t1", "p_a"].item() == pytest.approx(0.5)


@pytest.mark.parametrize(("policy", "t1_label"), [("first", "a"), ("last", "b")])
def test_duplicates_first_last(runner, dup_csv, policy, t1_label):
    result = invoke(runner, "aggregate", dup_csv, "-m", "mv", "--duplicates", policy)
    ok(result)
    assert "2 duplicate" in result.stderr and "dropped" in result.stderr and policy in result.stderr
    out = read_csv_out(result.stdout)
    assert out["task"].tolist() == ["t1", "t2", "t3"]
    labels = dict(zip(out["task"], out["label"], strict=True))
    assert labels["t1"] == t1_label
    assert out.loc[out["task"] == "t1", "confidence"].item() == pytest.approx(1.0)


def test_duplicates_error(runner, dup_csv, tmp_path):
    before = listing(tmp_path)
    err = assert_one_error_line(
        invoke(runner, "aggregate", dup_csv, "--duplicates", "error", "-o", tmp_path / "o.csv"), 1
    )
    assert "line 5" in err and "duplicate" in err
    assert listing(tmp_path) == before


# --------------------------------------------------------------------------- seeds and ties
@pytest.fixture
def ties_csv(tmp_path: Path) -> Path:
    """200 tasks split 1-1 between a and b, plus one task voted c (so 3 classes)."""
    rows = []
    for i in range(200):
        rows += [(f"t{i}", "w1", "a"), (f"t{i}", "w2", "b")]
    rows += [("tc", "w1", "c"), ("tc", "w2", "c")]
    p = tmp_path / "ties.csv"
    p.write_text(_csv(rows))
    return p


def test_mv_ties_broken_at_random_by_seed(runner, ties_csv):
    runs = {}
    for seed in (0, 1):
        result = invoke(runner, "aggregate", ties_csv, "-m", "mv", "--seed", seed)
        ok(result)
        out = read_csv_out(result.stdout)
        runs[seed] = out
        tied = out[out["task"] != "tc"]
        assert set(tied["label"]) == {"a", "b"}  # only tied classes, and both of them
        assert tied["confidence"].to_numpy() == pytest.approx(0.5)
        assert out.loc[out["task"] == "tc", "label"].item() == "c"
        # not always the first class: roughly half each
        assert 50 < (tied["label"] == "a").sum() < 150
    assert (runs[0]["label"] != runs[1]["label"]).sum() > 20


@pytest.mark.parametrize("method", REQUIRED_METHODS)
def test_same_seed_same_output(runner, ties_csv, method):
    a = invoke(runner, "aggregate", ties_csv, "-m", method, "--seed", 3, "--proba")
    b = invoke(runner, "aggregate", ties_csv, "-m", method, "--seed", 3, "--proba")
    ok(a)
    assert a.stdout == b.stdout


# --------------------------------------------------------------------------- evaluate
PRED = "task,label,confidence\nt1,a,0.9\nt2,b,0.8\nt3,a,0.7\nt4,b,0.6\nt5,a,0.5\n"
TRUTH = "task,label\nt1,a\nt2,a\nt3,a\nt4,b\nt9,b\n"
# compared: t1..t4 (t5 has no truth; t9 no prediction)
#   a: true {t1,t2,t3}, predicted {t1,t3}     tp=2 recall 2/3, F1 = 2*2/(3+2) = 0.8
#   b: true {t4},       predicted {t2,t4}     tp=1 recall 1,   F1 = 2*1/(1+2) = 2/3
HAND = {
    "accuracy": 3 / 4,
    "macro_f1": (0.8 + 2 / 3) / 2,
    "recall[a]": 2 / 3,
    "recall[b]": 1.0,
    "n_compared": 4,
    "n_without_truth": 1,
}


@pytest.fixture
def pred_truth(tmp_path: Path) -> tuple[Path, Path]:
    p, t = tmp_path / "pred.csv", tmp_path / "truth.csv"
    p.write_text(PRED)
    t.write_text(TRUTH)
    return p, t


def test_evaluate_csv_matches_hand_computation(runner, pred_truth):
    pred, truth = pred_truth
    result = invoke(runner, "evaluate", pred, "--truth", truth)
    ok(result)
    assert result.stdout.splitlines()[0] == "metric,value"
    frame = pd.read_csv(io.StringIO(result.stdout))
    values = dict(zip(frame["metric"], frame["value"], strict=True))
    for key, want in HAND.items():
        assert values[key] == pytest.approx(want, abs=1e-5), key


def test_evaluate_json(runner, pred_truth):
    pred, truth = pred_truth
    result = invoke(runner, "evaluate", pred, "--truth", truth, "--format", "json")
    ok(result)
    obj = json.loads(result.stdout)
    assert isinstance(obj, dict)
    assert obj["accuracy"] == pytest.approx(0.75)
    assert obj["macro_f1"] == pytest.approx(HAND["macro_f1"])
    assert obj["recall"] == pytest.approx({"a": 2 / 3, "b": 1.0})
    assert obj["n_compared"] == 4 and obj["n_without_truth"] == 1


def test_evaluate_predictions_from_stdin(runner, pred_truth):
    _, truth = pred_truth
    result = invoke(runner, "evaluate", "-", "--truth", truth, "--format", "json", input=PRED)
    ok(result)
    assert json.loads(result.stdout)["accuracy"] == pytest.approx(0.75)


def test_evaluate_no_common_tasks(runner, tmp_path, pred_truth):
    pred, _ = pred_truth
    other = tmp_path / "other.csv"
    other.write_text("task,label\nx,a\n")
    assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", other), 1)


def test_aggregate_then_evaluate_bluebird(runner, tmp_path):
    agg = invoke(runner, "aggregate", BLUEBIRD, "-m", "mv", "--seed", 0)
    ok(agg)
    ev = invoke(runner, "evaluate", "-", "--truth", BLUEBIRD_TRUTH, "--format", "json", input=agg.stdout)
    ok(ev)
    pred = read_csv_out(agg.stdout)
    truth = pd.read_csv(BLUEBIRD_TRUTH, dtype=str)
    merged = pred.merge(truth, on="task", suffixes=("_p", "_t"))
    obj = json.loads(ev.stdout)
    assert obj["accuracy"] == pytest.approx((merged["label_p"] == merged["label_t"]).mean())
    assert obj["n_compared"] == 108


def test_aggregate_truth_summary_on_stderr(runner):
    plain = invoke(runner, "aggregate", BLUEBIRD, "-m", "ds")
    scored = invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", "--truth", BLUEBIRD_TRUTH)
    ok(scored)
    assert scored.stdout == plain.stdout
    assert "accuracy" in scored.stderr and "macro-F1" in scored.stderr and "108 tasks compared" in scored.stderr
    assert "accuracy" not in scored.stdout
    pred = read_csv_out(plain.stdout)
    truth = pd.read_csv(BLUEBIRD_TRUTH, dtype=str)
    merged = pred.merge(truth, on="task", suffixes=("_p", "_t"))
    acc_line = next(ln for ln in scored.stderr.splitlines() if ln.startswith("accuracy"))
    assert float(acc_line.split()[1]) == pytest.approx((merged["label_p"] == merged["label_t"]).mean(), abs=5e-5)


# --------------------------------------------------------------------------- methods
def test_methods_lists_each_once(runner):
    result = invoke(runner, "methods")
    ok(result)
    lines = [ln for ln in result.stdout.splitlines() if ln.strip()]
    names = [ln.split()[0] for ln in lines]
    assert len(names) == len(set(names))
    for m in REQUIRED_METHODS:
        assert m in names
    for ln in lines:
        assert len(ln.split(None, 1)) == 2  # a name and a summary
    assert result.stderr == ""


def test_methods_csv(runner):
    ok(result := invoke(runner, "methods", "--format", "csv"))
    frame = pd.read_csv(io.StringIO(result.stdout))
    assert set(REQUIRED_METHODS) <= set(frame["method"])


# --------------------------------------------------------------------------- simulate
def test_simulate_then_aggregate(runner, tmp_path):
    outdir = tmp_path / "sim"
    result = invoke(
        runner, "simulate", "--tasks", 60, "--workers", 12, "--classes", 3, "--per-task", 5, "--seed", 1, "-o", outdir
    )
    ok(result)
    assert result.stdout == ""
    labels = pd.read_csv(outdir / "labels.csv", dtype=str)
    truth = pd.read_csv(outdir / "truth.csv", dtype=str)
    assert {"task", "worker", "label"} <= set(labels.columns)
    assert truth["task"].nunique() == 60
    assert len(labels) == 60 * 5
    agg = invoke(runner, "aggregate", outdir / "labels.csv", "-m", "ds", "--truth", outdir / "truth.csv")
    ok(agg)
    out = read_csv_out(agg.stdout)
    assert len(out) == 60 and out["task"].is_unique
    assert "accuracy" in agg.stderr


def test_simulate_same_seed_same_files(runner, tmp_path):
    for d in ("a", "b"):
        ok(invoke(runner, "simulate", "--tasks", 30, "--workers", 6, "--per-task", 3, "--seed", 5, "-o", tmp_path / d))
    assert (tmp_path / "a" / "labels.csv").read_bytes() == (tmp_path / "b" / "labels.csv").read_bytes()


def test_simulate_list_scenarios_prints_the_registry(runner):
    from crowdagg.simulate.scenarios import REGISTRY

    result = invoke(runner, "simulate", "--list-scenarios")
    ok(result)
    assert result.stdout == "".join(f"{name}\t{spec.description}\n" for name, spec in REGISTRY.items())


def test_simulate_glad_writes_the_library_crowd_with_alpha_and_tasks(runner, tmp_path):
    from crowdagg.simulate import simulate

    args = ["--model", "glad", "--difficulty-spread", "1.5", "--tasks", 80, "--workers", 10, "--classes", 3,
            "--per-task", 4, "--spammers", "0.2", "--skill", "0.55,0.95", "--seed", 3]  # fmt: skip
    result = invoke(runner, "simulate", *args, "-o", tmp_path / "cli")
    ok(result)
    assert result.stdout == "" and "tasks.csv" in result.stderr
    crowd = simulate(80, 10, 3, 4, model="glad", difficulty_spread=1.5, spammers=0.2, skill=(0.55, 0.95), seed=3)
    paths = crowd.write(tmp_path / "lib")
    assert listing(tmp_path / "cli") == {p.name for p in paths} == {
        "labels.csv", "truth.csv", "confusion.csv", "workers.csv", "tasks.csv"}  # fmt: skip
    for p in paths:
        assert (tmp_path / "cli" / p.name).read_bytes() == p.read_bytes(), p.name
    assert (tmp_path / "cli" / "workers.csv").read_text().startswith("worker,kind,alpha,accuracy,n_answers\n")
    tasks = pd.read_csv(tmp_path / "cli" / "tasks.csv")
    assert list(tasks.columns) == ["task", "beta", "n_answers"] and len(tasks) == 80
    np.testing.assert_array_equal(tasks["beta"], crowd.task_beta)


def test_simulate_help_lists_glad_and_its_files(runner):
    result = invoke(runner, "simulate", "--help")
    ok(result)
    text = " ".join(result.stdout.split())
    for needle in ("glad", "--difficulty-spread", "tasks.csv", "(task,beta,n_answers)", "(worker,kind,alpha,accuracy,n_answers)"):
        assert needle in text, needle


# --------------------------------------------------------------------------- errors
BAD_INPUTS = {
    # name: (file name, content, substrings the message must contain, options...)
    "empty": ("empty.csv", b"", ["empty"]),
    "header-only": ("hdr.csv", b"task,worker,label\n", ["header only"]),
    "no-columns": ("cols.csv", b"a,b,c\n1,2,3\n", ["'a'", "'b'", "'c'", "task"]),
    "blank-task": ("bt.csv", b"task,worker,label\n1,a,x\n,b,y\n", ["task", "line 3"]),
    "blank-worker": ("bw.csv", b"task,worker,label\n1,a,x\n2,b,y\n3,,y\n", ["worker", "line 4"]),
    "blank-label": ("bl.csv", b"task,worker,label\n1,a,\n2,b,y\n", ["label", "line 2"], "--blank-labels", "error"),
    "ragged-csv": ("ragged.csv", b"task,worker,label\n1,a,x\n2,b,y,z\n3,c,x\n", ["4 fields", "header has 3", "line 3"]),
    "bad-json": (
        "bad.json",
        b'[\n {"task": "1", "worker": "a", "label": "x"},\n {"task": "2" "worker": "b", "label": "y"}\n]\n',
        ["malformed JSON", "line 3", "column"],
    ),
    "bad-jsonl": (
        "bad.jsonl",
        b'{"task": "1", "worker": "a", "label": "x"}\n{"task": "2", "worker": "b"\n',
        ["malformed JSON", "line 2", "column"],
    ),
    "binary": (
        "garbage.csv",
        bytes(random.Random(0).randrange(256) for _ in range(500)) + b"\x00\x00",
        ["not a text file"],
    ),
    "binary-no-ext": ("garbage", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ["not a text file"]),
    "corrupt-gzip": ("bad.csv.gz", gzip.compress(SMALL_CSV.encode())[:30], ["gzip"]),
    "json-scalar": ("scalar.json", b"42", ["JSON"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_one_error_line_and_no_output(runner, tmp_path, case):
    name, content, needles, *options = BAD_INPUTS[case]
    src = tmp_path / name
    src.write_bytes(content)
    before = listing(tmp_path)
    result = invoke(runner, "aggregate", src, "-o", tmp_path / "out.csv", "--workers", tmp_path / "w.csv", *options)
    err = assert_one_error_line(result, 1)
    for needle in needles:
        assert needle in err, (needle, err)
    assert listing(tmp_path) == before


def test_missing_file(runner, tmp_path):
    before = listing(tmp_path)
    err = assert_one_error_line(invoke(runner, "aggregate", tmp_path / "nope.csv", "-o", tmp_path / "o.csv"), 1)
    assert "nope.csv" in err and "no such file" in err
    assert listing(tmp_path) == before


def test_missing_truth_file(runner, small_csv, tmp_path):
    before = listing(tmp_path)
    err = assert_one_error_line(
        invoke(runner, "aggregate", small_csv, "--truth", tmp_path / "t.csv", "-o", tmp_path / "o.csv"), 1
    )
    assert "t.csv" in err
    assert listing(tmp_path) == before


def test_output_directory_missing_leaves_no_temp_files(runner, small_csv, tmp_path):
    # the --workers file's temporary is created first; the -o failure must remove it
    before = listing(tmp_path)
    result = invoke(
        runner, "aggregate", small_csv, "-m", "mv", "--workers", tmp_path / "w.csv", "-o", tmp_path / "nodir" / "o.csv"
    )
    err = assert_one_error_line(result, 1)
    assert "nodir" in err
    assert listing(tmp_path) == before


def test_numeric_label_column_refused(runner, datasets_dir, tmp_path):
    path = datasets_dir / "emotion" / "labels.csv"
    if not path.exists():
        pytest.skip("emotion dataset missing")
    before = listing(tmp_path)
    err = assert_one_error_line(invoke(runner, "aggregate", path, "-o", tmp_path / "o.csv"), 1)
    assert "categorical methods do not aggregate" in err and "--numeric" in err and "mean, median, catd, crh" in err
    assert listing(tmp_path) == before


def test_numeric_label_column_synthetic(runner, tmp_path):
    p = tmp_path / "scores.csv"
    rng = np.random.default_rng(0)
    rows = [(f"t{i}", f"w{i % 5}", f"{v:.2f}") for i, v in enumerate(rng.normal(50, 20, 200))]
    p.write_text(_csv(rows))
    err = assert_one_error_line(invoke(runner, "aggregate", p), 1)
    assert "categorical methods do not aggregate" in err and "--numeric" in err


def test_single_class_is_a_warning(runner, tmp_path):
    p = tmp_path / "one.csv"
    p.write_text(_csv([("t1", "w1", "x"), ("t2", "w2", "x"), ("t2", "w1", "x")]))
    result = invoke(runner, "aggregate", p, "-m", "ds")
    ok(result)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("Warning: ") for ln in lines)
    assert any("one class" in ln for ln in lines)
    out = read_csv_out(result.stdout)
    assert out["label"].tolist() == ["x", "x"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--method", "nope"], ["'nope'", *REQUIRED_METHODS]),
        (["--format", "xml"], ["--format", "'xml'"]),
        (["--duplicates", "sometimes"], ["--duplicates", "'sometimes'"]),
        (["--method", "mv", "--tol", "1e-3"], ["--tol", "'mv'"]),
        (["--method", "mv", "--max-iter", "5"], ["--max-iter", "'mv'"]),
        (["--method", "mv", "--smoothing", "1"], ["--smoothing", "'mv'"]),
        (["--input-format", "xlsx"], ["--input-format", "'xlsx'"]),
        (["--classes", "a,,b"], ["--classes"]),
    ],
    ids=["method", "format", "duplicates", "tol-mv", "max-iter-mv", "smoothing-mv", "input-format", "classes-empty"],
)
def test_usage_errors_exit_2(runner, small_csv, tmp_path, args, needles):
    before = listing(tmp_path)
    err = assert_one_error_line(invoke(runner, "aggregate", small_csv, *args, "-o", tmp_path / "o.csv"), 2)
    for needle in needles:
        assert needle in err, (needle, err)
    assert listing(tmp_path) == before


def test_evaluate_bad_format_exit_2(runner, pred_truth):
    pred, truth = pred_truth
    assert_one_error_line(invoke(runner, "evaluate", pred, "--truth", truth, "--format", "xml"), 2)


def test_verbose_shows_traceback(runner, tmp_path):
    p = tmp_path / "blank.csv"
    p.write_text("task,worker,label\n1,a,x\n2,,y\n")
    quiet = invoke(runner, "aggregate", p)
    assert "Traceback" not in quiet.stderr
    loud = invoke(runner, "aggregate", p, "--verbose")
    assert loud.exit_code == 1
    assert "Traceback" in loud.stderr
    assert loud.stderr.rstrip().splitlines()[-1].startswith("Error: ")
    assert loud.stdout == ""


# --------------------------------------------------------------------------- subprocesses
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return env


def first_line_then_quiet(args: list[str], env: dict[str, str] | None = None) -> str:
    """``python -m crowdagg ARGS | head -1``: read stdout's first line and close the pipe; the command must then
    end quietly (exit 0, no traceback, no error on stderr).  Returns the first line."""
    proc = subprocess.Popen([sys.executable, "-m", "crowdagg", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env() if env is None else env, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert code == 0
    return first.decode()


def test_python_m_help():
    proc = subprocess.run(
        [sys.executable, "-m", "crowdagg", "--help"], capture_output=True, text=True, timeout=300, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
    for cmd in ("aggregate", "evaluate", "methods", "simulate"):
        assert cmd in proc.stdout
    assert proc.stderr == ""


def test_broken_pipe_is_quiet(tmp_path):
    # ~1 MB of output: far beyond a pipe buffer, so the writer must hit EPIPE.
    rng = random.Random(0)
    lines = ["task,worker,label"]
    for t in range(20000):
        for w in rng.sample(range(40), 3):
            lines.append(f"task{t},w{w},{rng.choice('abc')}")
    src = tmp_path / "big.csv"
    src.write_text("\n".join(lines) + "\n")
    first = first_line_then_quiet(["aggregate", str(src), "-m", "mv", "--proba"])
    assert first.startswith("task,label,confidence")


def test_cli_import_is_light():
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import crowdagg.cli"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    imported = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            imported.add(name.split(".")[0])
    assert "crowdagg" in imported  # the parse worked
    heavy = {"numba", "pandas", "tensorly", "torch", "scipy"} & imported
    assert not heavy, f"importing crowdagg.cli pulls in {sorted(heavy)}"


# --------------------------------------------------------------------------- gold
def test_gold_that_contradicts_the_crowd_clamps_and_is_left_out_of_the_score(runner, tmp_path):
    plain = read_csv_out(invoke(runner, "aggregate", BLUEBIRD, "-m", "ds").stdout).set_index("task")
    # gold that says the opposite of what DS concludes on 20 tasks
    flipped = plain.iloc[:20]
    gold_file = tmp_path / "gold.csv"
    gold_file.write_text("item,truth\n" + "".join(f"{t},{1 - int(y)}\n" for t, y in flipped["label"].items()))
    result = invoke(
        runner, "aggregate", BLUEBIRD, "-m", "ds", "--gold", gold_file, "--gold-task-col", "item",
        "--gold-label-col", "truth", "--truth", BLUEBIRD_TRUTH,
    )
    ok(result)
    clamped = read_csv_out(result.stdout).set_index("task")
    for task, label in flipped["label"].items():
        assert clamped.loc[task, "label"] == str(1 - int(label))
        assert float(clamped.loc[task, "confidence"]) == 1.0
    # accuracy is measured on the other 88 tasks only, and the run says so
    assert "88 tasks compared" in result.stderr and "20 gold task(s) excluded" in result.stderr
    bad = invoke(runner, "aggregate", BLUEBIRD, "-m", "mv", "--gold", gold_file)
    assert bad.exit_code == 2 and "--gold does not apply" in bad.stderr


def test_gold_matching_no_task_warns(runner, tmp_path):
    gold_file = tmp_path / "gold.csv"
    gold_file.write_text("task,label\nnope1,0\nnope2,1\n")
    result = invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", "--gold", gold_file)
    ok(result)
    assert "Warning: none of the 2 gold task(s) is in the answers" in result.stderr


def test_gold_and_truth_columns_are_named_by_their_own_options(runner, tmp_path):
    odd = tmp_path / "odd.csv"
    odd.write_text("id,answer_key\n1,a\n")
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "--truth", odd), 1)
    assert "--truth-task-col" in err and "--task-col" not in err.replace("--truth-task-col", "")
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "--gold", odd), 1)
    assert "--gold-task-col" in err
    err = assert_one_error_line(invoke(runner, "evaluate", odd, "--truth", BLUEBIRD_TRUTH), 1)
    assert "--task-col" in err
    err = assert_one_error_line(invoke(runner, "evaluate", BLUEBIRD_TRUTH, "--truth", odd), 1)
    assert "--truth-task-col" in err
    twin = tmp_path / "twin.csv"  # (the same file read twice by the same columns is refused: issue 29)
    twin.write_bytes(odd.read_bytes())
    ok(invoke(runner, "evaluate", odd, "--truth", twin, "--task-col", "id", "--label-col", "answer_key",
              "--truth-task-col", "id", "--truth-label-col", "answer_key"))


# --------------------------------------------------------------------------- hardening: outputs
def test_truth_matching_no_task_writes_nothing(runner, small_csv, tmp_path):
    truth = tmp_path / "t.csv"
    truth.write_text("task,label\nzz,a\n")
    before = listing(tmp_path)
    err = assert_one_error_line(
        invoke(runner, "aggregate", small_csv, "--truth", truth, "-o", tmp_path / "o.csv", "--workers", tmp_path / "w.csv"), 1
    )
    assert "task ids" in err
    assert listing(tmp_path) == before


@pytest.mark.parametrize("second", ["o.csv", "./o.csv", "link.csv"])
def test_two_outputs_on_one_file_are_a_usage_error(runner, small_csv, tmp_path, second):
    (tmp_path / "link.csv").symlink_to(tmp_path / "o.csv")
    before = listing(tmp_path)
    args = ["aggregate", small_csv, "-o", tmp_path / "o.csv", "--workers", str(tmp_path) + "/" + second]
    err = assert_one_error_line(invoke(runner, *args), 2)
    assert "same file" in err
    assert listing(tmp_path) == before


@pytest.mark.parametrize("name", ["out.xls", "out.xlsx", "out.csv.bz2"])
def test_unknown_output_extension_is_refused(runner, small_csv, tmp_path, name):
    err = assert_one_error_line(invoke(runner, "aggregate", small_csv, "-o", tmp_path / name), 2)
    assert "--format" in err
    assert listing(tmp_path) == {"small.csv"}


def test_tsv_output_refuses_a_tab_in_a_name(runner, tmp_path):
    p = tmp_path / "tab.json"
    p.write_text(json.dumps([{"task": "a\tb", "worker": "w", "label": "x"}, {"task": "c", "worker": "w", "label": "y"}]))
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv", "-o", tmp_path / "o.tsv"), 1)
    assert "task 'a\\tb' has a tab" in err
    assert listing(tmp_path) == {"tab.json"}
    ok(invoke(runner, "aggregate", p, "-m", "mv", "-o", tmp_path / "o.csv"))


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "json"])
def test_output_floats_read_back_exactly(runner, fmt):
    from crowdagg import aggregate, load_annotations

    result = invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", "--proba", "--format", fmt)
    ok(result)
    if fmt in ("csv", "tsv"):
        frame = pd.read_csv(io.StringIO(result.stdout), sep="," if fmt == "csv" else "\t",
                            dtype={"task": str})
    elif fmt == "jsonl":
        frame = pd.DataFrame([json.loads(x) for x in result.stdout.splitlines()])
    else:
        frame = pd.DataFrame(json.loads(result.stdout))
    lib = aggregate(load_annotations(BLUEBIRD), "ds")
    np.testing.assert_array_equal(frame[["p_0", "p_1"]].to_numpy(), lib.posteriors)  # bit for bit
    assert (lib.posteriors < 1e-6).any()  # tiny probabilities exist and survived (no 6-digit rounding)


@pytest.mark.parametrize("name", ["o.csv", "o.tsv", "o.jsonl", "o.json", "o.csv.gz", "o.json.gz"])
def test_same_run_same_bytes(runner, tmp_path, name):
    outs = []
    for i in range(2):
        target = tmp_path / f"{i}{name}"
        ok(invoke(runner, "aggregate", BLUEBIRD, "-m", "wmv", "--proba", "--seed", 4, "-o", target,
                  "--workers", tmp_path / f"w{i}.csv"))
        outs.append(target.read_bytes())
    assert outs[0] == outs[1]
    assert (tmp_path / "w0.csv").read_bytes() == (tmp_path / "w1.csv").read_bytes()
    if name.endswith(".gz"):
        assert b".tmp" not in outs[0] and outs[0][4:8] == b"\0\0\0\0"


# --------------------------------------------------------------------------- hardening: errors
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["aggregate", str(BLUEBIRD), "--seed", "abc"], "--seed"),
        (["aggregate"], "Missing argument"),
        (["methods", "extra", "more"], "unexpected extra argument"),
        (["aggregate", str(BLUEBIRD), "--bogus"], "--bogus"),
        (["nonsense"], "nonsense"),
        (["evaluate", str(BLUEBIRD)], "--truth"),
    ],
)
def test_click_usage_errors_are_one_line(runner, args, needle):
    err = assert_one_error_line(invoke(runner, *args), 2)
    assert needle in err
    loud = invoke(runner, *args, "--verbose") if args[0] != "nonsense" else None
    if loud is not None and "Missing" not in needle:
        assert loud.exit_code == 2 and "Usage:" in loud.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--smoothing", "1e308"], "--smoothing must be a finite number in [0, 1e+09], got 1e+308"),
        (["--smoothing", "nan"], "--smoothing"),
        (["--max-iter", "0"], "--max-iter must be an integer"),
        (["--tol", "-1"], "--tol"),
        (["--max-memory", "lots"], "--max-memory"),
    ],
)
def test_parameter_errors_speak_flags(runner, args, needle):
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", *args), 2)
    assert needle in err
    assert "max_iter" not in err and "max_memory" not in err


def test_memory_limit_refuses_up_front(runner, tmp_path):
    rows = [(f"t{i}", f"w{i % 300}", f"c{i % 600}") for i in range(3000)]
    p = tmp_path / "wide.csv"
    p.write_text(_csv(rows))
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "ds", "--max-memory", "100M", "-o", tmp_path / "o.csv"), 1)
    assert err.startswith("Error: this needs ~") and "300 workers × 600² classes" in err and "--max-memory" in err
    assert listing(tmp_path) == {"wide.csv"}
    # mv does not need the worker tensor, unless --workers asks for it
    ok(invoke(runner, "aggregate", p, "-m", "mv", "--max-memory", "100M"))
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv", "--max-memory", "100M", "--workers", tmp_path / "w.csv"), 1)
    assert "600² classes" in err


def test_no_exception_class_names_reach_the_user(runner, tmp_path):
    d = tmp_path / "adir"
    d.mkdir()
    for args, code in ((["aggregate", d], 1), (["evaluate", d, "--truth", BLUEBIRD_TRUTH], 1),
                       (["aggregate", BLUEBIRD, "-o", d, "--workers", d], 1)):
        err = assert_one_error_line(invoke(runner, *args), code)
        for name in ("Error:", "IsADirectoryError", "PermissionError", "OSError", "Errno"):
            assert err.count(name) == (1 if name == "Error:" else 0), err
    (d / "notes.txt").write_text("mine")  # -o DIR takes a directory of parts, never one holding other files
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "-o", d), 2)
    assert "holds files this tool did not write (notes.txt)" in err and "Errno" not in err


# --------------------------------------------------------------------------- hardening: inputs
def test_tasks_without_answers_get_a_row(runner, tmp_path):
    p = tmp_path / "m.json"
    p.write_text('{"t1": {"w1": "a", "w2": "a"}, "t2": {}, "t3": {"w1": "b", "w2": "b", "w1": "a"}}')
    result = invoke(runner, "aggregate", p, "-m", "ds", "--proba")
    ok(result)
    out = read_csv_out(result.stdout)
    assert out["task"].tolist() == ["t1", "t2", "t3"]
    assert out["n_answers"].tolist() == [2, 0, 3]
    assert "1 task(s) have no answers" in result.stderr and "1 duplicate answer" in result.stderr


def test_whitespace_and_near_collisions_are_reported(runner, tmp_path):
    p = tmp_path / "ws.csv"
    p.write_text("task , worker, label\nt1, w1,a\nt1,w1,A\nt2 ,w2,a\n")
    result = invoke(runner, "aggregate", p, "-m", "mv")
    ok(result)
    assert "Warning: stripped surrounding whitespace from 2 cell(s)" in result.stderr
    assert "'a' / 'A'" in result.stderr
    assert "set --duplicates" in result.stderr  # the CLI speaks flags
    assert read_csv_out(result.stdout)["task"].tolist() == ["t1", "t2"]


def test_platform_exports_are_recognised(runner, tmp_path):
    mturk = tmp_path / "Batch_123_batch_results.csv"
    mturk.write_text(
        "HITId,HITTypeId,AssignmentId,WorkerId,AssignmentStatus,Input.text,Answer.sentiment.label\n"
        + "".join(f"H{t},T,A{t}{w},W{w},Approved,text {t},{'pos' if (t + (w == 2)) % 2 else 'neg'}\n"
                  for t in range(6) for w in range(3))
    )
    result = invoke(runner, "aggregate", mturk, "-m", "mv")
    ok(result)
    assert read_csv_out(result.stdout)["task"].tolist() == [f"H{t}" for t in range(6)]
    toloka = tmp_path / "assignments.tsv"
    toloka.write_text(
        "INPUT:image\tOUTPUT:result\tGOLDEN:result\tASSIGNMENT:task_id\tASSIGNMENT:worker_id\n"
        + "".join(f"http://x/{t}.png\t{'cat' if t % 2 else 'dog'}\t\tT{t}\tU{w}\n" for t in range(4) for w in range(3))
    )
    out = read_csv_out(invoke(runner, "aggregate", toloka, "-m", "mv").stdout)
    assert dict(zip(out["task"], out["label"])) == {"T0": "dog", "T1": "cat", "T2": "dog", "T3": "cat"}
    two = tmp_path / "two.csv"
    two.write_text("HITId,WorkerId,Answer.q1,Answer.q2\nh,w,a,b\n")
    err = assert_one_error_line(invoke(runner, "aggregate", two), 1)
    assert "'Answer.q1'" in err and "'Answer.q2'" in err and "--label-col" in err


def test_label_studio_export_end_to_end(runner, tmp_path):
    def ann(user, choice, cancelled=False):
        return {"id": 1, "completed_by": user, "was_cancelled": cancelled,
                "result": [{"from_name": "sentiment", "to_name": "text", "type": "choices",
                            "value": {"choices": [choice]}}]}

    export = [
        {"id": 1, "data": {"text": "good"}, "annotations": [ann(1, "Positive"), ann(2, "Positive")], "predictions": []},
        {"id": 2, "data": {"text": "bad"}, "annotations": [ann({"id": 1, "email": "a@x"}, "Negative"), ann(3, "Positive", True)]},
        {"id": 3, "data": {"text": "?"}, "annotations": []},
    ]
    p = tmp_path / "project-1-at-2026.json"
    p.write_text(json.dumps(export))
    result = invoke(runner, "aggregate", p, "-m", "mv", "--proba")
    ok(result)
    out = read_csv_out(result.stdout)
    assert out["task"].tolist() == ["1", "2", "3"] and out["n_answers"].tolist() == [2, 1, 0]
    assert out["label"].tolist()[:2] == ["Positive", "Negative"]
    assert "1 cancelled Label Studio annotation(s) skipped" in result.stderr


@pytest.mark.parametrize(
    "args",
    [["-o", ""], ["--workers", ""], ["--truth", ""], ["--gold", ""], ["-f", ""], ["--input-format", ""],
     ["--max-memory", ""]],
)
def test_empty_option_values_are_usage_errors(runner, args):
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", *args), 2)
    flag = {"-o": "--output", "-f": "--format"}.get(args[0], args[0])
    assert f"Error: {flag} is empty" in err


def test_standard_input_can_be_read_once(runner):
    for args in (["aggregate", "-", "--truth", "-"], ["aggregate", "-", "--gold", "-", "-m", "ds"],
                 ["evaluate", "-", "--truth", "-"]):
        err = assert_one_error_line(invoke(runner, *args, input="task,worker,label\nt,w,a\n"), 2)
        assert "standard input" in err and "only once" in err


def test_simulate_errors_speak_its_flags(runner, tmp_path):
    cases = [
        (["--per-task", "100", "--workers", "5"], "--per-task=100 exceeds --workers=5"),
        (["--skill", "0.9,0.6"], "--skill must satisfy"),
        (["--spammers", "0.7", "--adversaries", "0.5"], "--spammers + --adversaries"),
        (["--tasks-per-worker", "3"], "--tasks-per-worker is only used with --assignment='regular'"),
        (["--scenario", "deepbp", "--classes", "3"], "fixes --classes=2"),
        (["--tasks", "1000000000000"], "--tasks"),
        (["--difficulty-spread", "1"], "--difficulty-spread is only used with --model='glad', got --model='ds'"),
        (["--model", "glad", "--difficulty-spread", "-1"], "--difficulty-spread must be a finite number in [0, 5], got -1.0"),
        (["--model", "glad", "--difficulty-spread", "nan"], "--difficulty-spread must be a finite number in [0, 5]"),
        (["--model", "glad", "--skill", "0.6,1"], "--model='glad' draws ability logit(p), p ~ Uniform(--skill); --skill must lie strictly between 0 and 1"),
        (["--model", "glad", "--adversaries", "0.2", "--skill", "0.2,0.4"], "--adversaries of --model='glad'"),
        (["--scenario", "deepbp", "--difficulty-spread", "1"], "scenario 'deepbp' does not use --difficulty-spread"),
        (["--model", "GLAD"], "unknown --model 'GLAD'; valid values are ds, onecoin, hammer-spammer, glad"),
    ]
    for args, needle in cases:
        result = invoke(runner, "simulate", "-o", tmp_path / "s", *args)
        err = assert_one_error_line(result, 1 if "1000000000000" in args else 2)
        assert needle in err, (args, err)
        assert "n_workers" not in err and "per_task" not in err
    assert not (tmp_path / "s").exists()


def test_output_size_is_refused_before_the_fit(runner, tmp_path, monkeypatch):
    import crowdagg.methods.api

    rows = [(f"t{i}", f"w{i % 7}", f"c{i % 500}") for i in range(20000)]
    p = tmp_path / "many.csv"
    p.write_text(_csv(rows))

    def fit_must_not_run(*args, **kwargs):
        raise AssertionError("the fit ran before the output size was checked")

    monkeypatch.setattr(crowdagg.methods.api, "aggregate", fit_must_not_run)
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv", "--proba", "--max-memory", "200M"), 1)
    assert "20,000 output rows × 500 classes" in err and "--proba" in err


def test_truth_made_only_of_gold_tasks_says_so(runner, tmp_path):
    gold = tmp_path / "g.csv"
    gold.write_text("task,label\n" + "".join(f"{t},{y}\n" for t, y in list(zip(
        pd.read_csv(BLUEBIRD_TRUTH, dtype=str)["task"], pd.read_csv(BLUEBIRD_TRUTH, dtype=str)["label"]))[:5]))
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", "--gold", gold, "--truth", gold), 1)
    assert "all 5 task(s) of --truth are --gold tasks" in err


def test_truth_labels_outside_the_classes_still_get_their_recall(runner, tmp_path):
    truth = pd.read_csv(BLUEBIRD_TRUTH, dtype=str)
    other = tmp_path / "yesno.csv"
    other.write_text("task,label\n" + "".join(f"{t},{'yes' if y == '1' else 'no'}\n" for t, y in zip(truth["task"], truth["label"])))
    result = invoke(runner, "aggregate", BLUEBIRD, "-m", "mv", "--truth", other)
    ok(result)
    assert "recall" in result.stderr and "no=0.0000" in result.stderr and "yes=0.0000" in result.stderr
    assert "no class in common" in result.stderr


def test_upper_case_gz_extension(runner, tmp_path):
    ok(invoke(runner, "aggregate", BLUEBIRD, "-m", "mv", "-o", tmp_path / "o.CSV.GZ"))
    assert gzip.decompress((tmp_path / "o.CSV.GZ").read_bytes()).startswith(b"task,label,confidence\n")


# --------------------------------------------------------------------------- ingest: Parquet, several inputs
def test_parquet_output_reads_back_as_the_csv_output(runner, tmp_path):
    import pyarrow.parquet as pq

    ok(invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", "--proba", "-o", tmp_path / "t.csv",
              "--workers", tmp_path / "w.csv"))
    ok(invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", "--proba", "-o", tmp_path / "t.parquet",
              "--workers", tmp_path / "w.parquet"))
    for name in ("t", "w"):
        csv = pd.read_csv(tmp_path / f"{name}.csv", dtype={"task": str, "worker": str, "label": str,
                                                          "true_label": str, "observed_label": str})
        back = pq.read_table(tmp_path / f"{name}.parquet").to_pandas()
        assert list(back.columns) == list(csv.columns)
        pd.testing.assert_frame_equal(back, csv, check_dtype=False)  # floats bit-exact
    # --format parquet to a pipe gives the same bytes; and the same input gives the same bytes
    piped = invoke(runner, "aggregate", BLUEBIRD, "-m", "ds", "--proba", "--format", "parquet")
    ok(piped)
    assert piped.stdout_bytes == (tmp_path / "t.parquet").read_bytes()


def test_parquet_input_and_output_round_trip(runner, tmp_path):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    pq.write_table(pcsv.read_csv(BLUEBIRD), tmp_path / "in.parquet")  # typed: integer ids
    a = invoke(runner, "aggregate", tmp_path / "in.parquet", "-m", "ds")
    b = invoke(runner, "aggregate", BLUEBIRD, "-m", "ds")
    ok(a)
    assert a.stdout == b.stdout


def test_several_inputs_on_the_command_line(runner, tmp_path):
    lines = BLUEBIRD.read_text().splitlines()
    header, rows = lines[0], lines[1:]
    (tmp_path / "parts").mkdir()
    for i in range(3):
        (tmp_path / "parts" / f"b{i}.csv").write_text("\n".join([header, *rows[i::3]]) + "\n")
    # the same rows in another order are another data set: compare with the joined file
    joined = tmp_path / "joined.csv"
    joined.write_text("\n".join([header, *rows[0::3], *rows[1::3], *rows[2::3]]) + "\n")
    want = invoke(runner, "aggregate", joined, "-m", "ds")
    ok(want)
    parts = [tmp_path / "parts" / f"b{i}.csv" for i in range(3)]
    for args in ([*parts], [tmp_path / "parts"], [str(tmp_path / "parts" / "b*.csv")]):
        got = invoke(runner, "aggregate", *args, "-m", "ds")
        ok(got)
        assert got.stdout == want.stdout, args
    err = assert_one_error_line(invoke(runner, "aggregate", str(tmp_path / "parts" / "*.tsv")), 1)
    assert "no file matches" in err
    err = assert_one_error_line(invoke(runner, "aggregate", "-", "-"), 2)
    assert "twice" in err


# --------------------------------------------------------------------------- outputs never land on an input
def _snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_ino


def _answers_dir(tmp_path: Path) -> Path:
    """d/ holding one answers file, a.csv (small crowd), and b.json (the same answers as JSON records)."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text(SMALL_CSV)
    (d / "b.json").write_text(json.dumps([{"task": t, "worker": w, "label": y} for t, w, y in SMALL_ROWS]))
    return d


@pytest.mark.parametrize("given", ["dir", "glob"])
@pytest.mark.parametrize(
    ("option", "victim", "extra"),
    [("-o", "a.csv", []), ("--workers", "a.csv", []), ("--save-workers", "b.json", ["-m", "ds"])],
)
def test_an_input_reached_through_a_directory_or_pattern_is_never_overwritten(runner, tmp_path, given, option,
                                                                               victim, extra):
    d = _answers_dir(tmp_path)
    before = {p.name: _snapshot(p) for p in d.iterdir()}
    source = str(d) if given == "dir" else str(d / "*")
    err = assert_one_error_line(invoke(runner, "aggregate", source, *extra, option, d / victim), 2)
    flag = {"-o": "--output"}.get(option, option)
    assert f"Error: {flag} {d / victim} is also an input ({d / victim}, from INPUT {source}); refusing to overwrite it" == err
    assert {p.name: _snapshot(p) for p in d.iterdir()} == before  # same bytes, same inode, nothing added


def test_an_input_reached_through_a_link_or_another_spelling_is_never_overwritten(runner, tmp_path):
    d = _answers_dir(tmp_path)
    src = d / "a.csv"
    (tmp_path / "soft.csv").symlink_to(src)
    os.link(src, tmp_path / "hard.csv")
    truth = tmp_path / "truth.csv"
    truth.write_text("task,label\nt1,b\n")
    gold = tmp_path / "gold.csv"
    gold.write_text("task,label\nt2,a\n")
    model = tmp_path / "model.json"
    ok(invoke(runner, "aggregate", src, "-m", "ds", "--save-workers", model))
    files = [src, truth, gold, model]
    before = {p: _snapshot(p) for p in files}
    cases = [
        ([src, "-o", tmp_path / "soft.csv"], f"--output {tmp_path / 'soft.csv'} is also an input (INPUT {src})"),
        ([src, "-o", tmp_path / "hard.csv"], f"--output {tmp_path / 'hard.csv'} is also an input (INPUT {src})"),
        ([tmp_path / "soft.csv", "-o", f"{d}/../d/a.csv"], "is also an input (INPUT"),
        ([src, "--truth", truth, "-o", truth], f"is also an input (--truth {truth})"),
        ([src, "-m", "ds", "--gold", gold, "--workers", gold], f"is also an input (--gold {gold})"),
        ([src, "-m", "ds", "--init-workers", model, "--save-workers", model], f"(--init-workers {model})"),
    ]
    for args, needle in cases:
        err = assert_one_error_line(invoke(runner, "aggregate", *args), 2)
        assert needle in err and "refusing to overwrite it" in err, (args, err)
    assert {p: _snapshot(p) for p in files} == before


def test_standard_input_or_output_on_an_input_file_is_refused(tmp_path):
    """``aggregate - -o in.csv <in.csv`` and ``aggregate in.csv >>in.csv`` would replace / grow their input."""
    src = tmp_path / "in.csv"
    src.write_text(SMALL_CSV)
    before = _snapshot(src)
    with open(src, "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", "-", "-m", "mv", "-o", str(src)],
                              stdin=stdin, capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"Error: --output {src} is also an input (INPUT -); refusing to overwrite it"]
    with open(src, "ab") as stdout:
        proc = subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", str(src), "-m", "mv"], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"Error: standard output is also an input (INPUT {src}); refusing to write into it"
    ]
    assert _snapshot(src) == before


@pytest.mark.parametrize(
    ("outputs", "extra"),
    [
        (["-o", "out.csv"], []),
        (["-o", "out.jsonl.gz"], []),
        (["-o", "out.parquet"], []),
        (["-o", "out.json", "--workers", "w.tsv"], []),
        (["-o", "out.csv", "--save-workers", "model.json"], ["-m", "ds"]),
    ],
)
@pytest.mark.parametrize("given", ["dir", "glob"])
def test_a_rerun_leaves_its_own_earlier_outputs_out_of_a_directory_or_pattern(runner, tmp_path, outputs, extra,
                                                                            given):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text(SMALL_CSV)
    source = str(d) if given == "dir" else str(d / "*")
    args = [a if a.startswith("-") else d / a for a in outputs]
    first = invoke(runner, "aggregate", source, *extra, *args)
    ok(first)
    assert first.stderr == ""
    written = {a: (d / a).read_bytes() for a in outputs if not a.startswith("-")}
    again = invoke(runner, "aggregate", source, *extra, *args)
    ok(again)
    # each output the directory or pattern matches is left out, said once; the run reads a.csv alone
    expect = sorted(f"Warning: left out {d / name}: it is this run's output" for name in written
                    if given == "glob" or name.lower().removesuffix(".gz").endswith((".csv", ".tsv", ".json",
                                                                                    ".jsonl", ".parquet")))
    assert sorted(again.stderr.splitlines()) == expect
    assert {a: (d / a).read_bytes() for a in written} == written  # the same bytes as the first run


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("out.csv", "task,label,confidence,worker\nt1,a,0.9,w1\nt1,b,0.8,w2\n"),
        ("out.jsonl", '{"task": "t1", "label": "a", "confidence": 0.9, "worker": "w1"}\n'),
        ("w.csv", "worker,true_label,observed_label,task\nw1,a,a,t1\n"),
    ],
)
def test_answers_that_only_start_like_an_output_are_never_overwritten(runner, tmp_path, name, content):
    """Answers whose header begins ``task,label,confidence`` but goes on (``worker``) are input, not output."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text(SMALL_CSV)
    (d / name).write_text(content)
    before = _snapshot(d / name)
    flag = "--workers" if name.startswith("w") else "-o"
    result = invoke(runner, "aggregate", d, "-m", "mv", flag, d / name)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"Error: {flag.replace('-o', '--output')} {d / name} is also an input ({d / name}, from INPUT {d}); "
        "refusing to overwrite it"
    ]
    assert _snapshot(d / name) == before


@pytest.mark.parametrize("flag", ["-o", "--workers", "--save-workers"])
def test_an_output_name_ending_in_a_slash_is_a_usage_error(runner, tmp_path, flag):
    """--workers and --save-workers are files; -o takes a directory of parts (tests/io/test_parts.py), but not of
    JSON, which is one list."""
    out = f"{tmp_path / 'out.json.gz'}/"
    result = invoke(runner, "aggregate", "example:bluebird", "-m", "ds", flag, out)
    assert result.exit_code == 2 and result.stdout == ""
    if flag == "-o":
        assert result.stderr.splitlines() == [
            f"Error: --output {out}: a directory holds parts, and JSON is one list that cannot be split into parts; "
            "write csv, tsv, jsonl, parquet (JSON Lines for JSON records)"]
    else:
        assert result.stderr.splitlines() == [
            f"Error: {flag} {out}: the trailing '/' names a directory; an output is a file"]
    assert list(tmp_path.iterdir()) == []


def test_an_empty_file_made_by_the_shell_is_left_out(tmp_path):
    """``aggregate 'd/*.csv' > d/out.csv``: the shell makes d/out.csv (empty) before the run starts."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text(SMALL_CSV)
    with open(d / "out.csv", "wb") as stdout:
        proc = subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", str(d / "*.csv"), "-m", "mv"],
                              stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"Warning: left out {d / 'out.csv'}: it is this run's output\n"
    assert read_csv_out((d / "out.csv").read_text()).set_index("task")["label"].to_dict() == SMALL_MV


def test_a_pattern_that_matches_only_the_output_is_an_error(runner, tmp_path):
    (tmp_path / "a.csv").write_text(SMALL_CSV)
    out = tmp_path / "out.csv"
    ok(invoke(runner, "aggregate", tmp_path / "a.csv", "-m", "mv", "-o", out))
    before = _snapshot(out)
    err = assert_one_error_line(invoke(runner, "aggregate", str(tmp_path / "o*.csv"), "-m", "mv", "-o", out), 1)
    assert "nothing to read" in err and str(out) in err
    assert _snapshot(out) == before


def test_a_file_named_both_input_and_output_stays_a_usage_error(runner, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text(SMALL_CSV)
    ok(invoke(runner, "aggregate", d / "a.csv", "-m", "mv", "-o", d / "out.csv"))
    before = _snapshot(d / "out.csv")
    # named explicitly, it is an input even though it holds an earlier output (and the directory also holds it)
    err = assert_one_error_line(invoke(runner, "aggregate", d / "out.csv", d, "-m", "mv", "-o", d / "out.csv"), 2)
    assert err == f"Error: --output {d / 'out.csv'} is also an input (INPUT {d / 'out.csv'}); refusing to overwrite it"
    assert _snapshot(d / "out.csv") == before


def test_inputs_are_expanded_once_and_that_list_is_read(runner, tmp_path, monkeypatch):
    import glob as glob_module

    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text(SMALL_CSV)
    calls = []
    original = glob_module.glob

    def counting(pattern, *a, **kw):
        calls.append(pattern)
        found = original(pattern, *a, **kw)
        (d / "late.csv").write_text("task,worker,label\nlate,w,a\n")  # appears after the expansion
        return found

    monkeypatch.setattr(glob_module, "glob", counting)
    result = invoke(runner, "aggregate", str(d / "*.csv"), "-m", "mv")
    ok(result)
    assert calls == [str(d / "*.csv")]
    assert read_csv_out(result.stdout)["task"].tolist() == SMALL_ORDER  # late.csv was not read


# --------------------------------------------------------------------------- binary output never to a terminal
def _on_terminal(args: list[str], *, stdout_tty: bool = True) -> tuple[int, bytes, str]:
    """Run the CLI with a pseudo-terminal as its controlling terminal (and its stdout, unless told otherwise).

    Returns (exit status, what reached the terminal, stderr).
    """
    import fcntl
    import termios
    import threading

    master, slave = os.openpty()

    def make_it_the_controlling_terminal() -> None:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crowdagg", *args], stdin=subprocess.DEVNULL,
            stdout=slave if stdout_tty else subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(slave,),
            preexec_fn=make_it_the_controlling_terminal, env=_env(), cwd=ROOT,
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        # The child is gone, so the reader ends at EIO once it has drained the terminal; a loaded
        # machine may just schedule it late, and ``seen`` must not be read while it still grows.
        reader.join(timeout=120)
        os.close(master)
    assert not reader.is_alive(), "the terminal's reader did not finish"
    return proc.returncode, bytes(seen), err.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["aggregate", "{small}", "-m", "mv", "-f", "parquet"], "standard output"),
        (["aggregate", "{small}", "-m", "mv", "-o", "/dev/stdout", "-f", "parquet"], "--output /dev/stdout"),
        (["aggregate", "{small}", "-m", "mv", "-o", "/dev/fd/1", "-f", "parquet"], "--output /dev/fd/1"),
        (["aggregate", "{small}", "-m", "mv", "-o", "/proc/self/fd/1", "-f", "parquet"], "--output /proc/self/fd/1"),
        (["aggregate", "{small}", "-m", "mv", "-o", "{link}.parquet"], "--output {link}.parquet"),
        (["aggregate", "{small}", "-m", "mv", "-o", "/dev/null", "--workers", "{link}.parquet"], "--workers {link}.parquet"),
        (["aggregate", "{small}", "-m", "mv", "-o", "{link}.csv.gz"], "--output {link}.csv.gz"),
        (["evaluate", "{small}", "--truth", "{truth}", "--label-col", "label", "-f", "parquet"], "standard output"),
        (["methods", "-f", "parquet"], "standard output"),
    ],
)
def test_binary_output_is_never_written_to_a_terminal(tmp_path, args, where):
    small = tmp_path / "small.csv"
    small.write_text(SMALL_CSV)
    truth = tmp_path / "truth.csv"
    truth.write_text("task,label\nt1,b\n")
    link = tmp_path / "tty"
    for suffix in (".parquet", ".csv.gz"):
        Path(f"{link}{suffix}").symlink_to("/dev/stdout")
    fill = {"small": small, "truth": truth, "link": link}
    code, seen, err = _on_terminal([a.format(**fill) for a in args])
    what = "gzip" if where.endswith(".gz") else "Parquet"
    assert code == 2, err
    assert err.splitlines() == [f"Error: {what} is binary and {where.format(**fill)} is a terminal; send it to a file instead"]
    assert seen == b""
    assert listing(tmp_path) == {"small.csv", "truth.csv", "tty.parquet", "tty.csv.gz"}


def test_binary_output_to_dev_tty_is_refused_while_text_goes_through(tmp_path):
    small = tmp_path / "small.csv"
    small.write_text(SMALL_CSV)
    code, seen, err = _on_terminal(["aggregate", str(small), "-m", "mv", "-o", "/dev/tty", "-f", "parquet"],
                                   stdout_tty=False)
    assert code == 2 and err.splitlines() == [
        "Error: Parquet is binary and --output /dev/tty is a terminal; send it to a file instead"
    ]
    assert seen == b""
    code, seen, err = _on_terminal(["aggregate", str(small), "-m", "mv", "-o", "/dev/tty"], stdout_tty=False)
    assert code == 0, err
    assert seen.replace(b"\r\n", b"\n").decode().splitlines()[0] == "task,label,confidence"


# --------------------------------------------------------------------------- every output name checked alike
@pytest.mark.parametrize("name", ["sw.parquet", "sw.csv", "sw.jsonl", "sw.txt", "sw.json.bz2", "sw.xlsx"])
def test_save_workers_is_json_only(runner, small_csv, tmp_path, name):
    err = assert_one_error_line(invoke(runner, "aggregate", small_csv, "-m", "ds", "--save-workers", tmp_path / name), 2)
    assert err == (f"Error: --save-workers {tmp_path / name}: a saved worker model is JSON; "
                   "name it .json (optionally .json.gz)")
    assert listing(tmp_path) == {"small.csv"}


def test_save_workers_json_gz_round_trips(runner, small_csv, tmp_path):
    ok(invoke(runner, "aggregate", small_csv, "-m", "ds", "--save-workers", tmp_path / "m.json"))
    ok(invoke(runner, "aggregate", small_csv, "-m", "ds", "--save-workers", tmp_path / "m.json.gz"))
    packed = (tmp_path / "m.json.gz").read_bytes()
    assert packed[:2] == b"\x1f\x8b" and gzip.decompress(packed) == (tmp_path / "m.json").read_bytes()
    plain = invoke(runner, "aggregate", small_csv, "-m", "ds", "--init-workers", tmp_path / "m.json", "--proba")
    warm = invoke(runner, "aggregate", small_csv, "-m", "ds", "--init-workers", tmp_path / "m.json.gz", "--proba")
    ok(plain)
    ok(warm)
    assert warm.stdout == plain.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--workers", "{t}/w.xlsx"], "--workers {t}/w.xlsx: unknown output extension '.xlsx'"),
        (["-o", "{t}/o.csv", "-f", "parquet"], "--format parquet and --output {t}/o.csv disagree"),
        (["-o", "{t}/o.parquet", "-f", "csv"], "--format csv and --output {t}/o.parquet disagree"),
        (["-o", "{t}/o.csv.gz", "-f", "parquet"], "--format parquet and --output {t}/o.csv.gz disagree"),
    ],
)
def test_every_output_name_is_checked_alike(runner, small_csv, tmp_path, args, needle):
    err = assert_one_error_line(invoke(runner, "aggregate", small_csv, "-m", "mv", *[a.format(t=tmp_path) for a in args]), 2)
    assert needle.format(t=tmp_path) in err
    assert listing(tmp_path) == {"small.csv"}


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("-", "--output -: standard output; the crowd is written as CSV files into a directory"),
        ("/dev/stdout", "--output /dev/stdout: not a directory"),
        ("{t}/file", "--output {t}/file: not a directory"),
        ("{t}/sim.csv", "--output {t}/sim.csv: looks like a file name"),
        ("{t}/sim.parquet", "looks like a file name"),
    ],
)
def test_simulate_output_must_be_a_directory(runner, tmp_path, monkeypatch, name, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("kept")
    err = assert_one_error_line(invoke(runner, "simulate", "--tasks", "5", "-o", name.format(t=tmp_path)), 2)
    assert needle.format(t=tmp_path) in err
    assert listing(tmp_path) == {"file"} and (tmp_path / "file").read_text() == "kept"


def test_simulate_into_an_existing_directory_with_a_dotted_name(runner, tmp_path):
    out = tmp_path / "run.v2"
    ok(invoke(runner, "simulate", "--tasks", "5", "-o", out))
    assert listing(out) == {"labels.csv", "truth.csv", "confusion.csv", "workers.csv"}


# --------------------------------------------------------------------------- standard input, read once
@pytest.mark.parametrize(
    ("args", "users"),
    [
        (["aggregate", "-", "--init-workers", "/dev/stdin", "-m", "ds"], "INPUT - and --init-workers /dev/stdin"),
        (["aggregate", "-", "--truth", "/dev/fd/0"], "INPUT - and --truth /dev/fd/0"),
        (["aggregate", "-", "-m", "ds", "--gold", "/proc/self/fd/0"], "INPUT - and --gold /proc/self/fd/0"),
        (["aggregate", "/dev/stdin", "{link}"], "INPUT /dev/stdin and INPUT {link}"),
        (["aggregate", "-", "--truth", "{src}"], "INPUT - and --truth {src}"),
        (["evaluate", "/dev/stdin", "--truth", "-"], "PREDICTIONS /dev/stdin and --truth -"),
        (["evaluate", "{src}", "--truth", "{link}"], "PREDICTIONS {src} and --truth {link}"),
    ],
)
def test_standard_input_read_twice_is_found_by_identity(tmp_path, args, users):
    src = tmp_path / "in.csv"
    src.write_text(SMALL_CSV)
    link = tmp_path / "stdin-link"
    link.symlink_to("/dev/stdin")
    fill = {"src": src, "link": link}
    with open(src, "rb") as stdin:  # standard input is in.csv itself
        proc = subprocess.run([sys.executable, "-m", "crowdagg", *[a.format(**fill) for a in args]], stdin=stdin,
                              capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"Error: standard input is given twice ({users.format(**fill)}); it can be read only once"
    ]


@pytest.mark.parametrize(
    ("args", "users"),
    [
        (["aggregate", "{fifo}", "{link}", "-m", "mv"], "INPUT {fifo} and INPUT {link}"),
        (["aggregate", "{fifo}", "--truth", "{fifo}", "-m", "mv"], "INPUT {fifo} and --truth {fifo}"),
        (["aggregate", "{fifo}", "{dir}/*.csv", "-m", "mv"], "input {fifo} and input {dir}/*.csv ({fifo})"),
        (["evaluate", "{fifo}", "--truth", "{link}"], "PREDICTIONS {fifo} and --truth {link}"),
    ],
)
def test_a_fifo_read_twice_is_refused_not_waited_on_forever(tmp_path, args, users):
    """The second open of a drained FIFO waits for a writer: the run hung, now it is a usage error."""
    fifo = tmp_path / "p.csv"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    fill = {"fifo": fifo, "link": link, "dir": tmp_path}
    # nobody writes the FIFO: a run that opened it would hang until the timeout
    proc = subprocess.run([sys.executable, "-m", "crowdagg", *[a.format(**fill) for a in args]],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"Error: one FIFO or pipe is given twice ({users.format(**fill)}); reading it once drains it"
    ]


@pytest.mark.quick  # the quick tier's real process: `python -m crowdagg aggregate` end to end
def test_a_file_that_is_also_standard_input_but_read_once_is_fine(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text(SMALL_CSV)
    with open(src, "rb") as stdin:  # stdin redirected from in.csv, but nothing reads `-`
        proc = subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", str(src), "-m", "mv"], stdin=stdin,
                              capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert read_csv_out(proc.stdout).set_index("task")["label"].to_dict() == SMALL_MV


# --------------------------------------------------------------------------- help from the registry
def test_aggregate_help_lists_every_registered_method_and_its_defaults(runner):
    from crowdagg.methods.registry import METHODS

    result = runner.invoke(app, ["aggregate", "--help"], terminal_width=200)
    ok(result)
    text = " ".join(result.stdout.split())
    for name, m in METHODS.items():
        assert f"{name} {' '.join(m.summary.split())}" in text, name
    assert "wawa" in text
    defaults = {}
    for name, m in METHODS.items():
        if "max_iter" in m.param_names:
            defaults.setdefault(m.param("max_iter").default, []).append(name)
    for value, names in defaults.items():
        assert f"{', '.join(names)}: {value}" in text
    gold = ", ".join(n for n, m in METHODS.items() if m.gold)
    saving = ", ".join(n for n, m in METHODS.items() if m.init_workers)
    assert f"Known labels that clamp those tasks ({gold})" in text
    assert f"for --init-workers ({saving})" in text
    assert "(default 0)" in text  # --seed: every method's default is the same


def test_aggregate_help_names_the_objective_tol_reads_for_every_method_that_takes_it(runner):
    """--tol's help is true of each method declaring tol: the objective each stops on (its class's
    objective_name: ds's log-likelihood, glad's log-posterior) is named, not ds's alone."""
    from crowdagg.methods.api import get_method
    from crowdagg.methods.registry import METHODS

    result = runner.invoke(app, ["aggregate", "--help"], terminal_width=200)
    ok(result)
    text = " ".join(result.stdout.split())
    tol_help = text[text.index("--tol"):text.index("--smoothing")]
    names = {get_method(n).objective_name for n, m in METHODS.items() if "tol" in m.param_names}
    assert "log-posterior" in names  # glad's
    for objective in names:
        assert objective in tol_help, (objective, tol_help)


@pytest.mark.parametrize("args", [["--help"], ["aggregate", "--help"], ["methods"]])
def test_help_imports_no_method_code(args):
    code = (
        "import sys\nfrom crowdagg.cli import run\nrun(sys.argv[1:])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'pandas', 'pyarrow', 'numpy') "
        "or m.startswith(('crowdagg.methods.api', 'crowdagg.io.read', 'crowdagg.kernels')))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "HEAVY []"
    assert ("aggregate" if args == ["--help"] else "onecoin") in proc.stdout


def test_compiling_message_only_on_a_terminal(monkeypatch):
    import io as _io

    import crowdagg.kernels as k

    monkeypatch.setattr(k, "compiled", lambda *a: False)
    tty = _io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    k.announce_compilation(tty)
    assert tty.getvalue() == "compiling kernels, once (a few seconds; later runs reuse them)\n"
    pipe = _io.StringIO()
    k.announce_compilation(pipe)
    assert pipe.getvalue() == ""
    monkeypatch.setattr(k, "compiled", lambda *a: True)
    tty2 = _io.StringIO()
    tty2.isatty = lambda: True  # type: ignore[method-assign]
    k.announce_compilation(tty2)
    assert tty2.getvalue() == ""


def test_an_output_onto_the_input_is_refused(runner, small_csv):
    before = small_csv.read_bytes()
    err = assert_one_error_line(invoke(runner, "aggregate", small_csv, "-o", small_csv), 2)
    assert "is also an input (INPUT" in err
    assert small_csv.read_bytes() == before


# --------------------------------------------------------------------------- blank labels (issue 12)
def test_aggregate_skips_blank_labels_by_default_and_refuses_them_on_request(runner, tmp_path):
    p = tmp_path / "skips.csv"
    p.write_text("task,worker,label\nt1,w1,a\nt2,w1,\nt1,w2,a\nt3,w2,b\nt2,w2, \n")
    result = invoke(runner, "aggregate", p, "-m", "mv", "--proba")
    ok(result)
    out = read_csv_out(result.stdout)
    # every task once, in input order; t2 (only blank answers) with no answers
    assert out["task"].tolist() == ["t1", "t2", "t3"] and out["n_answers"].tolist() == [2, 0, 1]
    assert out.loc[out.task == "t1", "label"].item() == "a" and out.loc[out.task == "t3", "label"].item() == "b"
    warning = [ln for ln in result.stderr.splitlines() if "blank" in ln]
    assert warning == [
        f"Warning: skipped 2 answer(s) with a blank label (first at {p} line 3); "
        "set --blank-labels to error to refuse them"
    ]
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv", "--blank-labels", "error", "-o", tmp_path / "o.csv"), 1)
    assert err == f"Error: blank label at {p} line 3 (2 blank label cell(s) in all)"
    assert not (tmp_path / "o.csv").exists()
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv", "--blank-labels", "drop"), 2)
    assert err == "Error: --blank-labels must be one of skip, error, got 'drop'"


def test_aggregate_blank_worker_stays_an_error(runner, tmp_path):
    p = tmp_path / "bw.csv"
    p.write_text("task,worker,label\nt1,w1,a\nt2,,\n")
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv"), 1)
    assert err == f"Error: blank worker at {p} line 3 (1 blank worker cell(s) in all)"


def test_aggregate_refuses_parquet_names_that_are_not_text_before_writing(runner, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(np.array([0, 2, 4], np.int32).tobytes()),
                                                 pa.py_buffer(b"w1w\xfe")])
    pq.write_table(pa.table({"task": ["t1", "t2"], "worker": bad, "label": ["a", "b"]}), p := tmp_path / "b.parquet")
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv", "--workers", tmp_path / "w.csv",
                                       "-o", tmp_path / "o.csv"), 1)
    assert err == f"Error: the worker (column 'worker') at {p} row 2 is not UTF-8 text (byte 0xFE at byte 2)"
    assert listing(tmp_path) == {"b.parquet"}
# --------------------------------------------------------------------------- platform exports end to end
def _mturk_batch(tmp_path):
    from tests.io.test_platforms import MTURK_RADIO_ROWS, _mturk_radio_csv

    p = tmp_path / "Batch_5012345_batch_results.csv"
    p.write_text(_mturk_radio_csv(MTURK_RADIO_ROWS), newline="")
    return p


def test_mturk_radio_export_rejected_excluded_by_default(runner, tmp_path):
    p = _mturk_batch(tmp_path)
    result = invoke(runner, "aggregate", p, "-m", "mv", "--proba")
    ok(result)
    assert result.stdout.splitlines() == [
        "task,label,confidence,n_answers,p_cat,p_dog",
        "3HITAAAA,cat,1.0,2,1.0,0.0",
        "3HITBBBB,dog,1.0,2,0.0,1.0",
        "3HITCCCC,dog,0.5,0,0.5,0.5",  # no answers: the prior, tie broken by the seeded draw
    ]
    assert (
        f"Warning: {p}: excluded 3 rejected answer(s) (AssignmentStatus rejected, or a reason in the Reject "
        f"column; first at {p} line 3); set --rejected to 'keep' to count them"
    ) in result.stderr.splitlines()
    assert f"Warning: {p}: 1 task(s) have no answers left once those are left out; each keeps its output row" in (
        result.stderr.splitlines()
    )


def test_mturk_radio_export_rejected_kept_on_request(runner, tmp_path):
    result = invoke(runner, "aggregate", _mturk_batch(tmp_path), "-m", "mv", "--proba", "--rejected", "keep")
    ok(result)
    assert result.stdout.splitlines()[1:] == [
        "3HITAAAA,cat,0.6666666666666666,3,0.6666666666666666,0.3333333333333333",
        "3HITBBBB,dog,0.6666666666666666,3,0.3333333333333333,0.6666666666666666",
        "3HITCCCC,cat,1.0,1,1.0,0.0",
    ]
    assert "rejected" not in result.stderr


def test_rejected_option_is_checked_before_reading(runner, tmp_path):
    err = assert_one_error_line(invoke(runner, "aggregate", tmp_path / "absent.csv", "--rejected", "drop"), 2)
    assert err == "Error: --rejected must be one of exclude, keep, got 'drop'"


def test_mturk_radio_export_two_buttons_true_is_one_error_line(runner, tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("HITId,WorkerId,AssignmentStatus,Answer.cat.on,Answer.dog.on\nH1,W1,Approved,true,false\n"
                 "H1,W2,Submitted,true,true\n")
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv"), 1)
    assert err == (
        f"Error: {p} line 3: 2 radio buttons of 'Answer' are true ('Answer.cat.on', 'Answer.dog.on'); "
        "crowdagg aggregates one class per answer (1 such row(s) in all)"
    )


def test_label_studio_csv_export_end_to_end(runner, tmp_path):
    from tests.io.test_platforms import _ls_project, _to_csv

    p = tmp_path / "project-12-at-2024-03-05-09-30-5f1c2a1b.csv"
    p.write_text(_to_csv(_ls_project()), newline="")
    result = invoke(runner, "aggregate", p, "-m", "mv", "--proba")
    ok(result)
    out = read_csv_out(result.stdout)
    assert out["task"].tolist() == ["101", "102", "103", "104", "105"]
    assert out["n_answers"].tolist() == [2, 1, 0, 1, 2]
    assert out["label"].tolist()[3:] == ["Positive", "Negative"]
    assert f"Warning: {p}: 1 Label Studio annotation(s) without a 'sentiment' choice skipped (first at {p} line 5)" in (
        result.stderr.splitlines()
    )


def test_every_ambiguous_role_in_one_error_line(runner, tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("item,question,rater_name,answer,response\ni,q,r,a,b\n")
    err = assert_one_error_line(invoke(runner, "aggregate", p, "-m", "mv"), 1)
    assert err == (
        f"Error: {p}: cannot tell which columns to read: 2 candidate task columns: 'item', 'question' "
        "(set --task-col to pick one); no worker column (expected one of worker, annotator, rater, performer, ...; "
        "or set --worker-col); 2 candidate label columns: 'answer', 'response' (set --label-col to pick one); "
        "found columns: 'item', 'question', 'rater_name', 'answer', 'response'"
    )


# --------------------------------------------------------------------------- the fit's summary line (issue 29)
@pytest.mark.parametrize(("method", "pattern"), [
    ("ds", r"ds: \d+ iterations, (converged|not converged), \d+\.\d\d s"),
    ("mv", r"mv: \d+\.\d\d s"),
])
def test_aggregate_sums_its_fit_up_in_one_line_on_a_terminal_only(monkeypatch, small_csv, method, pattern):
    import io as _io
    import re

    from crowdagg import load_annotations
    from crowdagg.cli import pipeline

    class Terminal(_io.StringIO):
        def isatty(self):
            return True

    data = load_annotations(small_csv)
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    result = pipeline.fit(data, method, {}, quiet=True, max_memory=None, summary=True)
    assert screen.getvalue() == ""  # --quiet
    pipeline.fit(data, method, {}, quiet=False, max_memory=None, summary=True)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())  # the progress display's own codes
    lines = [ln for ln in shown.splitlines() if ln.startswith(f"{method}:")]
    assert len(lines) == 1 and re.fullmatch(pattern, lines[0]), screen.getvalue()
    if result.n_iter:
        assert lines[0].startswith(f"ds: {result.n_iter} iterations, {'converged' if result.converged else 'not'}")
    piped = _io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    pipeline.fit(data, method, {}, quiet=False, max_memory=None, summary=True)
    assert piped.getvalue() == ""


def test_aggregate_piped_prints_no_summary_line(runner, small_csv):
    result = invoke(runner, "aggregate", small_csv, "-m", "ds")
    ok(result)
    assert "iterations" not in result.stderr and " s\n" not in result.stderr


# --------------------------------------------------------------------------- evaluate against itself (issue 29)
def test_evaluate_refuses_the_truth_as_its_own_prediction(runner, tmp_path, monkeypatch):
    """The tour's `> truth.csv` inside a data set's folder overwrote the truth, and `evaluate truth.csv --truth
    truth.csv` scored 1.0 without a word: one file by any spelling is refused; a copy is scored."""
    import os

    truth = tmp_path / "truth.csv"
    truth.write_text("task,label\nt1,a\nt2,b\nt3,a\n")
    (tmp_path / "link.csv").symlink_to(truth)
    os.link(truth, tmp_path / "hard.csv")
    monkeypatch.chdir(tmp_path)
    for given in ("truth.csv", str(truth), "./truth.csv", "link.csv", "hard.csv", f"{tmp_path}/../{tmp_path.name}/truth.csv"):
        err = assert_one_error_line(invoke(runner, "evaluate", given, "--truth", "truth.csv"), 2)
        assert "PREDICTIONS and --truth are the same file" in err and "1.0" in err
    (tmp_path / "copy.csv").write_bytes(truth.read_bytes())
    result = invoke(runner, "evaluate", "copy.csv", "--truth", "truth.csv")
    ok(result)
    assert "accuracy,1.0" in result.stdout
    # one file holding a prediction column beside the truth's: read apart, scored
    both = tmp_path / "both.csv"
    both.write_text("task,pred,label\nt1,a,a\nt2,a,b\n")
    result = invoke(runner, "evaluate", both, "--label-col", "pred", "--truth", both)
    ok(result)
    assert "accuracy,0.5" in result.stdout


def test_evaluate_refuses_one_column_of_one_file_by_two_spellings(runner, tmp_path):
    """`--truth-label-col label` (or `--label-col ' label '`) beside the default, which picks `label`, named the
    same column twice in other words: the truth scored 1.0 against itself again.  Two columns are still scored."""
    truth = tmp_path / "truth.csv"
    truth.write_text("task,label,pred\nt1,a,a\nt2,b,a\n")
    for spelling in (["--truth-label-col", "label"], ["--label-col", " label "],
                     ["--label-col", "pred", "--truth-label-col", "pred"]):
        err = assert_one_error_line(invoke(runner, "evaluate", truth, "--truth", truth, *spelling), 2)
        assert "PREDICTIONS and --truth are the same file" in err
    for spelling in (["--truth-label-col", "pred"], ["--label-col", "pred", "--truth-label-col", "label"]):
        result = invoke(runner, "evaluate", truth, "--truth", truth, *spelling)
        ok(result)
        assert "accuracy,0.5" in result.stdout
