"""``crowdagg stats`` (agreement statistics) through the runner, and a few real subprocesses (a terminal, a closed
pipe, the imports of ``--help``)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from crowdagg.io.read import load_annotations
from crowdagg.reports.agreement import SUMMARY_COLUMNS, TASK_COLUMNS, WORKER_COLUMNS, stats
from tests.cli.test_cli import (
    BLUEBIRD,
    ROOT,
    _env,
    _on_terminal,
    assert_one_error_line,
    first_line_then_quiet,
    invoke,
    ok,
)


@pytest.fixture(scope="module")
def figures():
    return stats(load_annotations([str(BLUEBIRD)]))


@pytest.fixture
def small(tmp_path):
    """Three tasks of two answers (crowd-kit's alpha example, 0.4444), and a task of one."""
    path = tmp_path / "small.csv"
    path.write_text("task,worker,label\nX,A,Yes\nX,B,Yes\nY,A,No\nY,B,No\nZ,A,Yes\nZ,B,No\nW,A,No\n")
    return path


@pytest.mark.quick
def test_piped_it_is_csv_of_the_library_figures(runner, figures):
    result = invoke(runner, "stats", BLUEBIRD)
    ok(result)
    table = pd.read_csv(io.StringIO(result.stdout))
    assert tuple(table.columns) == SUMMARY_COLUMNS
    values = table.set_index("statistic")["value"]
    assert values["krippendorff_alpha"] == pytest.approx(figures.alpha, abs=1e-15)
    assert values["fleiss_kappa"] == pytest.approx(figures.fleiss_kappa, abs=1e-15)
    assert values["uncertainty"] == pytest.approx(figures.uncertainty, abs=1e-15)
    assert values["agreement"] == pytest.approx(figures.agreement, abs=1e-15)
    assert values["consistency"] == pytest.approx(figures.consistency, abs=1e-15)
    assert table.set_index("statistic").loc["fleiss_kappa", "note"] == "108 tasks of 39 answers each"
    assert result.stderr == ""  # nothing on stderr when all goes well off a terminal


@pytest.mark.quick
def test_json_with_an_undefined_statistic_null_and_its_statement(runner, small):
    result = invoke(runner, "stats", small, "-f", "json")
    ok(result)
    rows = {r["statistic"]: r for r in json.loads(result.stdout)}
    assert rows["krippendorff_alpha"]["value"] == pytest.approx(4 / 9, abs=1e-15)
    assert rows["fleiss_kappa"]["value"] is None
    assert rows["fleiss_kappa"]["note"].startswith("does not apply: the tasks have different numbers of answers "
                                                   "(3 tasks with 2 answers, 1 with 1)")


@pytest.mark.quick
def test_tasks_and_workers_tables_and_output_file(runner, small, tmp_path):
    out, tasks, workers = tmp_path / "stats.json", tmp_path / "tasks.csv", tmp_path / "workers.tsv"
    result = invoke(runner, "stats", small, "-o", out, "--tasks", tasks, "--workers", workers)
    ok(result)
    assert result.stdout == ""
    assert [r["statistic"] for r in json.loads(out.read_text())][0] == "krippendorff_alpha"
    t = pd.read_csv(tasks, dtype={"task": str, "label": str})
    assert tuple(t.columns) == TASK_COLUMNS
    assert t["task"].tolist() == ["X", "Y", "Z", "W"] and t["answers"].tolist() == [2, 2, 2, 1]
    assert t["uncertainty"].tolist() == pytest.approx([0.0, 0.0, np.log(2), 0.0])
    w = pd.read_csv(workers, sep="\t", dtype={"worker": str})
    assert tuple(w.columns) == WORKER_COLUMNS
    assert w["worker"].tolist() == ["A", "B"] and w["answers"].tolist() == [4, 3]


@pytest.mark.quick
def test_method_choice_reaches_the_figures(runner, small):
    result = invoke(runner, "stats", small, "-m", "ds", "-f", "csv")
    ok(result)
    assert "ds's label" in result.stdout


@pytest.mark.quick
@pytest.mark.parametrize("args, code, needle", [
    (["stats", "missing.csv"], 1, "missing.csv"),
    (["stats", "{small}", "-f", "xml"], 2, "xml"),
    (["stats", "{small}", "-m", "nosuch"], 2, "nosuch"),
    (["stats", "{small}", "--tasks", ""], 2, "--tasks"),
    (["stats", "{small}", "-o", "{small}"], 2, "small.csv"),
    (["stats", "{small}", "--max-memory", "1K"], 1, "more than the limit"),
])
def test_errors_are_one_line_and_nothing_is_written(runner, small, args, code, needle):
    before = small.read_bytes()
    result = invoke(runner, *[a.format(small=small) for a in args])
    line = assert_one_error_line(result, code)
    assert needle in line
    assert small.read_bytes() == before


def test_on_a_terminal_it_is_a_table():
    code, seen, err = _on_terminal(["stats", str(BLUEBIRD), "--quiet"])
    text = re.sub(r"\x1b\[[0-9;]*m", "", seen.decode("utf-8", "replace"))
    assert code == 0, err
    assert "krippendorff_alpha" in text and "statistic,value" not in text and "─" * 20 in text
    assert re.search(r"fleiss_kappa +0\.\d{4} ", text)


def test_a_closed_pipe_ends_quietly():
    assert first_line_then_quiet(["stats", str(BLUEBIRD)]) == "statistic,value,note\n"


def test_help_imports_neither_numba_nor_the_reports():
    code = ("import sys\nfrom crowdagg.cli import run\nrun(sys.argv[1:])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'pandas', 'numpy') "
            "or m.startswith(('crowdagg.reports', 'crowdagg.kernels', 'crowdagg.methods.api')))\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, "stats", "--help"], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, timeout=120)
    assert "krippendorff_alpha" in proc.stdout
    assert "HEAVY []" in proc.stderr, proc.stderr


@pytest.mark.quick
@pytest.mark.parametrize("command", ["stats", "workers"])
def test_a_refused_smoothing_is_spelled_as_the_command_takes_it(runner, small, command):
    """stats and workers have no --smoothing flag: their refusals named it (``No such option`` when tried);
    they name ``-p smoothing``, as these commands take it."""
    line = assert_one_error_line(invoke(runner, command, small, "-m", "ds", "-p", "bogus=1"), 2)
    assert "it takes: --seed, --max-iter, --tol; and -p NAME=VALUE for: smoothing, n_init, init" in line
    line = assert_one_error_line(invoke(runner, command, small, "-m", "ds", "-p", "smoothing=-1"), 2)
    assert line.startswith("Error: -p smoothing must be a finite number") and "--smoothing" not in line
    # aggregate has the flag: named as such
    line = assert_one_error_line(invoke(runner, "aggregate", small, "-m", "ds", "-p", "smoothing=-1"), 2)
    assert line.startswith("Error: --smoothing must be")


@pytest.mark.quick
def test_statistics_too_large_for_max_memory_are_refused_before_the_fit(runner, small, monkeypatch):
    """The statistics' memory check ran after the fit (a long ds run, then the refusal); now before it."""
    import crowdagg.cli.pipeline as steps
    import crowdagg.reports.agreement as agreement

    fits = []
    monkeypatch.setattr(agreement, "BYTES_PER_ANSWER", 10**12)  # 7 answers: terabytes, whatever --max-memory says
    monkeypatch.setattr(steps, "fit", lambda *a, **k: fits.append(a) or pytest.fail("fitted before the check"))
    line = assert_one_error_line(invoke(runner, "stats", small, "-m", "ds", "--max-memory", "4G"), 1)
    assert "the statistics of 4 tasks, 2 workers, 7 answers" in line
    assert fits == []
