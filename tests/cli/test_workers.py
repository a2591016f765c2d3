"""``crowdagg workers`` (the annotator report) and ``crowdagg aggregate --drop-spammers``, through the runner
and a few real subprocesses (a terminal, a closed pipe, the imports of ``--help``)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdagg.io.read import load_annotations
from crowdagg.methods.api import aggregate
from crowdagg.reports import spammers
from crowdagg.reports.workers import pair_agreement, report_columns
from crowdagg.simulate import simulate
from tests.cli.test_cli import (
    BLUEBIRD,
    BLUEBIRD_TRUTH,
    ROOT,
    _env,
    _on_terminal,
    assert_one_error_line,
    first_line_then_quiet,
    invoke,
    ok,
)

SCAN_LINE = re.compile(r"^spammer detector: (\d+) of (\d+) workers flagged as spammers, (\d+) skipped", re.M)
CHANCE_LINE = re.compile(r"^near-chance rule \(ds\): (\d+) of (\d+) workers flagged \((\d+) also by the detector\); "
                         r"(\d+) spammers in all$", re.M)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def bluebird():
    return load_annotations([str(BLUEBIRD)])


@pytest.fixture(scope="module")
def piped(runner):
    """``crowdagg workers bluebird`` as a pipe gets it."""
    result = invoke(runner, "workers", BLUEBIRD)
    ok(result)
    return result


@pytest.fixture(scope="module")
def spam_crowd(tmp_path_factory) -> Path:
    """The tutorial's setting, small: 600 tasks, K=4, 20 dense workers of whom 30% spammers."""
    crowd = simulate(scenario="tutorial-spammers", n_tasks=600, spammers=0.3, seed=5)
    data = crowd.to_annotations()
    path = tmp_path_factory.mktemp("spam") / "crowd.csv"
    pd.DataFrame({"task": data.task_names[data.task], "worker": data.worker_names[data.worker],
                  "label": np.asarray(data.classes, dtype=object)[data.label]}).to_csv(path, index=False)
    return path


def flag_by_hand(monkeypatch, names: list[str]) -> None:
    """The detector replaced by a verdict made by hand: ``names`` flagged, nobody skipped."""

    def detect(data, **options):
        flagged = np.isin(data.worker_names.astype(str), names)
        return spammers.SpammerScan(score=np.where(flagged, 0.01, 1.0), flagged=flagged,
                                    skipped=np.zeros(data.n_workers, bool), rank=1, n_iter=1, why="by hand")

    monkeypatch.setattr(spammers, "detect_spammers", detect)


# --------------------------------------------------------------------------- the report on stdout and in files
def test_piped_the_report_is_csv_one_row_per_worker_in_input_order(piped, bluebird):
    frame = pd.read_csv(io.StringIO(piped.stdout), dtype={"worker": str, "worst_class": str})
    assert tuple(frame.columns) == report_columns(bluebird.classes, gold=False)
    assert frame["worker"].tolist() == bluebird.worker_names.tolist()
    assert frame["answers"].tolist() == np.bincount(bluebird.worker).tolist()
    ds = aggregate(bluebird, "ds")
    np.testing.assert_array_equal(frame["accuracy"].to_numpy(), ds.worker_accuracy)  # exact text round trip
    said = SCAN_LINE.search(piped.stderr)
    assert said and int(said.group(2)) == bluebird.n_workers
    assert int(said.group(1)) == frame["spammer"].eq(True).sum()
    assert int(said.group(3)) == frame["spammer"].isna().sum()


def test_on_a_terminal_the_report_is_a_table():
    code, seen, err = _on_terminal(["workers", str(BLUEBIRD), "--quiet"])
    text = seen.decode("utf-8", "replace")
    assert code == 0, err
    assert "workers" in text and "recall per class, capacity and every digit: --format csv, or -o FILE" in text
    assert "─" * 20 in text and "worker,answers" not in text  # a table, not the CSV
    assert SCAN_LINE.search(err)


def test_output_file_holds_what_stdout_would_and_stdout_stays_empty(runner, piped, tmp_path):
    out = tmp_path / "w.csv"
    result = invoke(runner, "workers", BLUEBIRD, "-o", out)
    ok(result)
    assert result.stdout == "" and out.read_text() == piped.stdout
    pq = tmp_path / "w.parquet"
    ok(invoke(runner, "workers", BLUEBIRD, "-o", pq))
    back = pd.read_parquet(pq)
    assert back["worker"].tolist() == pd.read_csv(io.StringIO(piped.stdout), dtype={"worker": str})["worker"].tolist()


