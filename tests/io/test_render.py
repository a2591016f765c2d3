"""Rows to bytes: one float policy, formats the readers read back exactly."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from crowdagg.errors import DataError, UsageError
from crowdagg.io.read import load_annotations, read_task_labels
from crowdagg.io.render import float_text, render_table

FLOATS = np.array([0.1, 1.2e-10, 1.0, 1 / 3, 5e-324, 0.9999999999999999, 123456789.123, 0.0])


def table(**extra):
    n = len(FLOATS)
    cols = {
        "task": np.array([f"t{i}" for i in range(n)], dtype=object),
        "label": np.array(["a", "b"] * (n // 2), dtype=object),
        "confidence": FLOATS,
        "n_answers": np.arange(n),
    }
    cols.update(extra)
    return cols


def test_float_text_is_the_shortest_round_trip():
    assert float_text(FLOATS) == [repr(float(v)) for v in FLOATS]
    assert float_text(np.array([1.2e-10]))[0] == "1.2e-10"  # not rounded to 0.0
    with pytest.raises(DataError, match="non-finite"):
        float_text(np.array([1.0, np.nan]))


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "json"])
def test_every_format_reads_back_exactly(fmt):
    text = render_table(table(), fmt).decode()
    if fmt == "csv":
        back = pd.read_csv(io.StringIO(text), dtype={"task": str, "label": str})
    elif fmt == "tsv":
        back = pd.read_csv(io.StringIO(text), sep="\t", dtype={"task": str})
    elif fmt == "jsonl":
        back = pd.DataFrame([json.loads(x) for x in text.splitlines()])
    else:
        back = pd.DataFrame(json.loads(text))
    np.testing.assert_array_equal(back["confidence"].to_numpy(), FLOATS)  # bit-exact
    assert back["task"].tolist() == [f"t{i}" for i in range(len(FLOATS))]
    assert back["n_answers"].tolist() == list(range(len(FLOATS)))


def test_csv_quotes_only_what_needs_it():
    cols = {"task": np.array(['a,b', 'say "hi"', "two\nlines", "plain"], dtype=object), "x": np.arange(4)}
    text = render_table(cols, "csv").decode()
    assert text.splitlines()[1] == '"a,b",0'
    assert '"say ""hi"""' in text and "plain,3" in text
    back = pd.read_csv(io.StringIO(text), dtype=str)
    assert back["task"].tolist() == ["a,b", 'say "hi"', "two\nlines", "plain"]


@pytest.mark.parametrize(("bad", "what"), [("a\tb", "a tab"), ("a\nb", "a newline"), ("a\rb", "a carriage return")])
def test_tsv_refuses_values_it_cannot_write_naming_the_task(bad, what):
    cols = {"task": np.array(["t1", "t2"], dtype=object), "label": np.array(["x", bad], dtype=object)}
    with pytest.raises(DataError, match=f"task 't2' has {what} in column 'label'"):
        render_table(cols, "tsv", key="task")


def test_tsv_output_is_read_back_by_the_tsv_reader():
    cols = {
        "task": np.array(['"quoted', "t,2"], dtype=object),
        "worker": np.array(["w1", "w2"], dtype=object),
        "label": np.array(["a", "b"], dtype=object),
    }
    data = load_annotations(io.BytesIO(render_table(cols, "tsv")), input_format="tsv")
    assert list(data.task_names) == ['"quoted', "t,2"]


def test_json_escapes_and_keeps_unicode():
    cols = {"task": np.array(['q"\\', "é\u2028x"], dtype=object), "p": np.array([1e-300, 0.5])}
    text = render_table(cols, "jsonl").decode()
    rows = [json.loads(line) for line in text.split("\n") if line]
    assert [r["task"] for r in rows] == ['q"\\', "é\u2028x"]
    assert rows[0]["p"] == 1e-300
    assert "é" in text  # UTF-8, not \\u escapes


