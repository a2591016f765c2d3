"""The co-occurrence kernel: pair index and per-pair joint counts against a slow twin, on any engine and partitioning."""

from __future__ import annotations

import pickle
from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from crowdagg import load_annotations
from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine, Part, combine, reduce_range
from crowdagg.errors import DataError, ResourceError, UsageError
from crowdagg.kernels import cooc
from crowdagg.reports import agreement

# ------------------------------------------------------------------------------------------ the slow twin


def slow_co_occurrence(data: AnnotationSet, weights: np.ndarray | None = None):
    """Pure Python over a dict of tasks: every pair of answers by two different workers on a task.

    Returns ``(pairs, joint, n_tasks, weight)``: pairs sorted (w1 < w2), joint[p][a][b] counting (or
    summing the task's weight over) the answer pairs with w1 answering a and w2 answering b; n_tasks
    the tasks the pair shares; weight the sum of those tasks' weights.
    """
    k = data.n_classes
    by_task: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for t, w, y in zip(data.task.tolist(), data.worker.tolist(), data.label.tolist()):
        by_task[t].append((w, y))
    joint: dict[tuple[int, int], list[list[float]]] = {}
    shared: dict[tuple[int, int], int] = defaultdict(int)
    weight: dict[tuple[int, int], float] = defaultdict(float)
    for t, answers in by_task.items():
        wt = 1 if weights is None else float(weights[t])
        for i in range(len(answers)):
            for j in range(i + 1, len(answers)):
                (wi, yi), (wj, yj) = answers[i], answers[j]
                if wi == wj:
                    continue
                if wi > wj:
                    (wi, yi), (wj, yj) = (wj, yj), (wi, yi)
                cell = joint.setdefault((wi, wj), [[0] * k for _ in range(k)])
                cell[yi][yj] += wt
        for pair in {(min(a[0], b[0]), max(a[0], b[0])) for a in answers for b in answers if a[0] != b[0]}:
            shared[pair] += 1
            weight[pair] += wt
    pairs = sorted(joint)
    return (np.array(pairs, dtype=np.int64).reshape(-1, 2), np.array([joint[p] for p in pairs]).reshape(-1, k, k),
            np.array([shared[p] for p in pairs], dtype=np.int64), np.array([weight[p] for p in pairs]))


# ------------------------------------------------------------------------- an engine of several partitions


class SplitEngine:
    """The local engine's grid cut into ``n_parts`` partitions (some possibly empty), each reduced alone.

    Every partition sends the tree nodes of its block range (:func:`reduce_range`) and :func:`combine`
    rebuilds the root: what a distributed engine does, in one process.
    """

    def __init__(self, data: AnnotationSet, n_parts: int) -> None:
        whole = LocalEngine(data).part
        n = self.n_blocks = whole.n_blocks
        cuts = np.linspace(0, n, n_parts + 1).astype(np.int64)
        self.parts = []
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):  # empty ranges kept: an empty partition
            t0, t1 = int(whole.bounds[lo]), int(whole.bounds[hi])
            a0, a1 = int(whole.task_ptr[t0]), int(whole.task_ptr[t1])
            self.parts.append(Part(lo, n, t0, whole.bounds[lo:hi + 1] - t0, whole.task_ptr[t0:t1 + 1] - a0,
                                   whole.worker[a0:a1].copy(), whole.label[a0:a1].copy(), whole.n_workers,
                                   whole.n_classes, None))

    def map_reduce(self, fn: Any, params: Any = None, *, keep: bool = False) -> tuple[Any, None]:
        nodes: dict = {}
        for part in self.parts:
            # each partition's sums travel pickled, as they would between processes
            def block(gb: int, part: Part = part) -> Any:
                return fn(part, gb - part.first_block, params, keep)[0]

            nodes.update(pickle.loads(pickle.dumps(reduce_range(part.first_block, part.first_block + part.n_blocks,
                                                                self.n_blocks, block))))
        return combine(nodes, self.n_blocks), None


# ---------------------------------------------------------------------------------------------- crowds


def _crowd(n_tasks: int, n_workers: int, k: int, seed: int, *, max_answers: int = 8, repeats: float = 0.0):
    """Tasks with 1..max_answers answers from random workers (a share ``repeats`` of them a repeated worker)."""
    rng = np.random.default_rng(seed)
    per = rng.integers(1, max_answers + 1, n_tasks)
    task = np.repeat(np.arange(n_tasks), per)
    worker = rng.integers(0, n_workers, len(task))
    again = np.flatnonzero(rng.random(len(task)) < repeats)
    again = again[(again > 0) & (task[again] == task[np.maximum(again - 1, 0)])]
    worker[again] = worker[again - 1]  # the previous answer's worker answers the task again
    label = rng.integers(0, k, len(task))
    return AnnotationSet.from_codes(task, worker, label, n_workers=n_workers, n_classes=k)


