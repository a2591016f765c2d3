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


# --------------------------------------------------------------------------- features matched by name
@pytest.fixture(scope="module")
def named(tmp_path_factory):
    """A model trained on a CSV table of features f0..f7 (by name): (folder, model path, the features frame)."""
    folder = write_folder(tmp_path_factory.mktemp("named"), seed=5)
    x = np.load(folder / "feats.npy")
    table = pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])])
    table.insert(0, "task", (folder / "tasks.txt").read_text().split())
    table.to_csv(folder / "feats.csv", index=False)
    model = folder / "model.safetensors"
    ok(invoke("train", "--features", folder / "feats.csv", "--labels", folder / "labels.csv", "--method",
              "crowdlayer", *SMALL, "--save", model, "-q"))
    return folder, model, table


def test_the_model_keeps_the_names_of_the_features_it_was_trained_on(named):
    from crowdagg.learning.model_file import load

    _, model, table = named
    assert load(model).feature_names == tuple(f"f{j}" for j in range(8))


def test_columns_in_another_order_are_matched_by_name(named, tmp_path):
    """A Parquet/CSV features file with its columns in another order (f7..f0) was fed by position: predictions
    changed without a word."""
    folder, model, table = named
    expected = ok(invoke("predict", "--model", model, "--features", folder / "feats.csv", "--proba")).stdout
    reordered = table[["task", *[f"f{j}" for j in reversed(range(8))]]]
    reordered.to_parquet(tmp_path / "reversed.parquet")
    reordered.to_csv(tmp_path / "reversed.csv", index=False)
    for path in (tmp_path / "reversed.parquet", tmp_path / "reversed.csv"):
        result = ok(invoke("predict", "--model", model, "--features", path, "--proba"))
        assert result.stdout == expected and result.stderr == ""
    by_position = np.ascontiguousarray(reordered.drop(columns="task").to_numpy(np.float32))
    np.save(tmp_path / "reversed.npy", by_position)  # an array has no names: its columns go in order
    from crowdagg.learning.model_file import load

    moved = load(model).predict_proba(by_position).argmax(axis=1)
    assert (moved != frame(expected)["label"].astype(int).to_numpy()).any()  # what by position used to give


