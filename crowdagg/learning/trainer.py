"""The base of every trainer: the services' loop with epochs as iterations, plus batches, device, seed and selection.

A trainer learns a classifier f_θ (:mod:`.networks`) from features and
noisy answers.  :class:`Trainer` is an
:class:`~crowdagg.methods.base.Aggregator` (the checks of its declared
parameters and of the data, the memory check, the thread policy, the one
result type) whose loop is the services' :func:`~crowdagg.methods.loop.iterate`:

* an **iteration is an epoch** -- one pass over the training tasks in
  seeded random minibatches of ``batch_size`` tasks, each with all of its
  training answers (:class:`Batch`);
* the **objective** is the held-out noisy-answer negative log-likelihood:
  ``val_fraction`` of the answers (a seeded draw) are never trained on, and
  after each epoch ``-mean log P(answer | x)`` over them, under the
  method's own answer model (:meth:`Trainer._answer_proba`; for a method
  without one, the confusion the training answers imply given f, in
  closed form), is the objective, to be minimised;
* **model selection** keeps the epoch with the best objective (its weights
  are copied when it improves) and the stop rule is
  :class:`~crowdagg.methods.loop.NoImprovement` (``patience`` epochs
  without a better objective; 0 runs every epoch).  Truth is never read:
  ``--truth`` only reports.  With ``val_fraction = 0`` the objective is the
  training loss and the last epoch is kept.

A method is one module holding its loss and its confusion
parameterisation; it implements

* :meth:`Trainer._build` -- its own modules beside the network (a
  :class:`~crowdagg.learning.confusion.Confusions`), initialised;
* :meth:`Trainer._loss` -- the loss of one minibatch from the network's
  logits;
* :meth:`Trainer._answer_proba` -- P(answer | x) for a worker (the
  answer model the held-out objective and the posterior read; None: the
  base's closed-form confusion);
* optionally :meth:`Trainer._epoch_begin` (an EM method's E-step) and
  :meth:`Trainer._posterior` (the labels it infers for the training tasks;
  by default Bayes' rule on the classifier's output and every answer
  through the worker confusions: ``q_n ∝ f(x_n) Π_m A_m[:, answer]``).

The result is an :class:`~crowdagg.methods.result.AggregationResult`
(posteriors, labels and prior of the training tasks; ``worker_params
["confusion"]`` (n_workers, K, K) ``[worker, true, observed]``; the
objective trace) whose ``model_params["model"]`` is the
:class:`~crowdagg.learning.model.TrainedModel` (``predict_proba``, saved
by :mod:`.model_file`).

Shapes: features (n_tasks, d) or (n_tasks, C, H, W) float32, rows in
``data.tasks`` order (:func:`crowdagg.learning.features.align`); answers
the data's flat arrays.  Devices: ``auto`` is CUDA when available; on CUDA
the network's forward pass runs in bfloat16 autocast (mixed precision),
losses in float32.  Reproducibility: the whole fit runs under
``torch.random.fork_rng`` seeded by ``seed`` (initialisation, dropout,
shuffles, the held-out draw), so the same seed gives the same weights on
CPU, and the caller's global torch generator is untouched.  The same bytes
need the same number of threads too: torch's CPU kernels split their float32
sums by thread, so ``--threads 1`` and ``--threads 2`` give weights and
probabilities that differ in the last bits (measured on music, crowdlayer, 3
epochs: at most 1.7e-7 in a probability, no label changed).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from ..data.annotations import AnnotationSet
from ..errors import DataError, UsageError, param
from ..methods.base import Aggregator, FitContext, make_result
from ..methods.blocks import TieBreaker, argmax_random_ties
from ..methods.loop import MINIMISE, NoImprovement, Run, Step, StopRule, iterate
from ..methods.registry import Method
from ..methods.result import AggregationResult
from . import networks
from .confusion import Confusions, answer_proba
from .device import resolve_device
from .features import as_features, frame_rows
from .model import TrainedModel

#: Rows of the network's forward pass at a time outside training (evaluation, prediction).
EVAL_ROWS = networks.EVAL_ROWS
#: Probabilities are floored here before a log (an answer the model calls impossible costs 23 nats, not inf).
PROB_FLOOR = 1e-10


def answer_nll(q: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """``-mean log q[i, label[i]]`` over answers (probabilities floored at :data:`PROB_FLOOR`): the coupled
    cross-entropy of answer distributions ``q`` (n, K) and the answers ``label`` (n,)."""
    return -torch.log(q.gather(1, label.unsqueeze(1)).squeeze(1).clamp_min(PROB_FLOOR)).mean()


def _check_centred_range(x: torch.Tensor, mean: torch.Tensor) -> None:
    """Finite features near float32's limit can overflow once centred (3e38 - (-2e38)): refused, not trained
    into a NaN that reads as a divergence.  ``mean`` per feature (d,) or per channel (1, C, 1, 1)."""
    if not x.numel():
        return
    dims = (0, 2, 3) if x.dim() == 4 else (0,)
    hi, lo = x.amax(dim=dims).double(), x.amin(dim=dims).double()
    centre = mean.reshape(hi.shape).double()
    if float(torch.maximum(hi - centre, centre - lo).max()) >= float(torch.finfo(torch.float32).max):
        raise DataError(f"features: values up to {max(float(hi.max()), -float(lo.min())):g} overflow float32 once "
                        "centred by the network's input standardisation; rescale the features")


@dataclass
class Answers:
    """Answers on the device: task, worker, label (n,) int64, sorted by task; ``ptr`` (n_tasks + 1,) their CSR."""

    task: torch.Tensor
    worker: torch.Tensor
    label: torch.Tensor
    ptr: torch.Tensor

    @classmethod
    def of(cls, task: np.ndarray, worker: np.ndarray, label: np.ndarray, n_tasks: int,
           device: torch.device) -> Answers:
        ptr = np.zeros(n_tasks + 1, dtype=np.int64)
        np.cumsum(np.bincount(task, minlength=n_tasks), out=ptr[1:])
        return cls(*(torch.as_tensor(np.asarray(a, dtype=np.int64), device=device) for a in (task, worker, label, ptr)))

    def __len__(self) -> int:
        return int(self.task.shape[0])


@dataclass
class Batch:
    """One minibatch: ``tasks`` (B,) global task indices, ``x`` (B, ...) their features, and their answers:
    ``row`` (n,) each answer's row in the batch, ``worker``, ``label`` (n,); ``answers`` (n,) their indices
    in the training answers (for a method keeping per-answer state)."""

    tasks: torch.Tensor
    x: torch.Tensor
    row: torch.Tensor
    worker: torch.Tensor
    label: torch.Tensor
    answers: torch.Tensor


def batch_answers(answers: Answers, tasks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The answers of ``tasks`` (B,) through the CSR: (indices into ``answers``, each one's row in the batch).

    Vectorised: ``repeat_interleave`` of each task's start and count, no Python loop per task.
    """
    start = answers.ptr[tasks]
    count = answers.ptr[tasks + 1] - start
    row = torch.repeat_interleave(torch.arange(tasks.shape[0], device=tasks.device), count)
    first = torch.cumsum(count, 0) - count  # where each task's answers begin in the batch
    index = torch.arange(row.shape[0], device=tasks.device) - first[row] + start[row]
    return index, row


