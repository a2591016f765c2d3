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

Everything one fit holds lives in its :class:`TrainContext` -- the
features, the network, the method's modules, the optimiser, the answers
split, the method's own ``state`` -- handed to every hook; nothing is kept
on the estimator, so one estimator object fits twice as two fresh ones do.

A method is one module holding its loss and its confusion
parameterisation, declared in its family's ``__init__`` with its
parameters and its **module groups**
(:class:`~crowdagg.methods.registry.ModuleGroup`: each one Adam parameter
group, with its own learning-rate parameter and weight decay); it
implements

* :meth:`Trainer._build` -- its own modules beside the network (a
  :class:`~crowdagg.learning.confusion.Confusions`), by group name;
* :meth:`Trainer._loss` -- the loss of one minibatch from the network's
  logits;
* :meth:`Trainer._answer_proba` -- P(answer | x) for a worker (the
  answer model the held-out objective and the posterior read; None: the
  base's closed-form confusion);
* optionally :meth:`Trainer._epoch_begin` (an EM method's E-step),
  :meth:`Trainer._posterior` (the labels it infers for the training tasks;
  by default Bayes' rule on the classifier's output and every answer
  through the worker confusions: ``q_n ∝ f(x_n) Π_m A_m[:, answer]``),
  :meth:`Trainer._selection` (its own model-selection objective) and
  :attr:`Trainer.batch_policy` (a minimum batch, drop-last, full batch).

The network comes from :func:`crowdagg.learning.networks.make`: the
declared ``model`` (``linear``, ``mlp``, ``cnn``) or any ``torch.nn.Module``
given to :meth:`Trainer.fit` (``crowdagg.train(..., network=module)``).

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
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from ..core import memory, threads
from ..core.checks import check_float, check_int, check_seed
from ..data.annotations import AnnotationSet, check_annotations
from ..errors import CrowdaggWarning, DataError, UsageError, param, warn
from ..methods.base import Aggregator, FitContext, _engine, make_result
from ..methods.blocks import TieBreaker, argmax_random_ties, latent_posterior
from ..methods.loop import MINIMISE, NoImprovement, Run, Step, StopRule, check_callback, iterate
from ..methods.registry import Method
from ..methods.result import AggregationResult
from . import networks
from .confusion import Confusions, answer_proba
from .device import resolve_device
from .features import as_features, frame_rows
from .model import TrainedModel

#: Rows of the network's forward pass at a time outside training (evaluation, prediction).
EVAL_ROWS = networks.EVAL_ROWS
#: Cells of the per-row K × K matrices an answer model gathers at a time (:meth:`Trainer._answers_proba`,
#: :meth:`Trainer._confusions`): 64 MB of float32.  Every worker's confusion rows at once were M K³ floats
#: (200 workers, K = 200: 6.4 GB where the memory check counted 250 MB).
ANSWER_PROBA_CELLS = 2**24
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


@dataclass(frozen=True)
class BatchPolicy:
    """How an epoch's training tasks are cut into minibatches: a trainer's :attr:`Trainer.batch_policy`.

    Attributes
    ----------
    min_batch : int
        The fewest tasks a batch may hold (Max-MIG's loss compares the
        tasks of a batch in pairs: 2).  A last batch smaller than that is
        merged into the one before it -- never dropped, so every training
        task is seen each epoch -- and ``batch_size`` below it, or fewer
        training tasks, are refused before training.
    drop_last : bool
        Drop a last batch smaller than ``batch_size`` (a loss sized to the
        batch, as reference code often is); a single batch is always kept.
    full_batch : bool
        One batch of every training task per epoch (deepBP's full-batch
        updates); ``batch_size`` is then not used.
    """

    min_batch: int = 1
    drop_last: bool = False
    full_batch: bool = False

    def bounds(self, n: int, batch_size: int) -> list[tuple[int, int]]:
        """The ``(lo, hi)`` slices of an epoch's ``n`` shuffled training tasks."""
        batch_size = check_int("batch_size", batch_size, 1)  # 0 raised range()'s ValueError, -1 an IndexError
        if n == 0:
            return []
        if self.full_batch or n <= batch_size:
            return [(0, n)]
        cuts = [*range(0, n, batch_size), n]
        pairs = list(zip(cuts[:-1], cuts[1:]))
        last = pairs[-1][1] - pairs[-1][0]
        if self.drop_last and last < batch_size:
            pairs.pop()
        elif last < self.min_batch:
            pairs[-2:] = [(pairs[-2][0], n)]
        return pairs

    def check(self, method: str, n_train: int, batch_size: int, held_out: int = 0) -> None:
        """Refuse, before training, a ``batch_size`` or a number of training tasks below :attr:`min_batch`
        (``held_out``: the answers ``val_fraction`` held out, named in the message when any were)."""
        if self.min_batch <= 1:
            return
        if not self.full_batch and batch_size < self.min_batch:
            raise UsageError(f"{param('batch_size')} must be at least {self.min_batch} for {method} (its loss "
                             f"compares the tasks of a batch), got {batch_size}")
        if n_train < self.min_batch:
            hint = (f" ({param('val_fraction')} held out {held_out:,} answer{'s' * (held_out != 1)}: lower it, or 0 "
                    "to train on every answer)") if held_out else ""
            raise DataError(f"{method} needs at least {self.min_batch} tasks with training answers (its loss compares "
                            f"the tasks of a batch); {n_train} have any{hint}")


class TrainContext:
    """One fit of a trainer: everything it holds, handed to every hook (nothing is kept on the estimator).

    Attributes
    ----------
    method : str
        The trainer's name (for messages).
    data : AnnotationSet
        Every answer (the training and the held-out ones).
    params : FitContext
        The checked parameters (``ctx.params["lam"]``) and the fit's services (its ``engine``).
    device : torch.device
    spec : NetSpec
        The classifier (kind ``"module"`` for a network given as a ``torch.nn.Module``).
    net : nn.Module
        The classifier f_θ: features -> K logits.
    modules : nn.ModuleDict
        The method's own modules by declared group name (:class:`~crowdagg.methods.registry.ModuleGroup`),
        and any without trainable parameters (buffers set by an M-step).
    optimizer : torch.optim.Optimizer
        Adam over the network's group and each declared module group.
    x : Tensor, shape (n_tasks, d) or (n_tasks, C, H, W)
        The features on the device, rows in ``data.tasks`` order.
    train, val : Answers
        The answers trained on and the ones held out for model selection.
    train_tasks : Tensor, shape (n_train,)
        The tasks with at least one training answer (the ones the epochs visit).
    feature_names : tuple of str, or None
        The features' column names (kept in the model).
    state : dict
        The method's own state (soft targets, an EM's q ...): snapshotted with the best epoch and restored
        with it.
    epoch, best_epoch, best_objective
        The loop's progress and the model selection's best so far.
    """

    def __init__(self, *, method: str, data: AnnotationSet, params: FitContext, device: torch.device,
                 spec: networks.NetSpec, net: nn.Module, x: torch.Tensor, train: Answers, val: Answers,
                 train_tasks: torch.Tensor, feature_names: tuple[str, ...] | None) -> None:
        self.method, self.data, self.params, self.device = method, data, params, device
        self.spec, self.net, self.x = spec, net, x
        self.train, self.val, self.train_tasks = train, val, train_tasks
        self.feature_names = feature_names
        self.modules = nn.ModuleDict()
        self.optimizer: torch.optim.Optimizer | None = None
        self.state: dict[str, Any] = {}
        self.epoch = 0
        self.best_objective = math.inf
        self.best_epoch = 0
        self.best_weights: dict[str, Any] = {}
        self._training_set: AnnotationSet | None = None
        self._train_engine: Any = None

    @property
    def n_workers(self) -> int:
        return self.data.n_workers

    @property
    def n_classes(self) -> int:
        return self.data.n_classes

    @property
    def batch_size(self) -> int:
        return int(self.params["batch_size"])

    @property
    def amp(self) -> bool:
        """Mixed precision: bfloat16 autocast of the forward pass on CUDA."""
        return self.device.type == "cuda"

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The network's logits (float32), under autocast on CUDA; a given module's checked
        (:func:`~crowdagg.learning.networks.module_forward`)."""
        if self.amp:
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                return self._forward(x).float()
        return self._forward(x).float()

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.spec.kind == networks.MODULE:
            return networks.module_forward(self.net, x, self.n_classes)
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
        """The method's :class:`~crowdagg.learning.confusion.Confusions` module (its ``confusion`` group)."""
        conf = self.modules["confusion"]
        assert isinstance(conf, Confusions)
        return conf

    def training_set(self) -> AnnotationSet:
        """``data`` restricted to the training answers (same tasks, workers, classes; sorted by task, so its
        ``task_ptr`` is ``train.ptr``): what an EM step or an aggregator reads; the held-out answers never
        reach it.  Built once per fit."""
        if self._training_set is None:
            data, train = self.data, self.train
            task, worker, label = (a.cpu().numpy() for a in (train.task, train.worker, train.label))
            arrays = (task.astype(np.int32), worker.astype(np.int32), label.astype(data.label.dtype),
                      train.ptr.cpu().numpy())
            for a in arrays:
                a.setflags(write=False)
            out = AnnotationSet._trusted(
                task=arrays[0], worker=arrays[1], label=arrays[2], tasks=data.tasks, workers=data.workers,
                classes=data.classes, n_duplicates=data.n_duplicates, duplicates=data.duplicates,
                class_dtype=data.class_dtype,
            )
            out.__dict__["task_ptr"] = arrays[3]
            self._training_set = out
        return self._training_set

    def train_engine(self) -> Any:
        """The engine over :meth:`training_set` (built once per fit): what an E-step or a start over the training
        answers runs its block functions on -- never ``params.engine``, which spans every answer, the held-out
        ones too (:func:`crowdagg.methods.blocks.check_engine_data` refuses that)."""
        if self._train_engine is None:
            self._train_engine = _engine(None, self.training_set())
        return self._train_engine

    def snapshot(self) -> dict[str, Any]:
        return {"net": copy.deepcopy(self.net.state_dict()), "modules": copy.deepcopy(self.modules.state_dict()),
                "state": copy.deepcopy(self.state)}

    def restore(self, weights: dict[str, Any]) -> None:
        self.net.load_state_dict(weights["net"])
        self.modules.load_state_dict(weights["modules"])
        self.state = weights["state"]


class Trainer(Aggregator):
    """Base of a trainer (see the module docstring): a method implements ``_build``, ``_loss``, ``_answer_proba``."""

    stop_rule: ClassVar[StopRule] = NoImprovement()
    #: What :meth:`_selection` measures (stderr and the progress bar name it).
    objective_name: ClassVar[str] = "held-out answer NLL"
    empty_posterior: ClassVar[str] = "the classifier's prediction"
    memory_advice: ClassVar[str] = f"use fewer tasks, or a smaller {param('hidden')} or {param('batch_size')}"
    #: Where the labels of the training tasks come from: ``"answers"`` (Bayes' rule on the classifier's output
    #: and the answers through the confusions) or ``"classifier"`` (its prediction alone: a two-stage baseline).
    labels_from: ClassVar[str] = "answers"
    #: How an epoch's tasks are cut into minibatches (:class:`BatchPolicy`).
    batch_policy: ClassVar[BatchPolicy] = BatchPolicy()

    @classmethod
    def spec(cls) -> Method:
        from ..methods.registry import get_trainer

        return get_trainer(cls.name)

    # ------------------------------------------------------------------ the public entry
    def fit(self, data: AnnotationSet, features: Any = None, *, callback: Any = None, max_memory: Any = None,
            engine: Any = None, feature_names: Any = None, network: Any = None) -> AggregationResult:
        """Train on ``data``'s answers and ``features`` (n_tasks, d) or (n_tasks, C, H, W), rows in task order
        (a DataFrame indexed by task: its rows matched to the tasks by its index,
        :func:`~crowdagg.learning.features.frame_rows`).

        ``callback(epoch, objective)`` after each epoch; ``max_memory`` as
        for an aggregator (the features, their copy on the device, the
        posteriors and the network are counted).  ``engine`` runs the
        block functions of the method's E-steps (this machine's threads by
        default); the network trains in this process.
        ``feature_names`` (one per column of feature vectors; default a
        DataFrame's columns) are kept in the model, which then matches
        the columns it predicts on by name.  ``network``: a
        ``torch.nn.Module`` mapping a batch of features to K logits, trained
        in place of the declared ``model`` (a copy: the module given is not
        changed); None: the ``model`` parameter's network.
        """
        check_annotations(data, f"{self.name}.fit(data, features)")  # before data.task_names: not AttributeError
        if features is None:
            raise UsageError(f"method {self.name!r} is a trainer: fit(data, features) needs the features of the tasks")
        if data.n_tasks == 0:
            raise DataError("no tasks to train on")
        check_callback(callback)
        networks.check_network(network)
        checked = self.check_params()
        x, names = _inputs(data, features, feature_names)
        source = checked["model"] if network is None else network
        need, what = self._memory(data, x, checked, source)
        advice = self.memory_advice if not isinstance(source, nn.Module) else \
            f"use fewer tasks, a smaller network or a smaller {param('batch_size')}"  # hidden shapes no module
        memory.check(need, what, max_memory, advice=advice)
        canon = canonical(data)
        x = x[canon.tasks]  # rebound: a reordered copy of the features is not kept alive beside this one
        context = self._context(canon.data, checked, max_memory, _engine(engine, canon.data))
        with threads.fit_scope():
            result = self._train(canon, x, names, context, callback, source)
        self._check_result(data, result, context, max_memory)
        return result

    def memory_needed(self, data: AnnotationSet, features: Any = None, network: Any = None) -> tuple[float, str]:
        """Bytes a fit on ``data`` and ``features`` needs, and where they come from, before anything is allocated
        (:meth:`fit` checks it against ``max_memory``)."""
        if features is None:
            raise UsageError(f"method {self.name!r} is a trainer: memory_needed(data, features) needs the features")
        checked = self.check_params()
        x = as_features(features)
        return self._memory(data, x, checked, checked["model"] if network is None else network)

    def _memory(self, data: AnnotationSet, x: np.ndarray, checked: dict[str, Any],
                network: Any) -> tuple[float, str]:
        """The data's share (the features and their copy on the device, the answers, the posteriors and the
        confusions) and the network's (:func:`crowdagg.learning.networks.memory_needed`: its weights, gradients,
        Adam's moments and copies, and a batch's activations -- for a given module, its weights only)."""
        k = data.n_classes
        need = 2.0 * x.nbytes + 8.0 * 6 * data.n_tasks * k + 8.0 * 4 * data.n_workers * k * k
        need += 8.0 * 8 * data.n_answers
        rows = min(checked["batch_size"], data.n_tasks)
        if isinstance(network, nn.Module):
            n_weights = sum(p.numel() for p in network.parameters()) + sum(b.numel() for b in network.buffers())
            net_bytes, kind, width = float(networks.FIT_BYTES_PER_WEIGHT) * n_weights, "given", ""
        else:
            spec = networks.NetSpec(network, tuple(x.shape[1:]), k, checked["hidden"], checked["dropout"])
            net_bytes, n_weights = networks.memory_needed(spec, rows, min(EVAL_ROWS, data.n_tasks))
            kind, width = spec.kind, f" ({param('hidden')}={checked['hidden']})" if spec.kind != "linear" else ""
        return need + net_bytes, (f"{data.n_tasks:,} tasks × {x[0].size:,} features, "
                                  f"{data.n_workers:,} workers × {k:,}² classes, a {kind} network of "
                                  f"{n_weights:,} weights{width} trained on batches of {rows:,} tasks")

    # ------------------------------------------------------------------ the loop
    def _train(self, canon: Canonical, x: np.ndarray, names: tuple[str, ...] | None, checked: FitContext,
               callback: Any, network: Any) -> AggregationResult:
        """The fit on ``canon.data`` (:func:`canonical`; ``x`` in its task order), the result in the caller's."""
        device = resolve_device(checked["device"])
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(checked["seed"])
            run = iterate(
                lambda start, rng: self._start(canon.data, x, names, checked, device, network),
                self._epoch,
                rule=self.stop_rule, max_iter=checked["epochs"], seed=checked["seed"], tol=checked["patience"],
                n_init=1, direction=MINIMISE, callback=callback,
            )
            return self._finish(run.state, run, canon)

    def _start(self, data: AnnotationSet, x_np: np.ndarray, names: tuple[str, ...] | None, checked: FitContext,
               device: torch.device, network: Any) -> tuple[TrainContext, float]:
        """The context of the fit: the network, the answers split, the method's modules and the optimiser."""
        train_mask = _draw_split(data.n_answers, checked["val_fraction"], checked["seed"])
        task, worker, label = (np.asarray(a, dtype=np.int64) for a in (data.task, data.worker, data.label))
        trained = np.flatnonzero(np.bincount(task[train_mask], minlength=data.n_tasks) > 0)
        self.batch_policy.check(self.name, trained.size, checked["batch_size"], int((~train_mask).sum()))
        full = self.batch_policy.full_batch
        if full and checked["batch_size"] != next(p.default for p in self.spec().params if p.name == "batch_size"):
            warn(CrowdaggWarning(f"{self.name} trains on every task at once (full batch, as its paper): "
                                 f"{param('batch_size')} is not read"))
        x = torch.as_tensor(x_np, device=device)
        net, spec = networks.make(network, tuple(x_np.shape[1:]), data.n_classes, checked, device)
        # torch's threads by the measured rule (core.threads): one unless a batch is worth splitting
        batch = data.n_tasks if full else min(checked["batch_size"], data.n_tasks)
        work = sum(p.numel() for p in net.parameters()) * batch
        torch.set_num_threads(threads.torch_threads(work))
        if spec.kind != networks.MODULE:
            networks.standardizer(net).fit(x[torch.as_tensor(trained, device=device)] if trained.size > 1 else x)
            _check_centred_range(x, networks.standardizer(net).mean)
        ctx = TrainContext(
            method=self.name, data=data, params=checked, device=device, spec=spec, net=net, x=x,
            train=Answers.of(task[train_mask], worker[train_mask], label[train_mask], data.n_tasks, device),
            val=Answers.of(task[~train_mask], worker[~train_mask], label[~train_mask], data.n_tasks, device),
            train_tasks=torch.as_tensor(trained, device=device), feature_names=names,
        )
        ctx.modules = nn.ModuleDict(self._build(ctx)).to(device)
        ctx.optimizer = torch.optim.Adam(self._param_groups(ctx), lr=checked["lr"])
        return ctx, self._selection(ctx)

    def _param_groups(self, ctx: TrainContext) -> list[dict[str, Any]]:
        """Adam's parameter groups: the network (``lr``, ``weight_decay``), then each declared module group
        (:class:`~crowdagg.methods.registry.ModuleGroup`: its lr parameter's multiple of ``lr``, its own weight
        decay).  A module with trainable parameters outside a declared group is the method's error."""
        lr = ctx.params["lr"]
        groups = [{"params": [p for p in ctx.net.parameters() if p.requires_grad],
                   "weight_decay": ctx.params["weight_decay"]}]
        declared = {g.name: g for g in self.spec().groups}
        for name, module in ctx.modules.items():
            own = [p for p in module.parameters() if p.requires_grad]
            if own and name not in declared:
                raise TypeError(f"{self.name}: module {name!r} has trainable parameters but no declared module group "
                                f"(declared: {', '.join(declared) or 'none'})")
        for name, group in declared.items():
            if name not in ctx.modules:
                raise TypeError(f"{self.name}: _build returned no module for its declared group {name!r}")
            own = [p for p in ctx.modules[name].parameters() if p.requires_grad]
            if own:
                scale = ctx.params[group.lr] if group.lr else 1.0
                groups.append({"params": own, "weight_decay": group.weight_decay, "lr": lr * scale})
        if not any(g["params"] for g in groups):  # a frozen module given: backward raised torch's RuntimeError
            raise UsageError(f"nothing to train: the network has no trainable parameters (none with requires_grad) "
                             f"and {self.name} has none of its own")
        return groups

    def _epoch(self, ctx: TrainContext) -> Step:
        """One pass over the training tasks in seeded minibatches (:attr:`batch_policy`), then the selection
        objective (:meth:`_selection`; the mean training loss when nothing is held out)."""
        self._epoch_begin(ctx)
        ctx.net.train()
        order = ctx.train_tasks[torch.randperm(ctx.train_tasks.shape[0]).to(ctx.device)]
        total, n_batches = torch.zeros((), device=ctx.device), 0  # summed on the device: no sync per batch
        assert ctx.optimizer is not None
        for lo, hi in self.batch_policy.bounds(order.shape[0], ctx.batch_size):
            tasks = order[lo:hi]
            index, row = batch_answers(ctx.train, tasks)
            batch = Batch(tasks=tasks, x=ctx.x[tasks], row=row, worker=ctx.train.worker[index],
                          label=ctx.train.label[index], answers=index)
            loss = self._loss(ctx, ctx.logits(batch.x), batch)
            ctx.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            ctx.optimizer.step()
            total += loss.detach()
            n_batches += 1
        ctx.epoch += 1
        held_out = self._selection(ctx)
        objective = float(total) / max(n_batches, 1) if math.isnan(held_out) else held_out
        if not math.isfinite(objective):
            raise DataError(f"{self.name}: training diverged at epoch {ctx.epoch} (the objective is {objective}); "
                            f"try a smaller {param('lr')}")
        if objective < ctx.best_objective or math.isnan(held_out):
            ctx.best_objective, ctx.best_epoch = objective, ctx.epoch
            ctx.best_weights = {} if math.isnan(held_out) else ctx.snapshot()
        return Step(objective=objective, since_best=ctx.epoch - ctx.best_epoch)

    # ------------------------------------------------------------------ the method's part
    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        """The method's modules beside the network, by declared group name, initialised."""
        return {}

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The loss of one minibatch (a scalar tensor) from the network's ``logits`` (B, K)."""
        raise NotImplementedError

    def _answer_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor | None:
        """P(answer | x) (n, K) for class probabilities ``p`` (n, K) and ``workers`` (n,) under the method's
        answer model; None when the method has none (the base then uses :meth:`_implied_confusion`)."""
        return None

    def _epoch_begin(self, ctx: TrainContext) -> None:
        """Before each epoch (an EM method's E-step); nothing by default."""

    @torch.no_grad()
    def _selection(self, ctx: TrainContext) -> float:
        """The model-selection objective after an epoch, minimised: the epoch with the lowest is kept and
        ``patience`` counts the epochs since it.  By default ``-mean log P(answer | x)`` over the held-out
        answers under the method's answer model (:meth:`_answer_proba`, or the implied confusion); a method
        with an objective of its own overrides it.  nan when nothing is held out (the training loss then
        stands in and the last epoch is kept)."""
        if not len(ctx.val):
            return math.nan
        return float(answer_nll(self._answers_proba(ctx, ctx.proba(ctx.val.task), ctx.val.worker), ctx.val.label))

    def _answers_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        """:meth:`_answer_proba` (or through the implied confusion) of rows ``p`` (n, K) and ``workers`` (n,),
        :data:`ANSWER_PROBA_CELLS` // K² rows at a time: an answer model gathers each row's K × K matrix, and
        every held-out answer's at once was an (n, K, K) array no memory check saw (100,000 answers, K = 200:
        16 GB)."""
        k = ctx.n_classes
        step = max(1, ANSWER_PROBA_CELLS // (k * k))
        implied: torch.Tensor | None = None
        out = []
        for lo in range(0, p.shape[0], step):
            rows, who = p[lo:lo + step], workers[lo:lo + step]
            q = self._answer_proba(ctx, rows, who)
            if q is None:
                implied = self._implied_confusion(ctx) if implied is None else implied
                q = answer_proba(rows, implied[who])
            out.append(q)
        return torch.cat(out) if out else p.new_zeros((0, k))

    @torch.no_grad()
    def _implied_confusion(self, ctx: TrainContext) -> torch.Tensor:
        """The confusions the training answers imply given f: expected counts of f(x) against each answer,
        with a pseudo-count of 1/K per cell, rows normalised -- (n_workers, K, K) ``[worker, true, observed]``."""
        k = ctx.n_classes
        p = ctx.proba()
        counts = torch.zeros((ctx.n_workers * k, k), device=ctx.device)
        counts.index_add_(0, ctx.train.worker * k + ctx.train.label, p[ctx.train.task])
        rows = counts.reshape(ctx.n_workers, k, k).transpose(1, 2) + 1.0 / k
        return rows / rows.sum(dim=2, keepdim=True)

    @torch.no_grad()
    def _confusions(self, ctx: TrainContext) -> torch.Tensor:
        """Every worker's confusion (n_workers, K, K) ``[worker, true, observed]``: row k is the answer model's
        distribution for a task of class k (``_answer_proba`` of a one-hot), or the implied confusion."""
        k = ctx.n_classes
        eye = torch.eye(k, device=ctx.device)
        step = max(1, ANSWER_PROBA_CELLS // k**3)  # workers a chunk: K one-hot rows each, a K × K matrix per row
        out = []
        for lo in range(0, ctx.n_workers, step):
            workers = torch.arange(lo, min(ctx.n_workers, lo + step), device=ctx.device)
            rows = self._answer_proba(ctx, eye.repeat(workers.shape[0], 1), workers.repeat_interleave(k))
            if rows is None:
                return self._implied_confusion(ctx)
            out.append(rows)
        return torch.cat(out).reshape(ctx.n_workers, k, k)

    def _task_params(self, ctx: TrainContext) -> dict[str, np.ndarray]:
        """The method's per-task parameters, by name: arrays (n_tasks, ...) in ``ctx.data``'s task order (the
        canonical one), from the kept epoch's weights; :meth:`_finish` puts them in the caller's order in the
        result's ``task_params`` (what ``crowdagg train --task-params`` writes).  The one-number ones are
        declared in :attr:`task_param_names`.  None by default."""
        return {}

    def _posterior(self, ctx: TrainContext, proba: np.ndarray, confusion: np.ndarray) -> np.ndarray:
        """The labels inferred for the tasks (n_tasks, K): Bayes' rule on the classifier's ``proba`` and every
        answer through ``confusion`` (``labels_from = "answers"``, :func:`bayes_posterior`), or ``proba``
        itself (``"classifier"``)."""
        if self.labels_from == "classifier":
            return proba
        return bayes_posterior(ctx.data, proba, confusion, ctx.params.engine, ctx.params.max_memory)

    # ------------------------------------------------------------------ the result
    def _finish(self, ctx: TrainContext, run: Run, canon: Canonical) -> AggregationResult:
        """The result in the caller's order of tasks and workers (``canon``), from the kept epoch's weights."""
        if ctx.best_weights:
            ctx.restore(ctx.best_weights)
        proba = ctx.proba().double().cpu().numpy()
        proba /= proba.sum(axis=1, keepdims=True)
        confusion = self._confusions(ctx).double().cpu().numpy()
        confusion /= confusion.sum(axis=2, keepdims=True)
        post = self._posterior(ctx, proba, confusion)
        task_params = {name: canon.to_caller(np.asarray(values)) for name, values in self._task_params(ctx).items()}
        answered = ctx.data.answers_per_task > 0
        prior = post[answered].mean(axis=0) if answered.any() else post.mean(axis=0)
        caller = canon.caller
        post, proba = canon.to_caller(post), canon.to_caller(proba)
        confusion = canon.to_caller(confusion, of="workers")
        labels = argmax_random_ties(post, TieBreaker(caller.task_names, ctx.params["seed"]))
        model = TrainedModel.from_network(
            method=self.name, classes=caller.classes, spec=ctx.spec, net=ctx.net,
            workers=caller.worker_names, confusion=confusion, best_epoch=ctx.best_epoch,
            class_dtype=caller.class_dtype, feature_names=ctx.feature_names,
        )
        return make_result(
            self.name, caller, post, labels, prior,
            worker_params={"confusion": confusion}, task_params=task_params,
            model_params={"model": model, "best_epoch": ctx.best_epoch, "best_objective": ctx.best_objective,
                          "classifier_proba": proba, "n_held_out": len(ctx.val)},
            objective=np.asarray(run.trace), objective_name=self.objective_name,
            n_iter=run.n_iter, converged=run.converged,
        )


def bayes_posterior(data: AnnotationSet, proba: np.ndarray, confusion: np.ndarray, engine: Any = None,
                    max_memory: Any = None) -> np.ndarray:
    """Bayes' rule on a classifier and the answers: ``q_n ∝ proba_n ⊙ Π_m A_m[:, answer]`` (n_tasks, K).

    ``proba`` (n_tasks, K) the classifier's P(y | x) -- the per-task prior;
    ``confusion`` (n_workers, K, K) ``[worker, true, observed]``; every
    answer of ``data``.  Probabilities are floored at :data:`PROB_FLOOR`
    before their logs.  The latent E-step in its square case
    (:func:`crowdagg.methods.blocks.latent_posterior`: the classifier's
    log-probabilities as each task's prior, the log confusions as the
    ``[worker, observed, true]`` table) on ``engine``'s blocks -- an engine
    over ``data`` itself (None: the local engine over it), never the whole
    set's for a training split.
    """
    log_table = np.log(np.maximum(confusion, PROB_FLOOR)).transpose(0, 2, 1)  # [worker, observed, true]
    log_prior = np.log(np.maximum(proba, PROB_FLOOR))
    return latent_posterior(data, log_table, log_prior, engine=engine, max_memory=max_memory).classes


def split(data: AnnotationSet, fraction: float, seed: int) -> np.ndarray:
    """Which answers of ``data`` are trained on (True) and which are held out for model selection: a seeded draw
    of ``fraction`` of them (at least one when ``fraction`` > 0), made on the :func:`canonical` order of the
    answers, so that the same answers are held out however the input rows were ordered."""
    check_annotations(data, "split(data, fraction, seed)")
    fraction = check_float("fraction", fraction, 0.0, 1.0)  # NaN, -0.5 or "x" reached numpy's own errors
    seed = check_seed(seed)
    canon = canonical(data)
    keep = np.empty(data.n_answers, dtype=bool)
    keep[canon.answers] = _draw_split(canon.data.n_answers, fraction, seed)
    return keep


def _draw_split(n: int, fraction: float, seed: int) -> np.ndarray:
    """The held-out draw over ``n`` answers in their order: True for the ones trained on."""
    n_val = int(round(fraction * n))
    if fraction > 0 and n_val == 0 and n >= 2:
        n_val = 1
    if n_val >= n:
        raise DataError(f"{param('val_fraction')}={fraction:g} holds out all {n:,} answers: nothing to train on")
    keep = np.ones(n, dtype=bool)
    if n_val:
        keep[np.random.default_rng([seed, 0x5A11]).choice(n, size=n_val, replace=False)] = False
    return keep


@dataclass(frozen=True)
class Canonical:
    """A data set in an order that does not depend on the input's row order (see :func:`canonical`).

    ``data``'s task ``i`` is the caller's task ``tasks[i]``, its worker
    ``j`` the caller's ``workers[j]``, its answer ``a`` the caller's answer
    ``answers[a]``; ``caller`` is the data as given.
    """

    data: AnnotationSet
    tasks: np.ndarray
    workers: np.ndarray
    answers: np.ndarray
    caller: AnnotationSet

    def to_caller(self, rows: np.ndarray, of: str = "tasks") -> np.ndarray:
        """``rows`` (first axis in this order of tasks or workers) in the caller's order."""
        order = self.tasks if of == "tasks" else self.workers
        out = np.empty_like(rows)
        out[order] = rows
        return out


def canonical(data: AnnotationSet) -> Canonical:
    """``data`` with its tasks and workers sorted by name and its answers by (task, worker, label): the order a
    trainer trains in.

    An aggregator's result does not depend on the order of the input's
    rows; a trainer's minibatches, held-out draw and float sums do, and
    task and worker codes follow the rows' order (first seen, first
    coded).  Trained on this order -- the results put back in the
    caller's (:meth:`Canonical.to_caller`) -- the same answers give the
    same bytes however their rows were shuffled.  ``data`` itself when it
    is in that order already.
    """
    import pyarrow as pa

    check_annotations(data, "canonical(data)")
    t_order = np.argsort(np.asarray(data.task_names, dtype=str), kind="stable")
    w_order = np.argsort(np.asarray(data.worker_names, dtype=str), kind="stable")
    t_rank = np.empty_like(t_order)
    t_rank[t_order] = np.arange(t_order.size)
    w_rank = np.empty_like(w_order)
    w_rank[w_order] = np.arange(w_order.size)
    task, worker = t_rank[data.task], w_rank[data.worker]
    a_order = np.lexsort((data.label, worker, task))
    identity = (np.array_equal(t_order, np.arange(t_order.size)) and np.array_equal(w_order, np.arange(w_order.size))
                and np.array_equal(a_order, np.arange(a_order.size)))
    if identity:
        return Canonical(data, t_order, w_order, a_order, data)
    codes = (task[a_order].astype(np.int32), worker[a_order].astype(np.int32), data.label[a_order])
    for a in codes:
        a.setflags(write=False)
    tasks = type(data.tasks)(data.tasks.names.take(pa.array(t_order)), data.tasks.dtype)
    workers = type(data.workers)(data.workers.names.take(pa.array(w_order)), data.workers.dtype)
    out = AnnotationSet._trusted(
        task=codes[0], worker=codes[1], label=codes[2], tasks=tasks, workers=workers, classes=data.classes,
        n_duplicates=data.n_duplicates, duplicates=data.duplicates, class_dtype=data.class_dtype,
    )
    return Canonical(out, t_order, w_order, a_order, data)


def _inputs(data: AnnotationSet, features: Any, feature_names: Any) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """The features as float32 rows in ``data``'s task order (a DataFrame's rows by its task index), checked
    finite, and their column names."""
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
    return x, _feature_names(features, feature_names, x)


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