def test_json_output_round_trips_through_the_jsonl_reader():
    cols = {
        "task": np.array(["a\u2028b", "c"], dtype=object),
        "worker": np.array(["w", "w"], dtype=object),
        "label": np.array(["x", "y"], dtype=object),
    }
    data = load_annotations(io.BytesIO(render_table(cols, "jsonl")), input_format="jsonl")
    assert list(data.task_names) == ["a\u2028b", "c"]
    truth = read_task_labels(io.BytesIO(render_table(cols, "json")), input_format="json")
    assert truth == {"a\u2028b": "x", "c": "y"}


def test_empty_tables_and_unknown_format():
    empty = {"task": np.array([], dtype=object), "p": np.array([], dtype=float)}
    assert render_table(empty, "csv") == b"task,p\n"
    assert render_table(empty, "json") == b"[]\n"
    assert render_table(empty, "jsonl") == b""
    with pytest.raises(UsageError):
        render_table(empty, "xml")


def test_dataframe_input_is_accepted():
    frame = pd.DataFrame({"task": ["x"], "p": [0.25]})
    assert render_table(frame, "csv") == b"task,p\nx,0.25\n"


# --------------------------------------------------------------------------- the Arrow writer against the reference
import subprocess  # noqa: E402
import sys  # noqa: E402
from contextlib import contextmanager  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from crowdagg.io import render  # noqa: E402
from tests.reference import render_table_reference  # noqa: E402

TEXT_FORMATS = ["csv", "tsv", "jsonl", "json"]
SPECIALS = list(',"\r\n\t\\\x00\x01\x08\x0c\x1f\x7f\x85\u2028\u2029é€😀 a{}:')
CELL = st.text(alphabet=st.one_of(st.sampled_from(SPECIALS), st.characters(exclude_categories=["Cs"])), max_size=8)
NAME = st.one_of(st.sampled_from(["task", "label", "p", "n_answers"]), st.text(alphabet=st.sampled_from(SPECIALS), min_size=1, max_size=4))


@contextmanager
def fast_paths(block_rows=render._BLOCK_ROWS, kernel_min=render._KERNEL_MIN_ROWS):
    """Small blocks, and the numba kernels even for a few rows, so small tables take every path."""
    saved = render._BLOCK_ROWS, render._KERNEL_MIN_ROWS
    render._BLOCK_ROWS, render._KERNEL_MIN_ROWS = block_rows, kernel_min
    try:
        yield
    finally:
        render._BLOCK_ROWS, render._KERNEL_MIN_ROWS = saved


def outcome(fn, *args, **kwargs):
    """The bytes, or the error's type and message."""
    try:
        return fn(*args, **kwargs)
    except (DataError, UsageError, ValueError) as exc:
        return type(exc).__name__, str(exc)


def assert_same(cols, fmt, key=None):
    want = outcome(render_table_reference, cols, fmt, key=key)
    got = outcome(render_table, cols, fmt, key=key)
    assert got == want


def text_column(draw, n, form):
    values = draw(st.lists(CELL, min_size=n, max_size=n))
    if form == "object":
        return np.array(values, dtype=object)
    if form in ("string", "large_string"):
        return pa.array(values, getattr(pa, form)())
    if form == "chunked":
        cut = draw(st.integers(0, n))
        return pa.chunked_array([pa.array(values[:cut], pa.string()), pa.array(values[cut:], pa.string())], pa.string())
    vocab = draw(st.lists(CELL, min_size=1, max_size=5, unique=True))
    codes = draw(st.lists(st.integers(0, len(vocab) - 1), min_size=n, max_size=n))
    dict_arr = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(vocab))
    if form == "dict_chunked":
        cut = draw(st.integers(0, n))
        other = pa.DictionaryArray.from_arrays(pa.array(codes[cut:], pa.int8()), pa.array(vocab))
        return pa.chunked_array([dict_arr.slice(0, cut), other.cast(dict_arr.type)])
    return dict_arr


