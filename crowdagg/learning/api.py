"""``crowdagg.train``: the library's one call from features and noisy answers to a trained classifier.

>>> import crowdagg
>>> model = crowdagg.train(features, answers, method="geocrowdnet-f")     # doctest: +SKIP
>>> model.predict(new_features)                                           # doctest: +SKIP
>>> model.result.labels_series()       # the labels inferred for the training tasks  # doctest: +SKIP

The same fit as ``crowdagg train`` (the trainer's declared defaults, its
checks, its memory limit), with the network either one of the declared
kinds (``linear``, ``mlp``, ``cnn``) or any ``torch.nn.Module``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.memory import MaxMemory
from ..errors import UsageError, param


def train(
    features: Any,
    answers: Any,
    method: str = "geocrowdnet-f",
    *,
    network: Any = None,
    tasks: Sequence[Any] | np.ndarray | None = None,
    feature_names: Sequence[str] | None = None,
    callback: Callable[[int, float], Any] | None = None,
    max_memory: MaxMemory = None,
    task_col: str | None = None,
    worker_col: str | None = None,
    label_col: str | None = None,
    **params: Any,
) -> Any:
    """Train the trainer ``method`` on ``features`` and the noisy ``answers``; the trained model.

    Parameters
    ----------
    features : array (n, d) or (n, C, H, W), DataFrame, or tensor
        The tasks' features.  Rows are matched to the answers' tasks by
        ``tasks`` (the id of each row) when given, else by a DataFrame's
        index; else the rows are the answers' tasks in their order (as
        ``crowdagg.load_annotations(answers).task_names`` lists them).
        Rows of tasks without answers are predicted, not trained on.
    answers : AnnotationSet, DataFrame, list of records, or path
        The answers (task, worker, label), read as :func:`crowdagg.aggregate`
        reads them (``task_col`` ... name the columns).
    method : str
        A trainer (``crowdagg methods`` lists them), default ``geocrowdnet-f``.
    network : str or torch.nn.Module, optional
        ``linear``, ``mlp``, ``cnn`` (the ``model`` parameter; default
        ``mlp``), or a module mapping a batch of features to K logits,
        trained in place of it (a copy: the module given is unchanged).  A
        model with a module predicts in this process; it cannot be saved to
        a model file; ``hidden`` and ``dropout``, which shape the declared
        kinds, do not apply to it.
    tasks : sequence, optional
        The task id of each feature row, in the rows' order (a set is
        refused: it has none), each once; compared as text, stripped as the
        answers' task names are.  With a DataFrame indexed by task, the
        index must say the same.
    feature_names : sequence of str, optional
        The features' names (default a DataFrame's columns), kept in the
        model: it then matches the columns it predicts on by name.
    callback : callable, optional
        ``callback(epoch, objective)`` after each epoch.
    max_memory : int, float or str, optional
        As for :func:`crowdagg.aggregate`.
    **params
        The trainer's parameters (``epochs=20``, ``lam=0.01``; ``crowdagg
        methods NAME`` lists them); one it does not take is a
        :class:`~crowdagg.errors.UsageError` naming the ones it takes.

    Returns
    -------
    TrainedModel
        ``predict`` / ``predict_proba`` on new features, and ``result``:
        the :class:`~crowdagg.methods.result.AggregationResult` of the
        training tasks (their inferred labels, posteriors, the annotators'
        confusions, the classifier's own probabilities).
    """
    from ..data.annotations import AnnotationSet
    from ..methods.api import _as_annotations
    from ..methods.loop import check_callback
    from ..methods.registry import get_trainer

    if not isinstance(method, str):
        raise UsageError(f"{param('method')} must be a trainer's name, got {type(method).__name__}")
    cls = get_trainer(method).load()
    module = None
    if network is not None:
        if isinstance(network, str):
            if "model" in params:
                raise UsageError(f"give {param('network')} or {param('model')}, not both")
            params["model"] = network
        else:
            from .networks import check_network

            check_network(network)  # before the answers are read
            if "model" in params:  # two statements of the network: the module silently won
                raise UsageError(f"give {param('network')} or {param('model')}, not both")
            module = network
    check_callback(callback)
    trainer = cls(**params)
    trainer.check_params()  # a bad parameter before the answers are read
    if isinstance(answers, AnnotationSet):
        given = [param(k) for k, v in (("task_col", task_col), ("worker_col", worker_col), ("label_col", label_col))
                 if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)} apply to a DataFrame, records or a file, not to an AnnotationSet")
        data = answers
    else:
        data = _as_annotations(answers, max_memory, (task_col, worker_col, label_col), "train's answers are")
    data, x, names = _aligned(data, features, tasks, max_memory)
    result = trainer.fit(data, x, callback=callback, max_memory=max_memory,
                         feature_names=feature_names if feature_names is not None else names, network=module)
    model = result.model_params["model"]
    # the result without the model in it: the model holds the result, and no reference cycle is made
    model.result = dataclasses.replace(result, model_params={k: v for k, v in result.model_params.items()
                                                             if k != "model"})
    return model


#: How messages name the task ids of a DataFrame's index.
BY_INDEX = ("features", "given (its DataFrame index)")


def _aligned(data: Any, features: Any, tasks: Any, max_memory: MaxMemory) -> tuple[Any, Any, Any]:
    """The features in ``data``'s task order (feature-only tasks appended to ``data``), and their names: by
    ``tasks``, else by a DataFrame's index, else as given (rows in ``data``'s task order, checked by the fit)."""
    from .features import Features, align, as_features, column_names, task_ids, task_index

    names = column_names(features)
    index = task_index(features)
    if tasks is None and index is None:
        return data, features, names
    x = as_features(features)
    ids = task_ids(tasks, "tasks", "given") if tasks is not None else task_ids(index.tolist(), *BY_INDEX)
    if ids.shape[0] != x.shape[0]:
        raise UsageError(f"{param('tasks')} names {ids.shape[0]:,} rows for {x.shape[0]:,} rows of features")
    if tasks is not None and index is not None:
        by_index = task_ids(index.tolist(), *BY_INDEX)
        differ = np.flatnonzero(by_index != ids)
        if differ.size:  # which one is right cannot be told: tasks silently won
            i = int(differ[0])
            raise UsageError(f"{param('tasks')} names row {i} {ids[i]!r} but the features' DataFrame index names it "
                             f"{by_index[i]!r}: give the rows' tasks once (tasks, or the index)")
    aligned, x = align(data, Features(ids=ids, x=x, source="given", columns=names), max_memory=max_memory)
    return aligned, x, names