def _assert_matches_twin(stats: cooc.CoOccurrence, data: AnnotationSet, weights=None) -> None:
    pairs, joint, n_tasks, weight = slow_co_occurrence(data, weights)
    assert stats.pairs.dtype == np.int32 and stats.pairs.shape == (len(pairs), 2)
    assert np.array_equal(stats.pairs, pairs)
    assert stats.joint.shape == (len(pairs), data.n_classes, data.n_classes)
    assert stats.n_tasks.dtype == np.int64 and np.array_equal(stats.n_tasks, n_tasks)
    if weights is None:
        assert stats.joint.dtype == np.int64 and stats.weight is None
        assert np.array_equal(stats.joint, joint)
    else:
        assert stats.joint.dtype == np.float64
        np.testing.assert_allclose(stats.joint, joint, rtol=1e-12, atol=0)
        np.testing.assert_allclose(stats.weight, weight, rtol=1e-12, atol=0)


def _same(a: cooc.CoOccurrence, b: cooc.CoOccurrence) -> bool:
    return (np.array_equal(a.pairs, b.pairs) and np.array_equal(a.joint, b.joint) and a.joint.dtype == b.joint.dtype
            and np.array_equal(a.n_tasks, b.n_tasks)
            and (a.weight is None) == (b.weight is None) and (a.weight is None or np.array_equal(a.weight, b.weight)))


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("seed,k,repeats", [(0, 2, 0.0), (1, 3, 0.1), (2, 5, 0.3), (3, 1, 0.0)])
def test_random_crowds_match_the_slow_twin(seed, k, repeats):
    data = _crowd(600, 40, k, seed, repeats=repeats)
    engine = LocalEngine(data)
    _assert_matches_twin(cooc.co_occurrence(engine), data)
    weights = np.random.default_rng(seed).lognormal(0.0, 3.0, data.n_tasks)  # magnitudes far apart: order shows
    _assert_matches_twin(cooc.co_occurrence(engine, weights), data, weights)


def test_hand_computed_example_with_a_single_answer_task_and_a_repeated_worker():
    # task 0: w0=1, w2=0, w1=1; task 1: w3 alone; task 2: w0=0, w0=1 (twice), w2=1
    data = AnnotationSet.from_codes([0, 0, 0, 1, 2, 2, 2], [0, 2, 1, 3, 0, 0, 2], [1, 0, 1, 1, 0, 1, 1],
                                    n_classes=2)
    stats = cooc.co_occurrence(LocalEngine(data))
    assert stats.pairs.tolist() == [[0, 1], [0, 2], [1, 2]]  # worker 3 shares no task; no (0, 0)
    assert stats.n_tasks.tolist() == [1, 2, 1]  # the repeated worker counts task 2 once
    assert stats.joint[0].tolist() == [[0, 0], [0, 1]]
    # (0, 2): task 0 gives (1, 0); task 2 gives (0, 1) and (1, 1), both of worker 0's answers
    assert stats.joint[1].tolist() == [[0, 1], [1, 1]]
    assert stats.joint[2].tolist() == [[0, 0], [1, 0]]  # w1=1, w2=0 on task 0
    w = np.array([0.5, 3.0, 2.0])
    weighted = cooc.co_occurrence(LocalEngine(data), w)
    assert weighted.joint[1].tolist() == [[0.0, 2.0], [0.5, 2.0]]
    assert weighted.weight.tolist() == [0.5, 2.5, 0.5]
    assert weighted.n_tasks.tolist() == [1, 2, 1]


def test_one_class_one_worker_and_no_shared_task():
    data = AnnotationSet.from_codes([0, 0, 1, 1, 1], [0, 1, 0, 1, 2], [0, 0, 0, 0, 0], n_classes=1)
    stats = cooc.co_occurrence(LocalEngine(data))
    assert stats.pairs.tolist() == [[0, 1], [0, 2], [1, 2]] and stats.joint.shape == (3, 1, 1)
    assert stats.joint[:, 0, 0].tolist() == [2, 1, 1] and stats.n_tasks.tolist() == [2, 1, 1]
    for data in (AnnotationSet.from_codes([0, 0, 1], [0, 0, 0], [0, 1, 1]),  # one worker: only self-pairs
                 AnnotationSet.from_codes([0, 1, 2], [0, 1, 2], [0, 1, 1])):  # each task one answer
        stats = cooc.co_occurrence(LocalEngine(data))
        assert stats.pairs.shape == (0, 2) and stats.joint.shape == (0, 2, 2) and stats.n_tasks.shape == (0,)