FLOAT = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e-300, max_value=1e-300),
    st.sampled_from([0.0, -0.0, 5e-324, 1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, 0.1, 1.0, 2.0**63]),
)


@st.composite
def tables(draw, *, allow_bad=False):
    n = draw(st.integers(0, 50))
    names = draw(st.lists(NAME, min_size=1, max_size=5, unique=True))
    cols = {}
    for name in names:
        kind = draw(st.sampled_from(["text", "text", "float", "int", "bool"]))
        if kind == "text":
            form = draw(st.sampled_from(["object", "string", "large_string", "chunked", "dict", "dict_chunked"]))
            cols[name] = text_column(draw, n, form)
        elif kind == "float":
            dtype = draw(st.sampled_from([np.float64, np.float64, np.float32]))
            elements = FLOAT if dtype == np.float64 else st.floats(allow_nan=False, allow_infinity=False, width=32)
            values = np.array(draw(st.lists(elements, min_size=n, max_size=n)), dtype=dtype)
            if allow_bad and n and draw(st.booleans()):
                values[draw(st.integers(0, n - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
            cols[name] = values
        elif kind == "int":
            dtype = draw(st.sampled_from([np.int64, np.int8, np.uint64, np.int32]))
            info = np.iinfo(dtype)
            cols[name] = np.array(draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=n, max_size=n)), dtype=dtype)
        else:
            cols[name] = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if allow_bad and draw(st.booleans()):
        cols[draw(st.sampled_from(names))] = np.arange(n + 1)
    return cols


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cols=tables(), data=st.data())
def test_arrow_writer_matches_the_reference(cols, data):
    key = data.draw(st.one_of(st.none(), st.sampled_from([*cols, "absent"])))
    for fmt in TEXT_FORMATS:
        assert_same(cols, fmt, key)


@SETTINGS
@given(cols=tables(), data=st.data())
def test_arrow_writer_matches_the_reference_in_small_blocks_with_the_kernels(cols, data):
    block = data.draw(st.integers(1, 8))
    with fast_paths(block_rows=block, kernel_min=0):
        for fmt in TEXT_FORMATS:
            assert_same(cols, fmt)


@settings(max_examples=40, deadline=None)
@given(cols=tables(allow_bad=True))
def test_errors_match_the_reference(cols):
    with fast_paths(block_rows=3, kernel_min=0):
        for fmt in TEXT_FORMATS:
            assert_same(cols, fmt)


@settings(max_examples=25, deadline=None)
@given(cols=tables())
def test_dataframe_input_matches_the_reference(cols):
    frame = pd.DataFrame({n: (v.to_pylist() if isinstance(v, (pa.Array, pa.ChunkedArray)) else v) for n, v in cols.items()})
    for n in list(frame.columns)[::2]:
        if frame[n].dtype == object or isinstance(frame[n].dtype, pd.StringDtype):
            frame[n] = frame[n].astype("category")
    for fmt in TEXT_FORMATS:
        assert_same(frame, fmt)


POSTERIORS = np.random.default_rng(5).dirichlet(np.ones(3), 4)  # columns of it are strided views


