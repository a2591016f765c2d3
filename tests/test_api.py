"""The public API as a user meets it: what ``import crowdagg`` shows, ``aggregate`` on pandas data and
records, and bad code arrays refused by every entry -- never a crash."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tomllib

import crowdagg
from crowdagg import aggregate
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import DataError, UsageError
from crowdagg.methods.api import REGISTRY
from crowdagg.methods.registry import METHODS

#: The methods of categorical answers (code arrays of classes; the numeric methods' own are in tests/methods/numeric).
CATEGORICAL = sorted(name for name in REGISTRY if METHODS[name].kind == "categorical")

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter on this checkout: a segfault there fails the test, not pytest."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


# --------------------------------------------------------------------------- the module
def test_dir_and_all_list_every_public_name_before_first_use():
    out = run_python("""
        import sys, crowdagg
        names = [n for n in dir(crowdagg) if not n.startswith('_')]
        print(names)
        print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas', 'numba', 'pyarrow')))
    """)
    assert out.returncode == 0, out.stderr
    listed, heavy = out.stdout.strip().splitlines()
    public = set(crowdagg.__all__) - {"__version__"}
    assert public == set(crowdagg._LAZY)  # every lazy name is listed, every listed name is lazy
    assert set(eval(listed)) == public  # nothing private, nothing missing
    assert heavy == "[]"  # dir() imported nothing heavy
    for name in ("aggregate", "load_annotations", "AnnotationSet", "AggregationResult", "Vocabulary",
                 "evaluate_labels", "DataError", "UsageError", "ResourceError", "CrowdaggWarning"):
        assert name in public
    for name in crowdagg.__all__:  # every listed name resolves
        assert getattr(crowdagg, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        crowdagg.nope  # noqa: B018


def test_help_shows_the_api():
    import pydoc

    text = pydoc.render_doc(crowdagg, renderer=pydoc.plaintext)
    for name in ("load_annotations", "aggregate", "AnnotationSet", "AggregationResult", "evaluate_labels",
                 "DataError", "Public API"):
        assert name in text


def test_import_stays_light():
    out = run_python("""
        import sys, crowdagg
        print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas', 'numba', 'pyarrow')))
    """)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_py_typed_ships_with_the_package():
    assert (ROOT / "crowdagg" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["crowdagg"]


# --------------------------------------------------------------------------- aggregate on pandas data
FRAME = pd.DataFrame({
    "task": [10, 10, 10, 11, 11, 11, 12, 12, 12],
    "worker": ["a", "b", "c", "a", "b", "c", "a", "b", "c"],
    "label": [1, 1, 0, 0, 0, 1, 1, 1, 1],
})


def test_aggregate_takes_a_dataframe_directly():
    result = aggregate(FRAME, "mv")
    labels = result.labels_series()
    assert labels.to_dict() == {10: 1, 11: 0, 12: 1}
    assert labels.dtype == np.int64 and labels.index.dtype == np.int64
    ds = aggregate(FRAME, "ds")
    assert ds.labels_series().to_dict() == {10: 1, 11: 0, 12: 1}


def test_aggregate_takes_records_and_column_names():
    records = FRAME.rename(columns={"task": "item", "worker": "rater", "label": "answer"}).to_dict("records")
    result = aggregate(records, "mv")  # aliases found as load_annotations finds them
    assert result.labels_series().to_dict() == {10: 1, 11: 0, 12: 1}
    odd = FRAME.rename(columns={"task": "q", "worker": "who", "label": "y"})
    result = aggregate(odd, "mv", task_col="q", worker_col="who", label_col="y")
    assert result.labels_series().to_dict() == {10: 1, 11: 0, 12: 1}
    assert result.labels_series().index.name == "task"


@pytest.mark.parametrize("dtype", ["int64[pyarrow]", "double[pyarrow]", "bool[pyarrow]"])
def test_arrow_backed_labels_keep_their_dtype(dtype):
    """``dtype_backend="pyarrow"`` frames: labels came back as text, so comparing with the truth gave accuracy 0."""
    frame = FRAME.astype({"label": dtype, "task": "int64[pyarrow]"})
    truth = frame.groupby("task")["label"].agg(lambda s: s.mode().iloc[0])
    labels = aggregate(frame, "ds").labels_series()
    assert str(labels.dtype) == dtype
    assert labels.index.dtype == np.int64
    assert (labels == truth.reindex(labels.index)).all()


def test_negative_zero_is_the_class_zero():
    """-0.0 == 0.0: it made a class of its own, and the labels came back as text (accuracy 0 against pandas)."""
    frame = FRAME.astype({"label": float})
    frame.loc[frame["label"] == 0, "label"] = -0.0
    frame.loc[3, "label"] = 0.0  # task 11: one 0.0 and one -0.0 (and a 1.0): the 0.0 / -0.0 votes are one class
    assert np.signbit(frame["label"]).sum() == 2
    result = aggregate(frame, "mv")
    assert result.proba_frame().columns.tolist() == [0.0, 1.0]
    labels = result.labels_series()
    assert labels.dtype == np.float64 and labels.to_dict() == {10: 1.0, 11: 0.0, 12: 1.0}


def test_integer_and_tuple_column_labels_name_their_columns():
    """``pd.read_csv(header=None)`` gives columns 0, 1, 2: ``task_col=0`` raised AttributeError ('int' ... strip)."""
    plain = FRAME.astype({"label": "Int64"})
    plain.columns = [0, 1, 2]
    labels = aggregate(plain, "mv", task_col=0, worker_col=1, label_col=2).labels_series()
    assert labels.to_dict() == {10: 1, 11: 0, 12: 1} and str(labels.dtype) == "Int64"
    nested = FRAME.copy()
    nested.columns = pd.MultiIndex.from_tuples([("x", "task"), ("x", "worker"), ("x", "label")])
    labels = aggregate(nested, "mv", task_col=("x", "task"), worker_col=("x", "worker"),
                       label_col=("x", "label")).labels_series()
    assert labels.to_dict() == {10: 1, 11: 0, 12: 1}
    with pytest.raises(UsageError, match="task_col must be a column name, got bool True"):
        aggregate(plain, "mv", task_col=True)


def test_aggregate_takes_a_path(tmp_path):
    path = tmp_path / "answers.csv"
    FRAME.to_csv(path, index=False)
    assert aggregate(str(path), "mv").labels_series().to_dict() == {"10": "1", "11": "0", "12": "1"}  # CSV is text


def test_aggregate_refuses_what_it_cannot_read():
    with pytest.raises(UsageError, match="takes an AnnotationSet, a pandas DataFrame, a list of records"):
        aggregate(42, "mv")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="list of records is empty"):
        aggregate([], "mv")
    data = AnnotationSet.from_codes([0, 1], [0, 0], [0, 1])
    with pytest.raises(UsageError, match="label_col apply to a DataFrame"):
        aggregate(data, "mv", label_col="y")
    with pytest.raises(DataError, match="no task column.*set task_col"):  # as load_annotations names it
        aggregate([{"worker": "a", "label": 1}], "mv")


# --------------------------------------------------------------------------- bad code arrays, every method
#: (keyword of AnnotationSet to replace, value, what the error must say)
BAD_ARRAYS = {
    "worker beyond the vocabulary": ("worker", "np.array([0, 1, 0, 50_000_000], np.int32)",
                                     "worker code 50000000 at position 3 is out of range for 2 workers"),
    "negative task": ("task", "np.array([0, 0, -1, 1])", "task code -1 at position 2 is out of range"),
    "label beyond the classes": ("label", "[0, 1, 2, 0]", "label code 2 at position 2 is out of range for 2 classes"),
    "NaN codes": ("task", "[0.0, 0.0, np.nan, 1.0]", "task codes must be integers, got dtype float64 "
                                                       "(first NaN at position 2)"),
    "boolean codes": ("label", "np.array([True, False, True, False])", "label codes must be integers, got dtype bool"),
    "unequal lengths": ("worker", "[0, 1]", "equal lengths, got task 4, worker 2, label 4"),
    "two-dimensional": ("label", "np.zeros((2, 2), int)", "label codes must be a 1-D array"),
    "huge unsigned": ("worker", "np.array([0, 1, 0, 2**64 - 1], np.uint64)", "worker code 18446744073709551615"),
}


@pytest.mark.parametrize("method", CATEGORICAL)
def test_bad_code_arrays_are_a_data_error_for_every_method_never_a_crash(method):
    script = f"""
        import dataclasses, json, warnings
        import numpy as np
        from crowdagg import aggregate
        from crowdagg.data.annotations import AnnotationSet
        from crowdagg.errors import DataError
        warnings.simplefilter("ignore")
        good = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0])
        fields = dict(task=good.task, worker=good.worker, label=good.label, tasks=good.tasks,
                      workers=good.workers, classes=good.classes)
        out = {{}}
        for kind, (key, value) in {json.dumps({k: (v[0], v[1]) for k, v in BAD_ARRAYS.items()})}.items():
            for how in ("constructor", "replace", "from_codes"):
                try:
                    if how == "constructor":
                        bad = AnnotationSet(**(fields | {{key: eval(value)}}))
                    elif how == "replace":
                        bad = dataclasses.replace(good, **{{key: eval(value)}})
                    else:
                        codes = dict(task=good.task, worker=good.worker, label=good.label) | {{key: eval(value)}}
                        bad = AnnotationSet.from_codes(**codes, n_tasks=2, n_workers=2, n_classes=2)
                    aggregate(bad, {method!r})
                    out[kind + "/" + how] = "accepted"
                except DataError as exc:
                    out[kind + "/" + how] = str(exc)
        print(json.dumps(out))
    """
    proc = run_python(script)
    assert proc.returncode == 0, f"crashed (exit {proc.returncode}): {proc.stderr[-2000:]}"
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind, (_, _, message) in BAD_ARRAYS.items():
        for how in ("constructor", "replace", "from_codes"):
            assert message in found[f"{kind}/{how}"], (kind, how, found[f"{kind}/{how}"])


@pytest.mark.parametrize("method", CATEGORICAL)
def test_unsorted_answers_are_sorted_not_misread(method):
    # Three workers agree on tasks 0 and 1 (different classes): unsorted input must give the same fit.
    task = np.array([1, 0, 1, 0, 1, 0], dtype=np.int32)
    worker = np.array([0, 0, 1, 1, 2, 2], dtype=np.int32)
    label = np.array([1, 0, 1, 0, 1, 0], dtype=np.int8)
    ref = AnnotationSet.from_codes(task, worker, label)
    built = AnnotationSet(task=task, worker=worker, label=label, tasks=ref.tasks, workers=ref.workers,
                          classes=ref.classes)
    assert built.task.tolist() == [0, 0, 0, 1, 1, 1] and built.label.tolist() == [0, 0, 0, 1, 1, 1]
    got, want = aggregate(built, method), aggregate(ref, method)
    np.testing.assert_allclose(got.posteriors, want.posteriors)
    assert got.labels.tolist() == [0, 1]
