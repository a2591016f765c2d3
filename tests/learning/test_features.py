"""The features file of ``crowdagg train``/``predict``: every format read, every bad file refused in plain words."""

from __future__ import annotations

import gzip
import sys

import numpy as np
import pandas as pd
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import DataError, ResourceError, UsageError
from crowdagg.learning.features import Features, align, read_features, read_task_ids

X = np.arange(12, dtype=np.float64).reshape(4, 3) / 7.0
IDS = ["t0", "t1", "t2", "t3"]


def _tasks(tmp_path, ids=IDS, name="tasks.txt"):
    path = tmp_path / name
    path.write_text("\n".join(ids) + "\n")
    return str(path)


def _frame(x=X, ids=IDS):
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])])
    frame.insert(0, "task", ids)
    return frame


def _refused(exc, match, *args, **kwargs):
    with pytest.raises(exc, match=match) as info:
        read_features(*args, **kwargs)
    return str(info.value)


# --------------------------------------------------------------------------- every format
def test_npy_vectors_with_a_tasks_file(tmp_path):
    np.save(tmp_path / "f.npy", X)
    feats = read_features(str(tmp_path / "f.npy"), tasks_path=_tasks(tmp_path))
    assert feats.x.dtype == np.float32 and feats.x.shape == (4, 3)
    np.testing.assert_array_equal(feats.x, X.astype(np.float32))
    assert feats.ids.tolist() == IDS and feats.source == str(tmp_path / "f.npy")


def test_npy_without_ids_numbers_its_rows(tmp_path):
    np.save(tmp_path / "f.npy", X.astype(np.float32))
    feats = read_features(str(tmp_path / "f.npy"))
    assert feats.ids is None and feats.row_names().tolist() == ["0", "1", "2", "3"]


def test_npy_images(tmp_path):
    images = np.random.default_rng(0).normal(size=(5, 1, 6, 6))
    np.save(tmp_path / "im.npy", images)
    feats = read_features(str(tmp_path / "im.npy"))
    assert feats.x.shape == (5, 1, 6, 6) and feats.x.dtype == np.float32


@pytest.mark.parametrize(("arrays", "ids"), [
    ({"features": X, "ids": np.array(IDS)}, IDS),
    ({"x": X, "tasks": np.array([10, 11, 12, 13])}, ["10", "11", "12", "13"]),
    ({"anything": X}, None),
    ({"mine": X, "ids": np.array(IDS)}, IDS),
])
def test_npz(tmp_path, arrays, ids):
    np.savez(tmp_path / "f.npz", **arrays)
    feats = read_features(str(tmp_path / "f.npz"))
    np.testing.assert_array_equal(feats.x, X.astype(np.float32))
    assert (None if feats.ids is None else feats.ids.tolist()) == ids


def test_npz_ids_and_an_agreeing_tasks_file(tmp_path):
    np.savez_compressed(tmp_path / "f.npz", features=X, ids=np.array(IDS))
    assert read_features(str(tmp_path / "f.npz"), tasks_path=_tasks(tmp_path)).ids.tolist() == IDS
    text = _refused(DataError, "line 2 names 'tX'", str(tmp_path / "f.npz"),
                    tasks_path=_tasks(tmp_path, ["t0", "tX", "t2", "t3"], "other.txt"))
    assert "row 1" in text and "'t1'" in text


def test_parquet_and_its_id_column(tmp_path):
    _frame().to_parquet(tmp_path / "f.parquet")
    feats = read_features(str(tmp_path / "f.parquet"))
    assert feats.ids.tolist() == IDS and feats.x.shape == (4, 3)
    np.testing.assert_allclose(feats.x, X, rtol=1e-6)
    frame = _frame().rename(columns={"task": "item"})
    frame["item"] = [7, 8, 9, 10]
    frame.to_parquet(tmp_path / "g.pq")
    assert read_features(str(tmp_path / "g.pq"), id_col="item").ids.tolist() == ["7", "8", "9", "10"]


@pytest.mark.parametrize(("name", "sep"), [("f.csv", ","), ("f.tsv", "\t"), ("f.csv.gz", ",")])
def test_text_tables(tmp_path, name, sep):
    text = _frame().to_csv(index=False, sep=sep)
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    feats = read_features(str(path))
    assert feats.ids.tolist() == IDS
    np.testing.assert_allclose(feats.x, X, rtol=1e-6)