def test_other_inputs_match_the_reference():
    """Arrays the reference wrote as ``str`` of each value, or read through numpy, still match it."""
    sliced = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 1, 0], pa.int16()), pa.array(["a", "b,", 'c"']))
    cases = [
        {"u": np.array(["ab", "c\x00d", "é\t", ""]), "o": np.array([None, b"x", 3, "s\n"], dtype=object)},
        {"n": pa.array(["a", None, "b", "c"]), "d": pa.DictionaryArray.from_arrays(pa.array([0, None, 1, 0]), pa.array(["x", "y"]))},
        {"s": pa.array(["a", "b", "c,d", "e", "f"]).slice(1, 3), "d": sliced.slice(2, 3)},
        {"f": pa.array([0.5, 1e-7]), "i": pa.array([1, None]), "b": pa.array([True, False])},
        {"c": np.array([1 + 2j, 0j]), "t": np.array(["2020-01-01", "NaT"], dtype="datetime64[D]"), "by": np.array([b"a", b"b,"])},
        {"m": np.arange(6.0).reshape(3, 2) / 7, "k": np.array([[1, 2], [3, 4], [5, 6]]), "z": np.array([[True], [False], [True]])},
        {"h": np.array([0.1, 1e-5, 65504.0], dtype=np.float16), "ld": np.array([0.1, 1e300, -0.0], dtype=np.longdouble)},
        {"empty": pa.chunked_array([], pa.dictionary(pa.int32(), pa.string()))},
        {},
        {"nan_obj": np.array([float("nan"), "x"], dtype=object), "u8": np.array([2**64 - 1, 0], dtype=np.uint64)},
        {"p": POSTERIORS[:, 1], "i": np.arange(12).reshape(4, 3)[:, 2], "b": np.eye(4, dtype=bool)[:, 1], "r": FLOATS[::-2]},
    ]
    for cols in cases:
        for fmt in TEXT_FORMATS:
            assert_same(cols, fmt)
            with fast_paths(block_rows=2, kernel_min=0):
                assert_same(cols, fmt)


def test_dataframes_with_gaps_and_odd_columns_match_the_reference():
    frames = [
        pd.DataFrame({"s": pd.Series(["a", None, "b,"], dtype="str"), "c": pd.Categorical(["x", None, "y"])}),
        pd.DataFrame({"i": pd.array([1, None, 3], dtype="Int64"), "c": pd.Categorical([1, 2, 1]), "b": [True, False, True]}),
        pd.DataFrame({"s": pd.Series(["a", "b\n", "c"], dtype="string[pyarrow]"), 7: [0.5, 1e-7, 2.0]}),
        pd.DataFrame([[1, 2, "x"], [3, 4, "y"]], columns=["a", "a", "b"]),  # a repeated name: one 2-D column
    ]
    for frame in frames:
        for fmt in TEXT_FORMATS:
            assert_same(frame, fmt)
            with fast_paths(block_rows=2, kernel_min=0):
                assert_same(frame, fmt)


def test_unicode_arrays_take_the_kernel_path_and_keep_inner_nuls():
    cols = {"u": np.array(["ab", "c\x00d", "é\t😀", "", "x\x00"] * 3)}
    with fast_paths(block_rows=4, kernel_min=0):
        for fmt in TEXT_FORMATS:
            assert_same(cols, fmt)


def test_tsv_error_names_the_first_bad_row_in_column_order():
    cols = {
        "task": pa.array(["t0", "t1", "t2", "t3"]),
        "a": pa.DictionaryArray.from_arrays(pa.array([0, 0, 1, 1]), pa.array(["ok", "b\r\nad"])),
        "b": np.array(["x", "y\tz", "w", "v"], dtype=object),
        "p": np.array([0.5, 0.25, 1e-9, 3.0]),
    }
    for key in (None, "task", "p", "absent", ""):
        assert_same(cols, "tsv", key)
        with fast_paths(block_rows=3, kernel_min=0):
            assert_same(cols, "tsv", key)
    with pytest.raises(DataError, match=r"task 't2' has a carriage return in column 'a' \('b\\r\\nad'\)"):
        render_table(cols, "tsv", key="task")
    with pytest.raises(DataError, match=r"p '1e-09' has a carriage return"):
        render_table(cols, "tsv", key="p")


