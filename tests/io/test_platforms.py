"""Platform exports (crowdagg.io.platforms): Label Studio JSON flattened to one answer per row, and the
table exports of MTurk, Toloka and Label Studio (JSON-MIN, CSV) read as downloaded."""

from __future__ import annotations

import copy
import csv
import io
import json
import warnings

import numpy as np
import pyarrow as pa
import pytest

from crowdagg.errors import CrowdaggWarning, DataError, UsageError
from crowdagg.io.platforms import (
    ASSIGNMENT_STATUSES,
    REJECTED_POLICIES,
    FlatAnswers,
    boolean_cells,
    flatten_label_studio,
    is_label_studio,
    radio_labels,
    split_by_status,
)
from crowdagg.io.read import _answer_columns, load_annotations, read_raw
from tests.io.test_columns import MTURK_HEADER, _mturk_row

STAMP = "2024-03-05T09:20:31.482913Z"


def _result(choices: list[str], from_name: str = "sentiment", rid: str = "aB3xQ9", kind: str = "choices") -> dict:
    return {
        "value": {"choices": choices},
        "id": rid,
        "from_name": from_name,
        "to_name": "text",
        "type": kind,
        "origin": "manual",
    }


def _annotation(aid: int, task_id: int, completed_by: object, result: list[dict], cancelled: bool = False) -> dict:
    return {
        "id": aid,
        "completed_by": completed_by,
        "result": result,
        "was_cancelled": cancelled,
        "ground_truth": False,
        "created_at": STAMP,
        "updated_at": STAMP,
        "draft_created_at": None,
        "lead_time": 7.316,
        "prediction": {},
        "result_count": 0,
        "unique_id": f"7c1e2b0a-{aid:04d}",
        "import_id": None,
        "last_action": None,
        "task": task_id,
        "project": 12,
        "updated_by": completed_by if isinstance(completed_by, int) else None,
        "parent_prediction": None,
        "parent_annotation": None,
        "last_created_by": None,
    }


def _task(tid: int, inner: int, text: str, annotations: list[dict], predictions: list[dict] | None = None) -> dict:
    return {
        "id": tid,
        "annotations": annotations,
        "file_upload": "5b1f2c3d-reviews.csv",
        "drafts": [],
        "predictions": copy.deepcopy(predictions or []),
        "data": {"text": text},
        "meta": {},
        "created_at": STAMP,
        "updated_at": STAMP,
        "inner_id": inner,
        "total_annotations": sum(not a["was_cancelled"] for a in annotations),
        "cancelled_annotations": sum(a["was_cancelled"] for a in annotations),
        "total_predictions": len(predictions or []),
        "comment_count": 0,
        "unresolved_comment_count": 0,
        "last_comment_updated_at": None,
        "project": 12,
        "updated_by": 1,
        "comment_authors": [],
    }


MODEL_PREDICTION = {
    "id": 9,
    "model_version": "sentiment-bert-v2",
    "created_ago": "2 days",
    "result": [_result(["Negative"], rid="pr3d01")],
    "score": 0.87,
    "cluster": None,
    "neighbors": None,
    "mislabeling": 0.0,
    "created_at": STAMP,
    "updated_at": STAMP,
    "model": None,
    "model_run": None,
    "task": 101,
    "project": 12,
}

USER_2 = {"id": 2, "first_name": "Ana", "last_name": "Ruiz", "email": "ana@example.org"}


def _export() -> list[dict]:
    """A Label Studio "JSON" export of a text classification project (Choices "sentiment")."""
    return [
        _task(
            101,
            1,
            "The battery lasts all day.",
            [
                _annotation(1, 101, 1, [_result(["Positive"])]),
                _annotation(2, 101, USER_2, [_result(["Negative"], rid="kP02zz")]),
            ],
            predictions=[MODEL_PREDICTION],
        ),
        _task(
            102,
            2,
            "Screen is fine, nothing special.",
            [
                _annotation(3, 102, 1, [_result(["Neutral"])]),
                _annotation(4, 102, 3, [], cancelled=True),
                _annotation(5, 102, 2, []),  # submitted without choosing
            ],
        ),
        _task(103, 3, "Arrived broken.", [], predictions=[MODEL_PREDICTION]),
        _task(104, 4, "Works as described.", [_annotation(6, 104, 3, [_result(["Positive"])])]),
    ]


def _load(tmp_path, obj) -> list:
    """Write the export as Label Studio does and parse it back, as a reader would."""
    path = tmp_path / "project-12-at-2024-03-05-09-30-5f1c2a1b.json"
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False), encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


def _flatten(obj, **kw) -> FlatAnswers:
    return flatten_label_studio(obj, source="export.json", **kw)


def test_is_label_studio(tmp_path):
    assert is_label_studio(_load(tmp_path, _export()))
    old = [{"id": 1, "data": {"text": "x"}, "completions": [{"id": 1, "result": []}]}]
    assert is_label_studio(old)
    assert not is_label_studio([{"task": "t1", "worker": "w1", "label": "a"}])  # long-format records
    assert not is_label_studio({"t1": {"w1": "a"}})  # task -> worker -> label mapping
    assert not is_label_studio([])
    assert not is_label_studio([{"id": 1, "annotations": []}, "x"])
    assert not is_label_studio([{"id": 1, "annotations": "none"}])
    assert not is_label_studio("[]")