# --------------------------------------------------------------------------- bad files
class _Boom:
    """Unpickling this creates a file: proof that a pickled array was (or was not) unpickled."""

    target = ""

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_a_pickled_object_array_is_refused_and_never_unpickled(tmp_path):
    _Boom.target = str(tmp_path / "was-unpickled")
    arr = np.empty((2, 2), dtype=object)
    arr[:] = _Boom()
    np.save(tmp_path / "evil.npy", arr, allow_pickle=True)
    text = _refused(DataError, "Python objects", str(tmp_path / "evil.npy"))
    assert "never unpickled" in text and "evil.npy" in text
    np.savez(tmp_path / "evil.npz", features=X, ids=np.array(IDS, dtype=object))
    _refused(DataError, "pickled", str(tmp_path / "evil.npz"))
    assert not (tmp_path / "was-unpickled").exists()


@pytest.mark.parametrize(("array", "match"), [
    (np.arange(5.0), r"is 1-D \(shape \(5,\)\)"),
    (np.zeros((2, 3, 4)), "has 3 dimensions"),
    (np.zeros((2, 1, 1, 1, 1)), "has 5 dimensions"),
    (np.zeros((0, 3)), "holds no rows"),
    (np.zeros((3, 0)), "rows of no features"),
    (np.array([["a", "b"]]), "not numbers"),
    (np.zeros((2, 2), dtype=complex), "not numbers"),
])
def test_npy_of_the_wrong_shape_or_kind(tmp_path, array, match):
    np.save(tmp_path / "f.npy", array)
    assert "f.npy" in _refused(DataError, match, str(tmp_path / "f.npy"))


def test_nan_and_inf_name_the_first_bad_row_and_column(tmp_path):
    x = X.copy()
    x[2, 1] = np.nan
    x[3, 0] = np.inf
    np.save(tmp_path / "f.npy", x)
    text = _refused(DataError, r"row 2 \(task 't2'\), feature 1 is nan", str(tmp_path / "f.npy"),
                    tasks_path=_tasks(tmp_path))
    assert "2 rows hold NaN or inf" in text
    frame = _frame()
    frame.loc[1, "f2"] = np.inf
    frame.to_csv(tmp_path / "f.csv", index=False)
    _refused(DataError, r"line 3 \(task 't1'\), column 'f2' is inf", str(tmp_path / "f.csv"))
    images = np.zeros((2, 1, 2, 2))
    images[1, 0, 1, 0] = -np.inf
    np.save(tmp_path / "im.npy", images)
    _refused(DataError, r"row 1, element \(0, 1, 0\) is -inf", str(tmp_path / "im.npy"))


@pytest.mark.parametrize(("ids", "match"), [
    (IDS[:3], "3 ids for the 4 rows"),
    (IDS + ["t4"], "5 ids for the 4 rows"),
    (["t0", "t1", "t0", "t3"], r"task 't0' appears twice \(lines 1 and 3\)"),
    (["t0", "", "t2", "t3"], "line 2 has a blank task id"),
])
def test_a_tasks_file_that_does_not_fit(tmp_path, ids, match):
    np.save(tmp_path / "f.npy", X)
    _refused(DataError, match, str(tmp_path / "f.npy"), tasks_path=_tasks(tmp_path, ids))