@pytest.fixture(scope="module")
def big() -> AnnotationSet:
    data = _crowd(70_000, 200, 3, 7, max_answers=8, repeats=0.05)
    assert data.n_answers >= 300_000
    return data


def test_bit_identical_across_threads_and_partitions(big):
    engine = LocalEngine(big)
    assert engine.n_blocks >= 4
    weights = np.random.default_rng(1).lognormal(0.0, 3.0, big.n_tasks)
    results = []
    for n in (1, 2, 3):
        with threads.use_threads(n):
            results.append((cooc.co_occurrence(engine), cooc.co_occurrence(engine, weights)))
    for n_parts in (1, 2, 7):
        split = SplitEngine(big, n_parts)
        if n_parts == 7:
            assert any(p.n_blocks == 0 for p in split.parts)  # an empty partition range
        results.append((cooc.co_occurrence(split), cooc.co_occurrence(split, weights)))
    for plain, weighted in results[1:]:
        assert _same(plain, results[0][0]) and _same(weighted, results[0][1])
    _assert_matches_twin(results[0][0], big)  # the weighted sums meet the twin on the smaller crowds


def test_sparse_sums_add_to_the_bits_of_dense_sums():
    rng = np.random.default_rng(3)
    size, leaves = 50, []
    for _ in range(9):
        keys = np.sort(rng.choice(size, rng.integers(0, 20), replace=False)).astype(np.int64)
        leaves.append(cooc.SparseSum(keys, rng.lognormal(0, 4, len(keys)) * rng.choice([-1, 1], len(keys))))
    total = combine(reduce_range(0, 9, 9, lambda b: leaves[b]), 9)
    dense = combine(reduce_range(0, 9, 9, lambda b: leaves[b].dense(size)), 9)
    assert np.array_equal(total.dense(size), dense)
    assert np.all(np.diff(total.keys) > 0)
    union = cooc.PairSet(np.array([1, 4, 9], dtype=np.int64)) + cooc.PairSet(np.array([0, 4, 10], dtype=np.int64))
    assert union.keys.tolist() == [0, 1, 4, 9, 10]


@pytest.mark.parametrize("name", ["trec", "zencrowd", "cf_amt", "bluebird", "web"])
def test_real_datasets_match_the_slow_twin(datasets_dir, name):
    data = load_annotations(datasets_dir / name / "labels.csv")  # duplicates kept (zencrowd, cf_amt have them)
    stats = agreement.co_occurrence(data)
    _assert_matches_twin(stats, data)
    if name == "trec":
        assert stats.n_pairs == 12_861
    w = data.n_workers
    assert stats.n_pairs <= w * (w - 1) // 2  # bluebird: every pair shares a task


def test_the_block_functions_and_their_sums_pickle():
    data = _crowd(200, 10, 2, 0)
    part = LocalEngine(data).part
    for fn in (cooc.bound_block, cooc.index_block, cooc.stats_block):
        assert pickle.loads(pickle.dumps(fn)) is fn
    index = cooc.pair_index(LocalEngine(data))
    sums, _ = cooc.stats_block(part, 0, cooc.StatsParams(index.keys), False)
    back = pickle.loads(pickle.dumps(sums))
    assert np.array_equal(back[0].keys, sums[0].keys) and np.array_equal(back[1].values, sums[1].values)


def test_refused_up_front_with_the_size():
    data = AnnotationSet.from_codes(np.zeros(3000, dtype=np.int64), np.arange(3000), np.zeros(3000, dtype=np.int64),
                                    n_classes=2)  # one task, 3,000 workers: 4,498,500 pairs
    with pytest.raises(ResourceError, match="4,498,500 co-labelled worker pairs"):
        cooc.co_occurrence(LocalEngine(data), max_memory="1M")
    index = cooc.pair_index(LocalEngine(data))
    assert index.n_pairs == 4_498_500
    with pytest.raises(ResourceError, match="4,498,500 worker pairs"):
        cooc.pair_statistics(LocalEngine(data), index, max_memory="100M")


