"""The annotation set: vocabularies, ordering, CSR indices, classes, duplicates."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet, infer_classes
from crowdagg.errors import CrowdaggWarning, DataError, UsageError


def small():
    return AnnotationSet.from_names(
        ["b", "a", "b", "c", "a", "b"],
        ["w1", "w2", "w2", "w1", "w1", "w3"],
        ["yes", "no", "no", "yes", "yes", "yes"],
    )


def test_vocabularies_follow_first_appearance():
    d = small()
    assert list(d.task_names) == ["b", "a", "c"]
    assert list(d.worker_names) == ["w1", "w2", "w3"]
    assert d.classes == ("no", "yes")
    assert (d.n_tasks, d.n_workers, d.n_classes, d.n_answers) == (3, 3, 2, 6)


def test_answers_sorted_by_task_stably_with_dtypes():
    d = small()
    assert d.task.dtype == np.int32 and d.worker.dtype == np.int32 and d.label.dtype == np.int8
    assert np.all(np.diff(d.task) >= 0)
    # task "b" = 0 keeps its answers in input order: w1 yes, w2 no, w3 yes
    np.testing.assert_array_equal(d.worker[:3], [0, 1, 2])
    np.testing.assert_array_equal(d.label[:3], [1, 0, 1])
    np.testing.assert_array_equal(d.task_ptr, [0, 3, 5, 6])
    assert not d.task.flags.writeable


def test_worker_csr():
    d = small()
    for w in range(d.n_workers):
        idx = d.worker_order[d.worker_ptr[w]:d.worker_ptr[w + 1]]
        assert np.all(d.worker[idx] == w)
        assert np.all(np.diff(idx) > 0)
    assert d.worker_ptr[-1] == d.n_answers


def test_names_are_never_coerced():
    d = AnnotationSet.from_names(["007", "7"], ["01", "1"], ["1.0", "1"])
    assert list(d.task_names) == ["007", "7"]
    assert list(d.worker_names) == ["01", "1"]
    assert set(d.classes) == {"1.0", "1"}


def test_numeric_classes_sort_numerically():
    assert infer_classes(["10", "9", "-1", "2"]) == ["-1", "2", "9", "10"]
    assert infer_classes(["b", "a", "10", "9"]) == ["10", "9", "a", "b"]


def test_many_numeric_values_are_refused_but_codes_allowed():
    with pytest.raises(DataError, match="numeric"):
        infer_classes([str(v) for v in range(-50, 50, 3)])
    assert infer_classes([str(v) for v in range(40)])[:3] == ["0", "1", "2"]


def test_explicit_classes_include_unchosen_and_reject_unknown():
    d = AnnotationSet.from_names(["a", "b"], ["w", "w"], ["x", "y"], classes=["z", "y", "x"])
    assert d.classes == ("z", "y", "x")
    np.testing.assert_array_equal(d.label, [2, 1])
    with pytest.raises(DataError, match="'q'"):
        AnnotationSet.from_names(["a"], ["w"], ["q"], classes=["x"])


@pytest.mark.parametrize("policy,n,labels", [("keep", 3, [0, 1, 1]), ("first", 2, [0, 1]), ("last", 2, [1, 1])])
def test_duplicate_policies(policy, n, labels):
    d = AnnotationSet.from_names(["t", "t", "t"], ["w", "v", "w"], ["a", "b", "b"], duplicates=policy)
    assert d.n_answers == n
    assert sorted(d.label.tolist()) == sorted(labels)
    assert d.n_duplicates == 1 and d.duplicates == policy


def test_duplicate_error_names_the_row():
    with pytest.raises(DataError, match="duplicate"):
        AnnotationSet.from_names(["t", "t"], ["w", "w"], ["a", "b"], duplicates="error")
    with pytest.raises(UsageError):
        AnnotationSet.from_names(["t"], ["w"], ["a"], duplicates="bogus")  # type: ignore[arg-type]


def test_from_codes_validates():
    with pytest.raises(DataError):
        AnnotationSet.from_codes([0, 1], [0], [0, 1])
    with pytest.raises(DataError):
        AnnotationSet.from_codes([0, -1], [0, 0], [0, 1])
    with pytest.raises(DataError):
        AnnotationSet.from_codes([0, 1], [0, 0], [0, 3], n_classes=2)
    with pytest.raises(DataError, match="no answers"):
        AnnotationSet.from_names([], [], [])


def test_from_codes_copies_and_never_freezes_the_callers_arrays():
    t = np.array([2, 0, 1, 0], dtype=np.int32)
    w = np.array([0, 1, 0, 0], dtype=np.int32)
    y = np.array([1, 0, 1, 1], dtype=np.int8)
    copies = (t.copy(), w.copy(), y.copy())
    d = AnnotationSet.from_codes(t, w, y)
    for a, b in zip((t, w, y), copies):
        np.testing.assert_array_equal(a, b)
        assert a.flags.writeable  # the caller's arrays stay theirs
    t[0] = 0  # and changing them does not reach the set
    assert d.task.tolist() == [0, 0, 1, 2] and not d.task.flags.writeable


def test_more_than_32767_classes_are_refused_never_wrapped():
    from crowdagg.data.annotations import MAX_CLASSES

    with pytest.raises(DataError, match="at most 32,767 classes"):
        AnnotationSet.from_codes([0], [0], [0], n_classes=MAX_CLASSES + 1)
    many = [f"c{i}" for i in range(MAX_CLASSES + 1)]
    with pytest.raises(DataError, match="32,768 classes"):
        AnnotationSet.from_names([f"t{i}" for i in range(len(many))], ["w"] * len(many), many)
    ok = AnnotationSet.from_codes([0, 1], [0, 0], [0, 32766], n_classes=MAX_CLASSES)
    assert ok.label.dtype == np.int16 and ok.label.tolist() == [0, 32766]


def test_duplicates_are_reported_by_the_library_too():
    with pytest.warns(CrowdaggWarning, match="1 duplicate answer.*kept as separate votes.*duplicates"):
        AnnotationSet.from_names(["t", "t"], ["w", "w"], ["a", "b"])
    with pytest.warns(CrowdaggWarning, match="dropped, keeping the last"):
        AnnotationSet.from_names(["t", "t"], ["w", "w"], ["a", "b"], duplicates="last")


def test_task_order_keeps_tasks_without_answers():
    d = AnnotationSet.from_names(["b", "a"], ["w", "w"], ["x", "y"], task_order=["z", "a", "b"])
    assert list(d.task_names) == ["z", "a", "b"]
    assert d.answers_per_task.tolist() == [0, 1, 1]
    assert d.task.tolist() == [1, 2]


def test_whitespace_only_cell_is_blank():
    with pytest.raises(DataError, match="blank worker at answer 1"):
        AnnotationSet.from_names(["a", "b"], ["w", "   "], ["x", "y"])


def test_from_names_refuses_what_it_cannot_name():
    with pytest.raises(DataError, match="blank label at answer 1"):
        AnnotationSet.from_names(["t1", "t2"], ["w1", "w2"], ["a", None], blank_labels="error")
    with pytest.raises(DataError, match="blank worker at answer 2"):
        AnnotationSet.from_names(["t1", "t2", "t3"], ["w1", "w2", float("nan")], ["a", "b", "b"])
    with pytest.raises(DataError, match=r"differ in length \(3, 1, 3\)"):
        AnnotationSet.from_names(["t1", "t2", "t3"], ["w1"], ["a", "b", "b"])
    with pytest.raises(DataError, match="one-dimensional"):
        AnnotationSet.from_names([["t1"]], [["w"]], [["a"]])
    mixed = AnnotationSet.from_names(["t1", 2, b"t3"], ["w", "w", "w"], ["a", "b", "a"])
    assert list(mixed.task_names) == ["t1", "2", "t3"]


def test_from_codes_refuses_duplicate_names_and_no_classes():
    with pytest.raises(DataError, match="task name 'x' is given twice"):
        AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], task_names=["x", "x"])
    with pytest.raises(DataError, match="at least one class"):
        AnnotationSet.from_codes([], [], [], n_tasks=1, n_workers=1, n_classes=0)
    with pytest.raises(UsageError, match="classes lists a class twice"):
        AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], classes=["a", "a"])
    with pytest.raises(DataError, match="more than int32 codes"):
        AnnotationSet.from_codes(np.array([0, 2**40]), [0, 0], [0, 1])


def test_worker_position_and_cell_index():
    d = AnnotationSet.from_names(["t1", "t2", "t1", "t3", "t2"], ["w2", "w1", "w1", "w2", "w3"], ["a", "b", "b", "a", "a"])
    order, pos = d.worker_order, d.worker_position
    np.testing.assert_array_equal(order[pos], np.arange(d.n_answers))
    np.testing.assert_array_equal(pos[order], np.arange(d.n_answers))
    np.testing.assert_array_equal(d.worker[order], np.sort(d.worker, kind="stable"))
    np.testing.assert_array_equal(d.cell, d.worker * d.n_classes + d.label)
    assert d.cell.max() < d.n_workers * d.n_classes


# ------------------------------------------------------------- encoding against known workers
def test_batches_encoded_against_one_worker_vocabulary_agree_on_codes():
    first = small()
    batch = AnnotationSet.from_names(["x", "y", "y"], ["w9", "w3", "w1"], ["no", "yes", "no"],
                                     workers=first.workers, classes=first.classes)
    assert batch.worker_names.tolist() == ["w1", "w2", "w3", "w9"]  # known codes, then the new worker
    assert batch.classes == first.classes
    np.testing.assert_array_equal(batch.answers_per_worker, [1, 0, 1, 1])  # w2 stays, without answers
    by_name = dict(zip(batch.worker_names[batch.worker], batch.task_names[batch.task]))
    assert by_name == {"w9": "x", "w3": "y", "w1": "y"}


def test_partitions_by_task_encoded_against_the_whole_agree_with_it(tmp_path):
    from crowdagg import load_annotations

    whole = load_annotations("example:bluebird")
    tasks = whole.task_names[whole.task]
    workers, labels = whole.worker_names[whole.worker], np.asarray(whole.classes, dtype=object)[whole.label]
    rng = np.random.default_rng(0)
    part_of = rng.integers(0, 3, whole.n_tasks)[whole.task]
    for p in range(3):
        rows = np.flatnonzero(part_of == p)
        part = AnnotationSet.from_names(tasks[rows], workers[rows], labels[rows], workers=whole.workers,
                                        classes=whole.classes)
        assert part.workers.equals(whole.workers) and part.classes == whole.classes
        got = set(zip(part.task_names[part.task], part.worker.tolist(), part.label.tolist()))
        want = set(zip(tasks[rows], whole.worker[rows].tolist(), whole.label[rows].tolist()))
        assert got == want


def test_known_workers_through_load_annotations_keep_the_ids_dtype():
    import pandas as pd

    from crowdagg import load_annotations

    one = load_annotations(pd.DataFrame({"task": [1, 2], "worker": [10, 20], "label": ["a", "b"]}))
    two = load_annotations(pd.DataFrame({"task": [3], "worker": [30], "label": ["a"]}), workers=one.workers)
    assert two.worker_names.tolist() == ["10", "20", "30"] and two.workers.dtype == "int64"
    names = load_annotations(pd.DataFrame({"task": [3], "worker": ["b"], "label": ["a"]}), workers=[" a ", "b"])
    assert names.worker_names.tolist() == ["a", "b"] and names.worker.tolist() == [1]


@pytest.mark.parametrize(("given", "message"), [(["w1", "w1"], "'w1' twice"), (["w1", " "], "blank name"),
                                                 ("w1", "not one name")])
def test_a_bad_worker_vocabulary_is_a_usage_error(given, message):
    with pytest.raises(UsageError, match=message):
        AnnotationSet.from_names(["t"], ["w1"], ["a"], workers=given)


def test_known_workers_in_any_sequence_keep_their_type():
    import pandas as pd

    from crowdagg import load_annotations

    frame = pd.DataFrame({"task": [1, 2], "worker": [3, 4], "label": ["a", "b"]})
    for given in ([3, 2], pd.Index([3, 2]), {3: 0, 2: 1}.keys(), (w for w in [3, 2])):
        data = load_annotations(frame, workers=given)
        assert data.worker_names.tolist() == ["3", "2", "4"] and data.workers.dtype == "int64"
    text = load_annotations(pd.DataFrame({"task": ["x"], "worker": ["3"], "label": ["a"]}), workers=frame_workers())
    assert text.workers.dtype == "int64"  # every name is the vocabulary's: its type holds
    with pytest.raises(UsageError, match=r"\.workers"):
        load_annotations(frame, workers=small())


def frame_workers():
    import pandas as pd

    from crowdagg import load_annotations

    return load_annotations(pd.DataFrame({"task": [1], "worker": [3], "label": ["a"]})).workers


def test_names_given_to_from_codes_and_known_workers_must_be_text():
    import pyarrow as pa

    from crowdagg.errors import UsageError

    with pytest.raises(DataError, match=r"^the task at entry 2 of the task names holds a lone surrogate"):
        AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], task_names=["a", "b\ud800"])
    with pytest.raises(DataError, match=r"^the worker at entry 1 of the worker names holds a NUL character"):
        AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], worker_names=["w\x00"])
    with pytest.raises(DataError, match=r"^the class at entry 2 of the class names is not UTF-8 text"):
        AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], classes=["x", b"\xff"])
    with pytest.raises(UsageError, match=r"^name 1 of the worker vocabulary is not UTF-8 text \(byte 0xFF at byte 2\)"):
        AnnotationSet.from_names(["t"], ["w"], ["a"], workers=pa.array([b"w\xff"], pa.binary()))


def test_blank_labels_policy_in_from_names():
    import warnings

    from crowdagg.data.annotations import BLANK_LABEL_POLICIES
    from crowdagg.errors import CrowdaggWarning, UsageError

    assert BLANK_LABEL_POLICIES == ("skip", "error")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = AnnotationSet.from_names(["t1", "t2", "t2", "t3"], ["w1", "w2", "w1", "w3"], ["a", None, "b", "  "])
    # t3's only answer was blank: it keeps its place with no answers; w3 (blank answers only) is gone
    assert list(d.task_names) == ["t1", "t2", "t3"] and d.answers_per_task.tolist() == [1, 1, 0]
    assert list(d.worker_names) == ["w1"] and d.classes == ("a", "b")
    assert [str(w.message) for w in caught if issubclass(w.category, CrowdaggWarning)] == [
        "skipped 2 answer(s) with a blank label (first at answer 1); set blank_labels to error to refuse them",
    ]
    with pytest.raises(DataError, match=r"^blank label at answer 1 \(2 blank label cell\(s\) in all\)$"):
        AnnotationSet.from_names(["t1", "t2", "t2", "t3"], ["w1", "w2", "w1", "w3"], ["a", None, "b", "  "],
                                 blank_labels="error")
    with pytest.raises(UsageError, match="blank_labels must be one of skip, error"):
        AnnotationSet.from_names(["t1"], ["w1"], ["a"], blank_labels="keep")
    with pytest.raises(DataError, match=r"every label is blank \(1 answer\(s\) skipped\)"):
        AnnotationSet.from_names(["t1"], ["w1"], [None])
    only_prior = AnnotationSet.from_names(["t1"], ["w1"], [None], classes=["a", "b"])
    assert only_prior.n_tasks == 1 and only_prior.n_answers == 0 and only_prior.n_workers == 0


def test_a_parquet_float_nan_label_is_missing_not_a_class():
    import pyarrow as pa

    from crowdagg.data.vocab import as_strings

    names, dtype = as_strings(pa.array([1.5, float("nan"), None, float("inf")]))
    assert names.to_pylist() == ["1.5", "", "", "inf"] and dtype == "double"
    names, _ = as_strings(np.array([1.0, np.nan]))
    assert names.to_pylist() == ["1.0", ""]
# --------------------------------------------------------------------------- the constructor checks its arrays
def _fields(d: AnnotationSet, **change) -> dict:
    return dict(task=d.task, worker=d.worker, label=d.label, tasks=d.tasks, workers=d.workers,
                classes=d.classes) | change


@pytest.mark.parametrize("change,message", [
    ({"worker": np.array([0, 1, 0, 5], np.int32)}, "worker code 5 at position 3 is out of range for 2 workers"),
    ({"task": np.array([0, 0, 1, 2])}, "task code 2 at position 3 is out of range for 2 tasks"),
    ({"label": np.array([0, -3, 0, 0])}, "label code -3 at position 1 is out of range for 2 classes"),
    ({"task": np.array([0, 0, np.nan, 1])}, "task codes must be integers, got dtype float64 (first NaN at position 2)"),
    ({"task": np.array([0.0, 0.0, 1.0, 1.0])}, "task codes must be integers, got dtype float64 (convert with"),
    ({"worker": np.array(["0", "1", "0", "1"])}, "worker codes must be integers, got dtype <U1"),
    ({"label": [0, 1, 0]}, "equal lengths, got task 4, worker 4, label 3"),
])
def test_constructor_names_the_bad_array_and_position(change, message):
    good = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0])
    with pytest.raises(DataError) as err:
        AnnotationSet(**_fields(good, **change))
    assert message in str(err.value)


def test_constructor_checks_names_and_settings():
    good = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0])
    with pytest.raises(UsageError, match="distinct, non-blank"):
        AnnotationSet(**_fields(good, classes=("a", "a")))
    with pytest.raises(DataError, match="at least one class"):
        AnnotationSet(**_fields(good, classes=()))
    with pytest.raises(DataError, match="lists 'x' twice"):
        AnnotationSet(**_fields(good, tasks=["x", "x"]))
    with pytest.raises(UsageError, match="duplicates must be one of"):
        AnnotationSet(**_fields(good), duplicates="maybe")
    with pytest.raises(UsageError, match="n_duplicates must be a count"):
        AnnotationSet(**_fields(good), n_duplicates=-1)
    with pytest.raises(UsageError, match="classes must be a list of names"):
        AnnotationSet(**_fields(good, classes="ab"))
    with pytest.raises(UsageError, match="class_dtype must be a dtype name or None"):
        AnnotationSet(**_fields(good), class_dtype=int)  # type: ignore[arg-type]
    # names given as lists become vocabularies
    d = AnnotationSet(**_fields(good, tasks=["t1", "t2"], workers=np.array(["u", "v"]), classes=["no", "yes"]))
    assert list(d.task_names) == ["t1", "t2"] and list(d.worker_names) == ["u", "v"] and d.classes == ("no", "yes")


def test_constructor_copies_canonicalises_and_freezes():
    good = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0])
    task = np.array([1, 0, 1, 0], dtype=np.int64)  # unsorted, another dtype
    worker = np.array([0, 0, 1, 1], dtype=np.uint8)
    label = np.array([1, 0, 1, 1], dtype=np.int64)
    d = AnnotationSet(**_fields(good, task=task, worker=worker, label=label))
    assert (d.task.dtype, d.worker.dtype, d.label.dtype) == (np.int32, np.int32, np.int8)
    assert d.task.tolist() == [0, 0, 1, 1] and d.worker.tolist() == [0, 1, 0, 1] and d.label.tolist() == [0, 1, 1, 1]
    np.testing.assert_array_equal(d.task_ptr, [0, 2, 4])
    assert not (d.task.flags.writeable or d.worker.flags.writeable or d.label.flags.writeable)
    assert task.flags.writeable and task.tolist() == [1, 0, 1, 0]  # the caller's arrays are theirs
    worker[:] = 200  # and changing them later cannot reach the set
    assert d.worker.tolist() == [0, 1, 0, 1]


def test_constructor_takes_big_endian_and_memmapped_codes(tmp_path):
    """Codes in non-native byte order (read from a file) were a bare numba TypingError; a memmap is copied."""
    good = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0])
    d = AnnotationSet(**_fields(good, task=np.array([1, 0, 1, 0], ">i8"), worker=np.array([0, 0, 1, 1], ">i4"),
                                label=np.array([1, 0, 1, 1], ">i2")))
    assert d.task.tolist() == [0, 0, 1, 1] and d.worker.tolist() == [0, 1, 0, 1] and d.label.tolist() == [0, 1, 1, 1]
    assert d.task.dtype == np.int32 and d.task.dtype.isnative
    with pytest.raises(DataError, match="worker code 5 at position 0 is out of range for 2 workers"):
        AnnotationSet(**_fields(good, worker=np.array([5, 0, 1, 1], ">i4")))
    mm = np.memmap(tmp_path / "t.bin", dtype=np.int32, mode="w+", shape=(4,))
    mm[:] = [0, 0, 1, 1]
    d = AnnotationSet(**_fields(good, task=mm))
    mm[:] = 7
    assert d.task.tolist() == [0, 0, 1, 1]


def test_every_array_of_a_set_is_read_only():
    """worker_order, worker_ptr and the answer counts were writable: a write reached every later fit."""
    from crowdagg import load_annotations

    for d in (AnnotationSet.from_codes([0, 1, 1], [0, 0, 1], [0, 1, 1]), load_annotations("example:bluebird")):
        for name in ("task", "worker", "label", "task_ptr", "worker_order", "worker_ptr", "worker_position", "cell",
                     "answers_per_task", "answers_per_worker"):
            with pytest.raises(ValueError, match="read-only"):
                getattr(d, name)[0] = 10**9


def test_constructor_refuses_a_vocabulary_with_a_null_name():
    import pyarrow as pa

    from crowdagg.data.vocab import Vocabulary

    good = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0])
    with pytest.raises(DataError, match="the tasks vocabulary has a missing"):
        AnnotationSet(**_fields(good, tasks=Vocabulary(pa.array(["t1", None]))))


@pytest.mark.parametrize("given", [None, 5, {"a", "b"}, frozenset({"a", "b"})])
def test_names_must_be_an_ordered_list(given):
    """A set's order changes between runs (string hashing), and the order gives each class its code."""
    good = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0])
    with pytest.raises(UsageError, match="must be a list of names"):
        AnnotationSet(**_fields(good, classes=given))
    with pytest.raises(UsageError, match="must be a list of names"):
        AnnotationSet(**_fields(good, tasks=given))
    if given is not None:  # None is from_codes's default ("0", "1", ...)
        with pytest.raises(UsageError, match="must be a list of names"):
            AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], classes=given)
    if given is not None:  # the readers' classes= and workers= (known workers) follow the same rule
        import pandas as pd

        from crowdagg import load_annotations

        frame = pd.DataFrame({"task": [1], "worker": ["a"], "label": ["a"]})
        with pytest.raises(UsageError, match="must be a list of names"):
            load_annotations(frame, classes=given)
        if given != 5:
            with pytest.raises(UsageError, match="a set has no order"):
                load_annotations(frame, workers=given)