@pytest.mark.parametrize("columns, words", [
    (["f0", "f1", "f2", "f3", "f4", "f5", "f6"], "1 the model was trained on are missing: 'f7'"),
    (["f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "g"], "1 the model does not know: 'g'"),
    (["f0", "f1", "f2", "f3", "f4", "f5", "f6", "x7"], "1 the model was trained on are missing: 'f7'; 1 the model "
     "does not know: 'x7'"),
])
def test_missing_or_unknown_columns_are_refused_by_name(named, tmp_path, columns, words):
    folder, model, table = named
    renamed = table.drop(columns="task").iloc[:, :len(columns)].copy()
    if len(columns) > 8:
        renamed["extra"] = 0.0
    renamed.columns = columns
    renamed.insert(0, "task", table["task"])
    renamed.to_parquet(tmp_path / "f.parquet")
    err = one_error(invoke("predict", "--model", model, "--features", tmp_path / "f.parquet"), 1)
    assert err.startswith(f"Error: features {tmp_path / 'f.parquet'}: the columns do not match the features the "
                          "model was trained on by name (")
    assert words in err and "the model's are 'f0', 'f1', 'f2', 'f3', 'f4' ... (8 in all)" in err


def test_an_array_for_a_named_model_and_rows_without_ids_are_said_on_stderr(named, tmp_path):
    """Rows without ids were named 0..N-1 silently; an array's columns are taken by position, which stderr says
    for a model that knows its features' names; an .npz's ids name the rows, as documented."""
    folder, model, table = named
    x = table.drop(columns="task").to_numpy(np.float32)[:6]
    np.save(tmp_path / "x.npy", x)
    result = ok(invoke("predict", "--model", model, "--features", tmp_path / "x.npy"))
    assert frame(result.stdout)["task"].tolist() == [str(i) for i in range(6)]
    assert result.stderr.splitlines() == [
        f"predict: features {tmp_path / 'x.npy'} have no task ids (no --tasks, not an .npz with 'ids' or a table): "
        "the rows are named by their number, 0 to 5",
        f"predict: features {tmp_path / 'x.npy'} have no column names: their 8 columns are taken in the order of "
        "the model's (f0, f1, f2, f3, f4, ... (8 in all))",
    ]
    assert ok(invoke("predict", "--model", model, "--features", tmp_path / "x.npy", "-q")).stderr == ""
    ids = table["task"].to_numpy()[:6].astype(str)
    np.savez(tmp_path / "x.npz", features=x, ids=ids)
    result = ok(invoke("predict", "--model", model, "--features", tmp_path / "x.npz"))
    assert frame(result.stdout)["task"].tolist() == ids.tolist()
    assert result.stderr.splitlines() == [
        f"predict: features {tmp_path / 'x.npz'} have no column names: their 8 columns are taken in the order of "
        "the model's (f0, f1, f2, f3, f4, ... (8 in all))"]
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    result = ok(invoke("predict", "--model", model, "--features", tmp_path / "x.npy", "--tasks", tmp_path / "ids.txt"))
    assert frame(result.stdout)["task"].tolist() == ids.tolist() and "no task ids" not in result.stderr


def test_a_model_trained_on_an_array_says_nothing_of_columns(saved, tmp_path):
    folder, model, _ = saved
    np.save(tmp_path / "x.npy", np.load(folder / "feats.npy")[:3])
    (tmp_path / "ids.txt").write_text("a\nb\nc\n")
    result = ok(invoke("predict", "--model", model, "--features", tmp_path / "x.npy", "--tasks", tmp_path / "ids.txt"))
    assert result.stderr == ""


def test_a_table_for_a_model_without_feature_names_is_said_to_go_by_position(saved, tmp_path):
    """A model saved without names (trained on an array, or before models kept them) took a table's columns by
    position without a word: a reordered table changed the predictions silently."""
    folder, model, _ = saved
    x = np.load(folder / "feats.npy")[:3]
    table = pd.DataFrame(x[:, ::-1], columns=[f"g{j}" for j in reversed(range(x.shape[1]))])
    table.insert(0, "task", ["a", "b", "c"])
    table.to_csv(tmp_path / "x.csv", index=False)
    result = ok(invoke("predict", "--model", model, "--features", tmp_path / "x.csv"))
    assert result.stderr.splitlines() == [
        f"predict: the model has no feature names (saved before models kept them): the {x.shape[1]} columns of "
        f"features {tmp_path / 'x.csv'} are taken by position, in the table's order (g{x.shape[1] - 1}, "
        f"g{x.shape[1] - 2}, g{x.shape[1] - 3}, g{x.shape[1] - 4}, g{x.shape[1] - 5}, ... ({x.shape[1]} in all)), "
        "not matched by name"]
    assert frame(result.stdout)["task"].tolist() == ["a", "b", "c"]
    assert ok(invoke("predict", "--model", model, "--features", tmp_path / "x.csv", "-q")).stderr == ""


def test_parquet_column_names_are_stripped_as_a_csv_header_is(named, tmp_path):
    """A CSV header's names are stripped (`task, f0, f1` gives f0), a Parquet file's were not: the same table
    saved as Parquet with ' f0' was refused by a model trained on the CSV."""
    folder, model, table = named
    expected = ok(invoke("predict", "--model", model, "--features", folder / "feats.csv")).stdout
    padded = table.rename(columns={c: f" {c} " for c in table.columns if c != "task"})
    padded.to_parquet(tmp_path / "padded.parquet")
    assert ok(invoke("predict", "--model", model, "--features", tmp_path / "padded.parquet")).stdout == expected
    clash = table.rename(columns={"f1": " f0"})
    clash.to_parquet(tmp_path / "clash.parquet")
    err = one_error(invoke("predict", "--model", model, "--features", tmp_path / "clash.parquet"), 1)
    assert "the column 'f0' appears twice (columns 2 and 3)" in err