def test_tasks_files_empty_missing_or_binary(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(DataError, match="empty.txt: is empty"):
        read_task_ids(str(tmp_path / "empty.txt"))
    with pytest.raises(DataError, match="no such file"):
        read_task_ids(str(tmp_path / "nope.txt"))
    (tmp_path / "bin.txt").write_bytes(b"a\0b\n")
    with pytest.raises(DataError, match="not a text file"):
        read_task_ids(str(tmp_path / "bin.txt"))


@pytest.mark.parametrize(("text", "match"), [
    ("task,f0,f1\nt0,1,2\nt1,abc,3\n", r"column 'f0' is not numeric: line 3 holds 'abc'"),
    ("task,f0,f1\nt0,1,2\nt1,,3\n", r"column 'f0' is not numeric: line 3 holds ''"),
    ("task,f0\nt0,1\nt0,2\n", r"task 't0' appears twice \(lines 2 and 3\)"),
    ("task,f0\nt0,1\n ,2\n", "line 3: the id column 'task' is blank"),
    ("task,f0\n", "holds no rows"),
    ("", "is empty"),
    ("task\nt0\n", "no feature columns"),
    ("item,f0\nt0,1\n", r"no 'task' column .*columns: 'item', 'f0'.*--id-col"),
    ("task,f0\nt0,1,2,3\n", "cannot be read as CSV"),
])
def test_bad_csv(tmp_path, text, match):
    (tmp_path / "f.csv").write_text(text)
    exc = UsageError if "--id-col" in match else DataError
    assert "f.csv" in _refused(exc, match, str(tmp_path / "f.csv"))


def test_bad_parquet(tmp_path):
    frame = _frame()
    frame["f1"] = ["a", "b", "c", "d"]
    frame.to_parquet(tmp_path / "s.parquet")
    _refused(DataError, r"column 'f1' is not numeric \(it holds text\)", str(tmp_path / "s.parquet"))
    frame = _frame()
    frame["f0"] = [1.0, None, 2.0, 3.0]
    frame.to_parquet(tmp_path / "n.parquet")
    _refused(DataError, r"row 1, column 'f0' is (empty \(null\)|nan)", str(tmp_path / "n.parquet"))
    _refused(UsageError, "--id-col nope: .* has no such column", str(tmp_path / "n.parquet"), id_col="nope")


@pytest.mark.parametrize(("name", "content", "match"), [
    ("f.npy", b"task,f0\nt0,1\n", "is not a .npy file"),
    ("f.npy", np.lib.format.magic(1, 0) + b"\x10\x00{'descr': '<f8',", "is not a .npy file"),
    ("f.npz", b"not a zip", "is not a .npz file"),
    ("f.parquet", b"task,f0\nt0,1\n", "is not a Parquet file"),
    ("f.csv", b"PAR1\x00\x00\x15\x04", "not a text CSV"),
    ("f.csv.gz", b"task,f0\nt0,1\n", "not gzip-compressed"),
])
def test_a_file_that_is_not_what_its_extension_says(tmp_path, name, content, match):
    (tmp_path / name).write_bytes(content)
    assert name in _refused(DataError, match, str(tmp_path / name))


def test_a_truncated_npy(tmp_path):
    np.save(tmp_path / "f.npy", np.zeros((100, 10)))
    data = (tmp_path / "f.npy").read_bytes()
    (tmp_path / "f.npy").write_bytes(data[: len(data) // 2])
    _refused(DataError, "cannot be read as a .npy array", str(tmp_path / "f.npy"))


def test_npz_that_says_nothing_of_which_array(tmp_path):
    np.savez(tmp_path / "f.npz", a=X, b=X)
    _refused(DataError, "holds the arrays 'a', 'b'; name the features 'features'", str(tmp_path / "f.npz"))
    np.savez(tmp_path / "g.npz", features=X, ids=np.array(IDS[:3]))
    _refused(DataError, r"3 ids \('ids'\) for 4 rows", str(tmp_path / "g.npz"))
    np.savez(tmp_path / "h.npz", features=X, ids=np.ones((4, 2)))
    _refused(DataError, "ids must be a 1-D array of strings or integers", str(tmp_path / "h.npz"))


def test_unknown_extension_missing_file_and_misplaced_id_col(tmp_path):
    _refused(UsageError, r"unknown extension '\.xlsx'", str(tmp_path / "f.xlsx"))
    _refused(UsageError, r"unknown extension '\.npy\.gz'", str(tmp_path / "f.npy.gz"))
    _refused(DataError, "no such file", str(tmp_path / "f.npy"))
    _refused(UsageError, "--id-col applies to a Parquet/CSV/TSV", str(tmp_path / "f.npy"), id_col="task")


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    np.save(tmp_path / "f.npy", np.zeros((1000, 100)))
    text = _refused(ResourceError, "more than the limit", str(tmp_path / "f.npy"), max_memory="100K")
    assert "1,000 × 100 float64" in text
    _frame().to_csv(tmp_path / "f.csv", index=False)
    _refused(ResourceError, "more than the limit", str(tmp_path / "f.csv"), max_memory="100")


def test_the_header_alone_decides_a_huge_npy(tmp_path, monkeypatch):
    """A 10^12-element array announced by its header is refused without np.load ever being called."""
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
    with open(tmp_path / "big.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("np.load was called"))
    _refused(ResourceError, "1,000,000 × 1,000,000", str(tmp_path / "big.npy"))


# --------------------------------------------------------------------------- alignment
def _answers(tasks):
    return AnnotationSet.from_names(tasks, ["w1"] * len(tasks), ["a", "b"] * (len(tasks) // 2) + ["a"] * (len(tasks) % 2))


def test_align_orders_rows_by_task_and_appends_feature_only_tasks():
    feats = Features(np.array(IDS, dtype=object), X.astype(np.float32), "f.npy")
    data = _answers(["t2", "t0"])
    out, x = align(data, feats)
    assert out.task_names.tolist() == ["t2", "t0", "t1", "t3"]
    np.testing.assert_array_equal(x, X.astype(np.float32)[[2, 0, 1, 3]])
    assert out.answers_per_task.tolist() == [1, 1, 0, 0]
    np.testing.assert_array_equal(out.task, data.task)
    same = _answers(IDS)
    out2, x2 = align(same, feats)
    assert out2 is same and x2 is feats.x  # already in order: neither copied


def test_align_names_the_answered_tasks_without_features():
    feats = Features(np.array(IDS, dtype=object), X.astype(np.float32), "f.npy")
    with pytest.raises(DataError, match=r"7 of the 9 answered tasks have no row in features f.npy: 'u0', 'u1', 'u2', "
                                        r"'u3', 'u4' and 2 more"):
        align(_answers(["t0", "t1", *(f"u{i}" for i in range(7))]), feats)


def test_align_refuses_features_without_ids():
    with pytest.raises(UsageError, match="have no task ids.*give --tasks"):
        align(_answers(["t0"]), Features(None, X.astype(np.float32), "f.npy"))


def test_reading_features_imports_no_torch(tmp_path):
    import subprocess

    np.save(tmp_path / "f.npy", X)
    code = ("import sys\nfrom crowdagg.learning.features import read_features, align\n"
            f"read_features({str(tmp_path / 'f.npy')!r})\nprint('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_has_own_ids(tmp_path):
    from crowdagg.learning.features import has_own_ids

    np.save(tmp_path / "a.npy", X)
    np.savez(tmp_path / "b.npz", features=X, ids=np.array(IDS))
    np.savez(tmp_path / "c.npz", features=X)
    (tmp_path / "d.npz").write_bytes(b"junk")
    assert [has_own_ids(str(tmp_path / n)) for n in ("a.npy", "b.npz", "c.npz", "d.npz", "e.csv", "f.parquet")] == \
        [False, True, False, False, True, True]


# --------------------------------------------------------------------------- hostile files (regressions)
def _npy_bytes(array):
    import io

    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


@pytest.mark.parametrize(("edit", "match"), [
    (lambda b: b.replace(b"(4, 3)", b"(4, 1)"), r"holds 96 bytes of data where its header's 4 × 1 float64 array needs "
                                                r"32 \(its header does not describe its data\)"),
    (lambda b: b + b"\0" * 8, r"holds 104 bytes .* needs 96 \(its header does not describe its data\)"),
    (lambda b: b.replace(b"(4, 3)", b"(6, 3)"), r"holds 96 bytes .* 6 × 3 float64 array needs 144 \(truncated\?\)"),
    (lambda b: b.replace(b"(4, 3)", b"(-4, 3)"), r"is not a .npy file \(its header gives the shape \(-4, 3\)\)"),
])
def test_an_npy_whose_header_lies_about_its_data_is_refused(tmp_path, edit, match):
    """numpy reads the prefix a smaller header announces and ignores the rest: such a file was read as other
    features (a (4, 1) array of the first 4 values of a (4, 3) one), and bytes after the array were ignored."""
    (tmp_path / "f.npy").write_bytes(edit(_npy_bytes(X)))
    _refused(DataError, match, str(tmp_path / "f.npy"))
    import zipfile

    with zipfile.ZipFile(tmp_path / "f.npz", "w") as zf:
        zf.writestr("features.npy", edit(_npy_bytes(X)))
    _refused(DataError, match, str(tmp_path / "f.npz"))


def test_a_fortran_order_npy_and_a_fifo_are_read(tmp_path):
    """The array is read through one handle after its header: a FIFO (a process substitution) works."""
    import os
    import threading

    np.save(tmp_path / "f.npy", np.asfortranarray(X))
    np.testing.assert_array_equal(read_features(str(tmp_path / "f.npy")).x, X.astype(np.float32))
    if not hasattr(os, "mkfifo"):
        return
    os.mkfifo(tmp_path / "p.npy")
    data = _npy_bytes(X)
    writer = threading.Thread(target=lambda: (tmp_path / "p.npy").write_bytes(data))
    writer.start()
    try:
        np.testing.assert_array_equal(read_features(str(tmp_path / "p.npy")).x, X.astype(np.float32))
    finally:
        writer.join(timeout=10)


def test_npz_errors_are_worded_once_and_keep_their_kind(tmp_path):
    """A refusal raised while the archive is open was wrapped in "cannot be read as a .npz archive (features ...:
    ...)", naming the file twice, and a memory refusal lost its kind."""
    np.savez(tmp_path / "f.npz", a=X, b=X)
    text = _refused(DataError, "holds the arrays 'a', 'b'", str(tmp_path / "f.npz"))
    assert "cannot be read" not in text and text.count("f.npz") == 1
    np.savez(tmp_path / "g.npz", features=X, ids=np.array([b"\xff"] * 4))
    _refused(DataError, r"^features .*g\.npz \(array 'ids'\): ids that are not valid UTF-8 text$",
             str(tmp_path / "g.npz"))
    np.savez(tmp_path / "h.npz", features=np.zeros((1000, 100)))
    _refused(ResourceError, "more than the limit", str(tmp_path / "h.npz"), max_memory="100K")


def test_a_feature_column_named_twice_is_refused(tmp_path):
    """pandas returns a frame for a repeated name: the reader failed with an AttributeError."""
    (tmp_path / "f.csv").write_text("task,a,a,b\nt0,1,2,3\nt1,4,5,6\n")
    _refused(DataError, r"the column 'a' appears twice \(columns 2 and 3\)", str(tmp_path / "f.csv"))


def test_a_value_beyond_float32_is_named_not_called_inf(tmp_path):
    """1e39 in a CSV or 1e300 in a float64 .npy became inf when cast, and the error said the file held inf."""
    (tmp_path / "f.csv").write_text("task,a,b\nt0,1,2\nt1,3,1e39\n")
    _refused(DataError, r"line 3, column 'b' is 1e\+39, beyond the range of float32", str(tmp_path / "f.csv"))
    big = X.copy()
    big[2, 1] = -1e300
    np.save(tmp_path / "f.npy", big)
    _refused(DataError, r"row 2, feature 1 is -1e\+300, beyond the range of float32", str(tmp_path / "f.npy"))
    frame = _frame(big)
    frame.to_parquet(tmp_path / "f.parquet")
    _refused(DataError, r"row 2, column 'f1' is -1e\+300", str(tmp_path / "f.parquet"))


def test_a_masked_array_with_masked_values_is_refused_not_read_unmasked():
    """np.asarray dropped a masked array's mask: the values under it (whatever they held) were trained on and
    predicted from as if they were features.  A masked value is refused, by row and feature; no mask is fine."""
    from crowdagg.learning.features import as_features

    masked = np.ma.masked_array(X, mask=np.zeros(X.shape, dtype=bool))
    masked[2, 1] = np.ma.masked
    with pytest.raises(DataError, match=r"row 2, feature 1 is masked"):
        as_features(masked)
    assert np.array_equal(as_features(np.ma.masked_array(X)), X.astype(np.float32))


def test_a_dataframe_of_mixed_numeric_columns_is_read_and_a_text_column_named():
    """A DataFrame of float, int and bool columns (or a nullable Float64 one) is an object array to numpy: it was
    refused as "shape (n, d) of object", numbers though it holds.  Read as numbers (a missing value as NaN, which
    the trainers refuse by row); a column of text is named."""
    from crowdagg.learning.features import as_features

    frame = pd.DataFrame({"a": X[:, 0], "b": np.arange(4), "c": [True, False, True, False],
                          "d": pd.array(X[:, 2], dtype="Float64")})
    expected = np.column_stack([X[:, 0], np.arange(4), [1, 0, 1, 0], X[:, 2]]).astype(np.float32)
    assert np.array_equal(as_features(frame), expected)
    frame.loc[1, "d"] = pd.NA
    assert np.isnan(as_features(frame)[1, 3])
    with pytest.raises(DataError, match=r"column 'e' is not numeric"):
        as_features(frame.assign(e=["x", "y", "z", "w"]))
