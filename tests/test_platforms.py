"""Label Studio JSON exports flattened to one answer per row (crowdagg.platforms)."""

from __future__ import annotations

import copy
import json

import pytest

from crowdagg.errors import DataError
from crowdagg.platforms import FlatAnswers, flatten_label_studio, is_label_studio

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