def test_flatten_label_studio_export(tmp_path):
    flat = _flatten(_load(tmp_path, _export()))
    assert flat.task == ["101", "101", "102", "104"]
    assert flat.worker == ["1", "2", "1", "3"]  # int id and dict id, as text
    assert flat.label == ["Positive", "Negative", "Neutral", "Positive"]
    assert flat.record == [1, 1, 2, 4]
    assert flat.tasks == ["101", "102", "103", "104"]  # 103 has no annotation but is listed
    assert flat.n_cancelled == 1
    assert flat.n_without_choice == 1
    assert flat.label_name == "sentiment"


def test_predictions_are_ignored():
    obj = _export()
    obj[2]["predictions"] = [MODEL_PREDICTION, copy.deepcopy(MODEL_PREDICTION)]
    obj[0]["predictions"][0]["result"][0]["value"]["choices"] = ["Neutral"]
    flat = _flatten(obj)
    assert flat.task == ["101", "101", "102", "104"]
    assert flat.label == ["Positive", "Negative", "Neutral", "Positive"]


def test_completed_by_dict_without_id_uses_email_and_string_task_ids():
    obj = _export()
    obj[0]["id"] = "review-0001"
    obj[0]["annotations"][1]["completed_by"] = {"email": "ana@example.org"}
    flat = _flatten(obj)
    assert flat.task[:2] == ["review-0001", "review-0001"]
    assert flat.worker[1] == "ana@example.org"


def test_older_completions_export():
    obj = _export()
    for t in obj:
        t["completions"] = t.pop("annotations")
    flat = _flatten(obj)
    assert flat.label == ["Positive", "Negative", "Neutral", "Positive"]
    assert flat.n_cancelled == 1


def test_cancelled_annotation_needs_no_worker():
    obj = _export()
    del obj[1]["annotations"][1]["completed_by"]
    assert _flatten(obj).n_cancelled == 1


def _two_controls() -> list[dict]:
    obj = _export()
    obj[0]["annotations"][0]["result"].append(_result(["Battery"], from_name="topic", rid="tp01"))
    obj[3]["annotations"][0]["result"].append(_result(["Delivery"], from_name="topic", rid="tp02"))
    return obj


def test_several_choice_controls_are_listed():
    with pytest.raises(DataError) as e:
        _flatten(_two_controls())
    msg = str(e.value)
    assert msg.startswith("export.json: ")
    assert "'sentiment'" in msg and "'topic'" in msg and "label_col" in msg
    with pytest.raises(DataError, match=r"set label_col= to pick one"):
        _flatten(_two_controls(), options={"label": "label_col="})


def test_label_picks_a_choice_control():
    flat = _flatten(_two_controls(), label="topic")
    assert flat.label_name == "topic"
    assert flat.task == ["101", "104"] and flat.label == ["Battery", "Delivery"] and flat.worker == ["1", "3"]
    assert flat.n_without_choice == 3  # 101 by worker 2, 102 by worker 1 and 2 have no topic
    assert flat.n_cancelled == 1
    assert _flatten(_two_controls(), label="sentiment").label == ["Positive", "Negative", "Neutral", "Positive"]


def test_label_naming_no_control():
    with pytest.raises(DataError, match=r"no choices control named 'mood' \(from label_col\); found: 'sentiment'"):
        _flatten(_export(), label="mood")


def test_multi_label_answer_is_refused():
    obj = _export()
    obj[1]["annotations"][0]["result"][0]["value"]["choices"] = ["Neutral", "Positive"]
    with pytest.raises(DataError) as e:
        _flatten(obj)
    msg = str(e.value)
    assert "task 2 (id 102)" in msg and "one class per answer" in msg


def test_non_classification_export_is_refused():
    obj = _export()
    for t in obj:
        for a in t["annotations"]:
            for r in a["result"]:
                r["type"] = "rectanglelabels"
                r["value"] = {"x": 10.0, "y": 20.0, "width": 5.0, "height": 5.0, "rectanglelabels": ["Car"]}
    with pytest.raises(DataError) as e:
        _flatten(obj)
    msg = str(e.value)
    assert "only classification (choices)" in msg and "'rectanglelabels'" in msg


def test_other_result_types_beside_choices_are_ignored():
    obj = _export()
    obj[0]["annotations"][0]["result"].append(
        {"value": {"text": ["great"]}, "id": "tx1", "from_name": "comment", "to_name": "text", "type": "textarea"}
    )
    assert _flatten(obj).label == ["Positive", "Negative", "Neutral", "Positive"]


@pytest.mark.parametrize(
    ("damage", "where"),
    [
        (lambda o: o[1].__setitem__("annotations", {"id": 3}), "task 2 (id 102)"),
        (lambda o: o[1].__setitem__("annotations", None), "task 2 (id 102)"),
        (lambda o: o[0].pop("id"), "task 1"),
        (lambda o: o[2].__setitem__("id", None), "task 3"),
        (lambda o: o[3]["annotations"][0].pop("completed_by"), "task 4 (id 104)"),
        (lambda o: o[0]["annotations"][1].__setitem__("completed_by", {"first_name": "Ana"}), "task 1 (id 101)"),
        (lambda o: o[3]["annotations"][0].__setitem__("result", "Positive"), "task 4 (id 104)"),
        (lambda o: o.__setitem__(2, "task"), "task 3"),
        (lambda o: o[3].__setitem__("id", 101), "task 4 (id 101)"),
    ],
)
def test_malformed_structure_names_the_task(damage, where):
    obj = _export()
    damage(obj)
    with pytest.raises(DataError) as e:
        _flatten(obj)
    msg = str(e.value)
    assert msg.startswith(f"export.json: {where}")
    assert "\n" not in msg
    for name in ("NoneType", "dict", "KeyError", "TypeError", "str'"):
        assert name not in msg


