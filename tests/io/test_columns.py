"""Column mapping on headers of real-shaped platform exports (crowdagg.io.columns)."""

from __future__ import annotations

import csv
import io

import pytest

from crowdagg.errors import DataError, UsageError
from crowdagg.io.columns import (
    LABEL_ALIASES,
    TASK_ALIASES,
    TRUTH_ALIASES,
    WORKER_ALIASES,
    ColumnMap,
    detect_platform,
    map_answer_columns,
    map_label_columns,
)

# The column set of an Amazon Mechanical Turk "Download CSV" batch results file
# (a sentiment HIT built from the crowd-html-elements classifier template).
MTURK_HEADER = [
    "HITId", "HITTypeId", "Title", "Description", "Keywords", "Reward", "CreationTime", "MaxAssignments",
    "RequesterAnnotation", "AssignmentDurationInSeconds", "AutoApprovalDelayInSeconds", "Expiration",
    "NumberOfSimilarHITs", "LifetimeInSeconds", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime",
    "SubmitTime", "AutoApprovalTime", "ApprovalTime", "RejectionTime", "RequesterFeedback", "WorkTimeInSeconds",
    "LifetimeApprovalRate", "Last30DaysApprovalRate", "Last7DaysApprovalRate", "Input.text",
    "Answer.sentiment.label", "Approve", "Reject",
]  # fmt: skip


def _mturk_row(hit: str, assignment: str, worker: str, text: str, answer: str) -> list[str]:
    values = {
        "HITId": hit,
        "HITTypeId": "3PB1H8ZVHDA5XB4KUS10HQGBZOLSXL",
        "Title": "Sentiment of a short text",
        "Description": "Read the text and choose its sentiment",
        "Keywords": "sentiment, text, classification",
        "Reward": "$0.05",
        "CreationTime": "Tue Mar 05 09:13:44 PST 2024",
        "MaxAssignments": "3",
        "RequesterAnnotation": "BatchId:5012345;OriginalHitTemplateId:928390909;",
        "AssignmentDurationInSeconds": "3600",
        "AutoApprovalDelayInSeconds": "259200",
        "Expiration": "Tue Mar 12 09:13:44 PDT 2024",
        "NumberOfSimilarHITs": "",
        "LifetimeInSeconds": "",
        "AssignmentId": assignment,
        "WorkerId": worker,
        "AssignmentStatus": "Submitted",
        "AcceptTime": "Tue Mar 05 09:20:01 PST 2024",
        "SubmitTime": "Tue Mar 05 09:20:31 PST 2024",
        "AutoApprovalTime": "Fri Mar 08 09:20:31 PST 2024",
        "ApprovalTime": "",
        "RejectionTime": "",
        "RequesterFeedback": "",
        "WorkTimeInSeconds": "30",
        "LifetimeApprovalRate": "0% (0/0)",
        "Last30DaysApprovalRate": "0% (0/0)",
        "Last7DaysApprovalRate": "0% (0/0)",
        "Input.text": text,
        "Answer.sentiment.label": answer,
        "Approve": "",
        "Reject": "",
    }
    return [values[c] for c in MTURK_HEADER]


def _mturk_csv() -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(MTURK_HEADER)
    w.writerow(_mturk_row("3X0EMNLXGK9L", "3A1COHJ8NK1", "A1B2C3D4E5F6G7", "I loved it, really.", "Positive"))
    w.writerow(_mturk_row("3X0EMNLXGK9L", "3A1COHJ8NK2", "A3KL9Q0PZX7Y1", "I loved it, really.", "Neutral"))
    w.writerow(_mturk_row("3YGE63DIN8YK", "3A1COHJ8NK3", "A1B2C3D4E5F6G7", "Never again", "Negative"))
    return buf.getvalue()


# The column set of a Toloka "Download results" TSV (an image classification project).
TOLOKA_HEADER = [
    "INPUT:image", "OUTPUT:result", "GOLDEN:result", "HINT:text", "ASSIGNMENT:link", "ASSIGNMENT:task_id",
    "ASSIGNMENT:assignment_id", "ASSIGNMENT:worker_id", "ASSIGNMENT:status", "ASSIGNMENT:started",
]  # fmt: skip