def test_format_json_writes_missing_cells_as_null(runner, bluebird):
    result = invoke(runner, "workers", BLUEBIRD, "-m", "glad", "--format", "json", "--max-iter", "5")
    ok(result)
    rows = json.loads(result.stdout)
    assert len(rows) == bluebird.n_workers and list(rows[0]) == list(report_columns(bluebird.classes, False, ("alpha",)))
    assert all(r["accuracy"] is None and r["capacity"] is None and r["worst_class"] == "" for r in rows)
    assert all(isinstance(r["agreement"], float) for r in rows)
    assert all(r["spammer"] in (True, False, None) for r in rows)
    assert "Note: method 'glad' estimates no confusion matrices" in result.stderr
    assert "methods that estimate them: mv, wmv, wawa, ds" in result.stderr


def test_pairs_file_is_the_library_pair_table(runner, bluebird, tmp_path):
    out = tmp_path / "pairs.csv"
    result = invoke(runner, "workers", BLUEBIRD, "--pairs", out, "-o", tmp_path / "w.csv")
    ok(result)
    got = pd.read_csv(out, dtype={"worker_a": str, "worker_b": str})
    want = pair_agreement(bluebird)
    assert len(got) == bluebird.n_workers * (bluebird.n_workers - 1) // 2  # everyone answered every task
    assert got["worker_a"].tolist() == want["worker_a"].tolist()
    assert got["worker_b"].tolist() == want["worker_b"].tolist()
    for col in ("shared_tasks", "agreement", "chance_agreement", "kappa"):
        np.testing.assert_array_equal(got[col].to_numpy(), want[col].to_numpy(dtype=float))


def test_gold_scores_each_worker_on_the_gold_tasks(runner, bluebird):
    result = invoke(runner, "workers", BLUEBIRD, "--gold", BLUEBIRD_TRUTH)
    ok(result)
    frame = pd.read_csv(io.StringIO(result.stdout), dtype={"worker": str})
    assert tuple(frame.columns[-2:]) == ("gold_answers", "gold_accuracy")
    answers = pd.read_csv(BLUEBIRD, dtype=str).merge(pd.read_csv(BLUEBIRD_TRUTH, dtype=str), on="task",
                                                     suffixes=("", "_true"))
    by_worker = (answers["label"] == answers["label_true"]).groupby(answers["worker"]).agg(["sum", "size"])
    by_worker = by_worker.loc[frame["worker"]]
    assert frame["gold_answers"].tolist() == by_worker["size"].tolist()
    np.testing.assert_allclose(frame["gold_accuracy"], by_worker["sum"] / by_worker["size"], rtol=0, atol=1e-15)


def test_plot_writes_both_figures_into_a_directory_it_makes(runner, tmp_path):
    figures = tmp_path / "figs" / "run1"
    result = invoke(runner, "workers", BLUEBIRD, "--plot", figures, "-o", tmp_path / "w.csv")
    ok(result)
    assert sorted(p.name for p in figures.iterdir()) == ["answers_accuracy.png", "confusions.png"]
    for p in figures.iterdir():
        assert p.read_bytes()[:8] == PNG
    again = tmp_path / "again"
    ok(invoke(runner, "workers", BLUEBIRD, "--plot", again, "-o", tmp_path / "w2.csv"))
    assert (again / "confusions.png").read_bytes() == (figures / "confusions.png").read_bytes()  # same bytes


def test_plot_of_a_method_without_confusion_matrices_draws_the_scatter_only(runner, tmp_path):
    figures = tmp_path / "g"
    result = invoke(runner, "workers", BLUEBIRD, "-m", "glad", "--max-iter", "5", "--plot", figures,
                    "-o", tmp_path / "w.csv")
    ok(result)
    assert [p.name for p in figures.iterdir()] == ["answers_accuracy.png"]
    assert "--plot draws no confusions.png" in result.stderr