def test_structure_errors_come_before_the_choices_check():
    obj = _export()
    obj[3]["annotations"][0].pop("completed_by")
    for t in obj:
        for a in t["annotations"]:
            for r in a["result"]:
                r["type"] = "labels"
    with pytest.raises(DataError, match=r"task 4 \(id 104\): annotation 1 has no completed_by"):
        _flatten(obj)


# =========================================================================== table exports, as downloaded
# The exports below are written the way the platforms write them (column sets, quoting, line ends,
# status words), then read through load_annotations: what a user gets from the file they downloaded.

RADIO_HEADER = [*MTURK_HEADER[:-3], "Answer.cat.on", "Answer.dog.on", "Approve", "Reject"]


def _radio_row(hit, assignment, worker, status, cat, dog, reject=""):
    row = dict(zip(MTURK_HEADER, _mturk_row(hit, assignment, worker, "a photo", "")))
    row.update({"AssignmentStatus": status, "Answer.cat.on": cat, "Answer.dog.on": dog, "Reject": reject})
    if status == "Approved":
        row["ApprovalTime"] = "Wed Mar 06 10:02:11 PST 2024"
    if status == "Rejected":
        row["RejectionTime"] = "Wed Mar 06 10:02:11 PST 2024"
        row["RequesterFeedback"] = "Answers do not match the image"
    return [row[c] for c in RADIO_HEADER]


def _mturk_radio_csv(rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_ALL)  # MTurk quotes every cell
    w.writerow(RADIO_HEADER)
    for r in rows:
        w.writerow(_radio_row(*r))
    return buf.getvalue()


# An image batch ("Is it a cat or a dog?", crowd-radio-group with buttons named cat and dog).
MTURK_RADIO_ROWS = [
    ("3HITAAAA", "3ASG01", "A1WORKER", "Approved", "true", "false"),
    ("3HITAAAA", "3ASG02", "A2WORKER", "Rejected", "false", "true"),
    ("3HITAAAA", "3ASG03", "A3WORKER", "Submitted", "true", "false"),
    ("3HITBBBB", "3ASG04", "A1WORKER", "Submitted", "false", "true"),
    ("3HITBBBB", "3ASG05", "A2WORKER", "Submitted", "true", "false", "clicked without looking"),
    ("3HITBBBB", "3ASG06", "A3WORKER", "Approved", "false", "true"),
    ("3HITCCCC", "3ASG07", "A2WORKER", "Rejected", "true", "false"),
]


def _load_file(tmp_path, name, text, **kw):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_annotations(str(path), **kw)
    messages = [str(w.message).replace(str(tmp_path), "<tmp>") for w in caught if issubclass(w.category, CrowdaggWarning)]
    return data, messages


def _triples(data):
    return sorted(
        (data.task_names[t], data.worker_names[w], data.classes[y])
        for t, w, y in zip(data.task, data.worker, data.label)
    )


def test_mturk_radio_buttons_with_rejected_assignments(tmp_path):
    data, messages = _load_file(tmp_path, "Batch_5012345_batch_results.csv", _mturk_radio_csv(MTURK_RADIO_ROWS))
    assert data.classes == ("cat", "dog")
    assert _triples(data) == [
        ("3HITAAAA", "A1WORKER", "cat"),
        ("3HITAAAA", "A3WORKER", "cat"),
        ("3HITBBBB", "A1WORKER", "dog"),
        ("3HITBBBB", "A3WORKER", "dog"),
    ]
    # The task whose only answer was rejected keeps its place, with no answers.
    assert list(data.task_names) == ["3HITAAAA", "3HITBBBB", "3HITCCCC"]
    assert data.answers_per_task.tolist() == [2, 2, 0]
    assert messages == [
        "<tmp>/Batch_5012345_batch_results.csv: excluded 3 rejected answer(s) (AssignmentStatus rejected, "
        "or a reason in the Reject column; first at <tmp>/Batch_5012345_batch_results.csv line 3); "
        "set rejected to 'keep' to count them",
        "<tmp>/Batch_5012345_batch_results.csv: 1 task(s) have no answers left once those are left out; "
        "each keeps its output row",
    ]


def test_mturk_rejected_answers_kept_on_request(tmp_path):
    data, messages = _load_file(
        tmp_path, "batch.csv", _mturk_radio_csv(MTURK_RADIO_ROWS), rejected="keep"
    )
    assert len(data.task) == 7
    assert ("3HITCCCC", "A2WORKER", "cat") in _triples(data)
    assert ("3HITBBBB", "A2WORKER", "cat") in _triples(data)  # the Reject reason is ignored too
    assert messages == []


def test_rejected_policy_is_checked(tmp_path):
    assert REJECTED_POLICIES == ("exclude", "keep")
    with pytest.raises(UsageError, match=r"^rejected must be one of exclude, keep, got 'drop'$"):
        _load_file(tmp_path, "batch.csv", _mturk_radio_csv(MTURK_RADIO_ROWS), rejected="drop")


def test_mturk_question_choice_radio_columns(tmp_path):
    header = "HITId,WorkerId,AssignmentStatus,Input.text,Answer.sentiment.negative,Answer.sentiment.neutral,Answer.sentiment.positive\n"
    rows = (
        "H1,W1,Approved,great,false,false,true\n"
        "H1,W2,Approved,great,FALSE,TRUE,FALSE\n"  # Excel writes booleans in capitals
        "H2,W1,Submitted,awful,true,false,false\n"
    )
    data, messages = _load_file(tmp_path, "b.csv", header + rows)
    assert data.classes == ("negative", "neutral", "positive")
    assert _triples(data) == [("H1", "W1", "positive"), ("H1", "W2", "neutral"), ("H2", "W1", "negative")]
    assert messages == []