def test_float_kernel_matches_repr_on_a_million_values():
    rng = np.random.default_rng(2024)
    n = 125_000
    bits = rng.integers(0, 2**64, n, dtype=np.uint64).view(np.float64)
    near = np.array([1e-4, 1e16, 1e-5, 1e15, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308])
    values = np.concatenate([
        bits[np.isfinite(bits)],
        rng.random(n),
        rng.standard_normal(n) * 10.0 ** rng.integers(-320, 300, n),
        np.ldexp(1.0, rng.integers(-1074, 1024, n)),
        rng.integers(1, 2**52, n) * 5e-324,  # denormals
        rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64).astype(np.float64),
        rng.integers(0, 10**7, n) / 10.0 ** rng.integers(0, 6, n),  # short decimals
        np.concatenate([np.nextafter(near, 0), near, np.nextafter(near[:-1], np.inf)]),
        rng.random(n) * 1e-4,
        rng.random(n) * 1e16,
        10.0 ** np.arange(-323, 309),
        -(10.0 ** np.arange(-323, 309)),
        np.array([0.0, -0.0]),
    ])
    values = values[np.isfinite(values)]
    assert len(values) > 1_000_000
    got = render._float_text_block(values, True)
    want = pa.array(list(map(repr, values.tolist())), pa.large_string())
    same = pc.equal(got, want)
    if not pc.all(same).as_py():
        i = int(pc.index(same, False).as_py())
        raise AssertionError(f"{values[i]!r}: kernel {got[i]} vs repr {want[i]}")


def make_table():
    return {
        "task": np.array([f"t{i}" for i in range(6)], dtype=object),
        "label": pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, 0, 2, 0], pa.int32()), pa.array(["cat", "dog, big", "ë"])),
        "confidence": np.array([0.1, 5e-324, -0.0, 1e300, 1 / 3, 1.0]),
        "n_answers": np.array([1, 2, 3, 0, 5, 2**40]),
        "flag": np.array([True, False, True, True, False, False]),
        "name": pa.array(["a", 'b"', "c\nd", "", "é", "f"]),
    }


def test_parquet_round_trips_exactly_and_is_deterministic():
    cols = make_table()
    data = render_table(cols, "parquet")
    assert data[:4] == b"PAR1" and render_table(make_table(), "parquet") == data
    back = pq.read_table(io.BytesIO(data))
    assert back.column_names == list(cols)
    assert back.schema.field("task").type == pa.string()
    assert back.schema.field("name").type == pa.string()
    assert back.schema.field("confidence").type == pa.float64()
    assert back.schema.field("n_answers").type == pa.int64()
    assert back.schema.field("flag").type == pa.bool_()
    assert back.column("task").to_pylist() == [f"t{i}" for i in range(6)]
    assert back.column("label").to_pylist() == ["cat", "dog, big", "dog, big", "cat", "ë", "cat"]
    assert back.column("name").to_pylist() == ["a", 'b"', "c\nd", "", "é", "f"]
    got = back.column("confidence").to_numpy()
    assert got.view(np.uint64).tolist() == cols["confidence"].view(np.uint64).tolist()  # bit-exact, -0.0 too
    assert back.column("n_answers").to_pylist() == cols["n_answers"].tolist()
    assert back.column("flag").to_pylist() == cols["flag"].tolist()
    frame = pd.DataFrame({"task": ["x", "y"], "p": np.array([0.25, 0.5], dtype=np.float32)})
    back = pq.read_table(io.BytesIO(render_table(frame, "parquet")))
    assert back.schema.field("p").type == pa.float64() and back.column("p").to_pylist() == [0.25, 0.5]


def test_parquet_refuses_what_text_refuses_and_writes_empty_tables():
    with pytest.raises(DataError, match="non-finite"):
        render_table({"p": np.array([0.5, np.inf])}, "parquet")
    with pytest.raises(ValueError, match="unequal length"):
        render_table({"a": np.arange(2), "b": np.arange(3)}, "parquet")
    tab = {"task": np.array(["a\tb"], dtype=object)}  # no TSV rule in Parquet
    assert pq.read_table(io.BytesIO(render_table(tab, "parquet"))).column("task").to_pylist() == ["a\tb"]
    empty = pq.read_table(io.BytesIO(render_table({"task": np.array([], dtype=object), "p": np.array([])}, "parquet")))
    assert empty.num_rows == 0 and empty.column_names == ["task", "p"]


