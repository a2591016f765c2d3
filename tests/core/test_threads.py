"""The thread policy (crowdagg.core.threads): the count, its sources and errors, and the scope of a fit."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from crowdagg.core import threads
from crowdagg.errors import UsageError
from crowdagg.kernels import schedule


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    yield
    threads.set_threads(None)


# --------------------------------------------------------------------------- the count
@pytest.mark.parametrize("value, expected", [(1, 1), (3, 3), ("2", 2), (" 4 ", 4), ("16", 16),
                                             (np.int64(2), 2), (np.uint8(3), 3)])
def test_parse_accepts_whole_numbers(value, expected):
    """A NumPy integer is a whole number too (``set_threads(np.int64(2))`` was refused)."""
    n = threads.parse(value)
    assert n == expected and type(n) is int


@pytest.mark.parametrize("value", [0, -1, "0", "-2", "", " ", "x", "1.5", "2e3", "٣", True, 2.0, None,
                                   np.int64(0), np.bool_(True), np.float64(2.0)])
def test_parse_refuses_anything_else_naming_the_source(value):
    with pytest.raises(UsageError) as library:
        threads.parse(value)
    assert str(library.value) == f"threads must be a whole number >= 1, got {value!r}"
    with pytest.raises(UsageError) as env:
        threads.parse(value, threads.ENV)
    assert str(env.value) == f"CROWDAGG_THREADS must be a whole number >= 1, got {value!r}"


def test_default_is_all_cores_and_honours_numba_num_threads(monkeypatch):
    import os

    assert threads.count() == threads.all_cores() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    assert threads.count() == 3


def test_scope_over_process_over_environment_over_default(monkeypatch):
    monkeypatch.setenv(threads.ENV, "5")
    assert threads.count() == 5
    threads.set_threads(2)
    assert threads.count() == 2
    with threads.use_threads(7) as n:
        assert n == threads.count() == 7
        with threads.use_threads(None) as inner:  # None changes nothing
            assert inner == 7
        with threads.use_threads(1):
            assert threads.count() == 1
        assert threads.count() == 7
    assert threads.count() == 2
    threads.set_threads(None)
    assert threads.count() == 5


def test_a_bad_environment_variable_is_a_usage_error_only_where_it_is_used(monkeypatch):
    monkeypatch.setenv(threads.ENV, "many")
    with pytest.raises(UsageError, match=r"^CROWDAGG_THREADS must be a whole number >= 1, got 'many'$"):
        threads.count()
    with threads.use_threads(2):
        assert threads.count() == 2  # a given count wins; the variable is not read
    with pytest.raises(UsageError, match="threads must be"):
        threads.set_threads(0)
    with pytest.raises(UsageError, match="threads must be"), threads.use_threads(-1):
        pass


def test_a_scope_belongs_to_the_thread_that_opened_it():
    seen: list[int] = []
    with threads.use_threads(1):
        worker = threading.Thread(target=lambda: seen.append(threads.count()))
        worker.start()
        worker.join()
    assert seen == [threads.all_cores()]


# --------------------------------------------------------------------------- the kernels
@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_engine_runs_its_blocks_on_the_policy_count(n, monkeypatch):
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.engine import LocalEngine, grid

    monkeypatch.setattr(grid, "MIN_BLOCK_ANSWERS", 4)
    monkeypatch.setattr(grid, "ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    data = AnnotationSet.from_codes(np.arange(48) // 2, np.arange(48) % 3, np.arange(48) % 2)
    engine = LocalEngine(data)
    assert engine.n_blocks == 4  # 48 answers in blocks of 3 workers × 2²
    record: list[str] = []
    together = threading.Barrier(n, timeout=30)
    seen: set[int] = set()

    def block(part, b, params, keep):
        name = threading.current_thread().name
        if name not in record:
            record.append(name)
            together.wait()  # every thread holds a share of the blocks at once
        seen.add(b)
        return float(b), None

    with threads.use_threads(n):
        assert schedule.n_threads() == n
        total, _ = engine.map_reduce(block)
    assert total == sum(range(4)) and seen == set(range(4))
    assert len(record) == len(set(record)) == n  # n threads, all running blocks at once


def test_two_threads_runs_serially_on_one_thread():
    names: list[str] = []
    jobs = [lambda i=i: names.append(threading.current_thread().name) or i for i in range(2)]
    with threads.use_threads(1):
        assert schedule.two_threads(jobs) == [0, 1]
    assert names == [threading.current_thread().name] * 2
    names.clear()
    with threads.use_threads(2):
        assert schedule.two_threads(jobs) == [0, 1]
    assert len(set(names)) == 2


# --------------------------------------------------------------------------- a fit
def _blas() -> list[dict]:
    return [lib for lib in threadpool_info() if lib["user_api"] == "blas"]


def _small_data():
    from crowdagg.simulate import simulate

    return simulate(300, 20, 3, 5, seed=1).to_annotations()


@pytest.mark.parametrize("method", ["ds", "onecoin", "wmv"])
def test_blas_runs_on_one_thread_inside_a_fit_and_is_restored_after(method):
    from crowdagg.methods.api import aggregate

    if not _blas():
        pytest.skip("no BLAS library that threadpoolctl can see")
    data = _small_data()
    inside: list[list[int]] = []

    def callback(iteration, objective):
        inside.append([lib["num_threads"] for lib in _blas()])

    with threadpool_limits(limits=2, user_api="blas"):  # a known count outside, even on a 1-core machine
        before = [lib["num_threads"] for lib in _blas()]
        result = aggregate(data, method, callback=callback)
        after = [lib["num_threads"] for lib in _blas()]
    assert before == after and set(before) == {2}
    assert inside, "the callback was never called"
    assert all(set(counts) == {1} for counts in inside), inside
    assert result.n_iter >= 1


def test_torch_if_imported_gets_the_count_for_the_fit_and_is_restored(monkeypatch):
    calls: list[int] = []
    state = {"n": 8}
    fake = types.SimpleNamespace(
        get_num_threads=lambda: state["n"],
        set_num_threads=lambda n: (calls.append(n), state.__setitem__("n", n)),
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    with threads.use_threads(3), threads.fit_scope() as n:
        assert n == 3 and state["n"] == 3
    assert calls == [3, 8] and state["n"] == 8


def test_fit_scope_never_imports_torch(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with threads.fit_scope():
        pass
    assert "torch" not in sys.modules


def test_results_are_identical_for_any_thread_count(monkeypatch):
    from crowdagg.engine import LocalEngine, grid
    from crowdagg.methods.api import aggregate

    monkeypatch.setattr(grid, "MIN_BLOCK_ANSWERS", 100)  # blocks of 20 workers × 3² = 180 answers: 8 of them
    monkeypatch.setattr(grid, "ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    data = _small_data()
    assert LocalEngine(data).n_blocks == data.n_answers // 180 > 3
    results = []
    for n in (1, 2, 3):
        with threads.use_threads(n):
            results.append(aggregate(data, "ds", seed=0, tol=0, max_iter=30))
    for other in results[1:]:
        np.testing.assert_array_equal(other.posteriors, results[0].posteriors)
        np.testing.assert_array_equal(other.labels, results[0].labels)


# --------------------------------------------------------------------------- reading
@pytest.mark.parametrize("n", [1, 2])
def test_the_readers_use_threads_only_when_the_count_allows(n, tmp_path, monkeypatch):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from crowdagg.io.read import load_annotations

    seen: list[tuple[str, bool]] = []
    real_csv, real_parquet = pcsv.read_csv, pq.ParquetFile.read

    def read_csv(*args, **kwargs):
        seen.append(("csv", kwargs["read_options"].use_threads))
        return real_csv(*args, **kwargs)

    def read_parquet(self, *args, **kwargs):
        seen.append(("parquet", kwargs.get("use_threads", True)))
        return real_parquet(self, *args, **kwargs)

    monkeypatch.setattr(pcsv, "read_csv", read_csv)
    monkeypatch.setattr(pq.ParquetFile, "read", read_parquet)
    rows = "".join(f"t{i},w{i % 7},{'ab'[i % 2]}\n" for i in range(200))
    (tmp_path / "a.csv").write_text("task,worker,label\n" + rows)
    import pandas as pd

    pd.read_csv(tmp_path / "a.csv", dtype=str).to_parquet(tmp_path / "a.parquet")
    with threads.use_threads(n):
        a = load_annotations(str(tmp_path / "a.csv"))
        b = load_annotations(str(tmp_path / "a.parquet"))
    assert seen == [("csv", n > 1), ("parquet", n > 1)]
    assert a.n_answers == b.n_answers == 200


def test_names_are_encoded_on_one_thread_when_the_count_is_one(monkeypatch):
    import pyarrow as pa

    from crowdagg.data.encode import ColumnsEncoder
    from crowdagg.kernels import schedule

    def no_pool(*args, **kwargs):
        raise AssertionError("a thread pool was started under use_threads(1)")

    n = 1 << 17  # blocks from this size are encoded on two threads (task | worker and label)
    columns = [pa.array([f"x{i % 1000}" for i in range(n)]), pa.array(["a", "b"] * (n // 2)),
               pa.array(["0", "1", "1", "0"] * (n // 4))]
    encoded = []
    with threads.use_threads(2):
        enc = ColumnsEncoder()
        enc.add(*columns)
        encoded.append(enc)
    monkeypatch.setattr(schedule, "ThreadPoolExecutor", no_pool)
    with threads.use_threads(1):
        enc = ColumnsEncoder()
        enc.add(*columns)
        encoded.append(enc)
    two, one = encoded
    for e1, e2, c1, c2 in zip(one.encoders, two.encoders, one.codes, two.codes):
        np.testing.assert_array_equal(c1.take(), c2.take())
        assert e1.names().equals(e2.names())


# --------------------------------------------------------------------------- the bound
@pytest.mark.parametrize("cores, most", [(1, 64), (2, 64), (16, 64), (17, 68), (64, 256)])
def test_the_largest_count_is_four_per_core_and_at_least_64(cores, most, monkeypatch):
    monkeypatch.setattr(threads.os, "cpu_count", lambda: cores)
    assert threads.most() == most
    assert threads.parse(most) == most and threads.parse(str(most)) == most
    with pytest.raises(UsageError) as info:
        threads.parse(most + 1)
    assert str(info.value) == (f"threads must be at most {most:,} (4 per core of this machine's {cores} cores, and "
                               f"never under 64), got {most + 1!r}")


@pytest.mark.parametrize("value", [2**63, str(2**63), 10**5, "100000", np.uint64(2**63)])
def test_a_huge_count_is_refused_by_every_source_before_torch_or_a_thread_sees_it(value, monkeypatch):
    """2**63 overflowed torch.set_num_threads ("Overflow when unpacking long long"); 100,000 ran out of memory."""
    with pytest.raises(UsageError, match=r"^threads must be at most \d+ \(4 per core"):
        threads.parse(value)
    with pytest.raises(UsageError, match=r"^threads must be at most"):
        threads.set_threads(value)
    with pytest.raises(UsageError, match=r"^threads must be at most"):
        with threads.use_threads(value):
            pass  # pragma: no cover - never entered
    monkeypatch.setenv(threads.ENV, str(value))
    with pytest.raises(UsageError, match=r"^CROWDAGG_THREADS must be at most"):
        threads.count()


def test_numba_num_threads_beyond_the_bound_is_capped_for_the_default(monkeypatch):
    monkeypatch.setenv("NUMBA_NUM_THREADS", "100000")
    assert threads.all_cores() == threads.most()


# --------------------------------------------------------------------------- torch's count
def _fake_torch(monkeypatch, n: int = 8) -> tuple[dict, list[int]]:
    calls: list[int] = []
    state = {"n": n}
    fake = types.SimpleNamespace(
        get_num_threads=lambda: state["n"],
        set_num_threads=lambda k: (calls.append(k), state.__setitem__("n", k)),
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    return state, calls


def test_torch_runs_on_one_thread_in_a_fit_when_no_count_is_given(monkeypatch):
    """All cores was torch's count when nobody gave one: two threads on two cores beside other work ran an epoch
    60× slower than one.  Without a count the fit scope does not know the network: one thread."""
    monkeypatch.setattr(threads, "all_cores", lambda: 16)
    state, calls = _fake_torch(monkeypatch)
    with threads.fit_scope() as n:
        assert n == 16  # the kernels keep every core
        assert state["n"] == 1
    assert calls == [1, 8] and state["n"] == 8


@pytest.mark.parametrize("how", ["use_threads", "set_threads", "env"])
def test_a_given_count_wins_over_torchs_default_whatever_the_work(how, monkeypatch):
    monkeypatch.setattr(threads, "all_cores", lambda: 16)
    state, calls = _fake_torch(monkeypatch)
    if how == "env":
        monkeypatch.setenv(threads.ENV, "3")
    elif how == "set_threads":
        threads.set_threads(3)
    with threads.use_threads(3 if how == "use_threads" else None), threads.fit_scope():
        assert state["n"] == 3
        assert threads.given() == 3
        assert threads.torch_threads() == threads.torch_threads(1) == threads.torch_threads(10**12) == 3
    assert calls == [3, 8]


def test_given_is_none_without_a_count_and_count_is_then_all_cores(monkeypatch):
    monkeypatch.setattr(threads, "all_cores", lambda: 6)
    assert threads.given() is None and threads.count() == 6
    assert threads.torch_threads(10**12) == threads.default_torch_threads(10**12, 6)
    monkeypatch.setenv(threads.ENV, "junk")
    with pytest.raises(UsageError, match="CROWDAGG_THREADS must be a whole number"):
        threads.given()


W = threads.TORCH_WORK_PER_THREAD


@pytest.mark.parametrize("work, cores, expected", [
    (None, 64, 1),  # the work not known: small
    (0, 64, 1),
    (1_122_432, 64, 1),  # music: the default mlp (hidden 128) on batches of 64
    (4_334_080, 64, 1),  # labelme: the same
    (W - 1, 64, 1),
    (W, 64, 1),  # one thread's worth of work
    (2 * W - 1, 64, 1),
    (2 * W, 64, 2),
    (10 * W, 64, 10),
    (10**15, 64, 32),  # at most half the cores
    (10**15, 16, 8),
    (10**15, 5, 2),
    (10**15, 4, 2),
    (10**15, 3, 1),
    (10**15, 2, 1),  # two cores: one thread, however large the work
    (10**15, 1, 1),
    (2 * W, 2, 1),
    (3 * W, 4, 2),
    (3 * W, 8, 3),
])
def test_default_torch_threads_splits_only_large_batches_over_half_the_cores(work, cores, expected):
    assert threads.default_torch_threads(work, cores) == expected


def test_default_torch_threads_refuses_what_is_not_a_count():
    """Text reached Python's TypeError ('unsupported operand type(s) for //')."""
    for work, cores, name in (("x", 4, "work"), (10**9, "4", "cores"), (-1, 4, "work"), (10**9, -2, "cores")):
        with pytest.raises(UsageError, match=f"{name} must be an integer >= 0"):
            threads.default_torch_threads(work, cores)
    with pytest.raises(UsageError, match="work must be an integer >= 0"):
        threads.torch_threads("x") if threads.given() is None else threads.default_torch_threads("x", 4)
