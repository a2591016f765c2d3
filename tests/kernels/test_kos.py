"""KOS kernels: a slow pure-Python reference of the message passing equals the block functions' messages (to 1e-12),
with and without gold; bit-identical for any thread count; bad inputs refused by the block functions."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.core.threads import use_threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import DataError
from crowdagg.kernels.kos import Normalise, Round, kos_normalise_block, kos_round_block
from crowdagg.methods.graph.kos import KOSState
from crowdagg.simulate import simulate


def reference_kos(data: AnnotationSet, y0: np.ndarray, rounds: int, clamp=None, gold: float = 1.0):
    """Karger--Oh--Shah edge by edge, leave-one-out sums by explicit loops: (y per round, x, totals, beliefs)."""
    edges = [(int(t), int(w), 1.0 if int(y) == 1 else -1.0) for t, w, y in zip(data.task, data.worker, data.label,
                                                                               strict=True)]
    by_task: dict[int, list[int]] = {}
    by_worker: dict[int, list[int]] = {}
    for e, (t, w, _) in enumerate(edges):
        by_task.setdefault(t, []).append(e)
        by_worker.setdefault(w, []).append(e)
    clamp = {} if clamp is None else {t: g for t, g in enumerate(clamp) if g >= 0}

    def task_side(y):
        x = [0.0] * len(edges)
        for e, (t, _, _) in enumerate(edges):
            if t in clamp:
                x[e] = gold if clamp[t] == 1 else -gold
            else:
                x[e] = sum(edges[f][2] * y[f] for f in by_task[t] if f != e)
        return x

    top = max(abs(v) for v in y0)
    y = [v / top for v in y0]
    x = task_side(y)
    ys = [y]
    for _ in range(rounds):
        y = [sum(edges[f][2] * x[f] for f in by_worker[w] if f != e) for e, (_, w, _) in enumerate(edges)]
        top = max(abs(v) for v in y)
        y = [v / top for v in y]
        x = task_side(y)
        ys.append(y)
    totals = np.zeros(data.n_workers)
    for e, (_, w, sign) in enumerate(edges):
        totals[w] += sign * x[e]
    belief = np.zeros(data.n_tasks)
    for e, (t, _, sign) in enumerate(edges):
        belief[t] += sign * y[e]
    return [np.array(v) for v in ys], np.array(x), totals, belief


@pytest.fixture(scope="module")
def small():
    return simulate(n_tasks=40, n_workers=9, n_classes=2, per_task=3, adversaries=0.2, seed=4).to_annotations()


def _run(data, y0, rounds, clamp=None, gold=1.0):
    state = KOSState(LocalEngine(data), data, y0, clamp, gold)
    ys = [np.concatenate(state.y)]
    for _ in range(rounds):
        state.iterate()
        ys.append(np.concatenate(state.y))
    return state, ys


@pytest.mark.parametrize("with_gold", [False, True])
def test_kernels_equal_the_pure_python_reference(small, with_gold):
    y0 = np.random.default_rng(1).normal(1.0, 1.0, small.n_answers)
    clamp = None
    if with_gold:
        clamp = np.full(small.n_tasks, -1, dtype=np.int64)
        clamp[[0, 7, 21]] = [1, 0, 1]
    state, ys = _run(small, y0, 12, clamp, gold=2.0)
    want_ys, want_x, want_totals, want_belief = reference_kos(small, y0, 12, clamp, gold=2.0)
    for got, want in zip(ys, want_ys, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.concatenate(state.x), want_x, rtol=0, atol=1e-11)
    np.testing.assert_allclose(state.totals, want_totals, rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.concatenate(state.belief), want_belief, rtol=0, atol=1e-11)
    assert max(np.abs(y).max() for y in ys) == pytest.approx(1.0, abs=1e-15)  # normalised every round


def test_many_rounds_never_overflow(small):
    """Unnormalised, the messages grow geometrically (crowd-kit stops at 1e300); normalised, 5,000 rounds are finite."""
    state, _ = _run(small, np.random.default_rng(2).normal(1.0, 1.0, small.n_answers), 0)
    for _ in range(5000):
        state.iterate()
    assert all(np.isfinite(y).all() and np.abs(y).max() <= 1.0 for y in state.y)
    assert np.isfinite(state.totals).all()


def test_a_heavy_worker_and_several_blocks_give_the_same_bits_for_any_thread_count():
    crowd = simulate(n_tasks=30_000, n_workers=40, n_classes=2, per_task=5, extreme_spammers=1, seed=6)
    data = crowd.to_annotations()
    engine = LocalEngine(data)
    assert engine.n_blocks >= 2  # the extreme spammer's answers lie in every block
    y0 = np.random.default_rng(3).normal(1.0, 1.0, data.n_answers)
    runs = []
    for n in (1, 2, 3):
        with use_threads(n):
            state = KOSState(LocalEngine(data), data, y0, None, 1.0)
            res = [state.iterate() for _ in range(6)]
        runs.append((np.concatenate(state.y), np.concatenate(state.x), state.totals, res))
    for other in runs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(runs[0][:3], other[:3], strict=True))
        assert runs[0][3] == other[3]


def test_block_functions_refuse_bad_inputs(small):
    part = LocalEngine(small).part
    n = small.n_answers
    with pytest.raises(DataError, match="y0 of block 0 has shape"):
        kos_round_block(part, 0, Round(np.zeros(0), None, [np.ones(n - 1)]))
    with pytest.raises(DataError, match="totals has shape"):
        kos_round_block(part, 0, Round(np.zeros(3), [np.ones(n)]))
    with pytest.raises(DataError, match="clamp holds a class outside"):
        kos_round_block(part, 0, Round(np.zeros(0), None, [np.ones(n)], np.full(small.n_tasks, 2)))
    with pytest.raises(DataError, match="must be finite"):
        kos_normalise_block(part, 0, Normalise([np.ones(n)], [np.ones(n)], float("inf")))
    three = simulate(n_tasks=10, n_workers=4, n_classes=3, per_task=2, seed=0).to_annotations()
    with pytest.raises(DataError, match="binary: these answers have 3 classes"):
        kos_round_block(LocalEngine(three).part, 0, Round(np.zeros(0), None, [np.ones(three.n_answers)]))


@pytest.mark.parametrize("with_gold", [False, True])
def test_one_block_rounds_fused_or_split_give_the_same_bits_as_the_block_functions(with_gold, monkeypatch):
    """A sparse crowd is one block: its rounds run fused or split (kos's _Whole), whichever is faster, and every
    mode, thread count and switch between them gives the bits of the per-block functions' rounds."""
    from crowdagg.methods.graph import kos as kos_method

    data = simulate(n_tasks=3000, n_workers=2000, n_classes=2, per_task=3, seed=8).to_annotations()
    assert LocalEngine(data).n_blocks == 1
    y0 = np.random.default_rng(5).normal(1.0, 1.0, data.n_answers)
    clamp = None
    if with_gold:
        clamp = np.full(data.n_tasks, -1, dtype=np.int64)
        clamp[::97] = np.arange(len(clamp[::97])) % 2

    def rounds(state):
        res = [state.iterate() for _ in range(40)]
        return (np.concatenate(state.y), np.concatenate(state.x), state.totals, np.concatenate(state.belief), res)

    want = rounds(KOSState(LocalEngine(data), data, y0, clamp, 3.0, whole=False))  # the block functions' rounds
    for probe in (kos_method._Whole.PROBE, 1, 3):
        monkeypatch.setattr(kos_method._Whole, "PROBE", probe)
        for n in (1, 2, 3):
            with use_threads(n):
                state = KOSState(LocalEngine(data), data, y0, clamp, 3.0)
                got = rounds(state)
            assert state._whole is not None
            for a, b in zip(got[:4], want[:4], strict=True):
                assert a.tobytes() == b.tobytes()
            assert got[4] == want[4]

