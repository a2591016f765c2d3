"""``crowdagg aggregate --relabel FILE --budget N``: the file, its order, the messages, the refusals, and stdout
unchanged by it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from crowdagg.reports.relabel import RELABEL_FIELDS
from tests.cli.test_cli import BLUEBIRD, ROOT, _env, assert_one_error_line, invoke, ok, read_csv_out
from tests.reports.test_relabel import known_crowd


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def crowd_csv(tmp_path: Path) -> Path:
    """:func:`known_crowd` as a CSV: 'tie' (two good workers split) is the most uncertain task, 'single' the next."""
    data = known_crowd()
    rows = pd.DataFrame({"task": data.task_names[data.task], "worker": data.worker_names[data.worker],
                         "label": [data.classes[c] for c in data.label]})
    path = tmp_path / "crowd.csv"
    rows.to_csv(path, index=False)
    return path


def read_relabel(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"task": str, "label": str})


@pytest.mark.quick
def test_relabel_writes_the_most_uncertain_task_first_and_leaves_stdout_alone(runner, crowd_csv, tmp_path):
    plain = invoke(runner, "aggregate", crowd_csv, "--method", "ds")
    ok(plain)
    out = tmp_path / "next.csv"
    res = invoke(runner, "aggregate", crowd_csv, "--method", "ds", "--relabel", out, "--budget", 3)
    ok(res)
    assert res.stdout == plain.stdout
    table = read_relabel(out)
    assert tuple(table.columns) == RELABEL_FIELDS
    assert list(table["task"][:2]) == ["tie", "single"] and list(table["rank"]) == [1, 2, 3]
    assert table["score"].is_monotonic_decreasing and (table["score"] > 0).all()
    labels = read_csv_out(plain.stdout).set_index("task")
    for _, row in table.iterrows():  # the current label and confidence are stdout's
        assert row["label"] == labels.loc[row["task"], "label"]
        assert row["confidence"] == pytest.approx(labels.loc[row["task"], "confidence"], rel=1e-12)
    assert list(table["n_answers"][:2]) == [2, 1]
    assert ("--relabel: 3 of 32 tasks by expected information gain of one more answer under ds's confusion "
            "matrices, over all 4 workers by answer share") in res.stderr


def test_relabel_without_budget_ranks_every_task_and_a_budget_over_the_count_says_so(runner, crowd_csv, tmp_path):
    every, over = tmp_path / "every.csv", tmp_path / "over.csv"
    ok(invoke(runner, "aggregate", crowd_csv, "--relabel", every))
    res = invoke(runner, "aggregate", crowd_csv, "--relabel", over, "--budget", 500, "--quiet")
    ok(res)
    assert res.stderr.strip() == "--budget 500 is more than the 32 tasks: --relabel writes all of them"
    assert every.read_bytes() == over.read_bytes()
    table = read_relabel(every)
    assert len(table) == 32 and sorted(table["task"]) == sorted(known_crowd().task_names)
    # equal scores in name order
    for (s1, t1), (s2, t2) in zip(table[["score", "task"]].values[:-1], table[["score", "task"]].values[1:]):
        assert s1 > s2 or (s1 == s2 and t1 < t2)


def test_relabel_for_a_method_without_confusions_says_what_it_used(runner, crowd_csv, tmp_path):
    out = tmp_path / "next.jsonl"
    res = invoke(runner, "aggregate", crowd_csv, "--method", "glad", "--relabel", out, "--budget", 1)
    ok(res)
    assert "under one-coin workers (accuracy = agreement with glad's posteriors; glad has no confusion matrices)" \
        in res.stderr
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["task"] == "tie" and row["rank"] == 1 and set(row) == set(RELABEL_FIELDS)


@pytest.mark.parametrize(("args", "message"), [
    (["--budget", "3"], "Error: --budget sets how many tasks --relabel writes; give --relabel FILE too"),
    (["--relabel", "{tmp}/next.csv", "--budget", "0"],
     "Error: --budget must be at least 1 (the tasks --relabel writes), got 0"),
    (["--relabel", "-"],
     "Error: --output and --relabel both write to standard output; give all but one of them a file"),
    (["--relabel", ""], "Error: --relabel is empty; give a path or value (- means standard input/output)"),
])
def test_relabel_usage_errors(runner, crowd_csv, tmp_path, args, message):
    res = invoke(runner, "aggregate", crowd_csv, *[a.format(tmp=tmp_path) for a in args])
    assert assert_one_error_line(res, 2) == message
    assert not (tmp_path / "next.csv").exists()


def test_relabel_refuses_to_overwrite_an_input_and_writes_nothing_when_the_run_fails(runner, crowd_csv, tmp_path):
    before = crowd_csv.read_bytes()
    res = invoke(runner, "aggregate", crowd_csv, "--relabel", crowd_csv)
    assert "is also an input" in assert_one_error_line(res, 2)
    assert crowd_csv.read_bytes() == before
    out = tmp_path / "next.csv"
    res = invoke(runner, "aggregate", crowd_csv, "--relabel", out, "--truth", tmp_path / "missing.csv")
    assert res.exit_code != 0 and not out.exists()


def test_relabel_through_a_real_process_keeps_stdout_byte_for_byte(tmp_path):
    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", str(BLUEBIRD), "--seed", "3", *extra],
                              capture_output=True, env=_env(), cwd=ROOT, timeout=300)

    plain = run()
    out = tmp_path / "next.tsv"
    with_relabel = run("--relabel", str(out), "--budget", "10")
    assert plain.returncode == with_relabel.returncode == 0, with_relabel.stderr
    assert with_relabel.stdout == plain.stdout
    table = pd.read_csv(out, sep="\t", dtype={"task": str, "label": str})
    assert len(table) == 10 and table["score"].is_monotonic_decreasing


def test_relabel_of_a_method_without_confusions_runs_on_the_dask_engine(runner, crowd_csv, tmp_path):
    """bwa runs on Dask and has no confusions: its one-coin model summed every answer's posterior on the client,
    which on Dask holds no answers ("this step reads them all at once: not supported", after the whole fit).  The
    agreement is now summed on the engine's blocks: the same file as the local engine's."""
    pytest.importorskip("distributed")
    files = {}
    for engine in ("local", "dask"):
        files[engine] = tmp_path / f"{engine}.csv"
        ok(invoke(runner, "aggregate", crowd_csv, "-m", "bwa", "--engine", engine, "--threads", "1",
                  "--relabel", files[engine], "-o", tmp_path / f"labels_{engine}.csv"))
    assert files["dask"].read_bytes() == files["local"].read_bytes()
    assert read_relabel(files["local"])["task"][0] == "tie"