TOLOKA_TSV = (
    "\t".join(TOLOKA_HEADER) + "\n"
    "https://tlk.s3.yandex.net/dogs/1.jpg\tdog\t\t\thttps://toloka.ai/task/3416/00037cc2b4\t00037cc2b4--61a8"
    "\t00037cc2b4--61a8f1\t9a2c0b7d51\tAPPROVED\t2024-03-05T09:20:01\n"
    "https://tlk.s3.yandex.net/dogs/1.jpg\tcat\tdog\tlook at the ears\thttps://toloka.ai/task/3416/00037cc2b4"
    "\t00037cc2b4--61a8\t00037cc2b4--61a8f2\t51d7b0c2a9\tREJECTED\t2024-03-05T09:21:11\n"
)

# A Prolific study export joined with the answers, as researchers typically share it.
PROLIFIC_CSV = (
    "item_id,annotator_id,response,rt_ms,STUDY_ID,SESSION_ID,submitted_at\n"
    "q01,5f8d3a2b9c1e4d0012ab34cd,yes,2310,65e1f0c2a7b3d90012c4e5f6,65e7aa01b2,2024-03-05 09:20:31\n"
    "q01,60a1b2c3d4e5f60012345678,no,1874,65e1f0c2a7b3d90012c4e5f6,65e7aa01b3,2024-03-05 09:22:10\n"
)


def _header(text: str, delimiter: str = ",") -> list[str]:
    return next(csv.reader(io.StringIO(text), delimiter=delimiter))


def _select(text: str, cmap: ColumnMap, delimiter: str = ",") -> list[tuple[str, str, str]]:
    rows = csv.DictReader(io.StringIO(text), delimiter=delimiter)
    return [(r[cmap.task], r[cmap.worker], r[cmap.label]) for r in rows]


# --------------------------------------------------------------------------- platforms
def test_mturk_batch_results_are_recognised_without_flags():
    text = _mturk_csv()
    header = _header(text)
    assert header == MTURK_HEADER
    cmap = map_answer_columns(header, source="Batch_5012345_batch_results.csv")
    assert cmap == ColumnMap(
        task="HITId", worker="WorkerId", label="Answer.sentiment.label", platform="mturk",
        status="AssignmentStatus", reject="Reject",
    )
    assert _select(text, cmap) == [
        ("3X0EMNLXGK9L", "A1B2C3D4E5F6G7", "Positive"),
        ("3X0EMNLXGK9L", "A3KL9Q0PZX7Y1", "Neutral"),
        ("3YGE63DIN8YK", "A1B2C3D4E5F6G7", "Negative"),
    ]


def test_mturk_single_part_answer_name_and_input_columns_are_not_labels():
    header = ["HITId", "WorkerId", "Input.image_url", "Input.label_hint", "Answer.category"]
    assert map_answer_columns(header, source="b.csv").label == "Answer.category"


def test_mturk_two_answer_columns_are_listed_and_label_picks_one():
    header = [*MTURK_HEADER[:-2], "Answer.topic", "Approve", "Reject"]
    with pytest.raises(DataError) as e:
        map_answer_columns(header, source="batch.csv")
    msg = str(e.value)
    assert "batch.csv" in msg
    assert "'Answer.sentiment.label'" in msg and "'Answer.topic'" in msg
    assert "label_col" in msg
    assert "Input.text" not in msg
    assert "\n" not in msg
    cmap = map_answer_columns(header, source="batch.csv", label="Answer.topic")
    assert (cmap.task, cmap.worker, cmap.label, cmap.platform) == ("HITId", "WorkerId", "Answer.topic", "mturk")


def test_mturk_without_answer_column_says_what_is_expected():
    header = ["HITId", "WorkerId", "Input.text", "AssignmentStatus"]
    with pytest.raises(DataError, match=r"no label column.*Answer\.<name>.*label_col"):
        map_answer_columns(header, source="batch.csv")


