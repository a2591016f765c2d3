"""``crowdagg predict``: the model saved by ``crowdagg train --save`` labels new rows, exactly as it was trained."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from tests.cli.test_train import N_EXTRA, SMALL, frame, invoke, ok, one_error, write_folder

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A folder, and one training run that saved its model: (folder, model path, train's stdout)."""
    folder = write_folder(tmp_path_factory.mktemp("crowd"), seed=11)
    model = folder.parent / "model.pt"
    result = ok(invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer", "--proba", *SMALL,
                       "--epochs", "10", "--save", model, "-q"))
    return folder, model, result.stdout


@pytest.mark.quick  # the module's one training run (300 tasks, 10 small epochs), then predict
def test_the_round_trip_gives_the_saved_models_exact_probabilities(saved):
    from crowdagg.learning.model_file import load

    folder, model, _ = saved
    result = ok(invoke("predict", "--model", model, "--features", folder / "feats.npy", "--tasks",
                       folder / "tasks.txt", "--proba", "--device", "cpu"))
    assert result.stderr == ""
    out = frame(result.stdout)
    assert list(out.columns) == ["task", "label", "confidence", "p_0", "p_1", "p_2"]
    assert out["task"].tolist() == (folder / "tasks.txt").read_text().split()
    p = load(str(model)).predict_proba(np.load(folder / "feats.npy"))
    assert np.array_equal(out[["p_0", "p_1", "p_2"]].to_numpy(), p)  # the text holds the exact floats
    assert out["label"].tolist() == [str(k) for k in p.argmax(axis=1)]
    assert np.array_equal(out["confidence"].to_numpy(), p.max(axis=1))
    again = ok(invoke("predict", "--model", model, "--features", folder / "feats.npy", "--tasks",
                      folder / "tasks.txt", "--proba"))
    assert again.stdout == result.stdout


def test_the_tasks_without_answers_get_what_training_gave_them(saved):
    """Training writes the classifier's prediction for a task nobody labelled; predict gives the same."""
    folder, model, train_out = saved
    trained = frame(train_out).set_index("task").iloc[-N_EXTRA:]
    predicted = frame(ok(invoke("predict", "--model", model, "--features", folder / "feats.npy", "--tasks",
                                folder / "tasks.txt", "--proba")).stdout).set_index("task").loc[trained.index]
    assert predicted["label"].tolist() == trained["label"].tolist()
    np.testing.assert_allclose(predicted[["p_0", "p_1", "p_2"]], trained[["p_0", "p_1", "p_2"]], rtol=0,
                               atol=1e-6)


def test_rows_without_ids_are_numbered_and_formats_follow_the_output(saved, tmp_path):
    folder, model, _ = saved
    x = np.load(folder / "feats.npy")[:7]
    np.save(tmp_path / "new.npy", x)
    out = frame(ok(invoke("predict", "--model", model, "--features", tmp_path / "new.npy")).stdout)
    assert out["task"].tolist() == [str(i) for i in range(7)] and list(out.columns) == ["task", "label", "confidence"]
    ok(invoke("predict", "--model", model, "--features", tmp_path / "new.npy", "-o", tmp_path / "p.parquet"))
    back = pd.read_parquet(tmp_path / "p.parquet")
    assert back["task"].tolist() == out["task"].tolist() and back["label"].tolist() == out["label"].tolist()
    np.savez(tmp_path / "new.npz", features=x, ids=np.array([f"n{i}" for i in range(7)]))
    jsonl = ok(invoke("predict", "--model", model, "--features", tmp_path / "new.npz", "-f", "jsonl")).stdout
    assert pd.read_json(io.StringIO(jsonl), lines=True)["task"].tolist() == [f"n{i}" for i in range(7)]


def test_features_of_another_shape_are_refused(saved, tmp_path):
    _, model, _ = saved
    np.save(tmp_path / "wide.npy", np.zeros((3, 9)))
    err = one_error(invoke("predict", "--model", model, "--features", tmp_path / "wide.npy"), 1)
    assert "trained on rows of shape (8,)" in err and "(9,)" in err


def test_a_file_that_is_not_a_model_is_refused(saved, tmp_path):
    folder, _, _ = saved
    for path in (folder / "labels.csv", folder / "feats.npy"):
        err = one_error(invoke("predict", "--model", path, "--features", folder / "feats.npy"), 1)
        assert "not a crowdagg model file" in err and "crowdagg train --save" in err
    err = one_error(invoke("predict", "--model", tmp_path / "none.pt", "--features", folder / "feats.npy"), 1)
    assert "no such file" in err


def test_an_output_that_is_an_input_is_refused(saved):
    folder, model, _ = saved
    before = model.read_bytes()
    err = one_error(invoke("predict", "--model", model, "--features", folder / "feats.npy", "-o", model), 2)
    assert "is also an input" in err
    assert model.read_bytes() == before