def test_internal_builders_skip_the_check_public_entries_run_it_once(monkeypatch):
    from crowdagg.kernels import validate

    calls = []
    scan = validate._scan_codes

    def counting(*args):
        calls.append(len(args[0]))
        return scan(*args)

    monkeypatch.setattr(validate, "_scan_codes", counting)
    d = AnnotationSet.from_names(["a", "b", "a"], ["w", "w", "v"], ["x", "y", "y"])
    assert calls == []  # valid by construction: no pass
    AnnotationSet.from_codes(d.task, d.worker, d.label)
    assert calls == [3]  # one pass
    AnnotationSet(**_fields(d))
    assert calls == [3, 3]


def test_from_codes_names_the_first_bad_position():
    with pytest.raises(DataError, match="worker code 7 at position 1 is out of range for 2 workers"):
        AnnotationSet.from_codes([0, 1], [0, 7], [0, 1], n_workers=2)
    with pytest.raises(DataError, match="label code -1 at position 0 is negative"):
        AnnotationSet.from_codes([0, 1], [0, 0], [-1, 1])
    with pytest.raises(DataError, match="3 task names given for 2 tasks"):
        AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], n_tasks=2, task_names=["a", "b", "c"])
    with pytest.raises(DataError, match="task code 2 at position 1 is out of range for 2 tasks"):
        AnnotationSet.from_codes([0, 2], [0, 0], [0, 1], task_names=["a", "b"])
    with pytest.raises(UsageError, match="n_tasks must be an integer >= 0"):
        AnnotationSet.from_codes([0], [0], [0], n_tasks=-2)
    with pytest.raises(UsageError, match="task_names must be a list of names"):
        AnnotationSet.from_codes([0], [0], [0], task_names="a")