def test_mturk_header_matched_after_stripping_and_case_insensitively():
    header = [" hitid ", "WORKERID", "Input.text", " answer.Sentiment "]
    cmap = map_answer_columns(header, source="x.csv")
    assert cmap == ColumnMap(task=" hitid ", worker="WORKERID", label=" answer.Sentiment ", platform="mturk")


def test_toloka_results_are_recognised_without_flags():
    header = _header(TOLOKA_TSV, "\t")
    assert header == TOLOKA_HEADER
    cmap = map_answer_columns(header, source="assignments_from_pool_3416.tsv")
    assert cmap == ColumnMap(
        task="ASSIGNMENT:task_id", worker="ASSIGNMENT:worker_id", label="OUTPUT:result", platform="toloka",
        status="ASSIGNMENT:status",
    )
    assert _select(TOLOKA_TSV, cmap, "\t") == [
        ("00037cc2b4--61a8", "9a2c0b7d51", "dog"),
        ("00037cc2b4--61a8", "51d7b0c2a9", "cat"),
    ]


def test_toloka_two_output_columns_are_listed_and_golden_input_hint_are_not():
    header = [*TOLOKA_HEADER, "OUTPUT:breed", "GOLDEN:breed"]
    with pytest.raises(DataError) as e:
        map_answer_columns(header, source="pool.tsv", options={"label": "label_col="})
    msg = str(e.value)
    assert "'OUTPUT:result'" in msg and "'OUTPUT:breed'" in msg
    assert "GOLDEN" not in msg and "INPUT:" not in msg and "HINT" not in msg
    assert "label_col=" in msg and "label_col)" not in msg
    cmap = map_answer_columns(header, source="pool.tsv", label="OUTPUT:breed")
    assert cmap.label == "OUTPUT:breed" and cmap.platform == "toloka"


def test_toloka_missing_worker_column_names_it():
    header = ["INPUT:image", "OUTPUT:result", "ASSIGNMENT:task_id"]
    with pytest.raises(DataError, match=r"no worker column.*ASSIGNMENT:worker_id.*worker_col"):
        map_answer_columns(header, source="pool.tsv")


def test_detect_platform():
    assert detect_platform(MTURK_HEADER) == "mturk"
    assert detect_platform(TOLOKA_HEADER) == "toloka"
    assert detect_platform(["task", "worker", "label"]) is None
    assert detect_platform(["item_id", "annotator_id", "response"]) is None


# --------------------------------------------------------------------------- generic headers
def test_prolific_style_csv_with_annotator_id():
    header = _header(PROLIFIC_CSV)
    cmap = map_answer_columns(header, source="prolific.csv")
    assert cmap == ColumnMap(task="item_id", worker="annotator_id", label="response", platform=None)
    assert _select(PROLIFIC_CSV, cmap) == [
        ("q01", "5f8d3a2b9c1e4d0012ab34cd", "yes"),
        ("q01", "60a1b2c3d4e5f60012345678", "no"),
    ]


@pytest.mark.parametrize("name", ["PROLIFIC_PID", "participant_id"])
def test_prolific_participant_columns_are_worker_aliases(name):
    cmap = map_answer_columns(["question", name, "answer"], source="p.csv")
    assert cmap.worker == name


def test_alias_tuples():
    assert {"participant_id", "prolific_pid", "annotator_id"} <= set(WORKER_ALIASES)
    for aliases, canonical in [(TASK_ALIASES, "task"), (WORKER_ALIASES, "worker"), (LABEL_ALIASES, "label")]:
        assert aliases[0] == canonical
    assert TRUTH_ALIASES[0] == "label"
    assert not set(TASK_ALIASES) & set(WORKER_ALIASES)
    assert not set(WORKER_ALIASES) & set(LABEL_ALIASES)
    assert not set(TASK_ALIASES) & set(LABEL_ALIASES)


def test_canonical_names_win_over_other_aliases():
    header = ["item", "task", "annotator", "worker", "answer", "label", "response"]
    assert map_answer_columns(header, source="a.csv") == ColumnMap("task", "worker", "label", None)