def test_mturk_radio_several_true_is_an_error_naming_the_line(tmp_path):
    rows = [*MTURK_RADIO_ROWS[:3], ("3HITBBBB", "3ASG04", "A1WORKER", "Submitted", "true", "true")]
    with pytest.raises(DataError) as e:
        _load_file(tmp_path, "batch.csv", _mturk_radio_csv(rows))
    assert str(e.value).replace(str(tmp_path), "<tmp>") == (
        "<tmp>/batch.csv line 5: 2 radio buttons of 'Answer' are true ('Answer.cat.on', 'Answer.dog.on'); "
        "crowdagg aggregates one class per answer (1 such row(s) in all)"
    )


def test_mturk_radio_several_true_on_a_rejected_row_is_left_out_with_it(tmp_path):
    rows = [*MTURK_RADIO_ROWS[:3], ("3HITBBBB", "3ASG04", "A1WORKER", "Rejected", "true", "true")]
    data, _ = _load_file(tmp_path, "batch.csv", _mturk_radio_csv(rows))
    assert list(data.task_names) == ["3HITAAAA", "3HITBBBB"]
    assert data.answers_per_task.tolist() == [2, 0]


def test_mturk_radio_none_true_is_a_blank_label(tmp_path):
    # The question left unanswered: the row's label is blank, for the reader's blank-label rule.
    rows = [*MTURK_RADIO_ROWS[:1], ("3HITAAAA", "3ASG03", "A3WORKER", "Submitted", "false", "false")]
    path = tmp_path / "batch.csv"
    path.write_text(_mturk_radio_csv(rows))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table, cols = _answer_columns(read_raw(str(path)), None, None, None)
    assert cols == ("HITId", "WorkerId", "Answer")
    assert table.column("Answer").to_pylist() == ["cat", ""]
    assert [str(w.message).replace(str(tmp_path), "<tmp>") for w in caught] == [
        "<tmp>/batch.csv: 1 answer(s) with no radio button of 'Answer' true: their label is blank "
        "(first at <tmp>/batch.csv line 3)"
    ]


def test_mturk_radio_batches_joined_with_cat_skip_the_repeated_header(tmp_path):
    text = _mturk_radio_csv(MTURK_RADIO_ROWS[:4])
    data, messages = _load_file(tmp_path, "joined.csv", text + text.replace("3ASG0", "3ASG1"))
    assert _triples(data) == sorted(2 * [
        ("3HITAAAA", "A1WORKER", "cat"), ("3HITAAAA", "A3WORKER", "cat"), ("3HITBBBB", "A1WORKER", "dog")
    ])
    assert messages[:2] == [
        "<tmp>/joined.csv: excluded 2 rejected answer(s) (AssignmentStatus rejected, or a reason in the Reject "
        "column; first at <tmp>/joined.csv line 3); set rejected to 'keep' to count them",
        "skipped 1 line(s) repeating the header (first at <tmp>/joined.csv line 6); "
        "were files joined with their headers?",
    ]


TOLOKA_STATUS_HEADER = [
    "INPUT:image", "OUTPUT:result", "GOLDEN:result", "HINT:text", "ASSIGNMENT:link", "ASSIGNMENT:task_id",
    "ASSIGNMENT:assignment_id", "ASSIGNMENT:worker_id", "ASSIGNMENT:status", "ASSIGNMENT:started",
]  # fmt: skip


def _toloka_tsv(rows) -> str:
    lines = ["\t".join(TOLOKA_STATUS_HEADER)]
    for i, (task, worker, status, answer) in enumerate(rows):
        lines.append("\t".join([
            f"https://tlk.s3.yandex.net/pets/{task}.jpg", answer, "", "", f"https://toloka.ai/task/3416/{task}",
            task, f"{task}--{i:04d}", worker, status, "2024-03-05T09:20:01",
        ]))
    return "\n".join(lines) + "\n"


# One row per status Toloka writes (and an unknown one); T3 and T5 end up with no answer at all.
TOLOKA_ROWS = [
    ("00037cc2b4--61a8", "9a2c0b7d51", "APPROVED", "cat"),
    ("00037cc2b4--61a8", "51d7b0c2a9", "REJECTED", "dog"),
    ("00037cc2b4--61a8", "77e1f0aa02", "SUBMITTED", "cat"),
    ("00037cc2b4--61a9", "9a2c0b7d51", "ACCEPTED", "dog"),
    ("00037cc2b4--61a9", "51d7b0c2a9", "SKIPPED", ""),
    ("00037cc2b4--61b0", "77e1f0aa02", "EXPIRED", ""),
    ("00037cc2b4--61b0", "9a2c0b7d51", "ACTIVE", ""),
    ("00037cc2b4--61b1", "51d7b0c2a9", "REJECTED", "cat"),
    ("00037cc2b4--61b2", "77e1f0aa02", "ON_REVIEW", "dog"),
]


