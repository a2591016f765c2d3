"""crowdagg: trustworthy labels from noisy crowds.

>>> import pandas as pd
>>> from crowdagg import aggregate
>>> df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [0, 1, 1]})
>>> result = aggregate(df, "ds")                    # doctest: +SKIP
>>> result.labels_series()                          # doctest: +SKIP

Public API
----------
Reading and aggregating
    load_annotations(source, ...) -- a file, files, a DataFrame -> AnnotationSet
    read_task_labels(source, ...) -- a task -> label file (truth, gold) -> dict
    aggregate(data, method="ds", ...) -- AnnotationSet, DataFrame, records or path -> AggregationResult
    load_numeric(source, ...) -- numeric answers (task, worker, value) -> NumericAnswers
    aggregate(data, "crh", numeric=True) -- numeric answers -> NumericResult (one value per task; mean, median,
        catd, crh)
    get_method(name), REGISTRY -- the method classes by name, imported on use (mv, wmv, wawa, ds, onecoin, ...)
Data model and results
    AnnotationSet -- the answers as flat code arrays plus names (from_names, from_codes)
    Vocabulary -- the names behind task and worker codes
    AggregationResult -- posteriors, labels, worker parameters; pandas views
    NumericAnswers, NumericResult -- numeric answers, and a numeric method's values and worker weights
Learning from crowds (the optional extra ``train``: torch)
    train(features, answers, method=..., network=...) -- a classifier learned from crowds -> TrainedModel
        (predict, predict_proba; .result: the training tasks' inferred labels)
    load_model(path) -- a model saved by ``crowdagg train --save`` -> TrainedModel (loading executes no code)
Evaluation
    evaluate_labels(predicted, truth, posteriors=result.proba_frame()) -> Evaluation (accuracy, macro-F1, recall;
        with posteriors or confidence=: ECE over 15 equal-mass bins, Brier score, reliability table)
    stats(data, result=None, method="mv") -> Agreement (Krippendorff's alpha, Fleiss' kappa where it applies,
        uncertainty, agreement and consistency with the method's labels; per task and per worker tables)
Threads
    set_threads(n), use_threads(n) -- the thread count of reading and fitting (``--threads``)
Errors and warnings
    DataError, UsageError, ResourceError (a ``MemoryError`` refused up front),
    CrowdaggWarning, ConvergenceWarning

Heavy modules (pandas, numba) load on first use of a name above, so
``import crowdagg`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _moved
from ._version import __version__ as __version__

_moved.install()  # old module paths (crowdagg.vocab, crowdagg.aggregators, ...) keep working

from .core.lazy import exports  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from .core.threads import set_threads, use_threads
    from .data.annotations import AnnotationSet
    from .data.numeric import NumericAnswers
    from .data.vocab import Vocabulary
    from .errors import ConvergenceWarning, CrowdaggWarning, DataError, ResourceError, UsageError
    from .io.read import load_annotations, load_numeric, read_task_labels
    from .learning.api import train
    from .learning.model_file import load_model
    from .methods.api import aggregate
    from .methods.numeric.base import NumericResult
    from .methods.registry import REGISTRY, get_method
    from .methods.result import AggregationResult
    from .reports.agreement import Agreement, stats
    from .reports.evaluate import Evaluation, evaluate_labels

#: Public name -> the submodule defining it, imported on first access.
_LAZY = {
    "aggregate": "methods.api",
    "get_method": "methods.registry",
    "REGISTRY": "methods.registry",
    "AnnotationSet": "data.annotations",
    "Vocabulary": "data.vocab",
    "AggregationResult": "methods.result",
    "load_annotations": "io.read",
    "load_numeric": "io.read",
    "NumericAnswers": "data.numeric",
    "NumericResult": "methods.numeric.base",
    "read_task_labels": "io.read",
    "load_model": "learning.model_file",
    "train": "learning.api",
    "evaluate_labels": "reports.evaluate",
    "Evaluation": "reports.evaluate",
    "stats": "reports.agreement",
    "Agreement": "reports.agreement",
    "DataError": "errors",
    "UsageError": "errors",
    "ResourceError": "errors",
    "CrowdaggWarning": "errors",
    "ConvergenceWarning": "errors",
    "set_threads": "core.threads",
    "use_threads": "core.threads",
}

#: Spelled out (not built from ``_LAZY``) so that linters and type checkers see it; a test keeps the two equal.
__all__ = [
    "__version__",
    "aggregate",
    "get_method",
    "REGISTRY",
    "AnnotationSet",
    "Vocabulary",
    "AggregationResult",
    "load_annotations",
    "load_numeric",
    "NumericAnswers",
    "NumericResult",
    "read_task_labels",
    "load_model",
    "train",
    "evaluate_labels",
    "Evaluation",
    "stats",
    "Agreement",
    "DataError",
    "UsageError",
    "ResourceError",
    "CrowdaggWarning",
    "ConvergenceWarning",
    "set_threads",
    "use_threads",
]


__getattr__ = exports(__name__, {name: f"{__name__}.{module}" for name, module in _LAZY.items()})


def __dir__() -> list[str]:
    """The public names (lazy ones included, before their first use) and the module's dunder attributes."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})