# --------------------------------------------------------------------------- refusals
def test_a_missing_input_is_one_error_line_and_leaves_no_figure_directory(runner, tmp_path):
    figures = tmp_path / "new" / "figs"
    err = assert_one_error_line(invoke(runner, "workers", tmp_path / "nope.csv", "--plot", figures), 1)
    assert "nope.csv" in err
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--format", "xlsx"], "--format must be one of"),
    (["-o", "{tmp}/w.xlsx"], "unknown output extension"),
    (["--pairs", str(BLUEBIRD)], "is also an input"),
    (["--plot", str(BLUEBIRD)], "not a directory"),
    (["--plot", "-"], "not a directory"),
    (["--min-shared", "0"], "--min-shared"),
    (["-m", "nope"], "nope"),
    (["-p", "n_init=0"], "n_init"),
])
def test_usage_errors_are_one_line_exit_2_and_touch_nothing(runner, tmp_path, extra, message):
    before = BLUEBIRD.read_bytes()
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    err = assert_one_error_line(invoke(runner, "workers", BLUEBIRD, *args), 2)
    assert message in err
    assert BLUEBIRD.read_bytes() == before and list(tmp_path.iterdir()) == []


def test_without_matplotlib_plot_says_which_extra_to_install_before_reading(runner, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = assert_one_error_line(invoke(runner, "workers", tmp_path / "not-read.csv", "--plot", tmp_path / "f"), 2)
    assert err == "Error: the figures need matplotlib: pip install 'crowdagg[plot]'"
    assert list(tmp_path.iterdir()) == []


def test_a_closed_pipe_ends_the_report_quietly(tmp_path):
    """``crowdagg workers big.csv | head -1``: well over a pipe buffer of rows (1,500 workers)."""
    crowd = simulate(n_tasks=3000, n_workers=1500, per_task=3, seed=2)
    path = tmp_path / "big.csv"
    data = crowd.to_annotations()
    pd.DataFrame({"task": data.task_names[data.task], "worker": data.worker_names[data.worker],
                  "label": np.asarray(data.classes, dtype=object)[data.label]}).to_csv(path, index=False)
    assert first_line_then_quiet(["workers", str(path), "-m", "mv"]).startswith("worker,answers,accuracy,")


@pytest.mark.parametrize("args", [["--help"], ["workers", "--help"]])
def test_help_imports_neither_matplotlib_nor_numba(args):
    code = ("import sys\nfrom crowdagg.cli import run\nrun(sys.argv[1:])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'numba', 'pandas', 'numpy') "
            "or m.startswith(('crowdagg.reports', 'crowdagg.kernels', 'crowdagg.methods.api')))\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "HEAVY []"
    assert "workers" in proc.stdout


# --------------------------------------------------------------------------- aggregate --drop-spammers
def test_drop_spammers_fits_without_the_flagged_workers_and_says_how_many(runner, monkeypatch, tmp_path):
    flag_by_hand(monkeypatch, ["w3"])
    path = tmp_path / "a.csv"
    # t9 was answered by w3 alone: it keeps its row, with the prior
    path.write_text("task,worker,label\nt1,w1,a\nt1,w2,a\nt9,w3,b\nt2,w1,b\nt2,w3,a\nt2,w2,b\nt3,w2,a\nt3,w1,b\n")
    result = invoke(runner, "aggregate", path, "-m", "ds", "--drop-spammers", "--no-near-chance", "--proba")
    ok(result)
    assert "spammer detector: 1 of 3 workers flagged as spammers, 0 skipped" in result.stderr
    assert "--drop-spammers: removed 1 of 3 workers and their 2 of 8 answers" in result.stderr
    assert "1 task(s) have no answers: their posterior is the class prior" in result.stderr
    frame = pd.read_csv(io.StringIO(result.stdout), dtype={"task": str, "label": str})
    assert frame["task"].tolist() == ["t1", "t9", "t2", "t3"]  # every task once, in input order
    assert frame.set_index("task").loc["t9", "n_answers"] == 0


def test_drop_spammers_is_aggregate_on_the_answers_without_them(runner, monkeypatch, tmp_path, bluebird):
    from crowdagg.reports.workers import spammer_flags

    by_hand = bluebird.worker_names[[1, 4, 9]].tolist()
    flag_by_hand(monkeypatch, by_hand)
    dropped = invoke(runner, "aggregate", BLUEBIRD, "--drop-spammers", "--no-near-chance", "--workers",
                     tmp_path / "w.csv")
    ok(dropped)
    # the ds fit withdraws the flags of workers it shows right more often than chance
    scan = spammers.detect_spammers(bluebird)
    flags = spammer_flags(bluebird, aggregate(bluebird, "ds"), scan, chance=False)
    gone = bluebird.worker_names[flags.flagged].tolist()
    assert 0 < len(gone) < 3 and f"{int(flags.withdrawn.sum())} of its flags withdrawn" in dropped.stderr
    assert f"--drop-spammers: removed {len(gone)} of " in dropped.stderr
    rows = pd.read_csv(BLUEBIRD, dtype=str)
    pruned = tmp_path / "pruned.csv"
    rows[~rows.iloc[:, 1].isin(gone)].to_csv(pruned, index=False)
    direct = invoke(runner, "aggregate", pruned, "--workers", tmp_path / "w2.csv")
    ok(direct)
    assert dropped.stdout == direct.stdout
    assert (tmp_path / "w.csv").read_bytes() == (tmp_path / "w2.csv").read_bytes()  # the kept workers only


def test_drop_spammers_with_the_detector_on_a_crowd_with_spammers(runner, spam_crowd):
    result = invoke(runner, "aggregate", spam_crowd, "--drop-spammers", "-m", "mv", "--seed", "3")
    ok(result)
    said = SCAN_LINE.search(result.stderr)
    assert said and said.group(2) == "20"
    chance = CHANCE_LINE.search(result.stderr)  # ds first, for the near-chance rule: the union is removed
    assert chance and chance.group(2) == "20"
    n = int(chance.group(4))
    assert n >= max(int(said.group(1)), int(chance.group(1)))
    removed = re.search(r"--drop-spammers: removed (\d+) of 20 workers and their ([\d,]+) of 12,000 answers",
                        result.stderr)
    assert removed and int(removed.group(1)) == n and int(removed.group(2).replace(",", "")) == 600 * n
    frame = pd.read_csv(io.StringIO(result.stdout), dtype={"task": str})
    assert len(frame) == 600 and frame["task"].is_unique


@pytest.fixture(scope="module")
def rte_report(runner, datasets_dir):
    """``crowdagg workers rte`` (ds, both criteria), piped."""
    result = invoke(runner, "workers", datasets_dir / "rte" / "labels.csv")
    ok(result)
    return result


def test_workers_says_how_many_each_criterion_flagged_and_the_report_agrees(rte_report):
    said, chance = SCAN_LINE.search(rte_report.stderr), CHANCE_LINE.search(rte_report.stderr)
    assert said and chance
    assert said.groups() == ("57", "164", "0") and chance.groups() == ("5", "164", "4", "16")
    assert "spammer detector: 42 of its flags withdrawn: the ds fit shows those workers right more often than " \
           "chance (Benjamini-Hochberg at 0.1)" in rte_report.stderr
    assert "workers: 164 workers, 164 judged, 16 flagged as spammers (11 by covariance, 1 by chance, 4 by both); " \
           "42 covariance flags withdrawn (accuracy above chance)" in rte_report.stderr
    frame = pd.read_csv(io.StringIO(rte_report.stdout), dtype={"worker": str, "flagged_by": str},
                        keep_default_na=False, na_values={"spammer": [""]})
    assert frame["flagged_by"].value_counts().to_dict() == {"": 148, "covariance": 11, "both": 4, "chance": 1}
    assert frame.loc[frame["answers"] == 700, "flagged_by"].tolist() == ["chance"]
    assert frame["spammer"].astype("boolean").fillna(False).sum() == 16


def test_drop_spammers_removes_exactly_the_workers_the_report_flags(runner, rte_report, datasets_dir, tmp_path):
    """One shared decision: aggregate --drop-spammers (any method) fits ds, and removes what `workers` flags."""
    labels = datasets_dir / "rte" / "labels.csv"
    dropped = invoke(runner, "aggregate", labels, "-m", "mv", "--drop-spammers")
    ok(dropped)
    assert "near-chance rule (ds): 5 of 164 workers flagged (4 also by the detector); 16 spammers in all" \
        in dropped.stderr
    assert "--drop-spammers: removed 16 of 164 workers and their " in dropped.stderr
    report = pd.read_csv(io.StringIO(rte_report.stdout), dtype={"worker": str}, keep_default_na=False)
    gone = set(report.loc[report["spammer"].astype(str).str.lower() == "true", "worker"])
    assert len(gone) == 16
    rows = pd.read_csv(labels, dtype=str)
    pruned = tmp_path / "pruned.csv"
    rows[~rows.iloc[:, 1].isin(gone)].to_csv(pruned, index=False)
    direct = invoke(runner, "aggregate", pruned, "-m", "mv")
    ok(direct)
    assert set(pd.read_csv(io.StringIO(dropped.stdout))["task"]) >= set(pd.read_csv(io.StringIO(direct.stdout))["task"])
    both = pd.read_csv(io.StringIO(dropped.stdout), dtype=str).merge(
        pd.read_csv(io.StringIO(direct.stdout), dtype=str), on="task", suffixes=("", "_direct"))
    assert len(both) == len(pd.read_csv(io.StringIO(direct.stdout))) and (both["label"] == both["label_direct"]).all()


def test_without_an_accuracy_or_with_no_near_chance_the_detector_alone_flags(runner, bluebird):
    kos = invoke(runner, "workers", BLUEBIRD, "-m", "kos")
    ok(kos)
    assert "near-chance rule: method 'kos' estimates no worker accuracy; the detector alone flags" in kos.stderr
    off = invoke(runner, "workers", BLUEBIRD, "--no-near-chance")
    ok(off)
    assert "near-chance rule" not in off.stderr
    for result in (kos, off):
        frame = pd.read_csv(io.StringIO(result.stdout), keep_default_na=False)
        assert (frame["chance_bound"] == "").all() and set(frame["flagged_by"]) <= {"", "covariance"}
    on = invoke(runner, "workers", BLUEBIRD)
    ok(on)
    assert CHANCE_LINE.search(on.stderr)


def test_drop_spammers_refuses_the_dask_engine_before_reading(runner, tmp_path):
    pytest.importorskip("distributed")
    err = assert_one_error_line(invoke(runner, "aggregate", tmp_path / "not-read.csv", "--drop-spammers",
                                       "--engine", "dask"), 2)
    assert "--drop-spammers runs on the local engine" in err


def test_the_detector_options_default_to_the_library_defaults():
    import inspect

    from crowdagg.cli.workers import workers
    from crowdagg.reports import spammers

    params = inspect.signature(workers).parameters
    assert params["min_partners"].default.default == spammers.MIN_PARTNERS
    assert params["min_shared"].default.default == spammers.MIN_SHARED


# --------------------------------------------------------------------------- issue 29: sort, summary, layout, options
def test_sort_orders_the_rows_descending_with_a_dash_missing_last_ties_in_input_order(runner, piped):
    base = pd.read_csv(io.StringIO(piped.stdout), dtype={"worker": str})
    up = invoke(runner, "workers", BLUEBIRD, "--sort", "answers")
    down = invoke(runner, "workers", BLUEBIRD, "--sort=-spam_score")
    ok(up)
    ok(down)
    frame = pd.read_csv(io.StringIO(up.stdout), dtype={"worker": str})
    assert frame["worker"].tolist() == base.sort_values("answers", kind="stable")["worker"].tolist()
    frame = pd.read_csv(io.StringIO(down.stdout), dtype={"worker": str})
    expect = base.sort_values("spam_score", ascending=False, kind="stable", na_position="last")
    assert frame["worker"].tolist() == expect["worker"].tolist()
    assert sorted(frame.to_csv(index=False).splitlines()) == sorted(base.to_csv(index=False).splitlines())
    by_class = invoke(runner, "workers", BLUEBIRD, "--sort", "recall_1")
    ok(by_class)


@pytest.mark.parametrize("column", ["nope", "-nope", "recall_9"])
def test_sort_by_an_unknown_column_is_a_usage_error_naming_the_columns(runner, column):
    err = assert_one_error_line(invoke(runner, "workers", BLUEBIRD, "--sort", column), 2)
    assert f"--sort {column}: no such column; the columns are worker, answers, accuracy, accuracy_low" in err
    assert "spam_score" in err and "(-COLUMN: descending)" in err


def test_the_summary_line_counts_judged_and_flagged_by_rule(piped):
    line = re.search(r"^workers: (\d+) workers, (\d+) judged, (\d+) flagged as spammers \((\d+) by covariance, "
                     r"(\d+) by chance, (\d+) by both\)", piped.stderr, re.M)
    assert line
    frame = pd.read_csv(io.StringIO(piped.stdout), keep_default_na=False)
    n, judged, flagged, cov, chance, both = (int(g) for g in line.groups())
    assert n == len(frame) and judged == int((frame["spammer"] != "").sum())
    assert (cov, chance, both) == tuple(int((frame["flagged_by"] == b).sum()) for b in ("covariance", "chance", "both"))
    assert flagged == cov + chance + both == int((frame["spammer"].astype(str).str.lower() == "true").sum())


def test_on_a_terminal_the_table_fits_80_columns_with_the_interval():
    code, seen, err = _on_terminal(["workers", str(BLUEBIRD), "--quiet", "--sort=-answers"])
    assert code == 0, err
    lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", seen.decode()).splitlines() if ln.strip()]
    assert max(map(len, lines)) <= 80
    assert "interval" in lines[1] + lines[2] and "spammer" in lines[1] + lines[2]
    assert re.search(r" 0\.\d\d-[01]\.\d\d ", "\n".join(lines))


@pytest.fixture(scope="module")
def many_classes(tmp_path_factory):
    """12 classes, 8 dense workers: the detector's cost bound 300 × (2 P K²(K+1) + 4 M K²(K+1)) = 4.9e7."""
    data = simulate(n_tasks=400, n_workers=8, per_task=8, n_classes=12, seed=1).to_annotations()
    path = tmp_path_factory.mktemp("many") / "many.csv"
    pd.DataFrame({"task": data.task_names[data.task], "worker": data.worker_names[data.worker],
                  "label": np.asarray(data.classes, dtype=object)[data.label]}).to_csv(path, index=False)
    return path


def test_many_classes_over_the_budget_skip_the_detector_saying_how_to_force_it(runner, many_classes, monkeypatch):
    monkeypatch.setattr(spammers, "MAX_FIT_COST", 1e7)  # the pipeline reads it at call time
    skipped = invoke(runner, "workers", many_classes)
    ok(skipped)
    assert re.search(r"Note: spammer detector not run: its fit of 8 workers × 12 classes over 28 co-labelled pairs "
                     r"costs up to 4\.9e\+07 multiply-adds .*over the budget of 1e\+07: skipped, every worker with it "
                     r"\(--detector always runs it; --detector never leaves it out without this note\)", skipped.stderr)
    assert "Warning: spammer detection skipped" not in skipped.stderr and not SCAN_LINE.search(skipped.stderr)
    frame = pd.read_csv(io.StringIO(skipped.stdout), keep_default_na=False)
    assert (frame["spam_score"] == "").all()
    forced = invoke(runner, "workers", many_classes, "--detector", "always")
    ok(forced)
    assert "not run" not in forced.stderr and SCAN_LINE.search(forced.stderr)
    never = invoke(runner, "workers", many_classes, "--detector", "never")
    ok(never)
    assert "spammer detector" not in never.stderr and CHANCE_LINE.search(never.stderr)
    err = assert_one_error_line(invoke(runner, "workers", many_classes, "--detector", "sometimes"), 2)
    assert "--detector must be one of auto, always, never, got 'sometimes'" in err


def test_aggregate_takes_the_options_its_warning_names(runner, bluebird):
    # bluebird is dense (every pair shares its 108 tasks): 200 shared tasks leave nobody to judge
    result = invoke(runner, "aggregate", BLUEBIRD, "--drop-spammers", "--min-partners", "3", "--min-shared", "200")
    ok(result)
    assert "Warning: spammer detection skipped 39 of 39 workers with fewer than 3 co-labelling partners sharing " \
           "200+ tasks (--min-partners, --min-shared)" in result.stderr
    assert "spammers: 39 workers, 5 judged, 5 flagged as spammers (0 by covariance, 5 by chance, 0 by both)" \
        in result.stderr
    frame = pd.read_csv(io.StringIO(result.stdout), dtype={"task": str})
    assert len(frame) == bluebird.n_tasks


def test_exclude_workers_removes_a_hand_picked_list_and_keeps_every_task(runner, bluebird, tmp_path):
    bluebird_rows = pd.read_csv(BLUEBIRD, dtype=str)
    names = sorted(bluebird_rows.iloc[:, 1].unique())[:3]
    lonely = "lonely"  # a task only the excluded workers answered: it keeps its row
    extra = pd.DataFrame({c: v for c, v in zip(bluebird_rows.columns, ([lonely] * 3, names, ["1", "1", "0"]))})
    rows = pd.concat([bluebird_rows, extra], ignore_index=True)
    source = tmp_path / "answers.csv"
    rows.to_csv(source, index=False)
    listing = tmp_path / "out.txt"
    listing.write_text("\n".join(["  " + names[0] + "  ", "", *names[1:], "ghost-1", "ghost-2"]) + "\n")
    result = invoke(runner, "aggregate", source, "--exclude-workers", listing)
    ok(result)
    kept = rows[~rows.iloc[:, 1].isin(names)]
    assert (f"--exclude-workers: removed {len(names)} of 39 workers and their {len(rows) - len(kept):,} of "
            f"{len(rows):,} answers; every task keeps its row") in result.stderr
    assert f"--exclude-workers: 2 of the {len(names) + 2} ids in {listing} name no worker of the input " \
           "('ghost-1', 'ghost-2')" in result.stderr
    frame = pd.read_csv(io.StringIO(result.stdout), dtype=str)
    assert frame["task"].tolist() == list(dict.fromkeys(rows.iloc[:, 0]))  # every task, in input order
    assert lonely in set(frame["task"])
    pruned = tmp_path / "pruned.csv"
    kept.to_csv(pruned, index=False)
    direct = pd.read_csv(io.StringIO(invoke(runner, "aggregate", pruned).stdout), dtype=str)
    both = frame.merge(direct, on="task", suffixes=("", "_direct"))
    assert len(both) == len(direct) and (both["label"] == both["label_direct"]).all()


def test_exclude_workers_refusals(runner, tmp_path):
    everyone = tmp_path / "all.txt"
    everyone.write_text("\n".join(pd.read_csv(BLUEBIRD, dtype=str).iloc[:, 1].unique()) + "\n")
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "--exclude-workers", everyone), 1)
    assert "every worker with answers is excluded" in err
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "--exclude-workers", tmp_path / "none.txt"), 1)
    assert f"--exclude-workers {tmp_path / 'none.txt'}" in err
    err = assert_one_error_line(invoke(runner, "aggregate", BLUEBIRD, "--exclude-workers", "-"), 2)
    assert "not standard input" in err