@pytest.mark.parametrize("size", ["n_tasks", "n_workers"])
def test_from_codes_refuses_a_huge_size_up_front_with_what_it_needs(size):
    from crowdagg.errors import ResourceError

    with pytest.raises(ResourceError, match=r"this needs ~\d.* GB \(an annotation set of 1 answer"):
        AnnotationSet.from_codes([0], [0], [0], **{size: 2_000_000_000})
    with pytest.raises(ResourceError, match=r"more than the limit of 1.00 MB \(max_memory=1.00 MB\)"):
        AnnotationSet.from_codes([0], [0], [0], max_memory="1M", **{size: 100_000})
    assert AnnotationSet.from_codes([0], [0], [0], max_memory="64M", **{size: 100_000}).n_answers == 1


def test_a_classes_list_beyond_int16_is_refused_before_its_names_are_made():
    class Huge:
        def __len__(self):
            return 10**9

        def __iter__(self):
            raise AssertionError("iterated")

    with pytest.raises(DataError, match="1,000,000,000 classes"):
        AnnotationSet.from_names(["t"], ["w"], ["a"], classes=Huge())  # type: ignore[arg-type]


def test_the_label_column_dtype_is_recorded():
    import pandas as pd

    from crowdagg import load_annotations

    frame = pd.DataFrame({"task": [1, 2], "worker": ["a", "a"], "label": [0, 1]})
    assert load_annotations(frame).class_dtype == "int64"
    assert load_annotations(frame.assign(label=[0.5, 1.0])).class_dtype == "double"
    assert load_annotations(frame.assign(label=frame.label.astype("Int64"))).class_dtype == "Int64"
    assert load_annotations(frame.assign(label=frame.label.astype("category"))).class_dtype == "category[int64]"
    assert load_annotations(frame.assign(label=["x", "y"])).class_dtype in (None, "str")  # pandas 2 / pandas 3
    assert AnnotationSet.from_names(["t"], ["w"], ["x"]).class_dtype is None