def test_toloka_every_status(tmp_path):
    assert set(ASSIGNMENT_STATUSES["toloka"]) == {
        "SUBMITTED", "ACCEPTED", "APPROVED", "REJECTED", "SKIPPED", "EXPIRED", "ACTIVE"
    }
    data, messages = _load_file(tmp_path, "assignments_from_pool_3416.tsv", _toloka_tsv(TOLOKA_ROWS))
    assert _triples(data) == [
        ("00037cc2b4--61a8", "77e1f0aa02", "cat"),
        ("00037cc2b4--61a8", "9a2c0b7d51", "cat"),
        ("00037cc2b4--61a9", "9a2c0b7d51", "dog"),
        ("00037cc2b4--61b2", "77e1f0aa02", "dog"),
    ]
    assert list(data.task_names) == [
        "00037cc2b4--61a8", "00037cc2b4--61a9", "00037cc2b4--61b0", "00037cc2b4--61b1", "00037cc2b4--61b2"
    ]
    assert data.answers_per_task.tolist() == [2, 1, 0, 0, 1]
    f = "<tmp>/assignments_from_pool_3416.tsv"
    assert messages == [
        f"{f}: left out 3 assignment(s) that hold no answer (ASSIGNMENT:status SKIPPED 1, EXPIRED 1, ACTIVE 1; "
        f"first at {f} line 6)",
        f"{f}: excluded 2 rejected answer(s) (ASSIGNMENT:status rejected; first at {f} line 3); "
        "set rejected to 'keep' to count them",
        f"{f}: kept 1 answer(s) whose ASSIGNMENT:status is not one Toloka is known to write ('ON_REVIEW' 1; "
        f"first at {f} line 10)",
        f"{f}: 2 task(s) have no answers left once those are left out; each keeps its output row",
    ]


def test_toloka_keep_rejected_still_leaves_out_skipped_and_expired(tmp_path):
    data, messages = _load_file(tmp_path, "pool.tsv", _toloka_tsv(TOLOKA_ROWS), rejected="keep")
    assert data.answers_per_task.tolist() == [3, 1, 0, 1, 1]
    assert not any("rejected" in m for m in messages)
    assert any("left out 3 assignment(s) that hold no answer" in m for m in messages)


def test_every_answer_rejected_is_an_error_unless_classes_are_given(tmp_path):
    rows = [("t1", "w1", "REJECTED", "cat"), ("t2", "w1", "REJECTED", "dog")]
    with pytest.raises(DataError, match=r"no answers in the input \(2 task\(s\), none answered\)"):
        _load_file(tmp_path, "pool.tsv", _toloka_tsv(rows))
    data, _ = _load_file(tmp_path, "pool.tsv", _toloka_tsv(rows), classes=["cat", "dog"])
    assert list(data.task_names) == ["t1", "t2"] and len(data.task) == 0