def test_plot_with_class_names_mathtext_would_read(runner, tmp_path):
    pytest.importorskip("matplotlib")
    rows = pd.read_csv(BLUEBIRD, dtype=str)
    rows.iloc[:, 2] = rows.iloc[:, 2].map({"0": "$\\le 5$", "1": "$x$"})
    path = tmp_path / "tex.csv"
    rows.to_csv(path, index=False)
    result = invoke(runner, "workers", path, "--plot", tmp_path / "figures", "-o", tmp_path / "w.csv")
    ok(result)
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["answers_accuracy.png", "confusions.png"]


@pytest.mark.parametrize("column", ["gold_accuracy", "-gold_answers"])
def test_sort_by_a_gold_column_without_gold_is_refused_before_the_input_is_read(runner, tmp_path, column):
    # it was refused only after the fit and the detector had run; a missing input proves nothing was read
    err = assert_one_error_line(invoke(runner, "workers", tmp_path / "absent.csv", "--sort", column), 2)
    assert f"--sort {column}: no such column" in err and "gold_" not in err.split("the columns are")[1]


def test_exclude_workers_file_is_read_as_an_input_is_and_before_the_answers(runner, tmp_path):
    """The list was read with open(encoding='utf-8-sig') after the answers: a Latin-1 list failed at "byte 3"
    with no line once the whole input had been read, UTF-16 (Excel's "Unicode text") and .gz were refused, and
    its size was never checked against --max-memory."""
    import gzip

    listing = "39\r\n97\r\n"
    (tmp_path / "utf16.txt").write_bytes(listing.encode("utf-16"))  # with its byte-order mark
    (tmp_path / "list.txt.gz").write_bytes(gzip.compress(listing.encode()))
    for name in ("utf16.txt", "list.txt.gz"):
        result = invoke(runner, "aggregate", BLUEBIRD, "-m", "mv", "--exclude-workers", tmp_path / name)
        ok(result)
        assert "--exclude-workers: removed 2 of 39 workers and their 216 of 4,212 answers" in result.stderr
    latin = tmp_path / "latin.txt"
    latin.write_bytes("39\nJosé\n".encode("latin-1"))
    missing = tmp_path / "absent.csv"  # the answers: the list's error comes first, before they are read
    err = assert_one_error_line(invoke(runner, "aggregate", missing, "--exclude-workers", latin), 1)
    assert err == (f"Error: --exclude-workers {latin} line 2: not UTF-8 text (byte 0xE9 at column 4); it looks like "
                   "Latin-1/Windows-1252 -- save the file as UTF-8")
    big = tmp_path / "big.txt"
    big.write_text("worker-id\n" * 200_000)
    err = assert_one_error_line(invoke(runner, "aggregate", missing, "--exclude-workers", big, "--max-memory", "1M"), 1)
    assert f"from {big}" in err and "more than the limit of 1.00 MB" in err