# --------------------------------------------------------------------------- without_workers
def _answers(d):
    """Each answer as (task name, worker name, class name), in the set's order."""
    t, w, c = d.task_names, d.worker_names, d.classes
    return [(t[i], w[j], c[k]) for i, j, k in zip(d.task.tolist(), d.worker.tolist(), d.label.tolist())]


def test_without_workers_keeps_every_task_in_place_and_renumbers_the_kept_workers():
    rng = np.random.default_rng(5)
    n = 400
    d = AnnotationSet.from_names(
        [f"t{i}" for i in rng.integers(0, 60, n)], [f"w{i}" for i in rng.integers(0, 12, n)],
        [str(i) for i in rng.integers(0, 3, n)], task_order=[f"t{i}" for i in range(61)],  # t60: no answers
    )
    drop = np.zeros(d.n_workers, bool)
    drop[[0, 3, 7, 11]] = True
    sub = d.without_workers(drop)
    gone = set(d.worker_names[drop])
    assert sub.tasks.equals(d.tasks) and sub.classes == d.classes and sub.label.dtype == d.label.dtype
    assert list(sub.worker_names) == [w for w in d.worker_names if w not in gone]
    assert _answers(sub) == [a for a in _answers(d) if a[1] not in gone]  # same order: still sorted by task
    np.testing.assert_array_equal(sub.task_ptr, np.searchsorted(sub.task, np.arange(d.n_tasks + 1)))
    assert sub.answers_per_task.sum() == sub.n_answers and sub.answers_per_task[-1] == 0
    for w in range(sub.n_workers):  # the worker-side CSR built from the renumbered codes
        assert np.all(sub.worker[sub.worker_order[sub.worker_ptr[w]:sub.worker_ptr[w + 1]]] == w)
    assert not any(a.flags.writeable for a in (sub.task, sub.worker, sub.label, sub.task_ptr))


