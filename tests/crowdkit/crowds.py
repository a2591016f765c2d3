"""The crowds of crowd-kit 1.4.2's own tests (tests/aggregation/conftest.py: toy, "simple"), rebuilt as data, and
the values its classes give on them."""

from __future__ import annotations

import pandas as pd
from pandas.testing import assert_series_equal

# crowd-kit's majority vote keeps first appearance under pandas 3 and sorts under pandas 2 (tests below say where)
PANDAS3 = int(pd.__version__.split(".")[0]) >= 3

# ----------------------------------------------------------------------------- crowds
# toy: five workers, five tasks (w3 skipped t1); truth t1 yes, t2 yes, t3 no, t4 yes, t5 no
TOY_GRID = {
    "w1": ["no", "yes", "yes", "yes", "yes"],
    "w2": ["yes", "yes", "no", "yes", "no"],
    "w3": [None, "yes", "no", "yes", "no"],
    "w4": ["yes", "no", "yes", "yes", "no"],
    "w5": ["no", "no", "no", "yes", "no"],
}
TOY_TRUTH = {"t1": "yes", "t2": "yes", "t3": "no", "t4": "yes", "t5": "no"}

# "simple": six tasks (ids share a prefix), ten workers, three animals; one worker always answers parrot
P = "1231239876--5fac0d234ffb2f3b00893"
SIMPLE_ROWS = {
    "bde3b214b06c1efa6cb1bc6284dc72d2": "eec goose efb parrot f03 goose f05 goose f02 parrot f08 parrot",
    "b17c3301ad2ccbb798716fdd405d16e8": "efb parrot ee8 chicken f07 parrot efd chicken ee4 chicken f03 goose",
    "a452e450f913cfa987cad58d50393718": "ee8 chicken eec goose f05 goose f02 parrot f08 parrot",
    "0f65edea0a6dc7b9acba1dea313bbb3d": "eec goose ee8 chicken f03 goose ee4 chicken",
    "0c3eb7d5fcc414db137c4180a654c06e": "eec parrot efb parrot f07 parrot efd parrot ee4 parrot f05 parrot",
    "e563e2fb32fce9f00123a65a1bc78c55": "efb parrot ee8 goose f02 parrot f08 parrot f07 parrot efd goose",
}
SIMPLE_TRUTH = {"eec": "goose", "f03": "goose", "f05": "goose", "efb": "parrot", "f02": "parrot", "f08": "parrot",
                "f07": "parrot", "ee8": "chicken", "efd": "chicken", "ee4": "chicken"}


def toy_frame(task_major: bool = False) -> pd.DataFrame:
    rows = [(w, f"t{i + 1}", y) for w, ys in TOY_GRID.items() for i, y in enumerate(ys) if y]
    frame = pd.DataFrame(rows, columns=["worker", "task", "label"])
    if task_major:
        frame = frame.sort_values(["task", "worker"], kind="stable")[["task", "worker", "label"]]
    return frame.reset_index(drop=True)


def truth(mapping: dict, prefix: str = "") -> pd.Series:
    s = pd.Series({prefix + t: y for t, y in mapping.items()}, name="agg_label")
    s.index.name = "task"
    return s.sort_index()


def simple_frame() -> pd.DataFrame:
    rows = []
    for worker, text in SIMPLE_ROWS.items():
        cells = text.split()
        rows += [(worker, P + t, y) for t, y in zip(cells[::2], cells[1::2])]
    return pd.DataFrame(rows, columns=["worker", "task", "label"])


def labels_equal(result: pd.Series, expected: pd.Series) -> None:
    assert_series_equal(result.sort_index(), expected.sort_index())


# ----------------------------------------------------------------------------- Dawid-Skene, step by step
def frame(rows: dict, columns: list, name: str | None = "label") -> pd.DataFrame:
    out = pd.DataFrame.from_dict(rows, orient="index", columns=pd.Index(columns, name=name))
    out.index.name = "task"
    return out


# ----------------------------------------------------------------------------- majority vote, Wawa
TOY_MV = {"t1": [0.5, 0.5], "t2": [0.4, 0.6], "t3": [0.6, 0.4], "t4": [0.0, 1.0], "t5": [0.8, 0.2]}
TOY_WAWA = {"t1": [1.4 / 2.6, 1.2 / 2.6], "t2": [1 / 3, 2 / 3], "t3": [2.6 / 3.6, 1 / 3.6], "t4": [0.0, 1.0],
            "t5": [3 / 3.6, 0.6 / 3.6]}
TOY_MV_LABELS = {"t1": "no", "t2": "yes", "t3": "no", "t4": "yes", "t5": "no"}
TOY_SKILLS = [0.6, 0.8, 1.0, 0.4, 0.8]
SIMPLE_MV = {"ee4": [2 / 3, 0, 1 / 3], "ee8": [3 / 4, 1 / 4, 0], "eec": [0, 3 / 4, 1 / 4], "efb": [0, 0, 1],
             "efd": [1 / 3, 1 / 3, 1 / 3], "f02": [0, 0, 1], "f03": [0, 1, 0], "f05": [0, 2 / 3, 1 / 3],
             "f07": [0, 0, 1], "f08": [0, 0, 1]}
SIMPLE_WAWA = {"ee4": [6 / 7, 0, 1 / 7], "ee8": [9 / 11, 2 / 11, 0], "eec": [0, 0.9, 0.1], "efb": [0, 0, 1],
               "efd": [0.5, 1 / 3, 1 / 6], "f02": [0, 0, 1], "f03": [0, 1, 0], "f05": [0, 6 / 7, 1 / 7],
               "f07": [0, 0, 1], "f08": [0, 0, 1]}
SIMPLE_WORKERS = sorted(SIMPLE_ROWS)
SIMPLE_SKILLS = [1 / 3, 1.0, 1.0, 1.0, 1.0, 2 / 3]  # in sorted worker order: 0c3e (the parrot), ..., e563
if PANDAS3:  # MV's tie on efd goes to goose (the first label to appear): two workers' skills, so Wawa's weights, move
    SIMPLE_SKILLS = [1 / 3, 1.0, 1.0, 5 / 6, 1.0, 5 / 6]
    SIMPLE_WAWA = {**SIMPLE_WAWA, "ee4": [11 / 13, 0, 2 / 13], "ee8": [17 / 22, 5 / 22, 0], "efd": [5 / 12, 5 / 12, 1 / 6]}


def skills_series(names, values) -> pd.Series:
    return pd.Series(values, index=pd.Index(names, name="worker"), name="skill")