def test_several_label_aliases_without_label_column_are_all_listed():
    with pytest.raises(DataError) as e:
        map_answer_columns(["task", "worker", "answer", "response", "value"], source="a.csv")
    msg = str(e.value)
    assert msg.startswith("a.csv: ")
    assert "'answer'" in msg and "'response'" in msg and "'value'" in msg
    assert "label_col" in msg
    assert map_answer_columns(["task", "worker", "answer", "response"], source="a.csv", label="response").label == (
        "response"
    )


def test_several_task_aliases_without_task_column_are_listed():
    with pytest.raises(DataError, match=r"'item'.*'question'.*task_col"):
        map_answer_columns(["item", "question", "worker", "label"], source="a.csv")


def test_stripped_and_case_insensitive_generic_header():
    header = [" Task ", "WORKER", "Label\t"]
    assert map_answer_columns(header, source="a.csv") == ColumnMap(" Task ", "WORKER", "Label\t", None)


def test_same_name_twice_after_stripping_is_ambiguous():
    with pytest.raises(DataError, match=r"'label'.*' Label'"):
        map_answer_columns(["task", "worker", "label", " Label"], source="a.csv")


def test_duplicate_header_name_is_reported():
    with pytest.raises(DataError, match=r"'label' appears 2 times"):
        map_answer_columns(["task", "worker", "label", "label"], source="a.csv")


def test_missing_worker_message_wording():
    with pytest.raises(DataError) as e:
        map_answer_columns(["task", "label"], source="answers.csv")
    assert str(e.value) == (
        "answers.csv: no worker column; found columns: 'task', 'label' "
        "(expected one of worker, annotator, rater, performer, ...; or set worker_col)"
    )


def test_missing_column_message_uses_given_options():
    with pytest.raises(DataError) as e:
        map_answer_columns(["task", "label"], source="<frame>", options={"worker": "worker_col="})
    msg = str(e.value)
    assert "or set worker_col=)" in msg and "worker_col)" not in msg


def test_empty_header_names_every_missing_role_at_once():
    with pytest.raises(DataError) as e:
        map_answer_columns([], source="a.csv")
    assert str(e.value) == (
        "a.csv: cannot tell which columns to read: "
        "no task column (expected one of task, item, question, task_id, ...; or set task_col); "
        "no worker column (expected one of worker, annotator, rater, performer, ...; or set worker_col); "
        "no label column (expected one of label, answer, response, class, ...; or set label_col); "
        "found columns: (none)"
    )


# --------------------------------------------------------------------------- explicit columns
def test_explicit_columns_exact_or_stripped_return_the_original_names():
    header = [" id ", "who", "what", "label"]
    cmap = map_answer_columns(header, source="a.csv", task="id", worker="who", label="what")
    assert cmap == ColumnMap(" id ", "who", "what", None)
    assert map_answer_columns(header, source="a.csv", task=" id ", worker="who").label == "label"


def test_explicit_exact_name_wins_over_a_stripped_one():
    cmap = map_answer_columns(["a", " a", "worker", "label"], source="a.csv", task=" a")
    assert cmap.task == " a"


def test_explicit_column_not_found_names_option_value_and_columns():
    with pytest.raises(DataError) as e:
        map_answer_columns(["task", "worker", "label"], source="a.csv", worker="rater_name")
    msg = str(e.value)
    assert "'rater_name'" in msg and "worker_col" in msg and "'task', 'worker', 'label'" in msg
    with pytest.raises(DataError, match=r"'Verdict'.*\(from label=\)"):
        map_answer_columns(["task", "worker", "verdict"], source="a.csv", label="Verdict", options={"label": "label="})


def test_explicit_column_is_case_sensitive_but_hints():
    with pytest.raises(DataError, match=r"did you mean 'Verdict'"):
        map_answer_columns(["task", "worker", "Verdict"], source="a.csv", label="verdict")


