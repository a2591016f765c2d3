"""The figures of ``crowdagg workers --plot``: names are drawn as plain text."""

from __future__ import annotations

import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.methods.api import aggregate
from crowdagg.reports import plot
from crowdagg.reports.workers import worker_report
from crowdagg.simulate import simulate

pytest.importorskip("matplotlib")

#: Names mathtext would read as TeX: ``$\\le 5$`` is math with a symbol it lacks (the ValueError "\\le 5 ^
#: ParseFatalException: Unknown symbol" the CLI reported as an unexpected failure), ``$x$`` an italic x.
TEX_NAMES = ("$\\le 5$", "\\le 5", "$x$", "a_b^c")


def test_class_and_worker_names_that_look_like_tex_are_drawn_as_they_are():
    crowd = simulate(n_tasks=200, n_workers=6, per_task=6, n_classes=4, seed=2).to_annotations()
    data = AnnotationSet.from_codes(crowd.task, crowd.worker, crowd.label, n_tasks=crowd.n_tasks,
                                    n_workers=crowd.n_workers, task_names=crowd.task_names.tolist(),
                                    worker_names=["$\\lex$", "\\alpha", *crowd.worker_names[2:].tolist()],
                                    classes=TEX_NAMES)
    result = aggregate(data, "ds")
    report = worker_report(data, result)
    grid = plot.confusion_grid(report, result.confusion, data.classes)
    scatter = plot.answers_vs_accuracy(report, data.n_classes)
    assert grid[:8] == scatter[:8] == b"\x89PNG\r\n\x1a\n"
    # and the same bytes again
    assert plot.confusion_grid(report, result.confusion, data.classes) == grid
    import matplotlib

    assert matplotlib.rcParams["text.parse_math"] is True  # the caller's setting is back



@pytest.mark.parametrize(("args", "match"), [
    (([1, 2], 0.1, None, "posteriors"), "takes ReliabilityBin rows .* got int"),
    (([], float("nan"), None, "posteriors"), "ece and brier must be finite numbers"),
    (([], 0.1, "x", "posteriors"), "ece and brier must be finite numbers"),
])
def test_reliability_diagram_refuses_what_it_cannot_draw(args, match):
    """Bins that are not ReliabilityBin rows were an AttributeError, a text Brier score a ValueError from the
    title's format, a NaN ECE drawn as 'ECE nan'."""
    from crowdagg.errors import UsageError
    from crowdagg.reports.plot import reliability_diagram

    with pytest.raises(UsageError, match=match):
        reliability_diagram(*args)