def test_bad_weights_and_a_foreign_index_are_clear_errors():
    data = _crowd(100, 10, 2, 0)
    engine = LocalEngine(data)
    with pytest.raises(UsageError, match="one weight per task"):
        cooc.co_occurrence(engine, np.ones(3))
    bad = np.ones(data.n_tasks)
    bad[5] = np.nan
    with pytest.raises(UsageError, match="task 5"):
        cooc.co_occurrence(engine, bad)
    other = cooc.pair_index(LocalEngine(AnnotationSet.from_codes([0, 0], [0, 1], [0, 0], n_workers=10, n_classes=2)))
    with pytest.raises(DataError, match="built from other data"):
        cooc.pair_statistics(engine, other)


def test_an_index_of_data_with_other_sizes_is_refused_not_misread():
    """An index of data with more classes (same workers, same pairs) was read as this data's: joint counts of the
    wrong shape, silently; one of more workers keyed other pairs."""
    from crowdagg.engine import LocalEngine
    from crowdagg.errors import DataError
    from crowdagg.kernels.cooc import pair_index, pair_statistics

    codes = ([0, 0, 0, 1, 1, 2, 2], [0, 1, 2, 0, 1, 1, 2], [1, 1, 0, 0, 1, 1, 1])
    data = AnnotationSet.from_codes(*codes)
    wider = AnnotationSet.from_codes(*codes, n_classes=3)
    with pytest.raises(DataError, match="built from data of 3 classes, this has 2"):
        pair_statistics(LocalEngine(data), pair_index(LocalEngine(wider)))
    more = AnnotationSet.from_codes([0, 0, 0, 0], [0, 1, 2, 3], [0, 1, 0, 1])
    with pytest.raises(DataError, match="built from data of 4 workers, this has 3"):
        pair_statistics(LocalEngine(data), pair_index(LocalEngine(more)))


@pytest.mark.parametrize("fn", ["bound_block", "index_block", "stats_block", "label_block", "triple_bound_block",
                                "triple_index_block", "triple_stats_block"])
def test_block_functions_refuse_a_bad_partition_never_a_crash(fn):
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import numpy as np\n"
        "from crowdagg.engine import Part\n"
        "from crowdagg.kernels.cooc import *\n"
        "from crowdagg.errors import DataError\n"
        "part = Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 900], np.int32), "
        "np.array([0, 1], np.int8), 2, 2)\n"
        "try:\n"
        f"    {fn}(part, 0, StatsParams(np.array([1])), False)\n"
        "    print('accepted')\n"
        "except DataError as exc:\n"
        "    print(exc)\n"
        "try:\n"
        f"    {fn}(Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], np.int32), "
        "np.array([0, 1], np.int8), 2, 2), 3, StatsParams(np.array([1])), False)\n"
        "except DataError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "worker code 900 at position 1 is out of range for 2" in proc.stdout
    assert "block 3 is not one of the partition's 1 blocks" in proc.stdout


# ------------------------------------------------------------------------- the forms of the sums, the look-ups