def test_a_method_without_accuracy_and_detector_never_says_nothing_flags(runner):
    # it said "the detector alone flags" with the detector turned off
    result = invoke(runner, "workers", BLUEBIRD, "-m", "glad", "--detector", "never")
    ok(result)
    assert "near-chance rule: method 'glad' estimates no worker accuracy; nothing flags (--detector never)" \
        in result.stderr and "the detector alone flags" not in result.stderr
    assert "workers: 39 workers, 0 judged, 0 flagged as spammers" in result.stderr


@pytest.mark.parametrize("given, words", [
    (["--min-partners", "3"], "--min-partners tunes --drop-spammers"),
    (["--detector", "never", "--no-near-chance"], "--detector and --no-near-chance tune --drop-spammers"),
    (["--min-shared", "2"], "--min-shared tunes --drop-spammers"),
])
def test_aggregate_detector_options_without_drop_spammers_are_refused(runner, tmp_path, given, words):
    # they changed nothing, silently: a careless `aggregate --detector always` got the plain labels
    err = assert_one_error_line(invoke(runner, "aggregate", tmp_path / "absent.csv", *given), 2)
    assert err == f"Error: {words}; give --drop-spammers too (or `crowdagg workers` to see the flags)"


@pytest.mark.quick
def test_empty_columns_of_ds_clust_and_iwmv_are_said_and_why(runner):
    """The report left ds-clust's and iwmv's accuracy interval empty without a word, and said ds-clust "estimates
    no confusion matrices" when it estimates one per cluster of workers."""
    result = invoke(runner, "workers", BLUEBIRD, "-m", "ds-clust", "--max-iter", "5", "--detector", "never")
    ok(result)
    rows = pd.read_csv(io.StringIO(result.stdout))
    assert rows["accuracy_low"].isna().all() and rows["recall_0"].isna().all() and rows["accuracy"].notna().all()
    assert ("Note: method 'ds-clust' estimates no confusion matrices per worker (its workers share their cluster's "
            "confusion: aggregate --workers names each one's cluster)") in result.stderr
    assert ("Note: method 'ds-clust' gives no posterior without a worker's answers (its posteriors are not a product "
            "of per-worker confusions): accuracy_low, accuracy_high are left empty (methods that give them: wmv, ds, "
            "onecoin,") in result.stderr
    result = invoke(runner, "workers", BLUEBIRD, "-m", "iwmv", "--detector", "never")
    ok(result)
    rows = pd.read_csv(io.StringIO(result.stdout))
    assert rows["accuracy_low"].isna().all() and rows["recall_0"].notna().all()
    assert "Note: method 'iwmv' gives no posterior without a worker's answers" in result.stderr
    assert "estimates no confusion" not in result.stderr
    result = invoke(runner, "workers", BLUEBIRD, "-m", "ds", "--max-iter", "5", "--detector", "never")
    ok(result)
    assert pd.read_csv(io.StringIO(result.stdout))["accuracy_low"].notna().all() and "Note:" not in result.stderr