@dataclass
class TrainState:
    """Everything one fit holds: the network, the method's modules, the optimiser, the data on the device,
    the held-out answers, the best epoch so far.  ``extra``: the method's own state (soft targets ...)."""

    device: torch.device
    spec: networks.NetSpec
    net: nn.Module
    modules: nn.ModuleDict
    optimizer: torch.optim.Optimizer
    x: torch.Tensor
    train: Answers
    val: Answers
    train_tasks: torch.Tensor
    n_workers: int
    n_classes: int
    batch_size: int
    amp: bool
    epoch: int = 0
    best_objective: float = math.inf
    best_epoch: int = 0
    best_weights: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The network's logits (float32), under autocast on CUDA."""
        if self.amp:
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                return self.net(x).float()
        return self.net(x)

    @torch.no_grad()
    def proba(self, tasks: torch.Tensor | None = None) -> torch.Tensor:
        """softmax f_θ(x) (n, K) of ``tasks`` (all when None), in eval mode (no dropout), by chunks."""
        was = self.net.training
        self.net.eval()
        n = self.x.shape[0] if tasks is None else tasks.shape[0]
        out = torch.empty((n, self.n_classes), device=self.device)
        for lo in range(0, n, EVAL_ROWS):
            rows = slice(lo, min(n, lo + EVAL_ROWS))
            x = self.x[rows] if tasks is None else self.x[tasks[rows]]
            out[rows] = torch.softmax(self.logits(x), dim=1)
        self.net.train(was)
        return out

    def confusions(self) -> Confusions:
        """The method's :class:`~crowdagg.learning.confusion.Confusions` module (``modules["confusion"]``)."""
        conf = self.modules["confusion"]
        assert isinstance(conf, Confusions)
        return conf

    def snapshot(self) -> dict[str, Any]:
        return {"net": copy.deepcopy(self.net.state_dict()), "modules": copy.deepcopy(self.modules.state_dict()),
                "extra": copy.deepcopy(self.extra)}

    def restore(self, weights: dict[str, Any]) -> None:
        self.net.load_state_dict(weights["net"])
        self.modules.load_state_dict(weights["modules"])
        self.extra = weights["extra"]


