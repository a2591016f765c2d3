"""First- and third-order statistics (crowdagg.kernels.cooc: label_counts, triple_statistics) against slow twins."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crowdagg.core import memory, threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import ResourceError, UsageError
from crowdagg.kernels import cooc

from .test_cooc import SplitEngine, _crowd


def slow_triples(data: AnnotationSet, units: np.ndarray | None = None, min_tasks: int = 1):
    """Triples of units, their joint answer-triple counts and shared tasks: a dict per task, plain Python."""
    units = np.arange(data.n_workers) if units is None else np.asarray(units)
    k = data.n_classes
    joint: dict[tuple[int, int, int], np.ndarray] = {}
    shared: dict[tuple[int, int, int], int] = {}
    for t in range(data.n_tasks):
        lo, hi = int(data.task_ptr[t]), int(data.task_ptr[t + 1])
        by_unit: dict[int, list[int]] = {}
        for a in range(lo, hi):
            by_unit.setdefault(int(units[data.worker[a]]), []).append(int(data.label[a]))
        for trip in itertools.combinations(sorted(by_unit), 3):
            shared[trip] = shared.get(trip, 0) + 1
            cell = joint.setdefault(trip, np.zeros((k, k, k), dtype=np.int64))
            for x in by_unit[trip[0]]:
                for y in by_unit[trip[1]]:
                    for z in by_unit[trip[2]]:
                        cell[x, y, z] += 1
    keep = sorted(t for t in shared if shared[t] >= min_tasks)
    triples = np.array(keep, dtype=np.int32).reshape(-1, 3)
    return (triples, np.array([joint[t] for t in keep], dtype=np.int64).reshape(-1, k, k, k),
            np.array([shared[t] for t in keep], dtype=np.int64), len(shared) - len(keep))


def _assert_twin(stats: cooc.TripleStats, data: AnnotationSet, units=None, min_tasks: int = 1) -> None:
    triples, joint, n_tasks, dropped = slow_triples(data, units, min_tasks)
    assert stats.triples.dtype == np.int32 and np.array_equal(stats.triples, triples)
    assert stats.joint.dtype == np.int64 and np.array_equal(stats.joint, joint)
    assert stats.n_tasks.dtype == np.int64 and np.array_equal(stats.n_tasks, n_tasks)
    assert stats.dropped == dropped


@pytest.mark.parametrize("seed,k,repeats,min_tasks", [(0, 2, 0.0, 1), (1, 3, 0.1, 1), (2, 4, 0.3, 3), (3, 1, 0.0, 2)])
def test_worker_triples_match_the_slow_twin(seed, k, repeats, min_tasks):
    data = _crowd(300, 12, k, seed, repeats=repeats)
    _assert_twin(cooc.triple_statistics(LocalEngine(data), min_tasks=min_tasks), data, None, min_tasks)


@pytest.mark.parametrize("n_units", [3, 5])
def test_groups_as_units_give_the_group_views_third_moment(n_units):
    data = _crowd(400, 20, 3, 9, repeats=0.1)
    units = np.arange(20) % n_units
    stats = cooc.triple_statistics(LocalEngine(data), units, n_units)
    _assert_twin(stats, data, units)
    if n_units == 3:  # joint[0] is Σ_n x_0 ⊗ x_1 ⊗ x_2 with x_g the task's one-hot sums over group g
        views = np.zeros((3, data.n_tasks, 3))
        task = np.repeat(np.arange(data.n_tasks), data.answers_per_task)
        np.add.at(views, (units[data.worker], task, data.label), 1)
        expected = np.einsum("na,nb,nc->abc", views[0], views[1], views[2])
        assert stats.n_triples == 1 and np.array_equal(stats.joint[0], expected.astype(np.int64))


def test_bit_identical_across_threads_partitions_and_look_ups(monkeypatch):
    data = _crowd(70_000, 60, 3, 4, max_answers=7, repeats=0.05)
    engine = LocalEngine(data)
    assert engine.n_blocks >= 3
    results = []
    for n in (1, 2):
        with threads.use_threads(n):
            results.append(cooc.triple_statistics(engine, min_tasks=12))
    for n_parts in (2, 7):
        results.append(cooc.triple_statistics(SplitEngine(data, n_parts), min_tasks=12))
    monkeypatch.setattr(cooc, "LOOKUP_MIN_BYTES", 0)  # the hash table instead of the ranked bitmap
    monkeypatch.setattr(cooc, "LOOKUP_BYTES_PER_PAIR", 0)
    results.append(cooc.triple_statistics(engine, min_tasks=12))
    monkeypatch.setattr(cooc, "DENSE_SWITCH", 0.0)  # every tree node dense from the first add
    results.append(cooc.triple_statistics(engine, min_tasks=12))
    for r in results[1:]:
        assert np.array_equal(r.triples, results[0].triples) and np.array_equal(r.joint, results[0].joint)
        assert np.array_equal(r.n_tasks, results[0].n_tasks) and r.dropped == results[0].dropped
    assert results[0].dropped > 0 and results[0].n_triples > 0


def test_label_counts_are_each_workers_answers_per_label():
    data = _crowd(2_000, 30, 4, 5, repeats=0.2)
    expected = np.zeros((30, 4), dtype=np.int64)
    np.add.at(expected, (data.worker, data.label), 1)
    for engine in (LocalEngine(data), SplitEngine(data, 3)):
        got = cooc.label_counts(engine)
        assert got.dtype == np.int64 and np.array_equal(got, expected)


def test_no_triple_and_fewer_than_three_units():
    data = AnnotationSet.from_codes([0, 0, 1], [0, 1, 1], [0, 1, 1], n_workers=2, n_classes=2)
    stats = cooc.triple_statistics(LocalEngine(data))
    assert stats.n_triples == 0 and stats.joint.shape == (0, 2, 2, 2) and stats.dropped == 0


def test_bad_units_are_usage_errors_and_big_requests_are_refused_up_front():
    data = _crowd(200, 10, 3, 1)
    engine = LocalEngine(data)
    for units, n_units, text in (([0] * 9, None, "one integer code per worker"),
                                 (np.arange(10) - 1, None, "outside"),
                                 (np.zeros(10, dtype=int), 4_000_000, "n_units"),
                                 (np.arange(10) * 1.0, None, "integer code")):
        with pytest.raises(UsageError, match=text):
            cooc.triple_statistics(engine, units, n_units)
    with pytest.raises(UsageError, match="min_tasks"):
        cooc.triple_statistics(engine, min_tasks=0)
    dense = AnnotationSet.from_codes(np.repeat(np.arange(300), 60), np.tile(np.arange(60), 300),
                                     np.zeros(18_000, dtype=int), n_workers=60, n_classes=2)
    with pytest.raises(ResourceError, match="answer triples"):
        cooc.triple_statistics(LocalEngine(dense), max_memory="2M")
    assert memory  # (the module the checks go through)


def test_triple_block_functions_refuse_bad_parameters_never_a_crash():
    from crowdagg.errors import DataError

    data = _crowd(50, 6, 2, 3)
    part = LocalEngine(data).part
    units = np.arange(6, dtype=np.int64)
    for params, text in ((cooc.TripleParams(units, 6, 7, 2), "7 workers"),
                         (cooc.TripleParams(units[:5], 6, 6, 2), "units of shape"),
                         (cooc.TripleParams(units + 3, 6, 6, 2), "unit codes outside"),
                         (cooc.TripleParams(units, 6, 6, 2, np.array([1]), np.zeros((3, 2), np.int64)),
                          "ranked bitmap has shape")):
        with pytest.raises(DataError, match=text):
            fn = cooc.triple_stats_block if params.index is not None else cooc.triple_index_block
            fn(part, 0, params, False)
    with pytest.raises(UsageError, match="TripleParams"):
        cooc.triple_index_block(part, 0, None, False)
    with pytest.raises(UsageError, match="index"):
        cooc.triple_stats_block(part, 0, cooc.TripleParams(units, 6, 6, 2), False)
