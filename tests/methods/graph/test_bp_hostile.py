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