def _leaves(rng, size: int, n: int, form: str) -> list[cooc.SparseSum]:
    out = []
    for _ in range(n):
        if form == "counts":  # unsorted, repeated keys
            out.append(cooc.SparseSum(rng.integers(0, size, rng.integers(0, 2 * size)).astype(np.int64), None, size))
        else:
            keys = np.sort(rng.choice(size, rng.integers(0, size // 2), replace=False)).astype(np.int64)
            vals = rng.lognormal(0, 4, len(keys)) * rng.choice([-1, 1], len(keys))
            out.append(cooc.SparseSum(keys, vals, size))
    return out


def _tree_total(leaves: list[cooc.SparseSum], size: int) -> np.ndarray:
    copies = [cooc.SparseSum(None if x.keys is None else x.keys.copy(), None if x.values is None else x.values.copy(),
                             x.size) for x in leaves]  # the tree owns (and may reuse) its operands
    return combine(reduce_range(0, len(copies), len(copies), lambda b: copies[b]), len(copies)).dense(size)


@pytest.mark.parametrize("form", ["sorted", "counts"])
def test_the_dense_switch_never_changes_a_bit(form, monkeypatch):
    """Every node sparse (switch off), every sum dense from its first add (switch at 0), the default: same bits,
    and the same bits as a reduction of the leaves' dense vectors."""
    rng = np.random.default_rng(5)
    size = 64
    leaves = _leaves(rng, size, 11, form)
    dense = combine(reduce_range(0, 11, 11, lambda b: leaves[b].dense(size).copy()), 11)
    totals = []
    for switch in (np.inf, 0.0, 1.0, 0.3):
        monkeypatch.setattr(cooc, "DENSE_SWITCH", switch)
        totals.append(_tree_total(leaves, size))
    for total in totals:
        assert total.dtype == dense.dtype and np.array_equal(total, dense)
    if form == "counts":
        assert np.array_equal(dense, np.bincount(np.concatenate([x.keys for x in leaves]), minlength=size))


def test_the_dense_switch_boundary():
    """Sorted sums (16 bytes an entry) turn dense when their entries reach half the cells (8 bytes a cell), counts
    (8 bytes) when they reach the cells; size 0 never; a dense side takes the other in, in place."""
    def sorted_sum(keys, size):
        return cooc.SparseSum(np.array(keys, dtype=np.int64), np.ones(len(keys)), size)

    assert (sorted_sum([0, 1], 10) + sorted_sum([2, 3], 10)).form == "sorted"  # 4 entries × 16 < 10 × 8
    total = sorted_sum([0, 1], 10) + sorted_sum([1, 3, 4], 10)  # 5 × 16 = 10 × 8
    assert total.form == "dense" and total.dense(10).tolist() == [1, 2, 0, 1, 1, 0, 0, 0, 0, 0]
    assert (sorted_sum([0, 1], 0) + sorted_sum([1, 3, 4], 0)).form == "sorted"
    counts = cooc.SparseSum(np.array([3, 3, 1, 2, 0], dtype=np.int64), None, 10)
    more = cooc.SparseSum(np.array([3, 9, 9, 9], dtype=np.int64), None, 10)
    assert (counts + more).form == "counts"  # 9 entries < 10 cells
    total = counts + more + cooc.SparseSum(np.array([5], dtype=np.int64), None, 10)
    assert total.form == "dense" and total.dense(10).tolist() == [1, 1, 1, 3, 0, 1, 0, 0, 0, 3]
    dense = cooc.SparseSum(None, np.zeros(10, dtype=np.int64), 10)
    assert (dense + cooc.SparseSum(np.array([4], dtype=np.int64), None, 10)) is dense and dense.values[4] == 1
    assert (cooc.SparseSum(np.array([4], dtype=np.int64), None, 10) + dense) is dense and dense.values[4] == 2


def test_sums_of_other_forms_sizes_or_keys_are_refused_not_a_crash():
    counts = cooc.SparseSum(np.array([1], dtype=np.int64), None, 10)
    with pytest.raises(DataError, match="cannot be added"):
        counts + cooc.SparseSum(np.array([1], dtype=np.int64), np.ones(1), 10)
    with pytest.raises(DataError, match="cannot be added"):
        counts + cooc.SparseSum(np.array([1], dtype=np.int64), None, 11)
    dense = cooc.SparseSum(None, np.zeros(10, dtype=np.int64), 10)
    for bad in (10, -1, 10**15):
        with pytest.raises(DataError, match=f"key {bad:,} is outside the 10 entries"):
            dense + cooc.SparseSum(np.array([0, bad, 2], dtype=np.int64), None, 10)
        with pytest.raises(DataError, match="outside"):
            cooc.SparseSum(np.array([bad], dtype=np.int64), None, 10).dense(10)
    with pytest.raises(DataError, match="outside"):
        cooc.PairSet(np.empty(0, dtype=np.int64), np.zeros(1, dtype=np.int64), 64) + cooc.PairSet(
            np.array([3, 64], dtype=np.int64))
    short = cooc.PairSet(np.empty(0, dtype=np.int64), np.zeros(1, dtype=np.int64), 6400)  # 1 word for 100 words
    with pytest.raises(DataError, match="a bitmap of \\(1,\\) int64 words for 6,400 keys"):
        short + cooc.PairSet(np.array([3, 6000], dtype=np.int64))
    with pytest.raises(DataError, match="a dense sum of \\(5,\\) int64 entries for 10"):
        cooc.SparseSum(None, np.zeros(5, dtype=np.int64), 10) + cooc.SparseSum(np.array([7], dtype=np.int64), None, 10)
    with pytest.raises(DataError, match="added float64 values"):
        dense + cooc.SparseSum(np.array([7], dtype=np.int64), np.ones(1), 10)


def test_pair_sets_switch_to_a_bitmap_and_keep_the_set(monkeypatch):
    rng = np.random.default_rng(2)
    space = 640
    sets = [np.unique(rng.integers(0, space, rng.integers(0, 12))) for _ in range(13)]
    want = np.unique(np.concatenate(sets))
    for switch in (np.inf, 0.0, 1.0):
        monkeypatch.setattr(cooc, "DENSE_SWITCH", switch)
        leaves = [cooc.PairSet(s.astype(np.int64), None, space) for s in sets]
        total = combine(reduce_range(0, 13, 13, lambda b, leaves=leaves: leaves[b]), 13)
        assert (total.bits is not None) == (switch != np.inf)
        assert np.array_equal(total.sorted_keys(), want)
    # the boundary: a bitmap (space / 8 bytes) once the keys (8 bytes each) would take as much: 64 n ≥ space
    monkeypatch.setattr(cooc, "DENSE_SWITCH", 1.0)
    assert (cooc.PairSet(np.arange(4), None, 640) + cooc.PairSet(np.arange(4, 9), None, 640)).bits is None
    both = cooc.PairSet(np.arange(4), None, 640) + cooc.PairSet(np.arange(4, 10), None, 640)
    assert both.bits is not None and both.sorted_keys().tolist() == list(range(10))


def test_every_pair_look_up_gives_the_same_bits(big, monkeypatch):
    """The rank bitmap (the default here), the hash table (where the bitmap is large: forced) and a bisection of
    the keys (a StatsParams without either) find the same pair ids: identical sums."""
    engine = LocalEngine(big)
    weights = np.random.default_rng(4).lognormal(0.0, 3.0, big.n_tasks)
    index = cooc.pair_index(engine)
    ranked, table = cooc.pair_lookup(index)
    assert ranked is not None and ranked.shape == (625, 2) and table is None  # 200² keys: 625 words
    assert int(ranked[-1, 1]) + bin(int(ranked[-1, 0]) % 2**64).count("1") == index.n_pairs
    want = (cooc.pair_statistics(engine, index), cooc.pair_statistics(engine, index, weights))
    monkeypatch.setattr(cooc, "LOOKUP_BYTES_PER_PAIR", 0)
    monkeypatch.setattr(cooc, "LOOKUP_MIN_BYTES", 0)
    ranked, table = cooc.pair_lookup(index)
    assert ranked is None and table.shape == (65_536, 2)  # ≥ twice the 19,900 pairs
    assert _same(cooc.pair_statistics(engine, index), want[0])
    assert _same(cooc.pair_statistics(engine, index, weights), want[1])
    part = engine.part
    for b in range(engine.n_blocks):
        got = cooc.stats_block(part, b, cooc.StatsParams(index.keys, weights), False)[0]
        ref = cooc.stats_block(part, b, cooc.StatsParams(index.keys, weights, table=table), False)[0]
        for g, r in zip(got, ref):
            assert np.array_equal(g.keys, r.keys) and (g.values is None or np.array_equal(g.values, r.values))


def test_a_look_up_that_does_not_fit_is_refused_never_a_crash_or_a_hang():
    data = _crowd(200, 10, 2, 0)
    part = LocalEngine(data).part
    index = cooc.pair_index(LocalEngine(data))
    ranked, _ = cooc.pair_lookup(index)
    keys = index.keys
    with pytest.raises(DataError, match="ranked bitmap has shape \\(1, 2\\), not \\(2, 2\\) for 10² workers"):
        cooc.stats_block(part, 0, cooc.StatsParams(keys, ranked=ranked[:1]), False)
    with pytest.raises(DataError, match="ranked bitmap has shape \\(2,\\)"):
        cooc.stats_block(part, 0, cooc.StatsParams(keys, ranked=ranked[:, 0]), False)
    with pytest.raises(DataError, match="hash table has shape \\(3, 2\\), not \\(a power of two, 2\\)"):
        cooc.stats_block(part, 0, cooc.StatsParams(keys, table=np.zeros((3, 2), dtype=np.int64)), False)
    full = np.zeros((4, 2), dtype=np.int64)  # no empty slot, none of its keys: every look-up misses, and ends
    with pytest.raises(DataError, match="does not hold workers"):
        cooc.stats_block(part, 0, cooc.StatsParams(keys, table=full), False)
    far = ranked.copy()
    far[:, 1] = 10**12  # ids far past the index: keys past the sums' entries, refused when added
    sums = cooc.stats_block(part, 0, cooc.StatsParams(keys, ranked=far), False)[0]
    with pytest.raises(DataError, match="outside"):
        sums[0].dense(len(keys) * 4)