def test_statuses_are_read_from_every_table_format(tmp_path):
    import pandas as pd

    frame = pd.read_csv(io.StringIO(_toloka_tsv(TOLOKA_ROWS)), sep="\t", dtype=str, keep_default_na=False)
    expected = _triples(_load_file(tmp_path, "pool.tsv", _toloka_tsv(TOLOKA_ROWS))[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _triples(load_annotations(frame)) == expected
        frame.to_parquet(tmp_path / "pool.parquet")
        assert _triples(load_annotations(str(tmp_path / "pool.parquet"))) == expected
        (tmp_path / "pool.jsonl").write_text(frame.to_json(orient="records", lines=True))
        assert _triples(load_annotations(str(tmp_path / "pool.jsonl"))) == expected


# --------------------------------------------------------------------------- Label Studio JSON-MIN and CSV
def _ls_items(export):
    """What label-studio-sdk's converter iterates: one item per kept annotation, newest first."""
    for task in export:
        anns = [a for a in task["annotations"] if not a.get("was_cancelled")]
        if not task["annotations"]:
            yield task, {}, {}
        for ann in sorted(anns, key=lambda a: a.get("created_at", 0), reverse=True):
            outputs = {}
            for r in ann["result"]:
                outputs.setdefault(r["from_name"], []).append(r["value"]["choices"])
            yield task, outputs, ann


def _pretty(values):
    return values[0][0] if len(values) == 1 and len(values[0]) == 1 else {"choices": values[0]}


def _to_json_min(export) -> str:
    """The JSON-MIN export of a project, as label-studio-sdk's ``convert_to_json_min`` writes it."""
    records = []
    for task, outputs, ann in _ls_items(export):
        rec = dict(task["data"])
        rec["id"] = task["id"]
        for name, values in outputs.items():
            rec[name] = _pretty(values)
        who = ann.get("completed_by", {})
        rec["annotator"] = who.get("email") if isinstance(who, dict) else who
        for key in ("id", "created_at", "updated_at", "lead_time"):
            rec["annotation_id" if key == "id" else key] = ann.get(key)
        records.append(rec)
    return json.dumps(records, indent=2, ensure_ascii=False)


def _to_csv(export) -> str:
    """The CSV export, as label-studio-sdk's ``csv2.convert`` writes it (columns sorted by name)."""
    rows, keys = [], {"annotator", "annotation_id", "created_at", "updated_at", "lead_time"}
    for task, outputs, ann in _ls_items(export):
        rec = {"id": task["id"], **{k: _pretty(v) if len(v) == 1 and len(v[0]) == 1 else json.dumps(_pretty(v))
                                    for k, v in outputs.items()}}
        rec.update(task["data"])
        who = ann.get("completed_by", {})
        rec["annotator"] = who.get("email") if isinstance(who, dict) else str(who)
        for key in ("id", "created_at", "updated_at", "lead_time"):
            rec["annotation_id" if key == "id" else key] = ann.get(key)
        keys.update(rec)
        rows.append(rec)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=sorted(keys), quoting=csv.QUOTE_NONNUMERIC)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _ls_project():
    """A sentiment project with two data fields, an unannotated task, a skip and an annotation without a choice."""
    export = _export()
    for t in export:
        t["data"]["source"] = "reviews-2024.csv"
    export.append(_task(105, 5, "Too loud.", [
        _annotation(7, 105, 1, [_result(["Negative"])]),
        _annotation(8, 105, 3, [_result(["Negative"])]),
    ]))
    return export


LS_TRIPLES = [
    ("101", "1", "Positive"),
    ("101", "ana@example.org", "Negative"),
    ("102", "1", "Neutral"),
    ("104", "3", "Positive"),
    ("105", "1", "Negative"),
    ("105", "3", "Negative"),
]


@pytest.mark.parametrize("kind", ["json-min", "csv"])
def test_label_studio_min_and_csv_exports(tmp_path, kind):
    text = _to_json_min(_ls_project()) if kind == "json-min" else _to_csv(_ls_project())
    name = "project-12-at-2024-03-05-09-30-5f1c2a1b." + ("json" if kind == "json-min" else "csv")
    data, messages = _load_file(tmp_path, name, text)
    assert _triples(data) == LS_TRIPLES
    # Every task once, in export order; 103 (nobody annotated it) with no answers.
    assert list(data.task_names) == ["101", "102", "103", "104", "105"]
    assert data.answers_per_task.tolist() == [2, 1, 0, 1, 2]
    line = 5 if kind == "csv" else 4  # annotation 5 (no choice): the 4th row, after the header
    unit = "line" if kind == "csv" else "record"
    assert messages == [
        f"<tmp>/{name}: 1 Label Studio annotation(s) without a 'sentiment' choice skipped "
        f"(first at <tmp>/{name} {unit} {line})"
    ]


def test_label_studio_json_min_finds_the_control_by_key_order_even_with_one_annotation_per_task(tmp_path):
    # One annotator per task: no column varies within a task, but JSON-MIN's key order tells.
    export = [_task(1, 1, "ok", [_annotation(1, 1, 1, [_result(["Positive"])])]),
              _task(2, 2, "bad", [_annotation(2, 2, 1, [_result(["Negative"])])])]
    data, _ = _load_file(tmp_path, "min.json", _to_json_min(export))
    assert _triples(data) == [("1", "1", "Positive"), ("2", "1", "Negative")]


def test_label_studio_csv_one_annotation_per_task_lists_the_candidates(tmp_path):
    export = [_task(1, 1, "ok", [_annotation(1, 1, 1, [_result(["Positive"])])]),
              _task(2, 2, "bad", [_annotation(2, 2, 1, [_result(["Negative"])])])]
    with pytest.raises(DataError) as e:
        _load_file(tmp_path, "export.csv", _to_csv(export))
    assert str(e.value).replace(str(tmp_path), "<tmp>") == (
        "<tmp>/export.csv: 2 candidate label columns: 'sentiment', 'text'; set label_col to pick one"
    )
    data, _ = _load_file(tmp_path, "export.csv", _to_csv(export), label_col="sentiment")
    assert _triples(data) == [("1", "1", "Positive"), ("2", "1", "Negative")]


@pytest.mark.parametrize("kind", ["json-min", "csv"])
def test_label_studio_multi_choice_cell_is_refused_with_its_line(tmp_path, kind):
    export = _ls_project()
    export[0]["annotations"][0]["result"][0]["value"]["choices"] = ["Positive", "Neutral"]
    text = _to_json_min(export) if kind == "json-min" else _to_csv(export)
    name = "e.json" if kind == "json-min" else "e.csv"
    with pytest.raises(DataError) as e:
        _load_file(tmp_path, name, text)
    where = f"<tmp>/{name} record 1" if kind == "json-min" else f"<tmp>/{name} line 2"
    assert str(e.value).replace(str(tmp_path), "<tmp>") == (
        f"{where}: several choices for 'sentiment' in one annotation "
        '({"choices": ["Positive", "Neutral"]}); crowdagg aggregates one class per answer '
        "(multi-label answers are not supported)"
    )


def test_label_studio_csv_two_controls_are_listed_at_once(tmp_path):
    export = _ls_project()
    for i, t in enumerate(export):
        for a in t["annotations"]:
            a["result"] = a["result"] + [_result(["yes" if (i + a["id"]) % 2 else "no"], from_name="sarcasm")]
    with pytest.raises(DataError) as e:
        _load_file(tmp_path, "export.csv", _to_csv(export))
    assert str(e.value).endswith("2 candidate label columns: 'sarcasm', 'sentiment'; set label_col to pick one")
    data, _ = _load_file(tmp_path, "export.csv", _to_csv(export), label_col="sentiment")
    assert _triples(data) == LS_TRIPLES


# --------------------------------------------------------------------------- one error for every role
AMBIGUOUS_HEADER = ["item", "question", "rater_name", "answer", "response"]
AMBIGUOUS_MESSAGE = (
    "cannot tell which columns to read: 2 candidate task columns: 'item', 'question' (set task_col to pick one); "
    "no worker column (expected one of worker, annotator, rater, performer, ...; or set worker_col); "
    "2 candidate label columns: 'answer', 'response' (set label_col to pick one); "
    "found columns: 'item', 'question', 'rater_name', 'answer', 'response'"
)


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "json", "parquet", "frame"])
def test_every_missing_or_ambiguous_role_in_one_error(tmp_path, fmt):
    import pandas as pd

    frame = pd.DataFrame([["i1", "q1", "r1", "a", "b"]], columns=AMBIGUOUS_HEADER)
    path = tmp_path / f"answers.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "tsv":
        frame.to_csv(path, index=False, sep="\t")
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    elif fmt == "json":
        frame.to_json(path, orient="records")
    elif fmt == "parquet":
        frame.to_parquet(path)
    with pytest.raises(DataError) as e:
        load_annotations(frame if fmt == "frame" else str(path))
    source = "<frame>" if fmt == "frame" else str(path)
    assert str(e.value) == f"{source}: {AMBIGUOUS_MESSAGE}"


