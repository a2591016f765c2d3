"""``crowdagg simulate --features``: Gaussian features for ``crowdagg train``, beside an unchanged crowd."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app

CROWD = ["--tasks", "300", "--workers", "12", "--classes", "4", "--per-task", "3", "--seed", "5"]
FILES = ("labels.csv", "truth.csv", "confusion.csv", "workers.csv")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args):
    return runner.invoke(app, [str(a) for a in args])


def ok(result) -> None:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"


def test_features_beside_an_unchanged_crowd(runner, tmp_path):
    ok(invoke(runner, "simulate", *CROWD, "-o", tmp_path / "plain"))
    ok(made := invoke(runner, "simulate", *CROWD, "--features", tmp_path / "sim" / "features.npy",
                      "--feature-dim", 8, "--separation", 6, "-o", tmp_path / "sim"))
    assert "features.npy" in made.stderr and "tasks.txt" in made.stderr
    for name in FILES:  # every existing output byte-identical
        assert (tmp_path / "sim" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name
    x = np.load(tmp_path / "sim" / "features.npy", allow_pickle=False)
    assert x.shape == (300, 8) and x.dtype == np.float32
    tasks = (tmp_path / "sim" / "tasks.txt").read_text().splitlines()
    assert tasks == [f"t{i}" for i in range(300)]
    truth = pd.read_csv(tmp_path / "sim" / "truth.csv", dtype=str).set_index("task")["label"].loc[tasks].to_numpy()
    means = np.stack([x[truth == c].mean(axis=0) for c in ("0", "1", "2", "3")])
    gaps = np.linalg.norm(means[:, None] - means[None], axis=2)[np.triu_indices(4, 1)]
    np.testing.assert_allclose(gaps, 6.0, atol=0.8)  # the rows are their task's class: means `separation` apart
    # the nearest class mean gives the truth back (Bayes error ~0.1% at separation 6)
    nearest = np.argmin(np.linalg.norm(x[:, None] - means[None], axis=2), axis=1).astype(str)
    assert (nearest == truth).mean() > 0.97


def test_same_seed_same_features(runner, tmp_path):
    for d in ("a", "b"):
        ok(invoke(runner, "simulate", *CROWD, "--features", tmp_path / d / "f.npy", "-o", tmp_path / d))
    assert (tmp_path / "a" / "f.npy").read_bytes() == (tmp_path / "b" / "f.npy").read_bytes()
    assert np.load(tmp_path / "a" / "f.npy").shape == (300, 64)  # the default dimension


def test_features_elsewhere_get_their_own_tasks_file(runner, tmp_path):
    ok(invoke(runner, "simulate", *CROWD, "--features", tmp_path / "feats" / "x.npy", "-o", tmp_path / "sim"))
    assert sorted(p.name for p in (tmp_path / "feats").iterdir()) == ["tasks.txt", "x.npy"]
    assert not (tmp_path / "sim" / "tasks.txt").exists()
    # the same run again: the tasks file there is this crowd's, rewritten
    ok(invoke(runner, "simulate", *CROWD, "--features", tmp_path / "feats" / "x.npy", "-o", tmp_path / "sim"))


def test_a_foreign_tasks_file_is_refused_and_nothing_written(runner, tmp_path):
    (tmp_path / "feats").mkdir()
    (tmp_path / "feats" / "tasks.txt").write_text("a\nb\n")
    result = invoke(runner, "simulate", *CROWD, "--features", tmp_path / "feats" / "x.npy", "-o", tmp_path / "sim")
    assert result.exit_code == 2 and "tasks.txt exists and lists other tasks" in result.stderr
    assert (tmp_path / "feats" / "tasks.txt").read_text() == "a\nb\n"
    assert not (tmp_path / "sim").exists() and not (tmp_path / "feats" / "x.npy").exists()


@pytest.mark.parametrize("args,needle", [
    (["--features", "f.csv"], "--features must name a .npy file"),
    (["--feature-dim", "8"], "--feature-dim shapes the features: give --features"),
    (["--separation", "2"], "--separation shapes the features: give --features"),
    (["--features", "f.npy", "--feature-dim", "2"], "--feature-dim=2: 4 classes need at least 4"),
    (["--features", "f.npy", "--separation", "-1"], "--separation"),
    (["--features", ""], "--features is empty"),
])
def test_bad_feature_options(runner, tmp_path, args, needle):
    args = [str(tmp_path / a) if a.endswith((".npy", ".csv")) else a for a in args]
    result = invoke(runner, "simulate", *CROWD, *args, "-o", tmp_path / "sim")
    assert result.exit_code == 2, result.stderr
    assert needle in result.stderr and result.stderr.startswith("Error: ")
    assert not (tmp_path / "sim").exists()


def test_then_train(runner, tmp_path):
    """The design card's pipeline: simulate with features, then train on the folder's files."""
    pytest.importorskip("torch")
    if "train" not in [c.name for c in app.registered_commands]:
        pytest.skip("the train command is not in this build")
    ok(invoke(runner, "simulate", *CROWD, "--features", tmp_path / "sim" / "features.npy", "--feature-dim", 8,
              "--separation", 5, "-o", tmp_path / "sim"))
    result = invoke(runner, "train", "--features", tmp_path / "sim" / "features.npy", "--method", "raykar",
                    "--model", "linear", "--epochs", 10, "--truth", tmp_path / "sim" / "truth.csv")
    ok(result)
    out = pd.read_csv(io.StringIO(result.stdout), dtype=str)
    assert len(out) == 300