class Trainer(Aggregator):
    """Base of a trainer (see the module docstring): a method implements ``_build``, ``_loss``, ``_answer_proba``."""

    stop_rule: ClassVar[StopRule] = NoImprovement()
    objective_name: ClassVar[str] = "held-out answer NLL"
    empty_posterior: ClassVar[str] = "the classifier's prediction"
    memory_advice: ClassVar[str] = f"use fewer tasks, or a smaller {param('hidden')} or {param('batch_size')}"
    #: Where the labels of the training tasks come from: ``"answers"`` (Bayes' rule on the classifier's output
    #: and the answers through the confusions) or ``"classifier"`` (its prediction alone: a two-stage baseline).
    labels_from: ClassVar[str] = "answers"
    #: The optimiser's lr for the method's own modules, as a multiple of ``lr`` (deepBP App. D: 10× for the
    #: confusions); a method declaring the parameter ``confusion_lr_scale`` sets it per fit.
    module_lr_scale: ClassVar[float] = 1.0

    _features: np.ndarray | None = None
    _names: tuple[str, ...] | None = None

    @classmethod
    def spec(cls) -> Method:
        from ..methods.registry import get_trainer

        return get_trainer(cls.name)

    # ------------------------------------------------------------------ the public entry
    def fit(self, data: AnnotationSet, features: Any = None, *, callback: Any = None, max_memory: Any = None,
            engine: Any = None, feature_names: Any = None) -> AggregationResult:
        """Train on ``data``'s answers and ``features`` (n_tasks, d) or (n_tasks, C, H, W), rows in task order
        (a DataFrame indexed by task: its rows matched to the tasks by its index,
        :func:`~crowdagg.learning.features.frame_rows`).

        ``callback(epoch, objective)`` after each epoch; ``max_memory`` as
        for an aggregator (the features, their copy on the device, the
        posteriors and the network are counted).  ``engine`` is accepted
        for the base's signature; a trainer runs in this process.
        ``feature_names`` (one per column of feature vectors; default a
        DataFrame's columns) are kept in the model, which then matches
        the columns it predicts on by name.
        """
        if not isinstance(data, AnnotationSet):  # before data.task_names is read: an AttributeError otherwise
            raise UsageError(f"{self.name}.fit(data, features): data must be an AnnotationSet (crowdagg.load_annotations "
                             f"reads a DataFrame, records or a file into one), got "
                             f"{type(data).__name__}")
        if features is None:
            raise UsageError(f"method {self.name!r} is a trainer: fit(data, features) needs the features of the tasks")
        x = as_features(features)
        if x.shape[0] != data.n_tasks:
            raise DataError(f"features have {x.shape[0]:,} rows for {data.n_tasks:,} tasks: align them first "
                            "(crowdagg.learning.features.align)")
        rows = frame_rows(features, data.task_names)  # a DataFrame indexed by task: its rows by name
        if rows is not None:
            x = x[rows]
        if not np.isfinite(x).all():
            bad = int(np.flatnonzero(~np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1))[0])
            raise DataError(f"features: row {bad} (task {data.task_names[bad]!r}) holds NaN or inf")
        self._names = _feature_names(features, feature_names, x)
        self._features = x
        try:
            return super().fit(data, callback=callback, max_memory=max_memory)
        finally:
            self._features, self._names = None, None

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        """The data's share (the features and their copy on the device, the answers, the posteriors and the
        confusions) and the network's (:func:`crowdagg.learning.networks.memory_needed`: its weights, gradients,
        Adam's moments and copies, and a batch's activations), before anything is allocated."""
        assert self._features is not None
        checked = self.check_params()
        k = data.n_classes
        need = 2.0 * self._features.nbytes + 8.0 * 6 * data.n_tasks * k + 8.0 * 4 * data.n_workers * k * k
        need += 8.0 * 8 * data.n_answers
        spec = networks.NetSpec(checked["model"], tuple(self._features.shape[1:]), k, checked["hidden"],
                                checked["dropout"])
        rows = min(checked["batch_size"], data.n_tasks)
        net_bytes, n_weights = networks.memory_needed(spec, rows, min(EVAL_ROWS, data.n_tasks))
        width = f" ({param('hidden')}={checked['hidden']})" if spec.kind != "linear" else ""
        return need + net_bytes, (f"{data.n_tasks:,} tasks × {self._features[0].size:,} features, "
                                  f"{data.n_workers:,} workers × {k:,}² classes, a {spec.kind} network of "
                                  f"{n_weights:,} weights{width} trained on batches of {rows:,} tasks")

    # ------------------------------------------------------------------ the loop
    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        device = resolve_device(checked["device"])
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(checked["seed"])
            run = iterate(
                lambda start, rng: self._start(data, checked, device),
                lambda state: self._epoch(data, state, checked),
                rule=self.stop_rule, max_iter=checked["epochs"], seed=checked["seed"], tol=checked["patience"],
                n_init=1, direction=MINIMISE, callback=callback,
            )
            return self._finish(data, run, checked)

    def _start(self, data: AnnotationSet, checked: FitContext, device: torch.device) -> tuple[TrainState, float]:
        x_np = self._features
        assert x_np is not None
        spec = networks.NetSpec(checked["model"], tuple(x_np.shape[1:]), data.n_classes, checked["hidden"],
                                checked["dropout"])
        networks.check_image_size(spec)
        net = networks.build(spec).to(device)
        x = torch.as_tensor(x_np, device=device)
        train_mask = self._split(data, checked["val_fraction"], checked["seed"])
        task, worker, label = (np.asarray(a, dtype=np.int64) for a in (data.task, data.worker, data.label))
        train = Answers.of(task[train_mask], worker[train_mask], label[train_mask], data.n_tasks, device)
        val = Answers.of(task[~train_mask], worker[~train_mask], label[~train_mask], data.n_tasks, device)
        trained = np.flatnonzero(np.bincount(task[train_mask], minlength=data.n_tasks) > 0)
        networks.standardizer(net).fit(x[torch.as_tensor(trained, device=device)] if trained.size > 1 else x)  # the standardisation
        _check_centred_range(x, networks.standardizer(net).mean)
        state = TrainState(
            device=device, spec=spec, net=net, modules=nn.ModuleDict(), optimizer=None,  # type: ignore[arg-type]
            x=x, train=train, val=val, train_tasks=torch.as_tensor(trained, device=device),
            n_workers=data.n_workers, n_classes=data.n_classes, batch_size=checked["batch_size"],
            amp=device.type == "cuda",
        )
        state.modules = nn.ModuleDict(self._build(data, state, checked)).to(device)
        groups = [{"params": list(net.parameters()), "weight_decay": checked["weight_decay"]}]
        own = [p for p in state.modules.parameters() if p.requires_grad]
        if own:
            scale = checked.get("confusion_lr_scale", self.module_lr_scale)  # a method may declare it a parameter
            groups.append({"params": own, "weight_decay": 0.0, "lr": checked["lr"] * scale})
        state.optimizer = torch.optim.Adam(groups, lr=checked["lr"])
        return state, self._objective(state)

    def _split(self, data: AnnotationSet, fraction: float, seed: int) -> np.ndarray:
        """Which answers are trained on (True) and which are held out: a seeded draw of ``fraction`` of them."""
        n = data.n_answers
        n_val = int(round(fraction * n))
        if fraction > 0 and n_val == 0 and n >= 2:
            n_val = 1
        if n_val >= n:
            raise DataError(f"{param('val_fraction')}={fraction:g} holds out all {n:,} answers: nothing to train on")
        keep = np.ones(n, dtype=bool)
        if n_val:
            keep[np.random.default_rng([seed, 0x5A11]).choice(n, size=n_val, replace=False)] = False
        return keep

    def _epoch(self, data: AnnotationSet, state: TrainState, checked: FitContext) -> Step:
        """One pass over the training tasks in seeded minibatches, then the held-out objective."""
        self._epoch_begin(data, state, checked)
        state.net.train()
        order = state.train_tasks[torch.randperm(state.train_tasks.shape[0]).to(state.device)]
        total, n_batches = torch.zeros((), device=state.device), 0  # summed on the device: no sync per batch
        for lo in range(0, order.shape[0], state.batch_size):
            tasks = order[lo:lo + state.batch_size]
            index, row = batch_answers(state.train, tasks)
            batch = Batch(tasks=tasks, x=state.x[tasks], row=row, worker=state.train.worker[index],
                          label=state.train.label[index], answers=index)
            loss = self._loss(state, state.logits(batch.x), batch)
            state.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            state.optimizer.step()
            total += loss.detach()
            n_batches += 1
        state.epoch += 1
        objective = self._objective(state) if len(state.val) else float(total) / max(n_batches, 1)
        if not math.isfinite(objective):
            raise DataError(f"{self.name}: training diverged at epoch {state.epoch} (the objective is {objective}); "
                            f"try a smaller {param('lr')}")
        if objective < state.best_objective or not len(state.val):
            state.best_objective, state.best_epoch = objective, state.epoch
            state.best_weights = state.snapshot() if len(state.val) else {}
        return Step(objective=objective, since_best=state.epoch - state.best_epoch)

    @torch.no_grad()
    def _objective(self, state: TrainState) -> float:
        """``-mean log P(answer | x)`` over the held-out answers (nan without any: the training loss stands in)."""
        if not len(state.val):
            return math.nan
        p = state.proba(state.val.task)
        q = self._answer_proba(state, p, state.val.worker)
        if q is None:
            q = answer_proba(p, self._implied_confusion(state)[state.val.worker])
        return float(answer_nll(q, state.val.label))

    @torch.no_grad()
    def _implied_confusion(self, state: TrainState) -> torch.Tensor:
        """The confusions the training answers imply given f: expected counts of f(x) against each answer,
        with a pseudo-count of 1/K per cell, rows normalised -- (n_workers, K, K) ``[worker, true, observed]``."""
        k = state.n_classes
        p = state.proba()
        counts = torch.zeros((state.n_workers * k, k), device=state.device)
        counts.index_add_(0, state.train.worker * k + state.train.label, p[state.train.task])
        rows = counts.reshape(state.n_workers, k, k).transpose(1, 2) + 1.0 / k
        return rows / rows.sum(dim=2, keepdim=True)

    # ------------------------------------------------------------------ the method's part
    def _build(self, data: AnnotationSet, state: TrainState, checked: FitContext) -> dict[str, nn.Module]:
        """The method's modules beside the network (its confusion parameters), initialised."""
        return {}

    def _loss(self, state: TrainState, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The loss of one minibatch (a scalar tensor) from the network's ``logits`` (B, K)."""
        raise NotImplementedError

    def _answer_proba(self, state: TrainState, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor | None:
        """P(answer | x) (n, K) for class probabilities ``p`` (n, K) and ``workers`` (n,) under the method's
        answer model; None when the method has none (the base then uses :meth:`_implied_confusion`)."""
        return None

    def _epoch_begin(self, data: AnnotationSet, state: TrainState, checked: FitContext) -> None:
        """Before each epoch (an EM method's E-step); nothing by default."""

    @torch.no_grad()
    def _confusions(self, state: TrainState) -> torch.Tensor:
        """Every worker's confusion (n_workers, K, K) ``[worker, true, observed]``: row k is the answer model's
        distribution for a task of class k (``_answer_proba`` of a one-hot), or the implied confusion."""
        k = state.n_classes
        eye = torch.eye(k, device=state.device)
        workers = torch.arange(state.n_workers, device=state.device)
        rows = self._answer_proba(state, eye.repeat(state.n_workers, 1), workers.repeat_interleave(k))
        if rows is None:
            return self._implied_confusion(state)
        return rows.reshape(state.n_workers, k, k)

    def _posterior(self, data: AnnotationSet, proba: np.ndarray, confusion: np.ndarray) -> np.ndarray:
        """The labels inferred for the tasks (n_tasks, K): Bayes' rule on the classifier's ``proba`` and every
        answer through ``confusion`` (``labels_from = "answers"``), or ``proba`` itself ("classifier")."""
        if self.labels_from == "classifier":
            return proba
        log_a = np.log(np.maximum(confusion, PROB_FLOOR))  # (W, K, K) [worker, true, observed]
        score = np.log(np.maximum(proba, PROB_FLOOR))
        per_answer = log_a[data.worker, :, data.label]  # (n_answers, K): log A_m[true, answer]
        _add_rows(score, data, per_answer)
        score -= score.max(axis=1, keepdims=True)
        post = np.exp(score)
        return post / post.sum(axis=1, keepdims=True)

    # ------------------------------------------------------------------ the result
    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: TrainState = run.state
        if state.best_weights:
            state.restore(state.best_weights)
        proba = state.proba().double().cpu().numpy()
        proba /= proba.sum(axis=1, keepdims=True)
        confusion = self._confusions(state).double().cpu().numpy()
        confusion /= confusion.sum(axis=2, keepdims=True)
        post = self._posterior(data, proba, confusion)
        labels = argmax_random_ties(post, TieBreaker(data.task_names, checked["seed"]))
        answered = data.answers_per_task > 0
        prior = post[answered].mean(axis=0) if answered.any() else post.mean(axis=0)
        model = TrainedModel.from_network(
            method=self.name, classes=data.classes, spec=state.spec, net=state.net,
            workers=data.worker_names, confusion=confusion, best_epoch=state.best_epoch,
            class_dtype=data.class_dtype, feature_names=self._names,
        )
        return make_result(
            self.name, data, post, labels, prior,
            worker_params={"confusion": confusion},
            model_params={"model": model, "best_epoch": state.best_epoch, "classifier_proba": proba},
            objective=np.asarray(run.trace), objective_name=self.objective_name,
            n_iter=run.n_iter, converged=run.converged,
        )


def _feature_names(features: Any, given: Any, x: np.ndarray) -> tuple[str, ...] | None:
    """The names of the feature columns: ``given``, else a DataFrame's columns, else None; one per column of
    feature vectors (images have no column names)."""
    from .features import check_names, column_names

    if given is None:
        return column_names(features)
    if isinstance(given, str) or not hasattr(given, "__len__"):
        raise UsageError(f"feature_names must be a list of names, one per feature, got {type(given).__name__}")
    if x.ndim != 2:
        raise UsageError(f"feature_names name the columns of feature vectors (n_tasks, d), not images of shape "
                         f"{tuple(x.shape[1:])}")
    if len(given) != x.shape[1]:
        raise UsageError(f"feature_names has {len(given):,} names for {x.shape[1]:,} features")
    return check_names(given, "feature_names")


def _add_rows(score: np.ndarray, data: AnnotationSet, per_answer: np.ndarray) -> None:
    """``score[task] += per_answer`` for answers sorted by task: a segment sum (``np.add.reduceat``)."""
    ptr = data.task_ptr
    has = np.flatnonzero(np.diff(ptr) > 0)
    score[has] += np.add.reduceat(per_answer, ptr[has], axis=0)

