"""BP kernels called directly with hostile arguments: a clear DataError, never a read or write outside an array.

The block functions and the points are public (``crowdagg.kernels.bp``); the compiled passes index without bounds
checks, so before these checks a short message array, a position past it or a gold class past K crashed the
interpreter (segmentation fault, heap corruption).
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import DataError
from crowdagg.kernels import bp as kb


@pytest.fixture(scope="module")
def crowd():
    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(50), 3)
    data = AnnotationSet.from_codes(task, rng.integers(0, 10, task.size), rng.integers(0, 2, task.size),
                                    n_tasks=50, n_workers=10, n_classes=2)
    engine = LocalEngine(data)
    return data, engine, kb.grid_points(2.0, 1.0, 2, 8), kb.spans(engine.worker_part)


def _task(data, wmsg=None, position=None, clamp=None, log_prior=None):
    a = data.n_answers
    return kb.TaskPass(np.full((a, 2), 0.5) if wmsg is None else wmsg,
                       data.worker_position if position is None else position,
                       np.full(data.n_tasks, -1) if clamp is None else clamp, log_prior)


@pytest.mark.parametrize("case, match", [
    ("short wmsg", "rows of wmsg"),
    ("position past wmsg", "rows of wmsg"),
    ("negative position", "rows of wmsg"),
    ("gold class past K", "class outside -1 .. 1"),
    ("short clamp", "clamp holds 3 tasks"),
    ("wmsg of 3 classes", "needs"),
    ("wmsg of text", "numbers"),
    ("block past the grid", "not one of"),
    ("short log_prior", "log_prior has shape"),
    ("log_prior of NaN", "log_prior holds NaN"),
    ("log_prior of +inf", "log_prior holds NaN"),
    ("log_prior row of -inf", "log_prior holds NaN"),
])
def test_task_block_refuses_what_does_not_fit_its_block(crowd, case, match):
    data, engine, _, _ = crowd
    a, n = data.n_answers, data.n_tasks
    args = {
        "short wmsg": dict(wmsg=np.full((3, 2), 0.5)),
        "position past wmsg": dict(position=np.full(a, 10**9)),
        "negative position": dict(position=np.full(a, -1)),
        "gold class past K": dict(clamp=np.full(n, 7)),
        "short clamp": dict(clamp=np.full(3, -1)),
        "wmsg of 3 classes": dict(wmsg=np.full((a, 3), 1 / 3)),
        "wmsg of text": dict(wmsg=np.full((a, 2), "x")),
        "short log_prior": dict(log_prior=np.zeros((3, 2))),
        "log_prior of NaN": dict(log_prior=np.full((n, 2), np.nan)),
        "log_prior of +inf": dict(log_prior=np.full((n, 2), np.inf)),
        "log_prior row of -inf": dict(log_prior=np.full((n, 2), -np.inf)),
    }.get(case, {})
    b = 99 if case == "block past the grid" else 0
    with pytest.raises(DataError, match=match):
        kb.task_block(engine.parts[0], b, _task(data, **args), True)


@pytest.mark.parametrize("fn", [kb.worker_block, kb.means_block, kb.partial_block])
@pytest.mark.parametrize("case, match", [
    ("short tmsg", "rows of tmsg"),
    ("points of 5 classes", "5-class confusions"),
    ("nan damping", "damping"),
    ("damping 1", "damping"),
    ("short old", "old has shape"),
    ("spans of another grid", "spans"),
    ("totals of the wrong shape", "totals has shape"),
    ("not points", "Points"),
    ("a task-ordered part", "worker-ordered partition"),
])
def test_worker_side_blocks_refuse_what_does_not_fit_their_block(crowd, fn, case, match):
    data, engine, pts, sp = crowd
    a = data.n_answers
    kw = dict(tmsg=np.full((a, 2), 0.5), old=np.full((a, 2), 0.5), points=pts, damping=0.0, damp=False, spans=sp)
    kw.update({
        "short tmsg": dict(tmsg=np.full((3, 2), 0.5)),
        "points of 5 classes": dict(points=kb.grid_points(2.0, 1.0, 5, 8)),
        "nan damping": dict(damping=float("nan")),
        "damping 1": dict(damping=1.0),
        "short old": dict(old=np.full((3, 2), 0.5)),
        "spans of another grid": dict(spans=kb.Spans(*(np.zeros(7, bool),) * 3, *(np.zeros(7, np.int64),) * 2)),
        "totals of the wrong shape": dict(totals=np.zeros((1, 2, 3))),
        "not points": dict(points="points"),
    }.get(case, {}))
    part = engine.parts[0] if case == "a task-ordered part" else engine.worker_part
    if fn is not kb.worker_block and case == "short old":
        pytest.skip("only the message pass reads the previous messages")
    with pytest.raises(DataError, match=match):
        fn(part, 0, kb.WorkerPass(**kw), True)


def test_the_passes_refuse_a_short_message_array(crowd):
    data, engine, pts, sp = crowd
    with pytest.raises(DataError, match="rows of tmsg"):
        kb.worker_pass(engine, kb.WorkerPass(np.full((3, 2), 0.5), np.full((data.n_answers, 2), 0.5), pts, 0.0,
                                             False, sp))
    with pytest.raises(DataError, match="rows of wmsg"):
        kb.task_pass(engine, _task(data, wmsg=np.full((3, 2), 0.5)))


@pytest.mark.parametrize("call, match", [
    (lambda: kb.Points(np.ones((0, 2, 2)), np.ones(0)), "G and K >= 1"),
    (lambda: kb.Points(np.ones((3, 0, 0)), np.zeros(3)), "G and K >= 1"),
    (lambda: kb.grid_points(2.0, 1.0, 0, 8), "number of classes"),
    (lambda: kb.grid_points(2.0, 1.0, 2, 0), "number of cells"),
    (lambda: kb.grid_points(0.0, 1.0, 2, 8), "first parameter"),
    (lambda: kb.grid_points(2.0, float("nan"), 2, 8), "second parameter"),
    (lambda: kb.sample_points(0.0, 1.0, 2, 8, 0), "first parameter"),
    (lambda: kb.sample_points(2.0, float("inf"), 2, 8, 0), "second parameter"),
    (lambda: kb.sample_points(2.0, 1.0, 2, -1, 0), "number of samples"),
    (lambda: kb.sample_points(2.0, 1.0, 2.5, 8, 0), "number of classes"),
])
def test_points_refuse_empty_shapes_and_bad_priors(call, match):
    with pytest.raises(DataError, match=match):
        call()
