"""``crowdagg train``: features + noisy answers in, the labels the trainer infers for the tasks out (+ confusions, model)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import typer

from ..errors import UsageError
from ..io.parts import LABEL_FIELDS, LABEL_THEN
from ..methods.registry import TRAINERS
from . import options as opt
from . import pipeline as steps
from .aggregate import header, params_renderer
from .options import require_values
from .plumbing import err, handle_errors

HELP = f"""Train a classifier from features and noisy answers, end to end.

Writes task,label,confidence (+ n_answers and p_<class> with --proba) for
every task with features, as `crowdagg aggregate` writes them: the labels
the trainer infers for the training tasks (tasks with features but no
answers, n_answers 0, get the classifier's prediction).  --workers writes
the annotators' estimated confusion matrices, --save the model for
`crowdagg predict`.  Model selection keeps the epoch with the best score
on held-out answers (--val-fraction: their likelihood, or the method's own
objective), stopping after --patience epochs without a better one; stderr
says which epoch was kept; --truth only reports.

{opt.method_list(TRAINERS, "Trainers")}

Needs the optional extra: pip install 'crowdagg[train]' (torch).

\b
Example:
  crowdagg train --features feats.npy --method crowdlayer \\
      --save model.pt > train_labels.csv
  (labels.csv and tasks.txt beside feats.npy are used when --labels and
  --tasks are not given)
"""

#: The trainer parameters with a flag of their own here (the others: -p name=value).
TRAIN_FLAGS = ("seed", "model", "hidden", "epochs", "batch_size", "lr", "weight_decay", "device", "val_fraction",
               "patience")
#: The files looked for beside the features file when --labels and --tasks are not given.
DEFAULT_LABELS = "labels.csv"
DEFAULT_TASKS = "tasks.txt"


class _Spelling(Mapping[str, str]):
    """How errors name a trainer parameter: its flag here, else ``-p name`` (``dropout`` -> ``-p dropout``)."""

    def _names(self) -> set[str]:
        from ..methods.registry import TRAINERS

        return {p.name for m in TRAINERS.values() for p in m.params if p.name not in TRAIN_FLAGS}

    def __getitem__(self, name: str) -> str:
        if name in self._names():
            return f"-p {name}"
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


SPELLING = _Spelling()


def _declared(name: str, tail: str = "") -> str:
    """A flag's help from the trainers' shared declaration (:data:`crowdagg.learning.methods.TRAIN_PARAMS`):
    its help and default (standard library only: ``crowdagg --help`` imports no torch)."""
    from ..learning.methods import TRAIN_PARAMS

    p = next(p for p in TRAIN_PARAMS if p.name == name)
    text = p.help[:1].upper() + p.help[1:]
    return f"{text} (default {p.describe_default()}){tail}."


@handle_errors(SPELLING)
def train(
    features: str = typer.Option(..., "--features", help="Features of the tasks: .npy (N×d vectors or N×C×H×W images), .npz (an array, or 'features' and 'ids'), Parquet/CSV/TSV with an id column and numeric feature columns."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help=f"Task ids of the feature rows, one per line (line i names row i) for .npy/.npz features (default: {DEFAULT_TASKS} beside the features file when it exists)."),
    labels: Optional[str] = typer.Option(None, "--labels", help=f"The answers (task, worker, label), read as `crowdagg aggregate` reads its input (default: {DEFAULT_LABELS} beside the features file when it exists)."),
    id_col: Optional[str] = typer.Option(None, "--id-col", help="The id column of Parquet/CSV/TSV features (default: task)."),
    method: str = typer.Option("geocrowdnet-f", "--method", "-m", help="Trainer (see `crowdagg methods`)."),
    model: Optional[str] = typer.Option(None, "--model", help=_declared("model")),
    hidden: Optional[int] = typer.Option(None, "--hidden", help=_declared("hidden")),
    epochs: Optional[int] = typer.Option(None, "--epochs", help=_declared("epochs")),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help=_declared("batch_size")),
    lr: Optional[float] = typer.Option(None, "--lr", help=_declared("lr")),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help=_declared("weight_decay")),
    seed: Optional[int] = typer.Option(None, "--seed", help=_declared("seed", "; the same seed and --threads give the same bytes on CPU")),
    device: Optional[str] = typer.Option(None, "--device", help=_declared("device")),
    val_fraction: Optional[float] = typer.Option(None, "--val-fraction", help=_declared("val_fraction")),
    patience: Optional[int] = typer.Option(None, "--patience", help=_declared("patience")),
    param_: list[str] = typer.Option([], "--param", "-p", metavar="NAME=VALUE", help="A parameter of the trainer (repeatable); `crowdagg methods NAME` lists them, e.g. -p dropout=0.2."),
    output: Optional[str] = opt.output_option("Write the labels here instead of stdout (a regular file is replaced atomically)."),
    fmt: Optional[str] = opt.format_option("csv, tsv, jsonl, json or parquet (default: from -o's extension, else csv)."),
    proba: bool = typer.Option(False, "--proba", help="Add n_answers and one p_<class> column per class."),
    workers: Optional[str] = typer.Option(None, "--workers", help="Write each annotator's estimated confusion matrix here (long form, as `crowdagg aggregate --workers`)."),
    task_params: Optional[str] = typer.Option(None, "--task-params", help="Write one row per task here, as `crowdagg aggregate --task-params`: task, each per-task parameter of the trainer (coinnet: outlier_score), n_answers (task and n_answers for a trainer without any)."),
    save: Optional[str] = typer.Option(None, "--save", help="Save the trained model here, named .safetensors or .pt (safetensors weights and a JSON header, with the feature columns' names of a table; loading runs no code) for `crowdagg predict`."),
    truth: Optional[str] = opt.TRUTH,
    truth_task_col: Optional[str] = opt.TRUTH_TASK_COL,
    truth_label_col: Optional[str] = opt.TRUTH_LABEL_COL,
    classes: Optional[str] = opt.CLASSES,
    duplicates: str = opt.DUPLICATES,
    blank_labels: str = opt.BLANK_LABELS,
    rejected: str = opt.REJECTED,
    input_format: Optional[str] = opt.INPUT_FORMAT,
    task_col: Optional[str] = opt.TASK_COL,
    worker_col: Optional[str] = opt.WORKER_COL,
    label_col: Optional[str] = opt.LABEL_COL,
    max_memory: Optional[str] = opt.max_memory_option("a run", examples=True),
    threads: Optional[str] = opt.THREADS,
    quiet: bool = opt.QUIET,
    verbose: bool = opt.VERBOSE,
) -> None:
    """Train a classifier from features and noisy answers (the help text: :data:`HELP`)."""
    from ..core.threads import use_threads

    # 1. Everything that can be checked without reading the data (a missing torch first of all).
    require_values(features=features, tasks=tasks, labels=labels, id_col=id_col, output=output, format=fmt,
                   workers=workers, task_params=task_params, save=save, truth=truth, input_format=input_format, classes=classes,
                   max_memory=max_memory)
    trainer, params = check_trainer(method, {
        "seed": seed, "model": model, "hidden": hidden, "epochs": epochs, "batch_size": batch_size, "lr": lr,
        "weight_decay": weight_decay, "device": device, "val_fraction": val_fraction, "patience": patience,
    }, param_)
    n_threads = steps.check_threads(threads)
    if features == "-":
        raise UsageError("--features must be a file (its format is read from its extension), not standard input")
    from ..learning.features import feature_format

    feature_format(features)  # an unknown extension, before anything is read
    labels, tasks = _defaults(features, labels, tasks, quiet)
    class_list = steps.check_read_options(
        duplicates=duplicates, blank_labels=blank_labels, rejected=rejected, max_memory=max_memory, classes=classes
    )
    side = steps.side_inputs(features=features, tasks=tasks, truth=truth)
    steps.check_stdin([labels], side, named="--labels")
    headers = {"--task-params": header(trainer, "--task-params")} if task_params else {}
    planned, sources = steps.plan_outputs(_outputs(output, fmt, workers, save, task_params, headers), [labels], side,
                                          named="--labels")
    with use_threads(n_threads):
        # 2. The inputs.
        truth_labels = steps.read_labels(truth, truth_task_col, truth_label_col, option="--truth") if truth else None
        data = steps.load(sources, input_format=input_format, task_col=task_col, worker_col=worker_col,
                          label_col=label_col, classes=class_list, duplicates=duplicates, max_memory=max_memory,
                          rejected=rejected, blank_labels=blank_labels)
        data, x, names = read_aligned(data, features, tasks, id_col, max_memory)
        _check_output_memory(data, proba=proba, workers=workers is not None, headers=headers, max_memory=max_memory)
        # 3. The fit, then what --truth says (it can fail: nothing written yet).
        result = fit(trainer, params, data, x, quiet=quiet, max_memory=max_memory, feature_names=names)
        lines = evaluate(data, result, truth_labels) if truth_labels is not None else []
        # 4. Render everything, then write all or nothing.
        steps.render_and_commit(planned, _renderers(result, proba, headers))
        for line in lines:
            err(line)


# --------------------------------------------------------------------------- steps
def check_trainer(method: str, flags: dict[str, Any], pairs: list[str]) -> tuple[type, dict[str, Any]]:
    """The trainer's class and its checked parameters, before anything is read: a missing torch (the registry's
    ``pip install 'crowdagg[train]'``), an aggregator's name (it says which command takes it), a bad value, a
    CUDA device this machine does not have."""
    from ..methods.registry import get_trainer
    from .options import method_params

    require_torch("crowdagg train")
    spec = get_trainer(method)
    cls = spec.load()  # the optional extra: before a parameter is looked at
    params = method_params(spec, flags, pairs, SPELLING)
    checked = cls(**params).check_params()
    from ..learning.device import resolve_device

    resolve_device(checked["device"])
    return cls, params


def require_torch(command: str) -> None:
    """The optional extra ``train`` (its modules found, not imported), else the usage error naming the
    ``pip install`` -- the words of :meth:`crowdagg.methods.registry.Method.load`."""
    from importlib.util import find_spec

    from ..methods.registry import EXTRAS

    missing = [m for m in EXTRAS["train"] if find_spec(m) is None]
    if missing:
        raise UsageError(f"{command} needs the optional extra 'train' ({', '.join(missing)} not installed): "
                         "pip install 'crowdagg[train]'")


def _defaults(features: str, labels: Optional[str], tasks: Optional[str], quiet: bool) -> tuple[str, Optional[str]]:
    """--labels and --tasks, defaulting to the files beside the features file; stderr says which were used."""
    from ..learning.features import has_own_ids

    folder = os.path.dirname(features)
    used = []
    if labels is None:
        beside = os.path.join(folder, DEFAULT_LABELS)
        if not os.path.isfile(beside):
            raise UsageError(f"--labels is needed: no {DEFAULT_LABELS} beside --features {features}")
        labels = beside
        used.append(f"labels {labels}")
    if tasks is None and not has_own_ids(features):
        beside = os.path.join(folder, DEFAULT_TASKS)
        if os.path.isfile(beside):
            tasks = beside
            used.append(f"tasks {tasks}")
    if used and not quiet:
        err(f"train: using {' and '.join(used)} (beside the features)")
    return labels, tasks


def read_aligned(data: Any, features: str, tasks: Optional[str], id_col: Optional[str],
                 max_memory: Any) -> tuple[Any, Any, Optional[tuple[str, ...]]]:
    """The features read and aligned to the answers' tasks (feature-only tasks appended), and their column names
    (a table's; None for an array file): the model keeps them, and predict matches columns by them."""
    from ..core import timing
    from ..learning.features import align, read_features

    with timing.stage("features"):
        feats = read_features(features, tasks_path=tasks, id_col=id_col, max_memory=max_memory)
        return (*align(data, feats, max_memory=max_memory), feats.columns)


def fit(trainer: type, params: dict[str, Any], data: Any, x: Any, *, quiet: bool, max_memory: Any,
        feature_names: Optional[tuple[str, ...]] = None) -> Any:
    """The trainer's fit, with a progress bar of its epochs on a terminal (unless ``quiet``)."""
    from ..core import timing
    from .plumbing import progress

    method = trainer(**params)
    checked = method.check_params()
    callback, stop = progress(quiet, total=int(checked["epochs"]), what="epoch", measure=method.objective_name)
    try:
        with timing.stage("fit"):
            result = method.fit(data, x, callback=callback, max_memory=max_memory, feature_names=feature_names)
    finally:
        stop()
    timing.note(iterations=result.n_iter, converged=result.converged)
    if not quiet:
        err(kept_epoch_line(result, checked, method.objective_name))
    return result


def kept_epoch_line(result: Any, checked: Mapping[str, Any], objective: str) -> str:
    """Which epoch model selection kept and its score, and why training stopped (for stderr)."""
    best, ran = result.model_params["best_epoch"], result.n_iter
    if checked["val_fraction"] == 0:
        return f"train: kept the last epoch, {ran} (nothing held out: --val-fraction 0)"
    if result.model_params.get("n_held_out") == 0:  # a share of too few answers: the training loss is no held-out score
        return (f"train: kept the last epoch, {ran} (nothing held out: --val-fraction {checked['val_fraction']:g} of "
                f"{result.data.n_answers:,} answer{'' if result.data.n_answers == 1 else 's'} is none)")
    score = result.model_params["best_objective"]
    if ran < checked["epochs"]:
        why = f"stopped after {_epochs(ran - best)} without a better one (--patience {checked['patience']})"
    else:
        why = f"ran all {ran} epochs" if ran != 1 else "ran its 1 epoch"
    return f"train: kept epoch {best} of {ran} ({objective} {score:.4f}); {why}"


def _epochs(n: int) -> str:
    return f"{n} epoch" if n == 1 else f"{n} epochs"


def evaluate(data: Any, result: Any, truth: dict[str, str]) -> list[str]:
    """``--truth``: the accuracy of the inferred labels and of the classifier alone, on the answered tasks with
    truth (the lines for stderr)."""
    import numpy as np

    from ..reports.evaluate import evaluate_labels, evaluate_run, summary_line

    ev, note = evaluate_run(data, result, truth, None)
    names = data.task_names
    answered = np.asarray(data.answers_per_task) > 0
    clf = np.asarray(data.classes, dtype=object)[result.model_params["classifier_proba"].argmax(axis=1)]
    alone = evaluate_labels({t: lab for t, lab, a in zip(names.tolist(), clf.tolist(), answered.tolist()) if a},
                            truth, list(data.classes))
    lines = [f"inferred training labels: {summary_line(ev, note)}",
             f"classifier alone: {summary_line(alone)}"]
    rest = [t for t, a in zip(names.tolist(), answered.tolist()) if not a and t in truth]
    if rest:
        predicted = {t: lab for t, lab, a in zip(names.tolist(), clf.tolist(), answered.tolist()) if not a}
        lines.append(f"classifier on the {len(rest):,} tasks without answers: "
                     f"{summary_line(evaluate_labels(predicted, truth, list(data.classes)))}")
    return lines


def _outputs(output: Optional[str], fmt: Optional[str], workers: Optional[str], save: Optional[str],
             task_params: Optional[str], headers: dict[str, tuple[str, ...]]) -> list[steps.Output]:
    from ..io.read import TRAINED_MODEL_FORMATS
    from ..methods.result import WORKERS_LONG

    planned = [steps.Output("--output", output or "-", LABEL_FIELDS, then=LABEL_THEN, fmt=fmt)]
    if workers:
        planned.append(steps.Output("--workers", workers, WORKERS_LONG))
    if save:
        planned.append(steps.Output("--save", save, (), formats=TRAINED_MODEL_FORMATS))
    if task_params:
        planned.append(steps.Output("--task-params", task_params, headers["--task-params"]))
    return planned


def _check_output_memory(data: Any, *, proba: bool, workers: bool, headers: dict[str, tuple[str, ...]],
                         max_memory: Any) -> None:
    k = data.n_classes
    steps.check_render_memory(data.n_tasks, 1 + (k + 1 if proba else 0), 2,
                              f"{data.n_tasks:,} output rows × {k:,} classes", max_memory)
    if workers:
        steps.check_render_memory(data.n_workers * k * k, 3, 3,
                                  f"--workers table of {data.n_workers:,} workers × {k:,}² classes", max_memory)
    if "--task-params" in headers:
        steps.check_render_memory(data.n_tasks, len(headers["--task-params"]) - 1, 1,
                                  f"--task-params table of {data.n_tasks:,} tasks", max_memory)


def _renderers(result: Any, proba: bool, headers: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    from ..io.render import render_chunks

    def save(fmt: str) -> bytes:
        from ..learning.model_file import to_bytes

        return to_bytes(result.model_params["model"])

    return {
        "--output": lambda fmt: render_chunks(result.table(proba=proba, arrow=True), fmt, key="task"),
        "--workers": lambda fmt: render_chunks(result.workers_table(arrow=True), fmt, key="worker"),
        "--save": save,
        "--task-params": params_renderer(result, "--task-params", headers),
    }