def test_explicit_column_takes_the_column_out_of_the_other_roles():
    # "answer" is the task here, so the label is the only other label alias.
    cmap = map_answer_columns(["answer", "worker", "response"], source="a.csv", task="answer")
    assert cmap == ColumnMap("answer", "worker", "response", None)


def test_same_column_for_two_roles_is_a_usage_error():
    with pytest.raises(UsageError, match=r"different columns"):
        map_answer_columns(["task", "worker", "label"], source="a.csv", task="task", worker="task")
    with pytest.raises(UsageError, match=r"'label'.*label_col"):
        map_answer_columns(["task", "worker", "label"], source="a.csv", task="label")
    # Both MTurk-detected and explicit: still three different columns.
    with pytest.raises(UsageError):
        map_answer_columns(MTURK_HEADER, source="b.csv", worker="HITId")


def test_error_messages_are_one_line_without_class_names():
    cases = [
        dict(header=["task", "label"]),
        dict(header=["task", "worker", "answer", "response"]),
        dict(header=["task", "worker", "label"], worker="x"),
    ]
    for case in cases:
        with pytest.raises(DataError) as e:
            map_answer_columns(case.pop("header"), source="a.csv", **case)
        msg = str(e.value)
        assert "\n" not in msg and "Error" not in msg and "KeyError" not in msg


# --------------------------------------------------------------------------- two-column files
def test_label_columns_truth_file():
    assert map_label_columns(["task", "truth"], source="t.csv") == ("task", "truth")
    assert map_label_columns([" Item ", "GOLD"], source="t.csv") == (" Item ", "GOLD")
    assert map_label_columns(["task", "gold", "label"], source="t.csv") == ("task", "label")


def test_label_columns_ambiguous_truth_aliases_listed():
    with pytest.raises(DataError) as e:
        map_label_columns(["question", "gold", "prediction"], source="t.csv", options={"label": "truth_col="})
    msg = str(e.value)
    assert "'gold'" in msg and "'prediction'" in msg and "truth_col=" in msg
    assert map_label_columns(["question", "gold", "prediction"], source="t.csv", label="gold") == ("question", "gold")


def test_label_columns_custom_aliases_and_missing_message():
    assert map_label_columns(["task", "pred", "gold"], source="p.csv", aliases=("pred",)) == ("task", "pred")
    with pytest.raises(DataError) as e:
        map_label_columns(["task", "score"], source="p.csv", aliases=("prediction", "pred"))
    assert str(e.value) == (
        "p.csv: no label column; found columns: 'task', 'score' (expected one of prediction, pred; or set label_col)"
    )


def test_label_columns_same_column_is_a_usage_error():
    with pytest.raises(UsageError, match=r"task and label must be different columns"):
        map_label_columns(["task", "label"], source="t.csv", task="task", label=" task")


# --------------------------------------------------------------------------- radio buttons, Label Studio tables
def test_radio_groups_from_boolean_columns():
    from crowdagg.io.columns import radio_groups

    header = ["HITId", "WorkerId", "Answer.cat.on", "Answer.dog.on", "Answer.mood.happy", "Answer.mood.sad",
              "Answer.consent.on", "Answer.comment", "Input.x.on"]
    boolean = ["Answer.cat.on", "Answer.dog.on", "Answer.mood.happy", "Answer.mood.sad", "Input.x.on"]
    assert radio_groups(header, boolean) == {
        "Answer": [("Answer.cat.on", "cat"), ("Answer.dog.on", "dog")],
        "Answer.mood": [("Answer.mood.happy", "happy"), ("Answer.mood.sad", "sad")],
    }
    # A lone boolean column (a consent box) is no radio group.
    assert radio_groups(["Answer.consent.on", "Answer.cat"], ["Answer.consent.on"]) == {}


