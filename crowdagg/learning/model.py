"""A trained classifier: its spec, weights (numpy), classes and annotator confusions; ``predict_proba``.

What ``crowdagg train --save`` writes and ``crowdagg predict --model``
reads (:mod:`.model_file`).  The weights are the network's ``state_dict``
as numpy arrays, so the object is independent of the device it was trained
on; :meth:`TrainedModel.network` rebuilds the torch module from the
:class:`~crowdagg.learning.networks.NetSpec` and loads them (strictly:
every tensor present, of its shape).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError


@dataclass(eq=False)
class TrainedModel:
    """A classifier trained from crowds.

    Attributes
    ----------
    method : str
        The trainer that fitted it (``"geocrowdnet-f"``).
    classes : tuple of str
        Class names; column k of :meth:`predict_proba` is ``classes[k]``.
    spec : NetSpec
        The network (kind, input shape, classes, hidden width, dropout).
    weights : dict of str -> ndarray
        The network's ``state_dict`` (float32 arrays).
    workers : ndarray of str, shape (n_workers,), or None
        The annotators of the training answers.
    confusion : ndarray, shape (n_workers, K, K), or None
        Their estimated confusions ``[worker, true, observed]``.
    best_epoch : int
        The epoch kept by model selection.
    class_dtype : str or None
        The dtype the labels had (as :class:`~crowdagg.data.annotations.AnnotationSet` keeps it).
    version : str
        The crowdagg version that trained it.
    feature_names : tuple of str, or None
        The name of each input feature when the training features had
        names (a Parquet/CSV table's columns, a DataFrame's): prediction
        matches columns by these names (:meth:`predict_proba`,
        ``crowdagg predict``); None: by position.
    module : torch.nn.Module or None
        The trained network itself when it was given as a module
        (``crowdagg.train(..., network=module)``; ``spec.kind ==
        "module"``): a model file cannot hold it (its code is not data), so
        such a model predicts in this process and is not saved.
    result : AggregationResult or None
        What :func:`crowdagg.train` fitted: the labels, posteriors and
        confusions of the training tasks (not saved with the model).
    """

    method: str
    classes: tuple[str, ...]
    spec: Any
    weights: dict[str, np.ndarray]
    workers: np.ndarray | None = None
    confusion: np.ndarray | None = None
    best_epoch: int = 0
    class_dtype: str | None = None
    version: str = field(default_factory=lambda: _version())
    feature_names: tuple[str, ...] | None = None
    module: Any = field(default=None, repr=False)
    result: Any = field(default=None, repr=False)

    @classmethod
    def from_network(cls, *, method: str, classes: Any, spec: Any, net: Any, **extra: Any) -> TrainedModel:
        import copy

        weights = {k: v.detach().float().cpu().numpy().copy() for k, v in net.state_dict().items()}
        module = copy.deepcopy(net).cpu().eval() if spec.kind == "module" else None
        return cls(method=method, classes=tuple(classes), spec=spec, weights=weights, module=module, **extra)

    def __repr__(self) -> str:
        """One line: the method, the network, the classes, the kept epoch -- never the weights."""
        spec = self.spec
        shape = "×".join(map(str, spec.input_shape))
        if spec.kind == "module":
            net = f"{type(self.module).__name__} (a torch module) on {shape} features"
        elif spec.kind == "linear":
            net = f"linear on {shape} features"
        else:
            net = f"{spec.kind} (hidden {spec.hidden}) on {shape} features"
        workers = "" if self.workers is None else f", {len(self.workers):,} workers"
        return (f"TrainedModel(method={self.method!r}, network={net}, classes={len(self.classes)}{workers}, "
                f"best_epoch={self.best_epoch})")

    @property
    def n_features(self) -> int:
        return int(self.spec.n_inputs)

    def predict(self, features: Any, *, device: str = "cpu", batch_rows: int = 8192) -> np.ndarray:
        """The most probable class of each row (n,), in the dtype the training labels had (ties: the first class).

        See :meth:`predict_proba` for ``features`` and the errors.
        """
        from ..methods.result import _typed

        proba = self.predict_proba(features, device=device, batch_rows=batch_rows)
        labels = np.asarray(self.classes, dtype=object)[proba.argmax(axis=1)]
        typed = _typed(labels, self.class_dtype)
        if typed is None:
            return labels
        return np.asarray(getattr(typed, "values", typed))

    def network(self, device: Any = "cpu") -> Any:
        """The torch module, weights loaded, in eval mode, on ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``
        or a ``torch.device``).

        Raises :class:`~crowdagg.errors.UsageError` for a device this
        machine does not have or a name that is not one (torch's bare
        AssertionError without CUDA, its RuntimeError for ``"junk"``).
        """
        import torch

        from . import networks
        from .device import resolve_device

        where = resolve_device(device)
        if self.module is not None:
            import copy

            return copy.deepcopy(self.module).to(where).eval()
        net = networks.build(self.spec)
        expected = net.state_dict()
        if set(expected) != set(self.weights) or any(tuple(expected[k].shape) != self.weights[k].shape
                                                      for k in expected):
            raise DataError(f"the model's weights do not match its {self.spec.kind} network "
                            f"(expected {sorted(expected)})")
        net.load_state_dict({k: torch.as_tensor(v) for k, v in self.weights.items()})
        return net.to(where).eval()

    def predict_proba(self, features: Any, *, device: str = "cpu", batch_rows: int = 8192) -> np.ndarray:
        """Class probabilities (n, K) float64 for ``features`` (n, *input_shape), rows in the given order.

        A DataFrame's columns are matched to :attr:`feature_names` by name
        (any order; a missing or unknown name is a DataError naming it);
        an array's, or any features of a model trained without names, by
        position.
        """
        import numbers

        import torch

        from ..errors import UsageError
        from . import networks
        from .device import resolve_device
        from .features import as_array, as_features, by_name, column_names

        if not isinstance(batch_rows, numbers.Integral) or isinstance(batch_rows, bool) or batch_rows < 1:
            raise UsageError(f"batch_rows must be a whole number >= 1, got {batch_rows!r}")
        batch_rows = int(batch_rows)
        where = resolve_device(device)  # auto; cuda without CUDA: the trainers' clear error
        shape = tuple(self.spec.input_shape)
        names = column_names(features)
        given = as_array(features)  # a tensor, a list of them: numpy's own conversion would raise torch's errors
        if names is not None and given.ndim == 2:
            given = by_name(given, names, self.feature_names)
        if tuple(given.shape) == shape:  # one row, not a batch: "rows of shape ()" said nothing of the fix
            raise DataError(f"features of shape {shape} are one row, not rows of shape {shape}: give a batch of one "
                            "row (x[None], shape (1, ...))")
        if given.ndim < 1 or tuple(given.shape[1:]) != shape:
            raise DataError(f"the model was trained on rows of shape {shape} ({self.n_features:,} features); these "
                            f"features have rows of shape {tuple(given.shape[1:])}")
        x = as_features(given) if len(given) else np.zeros((0, *shape), dtype=np.float32)
        if not np.isfinite(x).all():
            bad = int(np.flatnonzero(~np.isfinite(x.reshape(len(x), -1)).all(axis=1))[0])
            raise DataError(f"features: row {bad} holds NaN or inf")
        device = str(where)
        net = self.network(device)
        out = np.empty((len(x), len(self.classes)))
        from ..core import threads

        with torch.no_grad(), threads.fit_scope():  # torch's threads by the trainers' rule, not every core
            for lo in range(0, len(x), batch_rows):
                rows = torch.as_tensor(x[lo:lo + batch_rows], device=torch.device(device))
                logits = networks.module_forward(net, rows, len(self.classes)) if self.module is not None else net(rows)
                out[lo:lo + batch_rows] = torch.softmax(logits.float(), dim=1).double().cpu().numpy()
        overflow = np.flatnonzero(~np.isfinite(out).all(axis=1))
        if overflow.size:  # finite features and weights can still overflow float32 (3e38 in, a scale of 1e-30)
            raise DataError(f"features: the model's output overflows on row {int(overflow[0])} ({overflow.size:,} rows): "
                            "features far outside the range it was trained on, or weights that are")
        return out / out.sum(axis=1, keepdims=True)


def _version() -> str:
    from .._version import __version__

    return __version__
