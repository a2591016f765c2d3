"""bp's advice when a fit is refused for memory or its labels collapse: it names what applies to the model run."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import ResourceError
from crowdagg.methods.api import aggregate


@pytest.fixture(scope="module")
def uniform_answers():
    """Answers that ignore any truth (K = 3, 8 workers on 200 tasks): a fit with one sample collapses."""
    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(200), 8)
    return AnnotationSet.from_codes(task, np.tile(np.arange(8), 200), rng.integers(0, 3, task.size), n_classes=3)


def test_the_collapse_advice_of_the_confusion_model_does_not_say_to_use_it(uniform_answers):
    with pytest.warns(Warning, match="collapsed") as seen:
        aggregate(uniform_answers, "bp", worker_model="confusion", samples=1)
    said = " ".join(str(w.message) for w in seen if "collapsed" in str(w.message))
    assert "worker_model=confusion" not in said
    assert "samples" in said


def test_a_refusal_for_memory_names_the_messages_and_the_samples_not_the_posteriors(uniform_answers):
    with pytest.raises(ResourceError) as err:
        aggregate(uniform_answers, "bp", worker_model="confusion", samples=100_000, max_memory="1M")
    assert "posteriors alone" not in str(err.value)
    assert "samples" in str(err.value)


def test_the_vote_start_runs_on_the_grid_its_spans_were_built_for():
    """The start's first worker pass ran on the standard engine with the fine grid's crossing segments: on a
    crowd whose two grids differ, block b's flags and totals were another block's (the kernels' checks refuse
    that now), so the start must run where its spans come from."""
    from crowdagg.engine import LocalEngine

    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(30_000), 5)
    data = AnnotationSet.from_codes(task, rng.integers(0, 2000, task.size), rng.integers(0, 5, task.size),
                                    n_classes=5, duplicates="first")
    engine = LocalEngine(data)
    assert engine.worker_part.n_blocks != engine.fine().worker_part.n_blocks  # the case that went wrong
    result = aggregate(data, "bp", max_iter=2, tol=0.0)
    assert np.isfinite(result.posteriors).all()