def test_mturk_radio_group_is_the_label():
    header = [*MTURK_HEADER[:-3], "Answer.cat.on", "Answer.dog.on", "Approve", "Reject"]
    cmap = map_answer_columns(header, source="b.csv", boolean=["Answer.cat.on", "Answer.dog.on"])
    assert cmap == ColumnMap(
        "HITId", "WorkerId", "Answer", "mturk", status="AssignmentStatus", reject="Reject",
        choices=(("Answer.cat.on", "cat"), ("Answer.dog.on", "dog")),
    )
    # Without knowing the cells, two Answer columns are two candidates, as before.
    with pytest.raises(DataError, match=r"2 candidate label columns: 'Answer.cat.on', 'Answer.dog.on'"):
        map_answer_columns(header, source="b.csv")


def test_mturk_radio_group_beside_a_free_text_answer_is_ambiguous_and_label_picks_either():
    header = ["HITId", "WorkerId", "Answer.comment", "Answer.s.pos.on", "Answer.s.neg.on"]
    boolean = ["Answer.s.pos.on", "Answer.s.neg.on"]
    with pytest.raises(DataError) as e:
        map_answer_columns(header, source="b.csv", boolean=boolean)
    assert str(e.value) == (
        "b.csv: 2 candidate label columns: 'Answer.comment', 'Answer.s' (radio buttons 'Answer.s.pos.on', "
        "'Answer.s.neg.on'); set label_col to pick one"
    )
    assert map_answer_columns(header, source="b.csv", boolean=boolean, label="Answer.s").choices == (
        ("Answer.s.pos.on", "pos"), ("Answer.s.neg.on", "neg")
    )
    picked = map_answer_columns(header, source="b.csv", boolean=boolean, label="Answer.comment")
    assert (picked.label, picked.choices) == ("Answer.comment", ())


LS_CSV_HEADER = ["annotation_id", "annotator", "created_at", "id", "lead_time", "sentiment", "source", "text",
                 "updated_at"]


def test_label_studio_csv_header_is_recognised():
    assert detect_platform(LS_CSV_HEADER) == "label_studio"
    cmap = map_answer_columns(LS_CSV_HEADER, source="e.csv", controls=["sentiment"])
    assert cmap == ColumnMap("id", "annotator", "sentiment", "label_studio")
    with pytest.raises(DataError) as e:
        map_answer_columns(LS_CSV_HEADER, source="e.csv")
    assert str(e.value) == (
        "e.csv: 3 candidate label columns: 'sentiment', 'source', 'text'; set label_col to pick one"
    )
    # Controls that say nothing (none found) leave every candidate in.
    with pytest.raises(DataError, match=r"3 candidate label columns"):
        map_answer_columns(LS_CSV_HEADER, source="e.csv", controls=[])


def test_usage_error_comes_before_missing_columns():
    with pytest.raises(UsageError, match=r"the task and label columns must differ"):
        map_answer_columns(["task", "answer"], source="a.csv", task="answer")


def test_label_columns_both_roles_missing_in_one_error():
    with pytest.raises(DataError) as e:
        map_label_columns(["id", "verdict"], source="truth.csv", options={"task": "--truth-task-col",
                                                                         "label": "--truth-label-col"})
    assert str(e.value) == (
        "truth.csv: cannot tell which columns to read: "
        "no task column (expected one of task, item, question, task_id, ...; or set --truth-task-col); "
        "no label column (expected one of label, truth, gold, true_label, ...; or set --truth-label-col); "
        "found columns: 'id', 'verdict'"
    )


def test_a_wide_header_is_resolved_in_linear_time():
    """Membership in the header was a list scan per field: 200,000 fields took over ten minutes.

    The work is counted, not timed: a field name that counts its equality
    comparisons.  Hashed membership compares a name only on a hash match
    (itself, by identity: no call); a list scan per field compares each with
    every field before it, ~1.5 n**2 calls (37 million here).
    """

    class Name(str):
        compared = 0

        def __eq__(self, other: object) -> bool:
            Name.compared += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    header = [Name(h) for h in ("task", "worker", "label", *(f"c{i}" for i in range(5_000)))]
    cmap = map_answer_columns(header, source="wide.csv")
    assert (cmap.task, cmap.worker, cmap.label) == ("task", "worker", "label")
    assert Name.compared <= 4 * len(header)  # a few per field at most; 0 today