def test_platform_exports_missing_roles_in_one_error(tmp_path):
    # Toloka without a worker column and with two outputs; MTurk without WorkerId nor an answer.
    (tmp_path / "pool.tsv").write_text("INPUT:image\tOUTPUT:a\tOUTPUT:b\tASSIGNMENT:task_id\nx\t1\t2\tt\n")
    with pytest.raises(DataError) as e:
        load_annotations(str(tmp_path / "pool.tsv"))
    msg = str(e.value)
    assert "no worker column (expected ASSIGNMENT:worker_id (Toloka)" in msg
    assert "2 candidate label columns: 'OUTPUT:a', 'OUTPUT:b' (set label_col to pick one)" in msg
    assert msg.endswith("found columns: 'INPUT:image', 'OUTPUT:a', 'OUTPUT:b', 'ASSIGNMENT:task_id'")
    (tmp_path / "b.csv").write_text("HITId,AssignmentStatus,Input.text\nh,Approved,x\n")
    with pytest.raises(DataError) as e:
        load_annotations(str(tmp_path / "b.csv"))
    assert "no worker column (expected WorkerId (MTurk)" in str(e.value)
    assert "no label column (expected an Answer.<name> column (MTurk)" in str(e.value)


def test_explicit_column_missing_and_another_role_missing_in_one_error(tmp_path):
    (tmp_path / "a.csv").write_text("item,who,label\nt,w,a\n")
    with pytest.raises(DataError) as e:
        load_annotations(str(tmp_path / "a.csv"), task_col="task")
    assert str(e.value) == (
        f"{tmp_path / 'a.csv'}: cannot tell which columns to read: no column 'task' (from task_col); "
        "no worker column (expected one of worker, annotator, rater, performer, ...; or set worker_col); "
        "found columns: 'item', 'who', 'label'"
    )


# --------------------------------------------------------------------------- the row rules alone
def test_split_by_status_decides_on_distinct_values():
    status = pa.array(["Approved", "Rejected", " submitted ", "", "Pending", "AssignmentStatus", "REJECTED"])
    marks = pa.array(["", "", "bad", "", "", "Reject", ""])
    split = split_by_status(status, "mturk", reject_marks=marks, header_cell="AssignmentStatus")
    assert split.keep.tolist() == [True, False, False, True, True, True, False]
    assert split.rejected.tolist() == [1, 2, 6]
    assert split.unanswered == {}
    assert {k: v.tolist() for k, v in split.unknown.items()} == {"Pending": [4]}
    kept = split_by_status(status, "mturk", "keep", reject_marks=marks)
    assert kept.keep.tolist() == [True] * 7  # the header cell is merely unknown without header_cell
    assert kept.rejected.tolist() == []


def test_radio_labels():
    cat = pa.array(["true", "false", "False", "", "TRUE", "Answer.cat.on"])
    dog = pa.array(["false", "true", "false", "", "true", "Answer.dog.on"])
    labels, none, several = radio_labels([cat, dog], ["cat", "dog"], "Answer", ["Answer.cat.on", "Answer.dog.on"])
    assert labels.to_pylist() == ["cat", "dog", "", "", "dog", "Answer"]
    assert none.tolist() == [2, 3]
    assert several.tolist() == [4]


def test_boolean_cells():
    assert boolean_cells(pa.array(["true", "FALSE", ""]))
    assert boolean_cells(np.array(["true", "Answer.x.on"], dtype=object), header_cell="Answer.x.on")
    assert not boolean_cells(np.array(["true", "Answer.x.on"], dtype=object))
    assert not boolean_cells(pa.array(["", " "]))  # nothing to tell
    assert not boolean_cells(pa.array(["true", "yes"]))


def test_older_skipped_flag_counts_as_cancelled():
    # Label Studio before 1.0 marked a skipped task "skipped": true (label-studio-sdk's converter reads both).
    old = [{"id": 1, "data": {"text": "x"}, "completions": [
        {"id": 1, "completed_by": 1, "result": [_result(["Positive"])]},
        {"id": 2, "completed_by": 2, "skipped": True, "result": []},
    ]}]
    flat = _flatten(old)
    assert (flat.task, flat.worker, flat.label, flat.n_cancelled, flat.n_without_choice) == (
        ["1"], ["1"], ["Positive"], 1, 0
    )