def test_importing_render_loads_neither_numba_nor_pyarrow():
    code = "import sys, crowdagg.io.render; print('numba' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_float_strings_is_repr_as_arrow_text():
    from crowdagg.io.render import float_strings

    values = [0.1, None, float("nan"), float("inf"), -float("inf"), -0.0, 1e-05, 1e16, 5e-324, 3.0]
    want = [None if v is None else ("NaN" if v != v else repr(v)) for v in values]
    for kernel_min in (render._KERNEL_MIN_ROWS, 0):
        with fast_paths(block_rows=3, kernel_min=kernel_min):
            got = float_strings(pa.array(values, pa.float64()), nan_as="NaN")
            assert got.type == pa.string() and got.to_pylist() == want
            chunked = pa.chunked_array([pa.array(values[:4], pa.float64()), pa.array(values[4:], pa.float64())])
            assert float_strings(chunked).to_pylist() == [v if v != "NaN" else "nan" for v in want]
            assert float_strings(pa.array([0.1], pa.float32())).to_pylist() == [repr(float(np.float32(0.1)))]
            assert float_strings(np.array([2.5, np.nan])).to_pylist() == ["2.5", "nan"]
    assert float_strings(pa.array([], pa.float64())).to_pylist() == []


# --------------------------------------------------------------------------- missing numbers
def test_missing_numbers_are_empty_cells_nulls_in_json_and_parquet_on_every_path():
    from crowdagg.io.render import Missing

    valid = np.array([True, False, True, False, True])
    cols = {
        "w": np.array(["a", "b,", "c", "d", "e"], dtype=object),
        "x": Missing(np.array([0.5, np.nan, 1e-7, np.inf, 2.0]), valid),  # a missing value is never read
        "n": Missing(np.array([3, 0, -1, 7, 2], np.int32), valid),
        "f": Missing(np.array([True, True, False, False, True]), ~valid),
    }
    want = {
        "csv": 'w,x,n,f\na,0.5,3,\n"b,",,,true\nc,1e-07,-1,\nd,,,false\ne,2.0,2,\n',
        "tsv": "w\tx\tn\tf\na\t0.5\t3\t\nb,\t\t\ttrue\nc\t1e-07\t-1\t\nd\t\t\tfalse\ne\t2.0\t2\t\n",
        "jsonl": "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in [
            {"w": "a", "x": 0.5, "n": 3, "f": None}, {"w": "b,", "x": None, "n": None, "f": True},
            {"w": "c", "x": 1e-07, "n": -1, "f": None}, {"w": "d", "x": None, "n": None, "f": False},
            {"w": "e", "x": 2.0, "n": 2, "f": None}]),
    }
    for fmt, text in want.items():
        assert render_table(cols, fmt).decode() == text
        with fast_paths(block_rows=2, kernel_min=0):  # the numba kernels, rows cut across blocks
            assert render_table(cols, fmt).decode() == text
    assert json.loads(render_table(cols, "json")) == [json.loads(line) for line in want["jsonl"].splitlines()]
    back = pq.read_table(io.BytesIO(render_table(cols, "parquet")))
    assert back.schema.types == [pa.string(), pa.float64(), pa.int64(), pa.bool_()]
    assert back.to_pydict() == {"w": ["a", "b,", "c", "d", "e"], "x": [0.5, None, 1e-07, None, 2.0],
                                "n": [3, None, -1, None, 2], "f": [None, True, None, False, None]}


def test_a_missing_column_still_refuses_a_non_finite_number_it_holds_and_wants_one_flag_a_value():
    from crowdagg.io.render import Missing

    with pytest.raises(DataError, match="column 'x' holds a non-finite number"):
        render_table({"x": Missing(np.array([np.nan, 1.0]), np.array([True, True]))}, "csv")
    for values, valid in ((np.zeros(3), np.ones(2, bool)), (np.zeros((2, 1)), np.ones((2, 1), bool)),
                          (np.array(["a", "b"]), np.ones(2, bool))):
        with pytest.raises(ValueError, match="Missing wants 1-D numbers"):
            Missing(values, valid)
