"""``--threads N`` and ``CROWDAGG_THREADS``: the count the kernels use, the same bytes whatever it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crowdagg.cli import app
from crowdagg.engine import grid, local

ROOT = Path(__file__).resolve().parents[2]
BLUEBIRD = ROOT / "crowdagg" / "examples" / "bluebird_labels.csv"


@pytest.fixture
def runner(monkeypatch) -> CliRunner:
    monkeypatch.delenv("CROWDAGG_THREADS", raising=False)
    return CliRunner()


@pytest.fixture
def counts_seen(monkeypatch) -> list[int]:
    """Every thread count the engine was given during the test."""
    seen: list[int] = []
    real = local.threads.count

    def spy() -> int:
        seen.append(real())
        return seen[-1]

    monkeypatch.setattr(local.threads, "count", spy)
    return seen


def test_same_bytes_with_one_and_two_threads_on_a_real_dataset(runner, counts_seen, datasets_dir, tmp_path, monkeypatch):
    # trec (88k answers) is one block at the default grid; a finer grid gives it 17, so threads share the work
    monkeypatch.setattr(grid, "MIN_BLOCK_ANSWERS", 5_000)
    monkeypatch.setattr(grid, "ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    labels = datasets_dir / "trec" / "labels.csv"
    outputs = {}
    for how, args, env in [
        ("--threads 1", ["--threads", "1"], {}),
        ("--threads 2", ["--threads", "2"], {}),
        ("CROWDAGG_THREADS=2", [], {"CROWDAGG_THREADS": "2"}),
        ("flag over variable", ["--threads", "1"], {"CROWDAGG_THREADS": "2"}),
    ]:
        counts_seen.clear()
        workers = tmp_path / f"workers{len(outputs)}.csv"
        res = runner.invoke(app, ["aggregate", str(labels), "-m", "ds", "--proba", "--workers", str(workers), *args],
                            env=env)
        assert res.exit_code == 0, res.stderr
        assert counts_seen and set(counts_seen) == {1 if "1" in args else 2}, (how, counts_seen)
        outputs[how] = (res.stdout, workers.read_bytes())
    first = outputs["--threads 1"]
    assert first[0].startswith("task,label,confidence,n_answers,p_")
    for how, out in outputs.items():
        assert out == first, how


def test_same_bytes_with_one_and_two_threads_in_real_processes(datasets_dir, tmp_path):
    # two copies of trec under distinct task names: 177k real answers, two blocks of the engine's grid
    text = (datasets_dir / "trec" / "labels.csv").read_text().splitlines()
    rows = [f"{copy}-{line}" for copy in ("a", "b") for line in text[1:]]
    big = tmp_path / "trec2.csv"
    big.write_text("\n".join([text[0], *rows]) + "\n")
    from crowdagg import load_annotations
    from crowdagg.engine import LocalEngine

    assert LocalEngine(load_annotations(big)).n_blocks == 2
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    outs = []
    for args, extra in [(["--threads", "1"], {}), (["--threads", "2"], {}), ([], {"CROWDAGG_THREADS": "2"})]:
        proc = subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", str(big), "-m", "ds", "--proba", *args],
                              capture_output=True, timeout=600, env={**env, **extra}, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr.decode()
        outs.append(proc.stdout)
    assert outs[0].startswith(b"task,label,confidence,n_answers,p_")
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("args, env, message", [
    (["--threads", "0"], {}, "Error: --threads must be a whole number >= 1, got '0'"),
    (["--threads", "two"], {}, "Error: --threads must be a whole number >= 1, got 'two'"),
    (["--threads", ""], {}, "Error: --threads must be a whole number >= 1, got ''"),
    ([], {"CROWDAGG_THREADS": "0"}, "Error: CROWDAGG_THREADS must be a whole number >= 1, got '0'"),
    ([], {"CROWDAGG_THREADS": "all"}, "Error: CROWDAGG_THREADS must be a whole number >= 1, got 'all'"),
])
def test_a_bad_count_is_one_usage_error_naming_its_source_before_reading(runner, args, env, message):
    res = runner.invoke(app, ["aggregate", "no-such-file.csv", *args], env=env)  # the input is never reached
    assert res.exit_code == 2
    assert res.stderr == message + "\n"
    assert res.stdout == ""


def test_the_flag_wins_over_a_bad_variable(runner, counts_seen):
    res = runner.invoke(app, ["aggregate", str(BLUEBIRD), "--threads", "1"], env={"CROWDAGG_THREADS": "junk"})
    assert res.exit_code == 0, res.stderr
    assert res.stdout == runner.invoke(app, ["aggregate", str(BLUEBIRD)]).stdout


def test_help_documents_the_option(runner):
    res = runner.invoke(app, ["aggregate", "--help"])
    assert "--threads N" in res.stdout and "CROWDAGG_THREADS" in res.stdout


def test_the_flag_covers_every_file_the_run_reads(runner, tmp_path, monkeypatch):
    """``--threads 1`` covered the answers and the fit only: --truth, --gold and --init-workers were read
    outside it, so a bad CROWDAGG_THREADS failed the run the flag should have saved, and Arrow read them on
    several threads."""
    import pyarrow.csv as pcsv

    truth = ROOT / "crowdagg" / "examples" / "bluebird_truth.csv"
    gold = tmp_path / "gold.csv"
    gold.write_text("\n".join(truth.read_text().splitlines()[:11]) + "\n")  # 10 tasks
    model = tmp_path / "m.json"
    assert runner.invoke(app, ["aggregate", str(BLUEBIRD), "-m", "ds", "-o", str(tmp_path / "a.csv"),
                               "--save-workers", str(model)]).exit_code == 0
    seen: list[bool] = []
    real = pcsv.read_csv

    def spy(*args, **kwargs):
        seen.append(kwargs["read_options"].use_threads)
        return real(*args, **kwargs)

    monkeypatch.setattr(pcsv, "read_csv", spy)
    res = runner.invoke(app, ["aggregate", str(BLUEBIRD), "-m", "ds", "--threads", "1", "--truth", str(truth),
                              "--gold", str(gold), "--init-workers", str(model)], env={"CROWDAGG_THREADS": "junk"})
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("task,label,confidence\n") and "accuracy" in res.stderr
    assert len(seen) == 3 and not any(seen)  # the answers, the truth, the gold: each on one thread


@pytest.mark.parametrize("command", [["aggregate", "no-such-file.csv"], ["workers", "no-such-file.csv"],
                                     ["predict", "--model", "no-model.pt", "--features", "no.npy"],
                                     ["train", "--features", "no.npy", "--labels", "no.csv", "-m", "crowdlayer"]])
@pytest.mark.parametrize("value", [str(2**63), "100000"])
def test_a_huge_count_is_one_usage_error_on_every_command_before_reading(runner, command, value):
    """``train --threads 2**63`` was "unexpected failure: Overflow when unpacking long long"; 100000 died out of
    memory: every command refuses it up front, through the one check of a count."""
    from crowdagg.core.threads import most

    if command[0] in ("train", "predict"):
        pytest.importorskip("torch")
    res = runner.invoke(app, [*command, "--threads", value])
    assert res.exit_code == 2, res.stderr
    assert res.stderr.startswith(f"Error: --threads must be at most {most():,} (4 per core of this machine's ")
    assert res.stderr.endswith(f"got {value!r}\n") and res.stdout == ""
