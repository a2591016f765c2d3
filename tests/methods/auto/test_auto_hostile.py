"""auto under a hostile user: the memory its candidates need refused up front, the warnings worded for what
happened (why nothing was hidden; a lone refusing candidate said once), gold tasks out of the scores."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import CrowdaggWarning, DataError, ResourceError
from crowdagg.methods.api import aggregate
from crowdagg.methods.registry import get
from crowdagg.simulate import simulate


def crowd(seed=0, **kw):
    return simulate(**{"n_tasks": 200, "n_workers": 15, "n_classes": 3, "per_task": 4, "seed": seed, **kw})


@pytest.mark.quick
def test_the_largest_candidates_fits_are_in_the_memory_refused_up_front():
    data = crowd().to_annotations()
    auto = get("auto").load()(candidates=("mv", "ebcc"), folds=2)
    ebcc, _ = get("ebcc").load()().memory_needed(data)
    mv, _ = get("mv").load()().memory_needed(data)
    assert ebcc > mv
    with threads.use_threads(1):
        one, what = auto.memory_needed(data)
    with threads.use_threads(2):
        two, _ = auto.memory_needed(data)
    assert two - one == pytest.approx(ebcc)  # one more ebcc fit at once
    assert "1 fit(s) at once of ebcc" in what
    # a limit over auto's own tables but under ebcc's fit: refused before any fit, naming ebcc
    with threads.use_threads(1), pytest.raises(ResourceError, match="of ebcc, the largest candidate"):
        aggregate(data, "auto", candidates=("mv", "ebcc"), folds=2, max_memory=one - ebcc / 2)
    with threads.use_threads(1):
        res = aggregate(data, "auto", candidates=("mv", "ebcc"), folds=2, max_memory=one * 1.01)
    assert res.model_params["weights"].sum() == pytest.approx(1.0)


@pytest.mark.quick
def test_nothing_hidden_says_why():
    one_worker = AnnotationSet.from_names([f"t{i}" for i in range(8)] * 2, ["w"] * 16, ["a", "b"] * 8,
                                          duplicates="keep")
    with pytest.warns(CrowdaggWarning, match=r"no answer could be hidden \(every task has answers from one worker "
                                             r"only, kept in every fold\): the first candidate that ran, mv"):
        aggregate(one_worker, "auto", candidates=("mv", "ds"), folds=2)
    # two answers a task, but a fold share so small that no draw falls in it
    few = AnnotationSet.from_names(["t1", "t1", "t2", "t2"], ["w1", "w2", "w1", "w2"], ["a", "a", "b", "a"])
    with pytest.warns(CrowdaggWarning, match=r"the draws fell outside every fold: raise held_out from 0.001"):
        res = aggregate(few, "auto", candidates=("mv", "ds"), folds=2, held_out=0.001)
    assert res.model_params["weights"].tolist() == [1.0, 0.0]


@pytest.mark.quick
def test_a_lone_refusing_candidate_is_its_error_said_once():
    data = crowd(6).to_annotations()  # three classes: kos takes two
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(DataError, match="3 classes"):
            aggregate(data, "auto", candidates=("kos",), folds=2)
    assert not [w for w in said if "left out" in str(w.message)]


@pytest.mark.quick
def test_gold_tasks_are_out_of_the_scores_and_every_candidate_is_clamped_alike():
    from crowdagg.methods.auto.auto import answer_probability, held_out_folds, scoring_confusion
    from crowdagg.methods.blocks import clamp_posteriors

    sim = crowd(3)
    data = sim.to_annotations()
    n_gold = 120  # most tasks: a candidate told their truth would out-score mv on their answers alone
    gold = {data.task_names[i]: data.classes[sim.truth[i]] for i in range(n_gold)}
    res = aggregate(data, "auto", candidates=("mv", "ds"), folds=2, gold=gold)
    # mv's score by hand: no gold task's answer hidden, mv's fold posteriors clamped on the gold tasks
    clamp = np.full(data.n_tasks, -1)
    clamp[:n_gold] = sim.truth[:n_gold]
    fold = held_out_folds(data, 2, 0.1, seed=0)
    fold[clamp[data.task] >= 0] = -1
    logs = []
    for f in range(2):
        sub, h = data.without_answers(fold == f), np.flatnonzero(fold == f)
        assert h.size and np.all(data.task[h] >= n_gold)
        q = clamp_posteriors(aggregate(sub, "mv").posteriors.copy(), clamp)
        conf = scoring_confusion(sub, q, (4.0, 1.0))
        logs.append(np.log(answer_probability(q, conf, data.task[h], data.worker[h], data.label[h])))
    assert res.model_params["scores"][0] == pytest.approx(np.concatenate(logs).mean(), abs=1e-12)
    np.testing.assert_allclose(res.posteriors[np.arange(n_gold), sim.truth[:n_gold]], 1.0)


@pytest.mark.quick
def test_a_failing_job_stops_the_fits_in_flight_at_their_next_iteration():
    import threading

    from crowdagg.methods.auto.auto import run_jobs, stopper

    stop, started, ended = threading.Event(), threading.Event(), []
    halt = stopper(stop)

    def long_fit():
        started.set()
        try:
            for _ in range(20000):  # ~20 s of iterations, unless stopped
                halt(0, 0.0)
                threading.Event().wait(0.001)
        except BaseException:
            ended.append("stopped")
            raise
        ended.append("ran to the end")

    def failing():
        started.wait()
        raise DataError("boom")

    with pytest.raises(DataError, match="boom"):
        run_jobs([long_fit, failing], ["a", "b"], 2, stop)
    assert ended == ["stopped"] and stop.is_set()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to see a process's handlers")
def test_ctrl_c_with_threads_ends_the_run_without_waiting_for_the_fits(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.test_entry import _handlers_installed, _wait_until

    sim = simulate(n_tasks=6000, n_workers=60, n_classes=3, per_task=5, seed=0)
    sim.write(tmp_path)
    env = {**__import__("os").environ, "CROWDAGG_THREADS": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "crowdagg", "aggregate", str(tmp_path / "labels.csv"), "-m", "auto",
                             "-p", "candidates=ebcc,minimax", "-p", "folds=2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # crowdagg's handlers first (a SIGINT during the interpreter's own start-up is Python's, not ours), however slow
    # the machine; then into the fits (or not yet: once the handlers are in, the interrupt's answer is the same)
    _wait_until(proc, _handlers_installed, "catching SIGTERM")
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and out == b""
    assert err.decode().strip().splitlines()[-1] == "Error: interrupted"


@pytest.mark.quick
@pytest.mark.parametrize(("folds", "held_out", "seed", "match"), [
    (0, 0.1, 0, "folds must be an integer"), (2.5, 0.1, 0, "folds must be an integer"),
    (2, 0.0, 0, "held_out must be a finite number"), (2, float("nan"), 0, "held_out must be a finite number"),
    (2, -0.1, 0, "held_out must be a finite number"), (2, 0.1, -3, "seed must be an integer"),
])
def test_held_out_folds_refuses_what_auto_refuses(folds, held_out, seed, match):
    from crowdagg.errors import UsageError
    from crowdagg.methods.auto.auto import held_out_folds

    data = crowd().to_annotations()  # (was: fold codes of -2**63, or -10 .. -1 for a negative share)
    with pytest.raises(UsageError, match=match):
        held_out_folds(data, folds, held_out, seed)


@pytest.mark.quick
def test_a_candidate_that_flags_its_tasks_is_refused_up_front():
    """Found hostile: ``-p candidates=twothird`` ran, "chose twothird", and wrote task,label,confidence -- no
    ``accepted`` column -- under twothird's own warning that its tasks "are flagged accepted=false"; pooled with mv
    it weighed as mv (its posteriors are the same vote shares).  A pooled result cannot carry a rule's verdict on
    its own labels: refused before any fit, naming the flag and mv."""
    from crowdagg.errors import UsageError

    data = crowd().to_annotations()
    for candidates in (("twothird",), ("mv", "twothird")):
        with pytest.raises(UsageError, match=r"lists 'twothird', whose output flags each task \(accepted\).* mv is"):
            aggregate(data, "auto", candidates=candidates, folds=2)
    assert get("mmsr").load().flag_names == () and get("twothird").load().flag_names == ("accepted",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        assert aggregate(data, "auto", candidates=("mv", "mmsr"), folds=2).flags == {}  # mmsr pools