def test_without_workers_leaves_a_task_with_no_answers_and_nobody_dropped_is_the_same_set():
    d = small()  # task "c" has w1's answer only
    assert d.without_workers(np.zeros(3, bool)) is d
    sub = d.without_workers(np.array([True, False, False]))
    assert list(sub.task_names) == ["b", "a", "c"] and sub.answers_per_task.tolist() == [2, 1, 0]
    assert list(sub.worker_names) == ["w2", "w3"] and sub.worker.tolist() == [0, 1, 0]
    everyone = d.without_workers(np.ones(3, bool))
    assert everyone.n_answers == 0 and everyone.n_tasks == 3 and everyone.n_workers == 0
    np.testing.assert_array_equal(everyone.task_ptr, [0, 0, 0, 0])


@pytest.mark.parametrize("drop", [[True, False], [1, 0, 0], np.zeros((3, 1), bool)])
def test_without_workers_wants_one_boolean_per_worker(drop):
    with pytest.raises(UsageError, match="must be 3 booleans, one per worker"):
        small().without_workers(drop)


# --------------------------------------------------------------------------- with_tasks
def test_with_tasks_appends_tasks_without_answers_and_keeps_the_rest():
    d = small()
    out = d.with_tasks(["z", "y"])
    assert list(out.task_names) == ["b", "a", "c", "z", "y"] and out.n_tasks == 5
    assert _answers(out) == _answers(d) and out.worker_names.tolist() == d.worker_names.tolist()
    assert out.classes == d.classes and out.class_dtype == d.class_dtype and out.label.dtype == d.label.dtype
    assert out.answers_per_task.tolist() == [*d.answers_per_task.tolist(), 0, 0]
    np.testing.assert_array_equal(out.task_ptr, np.searchsorted(out.task, np.arange(out.n_tasks + 1)))
    assert not any(a.flags.writeable for a in (out.task, out.worker, out.label, out.task_ptr))
    assert d.with_tasks([]) is d and d.n_tasks == 3  # the set itself is unchanged


def test_with_tasks_keeps_an_integer_id_dtype_only_while_the_new_names_are_integers():
    import pandas as pd

    from crowdagg.io.read import load_annotations

    d = load_annotations(pd.DataFrame({"task": [3, 1], "worker": ["w", "w"], "label": ["a", "b"]}))
    assert d.tasks.dtype == "int64"
    assert d.with_tasks(["7", "-2"]).tasks.dtype == "int64"
    assert d.with_tasks(["7", "x"]).tasks.dtype is None


@pytest.mark.parametrize(("names", "match"), [(["a"], "'a' is already a task"), (["z", "z"], "'z' is given twice"),
                                              ([""], "blank")])
def test_with_tasks_refuses_known_repeated_or_blank_names(names, match):
    with pytest.raises(UsageError, match=match):
        small().with_tasks(names)
