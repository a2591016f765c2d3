"""The terminal tables (``crowdagg workers``' report, ``crowdagg evaluate``'s metrics): names drawn as they are
spelt, whatever characters they hold, and a narrow terminal not cropping the numbers; the report's --sort from
Python."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from crowdagg.reports import terminal_text
from crowdagg.reports.evaluate import evaluate_labels
from crowdagg.reports.evaluate import print_table as print_evaluation
from crowdagg.reports.workers import print_table


def _report(names: list[str]) -> pd.DataFrame:
    n = len(names)
    return pd.DataFrame({
        "worker": names, "answers": [108] * n, "accuracy": [0.8418] * n, "accuracy_low": [0.7614] * n,
        "accuracy_high": [0.8987] * n, "chance_accuracy": [0.5284] * n, "agreement": [0.8425] * n,
        "spam_score": [0.4210] * n, "spammer": pd.array([True] + [False] * (n - 1), dtype="boolean"),
        "flagged_by": ["covariance"] + [""] * (n - 1),
    })


def _printed(frame: pd.DataFrame) -> str:
    stream = io.StringIO()
    print_table(frame, stream)
    return stream.getvalue()


def test_worker_names_that_look_like_markup_are_drawn_as_spelt():
    # "[/bold]" failed the table (rich's MarkupError: closing tag doesn't match), "[red]alice" was drawn "alice"
    shown = _printed(_report(["[/bold]", "[red]alice", "plain"]))
    assert "[/bold]" in shown and "[red]alice" in shown and "plain" in shown


def test_control_characters_in_a_worker_name_reach_the_terminal_escaped():
    shown = _printed(_report(["bob\x1b[31mred", "tab\there", "bell\x07"]))
    assert "\x1b" not in shown and "\x07" not in shown and "\t" not in shown
    assert "bob\\x1b[31mred" in shown and "tab\\there" in shown and "bell\\x07" in shown


def test_terminal_text_keeps_printable_text_and_escapes_the_rest():
    assert terminal_text("日本語 😀 [b]").plain == "日本語 😀 [b]"
    assert terminal_text("a\nb\r\x00").plain == "a\\nb\\r\\x00"


@pytest.mark.parametrize("width", ["20", "40", "79"])
def test_a_terminal_under_80_columns_gets_the_whole_table_not_cropped_numbers(monkeypatch, width):
    # At 40 columns rich dropped the worker column and cropped 0.76-0.90 to "0.76-0" and 0.528 to "0."
    monkeypatch.setenv("COLUMNS", width)
    shown = _printed(_report(["worker-one", "worker-two"]))
    for cell in ("worker-one", "worker-two", "108", "0.842", "0.76-0.90", "0.528", "0.843", "0.421", "covariance"):
        assert cell in shown, (cell, shown)
    assert max(map(len, shown.splitlines())) <= 80


def test_evaluate_table_draws_class_names_as_spelt():
    stream = io.StringIO()
    print_evaluation(evaluate_labels({"t1": "[/x]", "t2": "[red]b"}, {"t1": "[/x]", "t2": "[/x]"}), stream)
    assert "recall[[/x]]" in stream.getvalue()


@pytest.mark.parametrize("column", [None, 5, ["accuracy"]])
def test_sort_report_refuses_a_column_that_is_not_a_name(column):
    from crowdagg.errors import UsageError
    from crowdagg.reports.workers import sort_report

    with pytest.raises(UsageError, match=r"^--sort takes a column's name \(COLUMN or -COLUMN\), got "):
        sort_report(_report(["a", "b"]), column)  # AttributeError: 'NoneType' object has no attribute 'startswith'


def test_sort_by_worker_orders_numeric_ids_by_value_and_text_as_text():
    from crowdagg.reports.workers import sort_report

    frame = _report(["1005", "39", "97", "175"])
    assert sort_report(frame, "worker")["worker"].tolist() == ["39", "97", "175", "1005"]  # was 1005, 175, 39, 97
    assert sort_report(frame, "-worker")["worker"].tolist() == ["1005", "175", "97", "39"]
    mixed = _report(["b7", "39", "a"])
    assert sort_report(mixed, "worker")["worker"].tolist() == ["39", "a", "b7"]
    assert sort_report(frame, "-accuracy")["worker"].tolist() == ["1005", "39", "97", "175"]  # ties: input order