def test_joined_exports_keep_every_task_once(tmp_path):
    # A Toloka pool whose task 00037cc2b4--61b0 has no answer left, joined with a plain CSV.
    (tmp_path / "a_pool.tsv").write_text(_toloka_tsv(TOLOKA_ROWS))
    (tmp_path / "b_more.csv").write_text("task,worker,label\nextra1,w9,cat\n00037cc2b4--61a9,w9,dog\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations([str(tmp_path)])
    assert list(data.task_names) == [
        "00037cc2b4--61a8", "00037cc2b4--61a9", "00037cc2b4--61b0", "00037cc2b4--61b1", "00037cc2b4--61b2",
        "extra1",
    ]
    assert data.answers_per_task.tolist() == [2, 2, 0, 0, 1, 1]


def test_mturk_radio_buttons_are_the_class_set_even_when_nobody_chose_one(tmp_path):
    header = "HITId,WorkerId,AssignmentStatus,Answer.q.yes,Answer.q.no,Answer.q.unsure\n"
    data, messages = _load_file(tmp_path, "b.csv", header + "H1,W1,Approved,true,false,false\nH2,W1,Approved,false,true,false\n")
    assert data.classes == ("no", "unsure", "yes")
    assert _triples(data) == [("H1", "W1", "yes"), ("H2", "W1", "no")]
    assert messages == []  # no "only one class" or unused-class surprise
    # Given classes still win.
    data, _ = _load_file(tmp_path, "b.csv", header + "H1,W1,Approved,true,false,false\n", classes=["yes", "no", "unsure"])
    assert data.classes == ("yes", "no", "unsure")


JSON_MIN_RECORDS = [
    {"text": "a", "id": 1, "sentiment": "Positive", "annotator": 1, "annotation_id": 10, "created_at": "x",
     "updated_at": "y", "lead_time": 1.2},
    {"text": "a", "id": 1, "sentiment": "Negative", "annotator": 2, "annotation_id": 11, "created_at": "x",
     "updated_at": "y", "lead_time": 1.2},
    {"text": "b", "id": 2},
    {"text": "c", "id": 3, "annotator": 2, "annotation_id": 12, "created_at": "x", "updated_at": "y",
     "lead_time": 1.2},
]


@pytest.mark.parametrize("order", ["label-studio", "id-first", "sorted"])
def test_label_studio_json_min_rewritten_in_another_key_order_reads_the_control_not_a_data_field(tmp_path, order):
    """``id, text, annotator, ..., sentiment`` took the data field ``text`` for the control, silently."""
    def reorder(rec):
        if order == "sorted":
            return dict(sorted(rec.items()))
        if order == "id-first":
            return {"id": rec["id"], **{k: v for k, v in rec.items() if k != "id" and k != "sentiment"},
                    **({"sentiment": rec["sentiment"]} if "sentiment" in rec else {})}
        return rec

    p = tmp_path / "min.json"
    p.write_text(json.dumps([reorder(r) for r in JSON_MIN_RECORDS]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_annotations(str(p))
    assert list(data.classes) == ["Negative", "Positive"]
    assert list(data.task_names) == ["1", "2", "3"]
    assert data.n_answers == 2 and data.answers_per_task.tolist() == [2, 0, 0]
    assert any("without a 'sentiment' choice skipped" in str(w.message) for w in caught)


def test_json_min_controls_never_name_a_key_an_unannotated_task_holds():
    from crowdagg.io.platforms import json_min_controls

    rewritten = [{"id": 1, "text": "a", "annotator": 1, "annotation_id": 10, "sentiment": "Positive"},
                 {"id": 2, "text": "b"}]
    assert json_min_controls(rewritten).names == []
    assert json_min_controls(JSON_MIN_RECORDS).names == ["sentiment"]


@pytest.mark.parametrize(("key", "row", "message"), [
    ("id", 0, "the task (column 'id') at <tmp>/min.json record 1 holds a list (JSON array), not one name: ['1']"),
    ("annotator", 2, "the worker (column 'annotator') at <tmp>/min.json record 3 holds a list (JSON array), "
                     "not one name: ['2']"),
])
def test_label_studio_json_min_value_that_is_no_name_is_named_by_record_and_column(tmp_path, key, row, message):
    """Read before the columns were mapped, it was "name at row 0: holds a list ...": no file, line or column."""
    records = [dict(r) for r in JSON_MIN_RECORDS]
    records[row][key] = [records[row].get(key, 2)]
    p = tmp_path / "min.json"
    p.write_text(json.dumps(records))
    with pytest.raises(DataError) as exc:
        load_annotations(str(p))
    assert str(exc.value).replace(str(tmp_path), "<tmp>") == message


def test_platform_status_that_is_no_name_is_named_by_row_and_column():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"HITId": ["H1", "H2"], "WorkerId": ["W1", "W2"],
                          "AssignmentStatus": [["Rejected"], "Approved"], "Answer.sentiment": ["pos", "neg"]})
    with pytest.raises(DataError, match=r"^the status \(column 'AssignmentStatus'\) at <frame> row 0 holds a list"):
        load_annotations(frame)


def test_label_studio_json_min_nested_data_field_is_no_control_and_no_error(tmp_path):
    """A rewritten JSON-MIN (key order sorted) whose task data holds an object: the rows find the control."""
    records = [dict(sorted({**r, "meta": {"source": "web"}}.items())) for r in JSON_MIN_RECORDS]
    p = tmp_path / "min.json"
    p.write_text(json.dumps(records))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        data = load_annotations(str(p))
    assert list(data.classes) == ["Negative", "Positive"]
    assert data.n_answers == 2 and data.answers_per_task.tolist() == [2, 0, 0]


def test_mturk_answer_column_with_a_nested_value_is_no_radio_button_and_is_named_when_read():
    """It was "status at row 0: holds a list": the radio-button check met it first, worded as a status."""
    pd = pytest.importorskip("pandas")
    from crowdagg.io.platforms import boolean_cells

    assert boolean_cells(np.array([["true"], "false"], dtype=object)) is False
    frame = pd.DataFrame({"HITId": ["H1", "H2"], "WorkerId": ["W1", "W2"], "AssignmentStatus": ["Approved"] * 2,
                          "Answer.q.yes": [["true"], "false"], "Answer.q.no": ["false", "true"]})
    with pytest.raises(DataError, match=r"^the label \(column 'Answer.q.yes'\) at <frame> row 0 holds a list"):
        load_annotations(frame, label_col="Answer.q.yes")
