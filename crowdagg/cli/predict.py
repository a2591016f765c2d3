"""``crowdagg predict``: a model saved by ``crowdagg train --save`` and features in, one label per row out."""

from __future__ import annotations

from typing import Any, Optional

import typer

from ..errors import UsageError
from ..io.parts import LABEL_FIELDS, LABEL_THEN
from . import options as opt
from . import pipeline as steps
from .options import require_values
from .plumbing import err, handle_errors
from .train import require_torch

HELP = """Predict labels with a model saved by `crowdagg train --save`.

Writes task,label,confidence (+ one p_<class> column per class with
--proba), one row per feature row in the file's order, in the classes the
model was trained with.  The task is the row's id (--tasks, an .npz's
'ids', a table's id column), else its number from 0 (stderr says so).
A Parquet/CSV/TSV table's columns are matched by name to those the model
was trained on (any order; a missing or unknown one is refused); an
array's are taken in order.

Needs the optional extra: pip install 'crowdagg[train]' (torch).

\b
Example:
  crowdagg predict --model model.pt --features new.npy \\
      --tasks new_ids.txt > predictions.csv
"""


@handle_errors()
def predict(
    model: str = typer.Option(..., "--model", help="A model saved by `crowdagg train --save` (loading runs no code)."),
    features: str = typer.Option(..., "--features", help="Features of the rows to label, of the shape the model was trained on: .npy, .npz, Parquet/CSV/TSV with an id column (its columns matched by name to the model's)."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Task ids of the feature rows, one per line (line i names row i; default: the rows are numbered from 0)."),
    id_col: Optional[str] = typer.Option(None, "--id-col", help="The id column of Parquet/CSV/TSV features (default: task)."),
    proba: bool = typer.Option(False, "--proba", help="Add one p_<class> probability column per class."),
    output: Optional[str] = opt.output_option("Write here instead of stdout (a regular file is replaced atomically)."),
    fmt: Optional[str] = opt.format_option("csv, tsv, jsonl, json or parquet (default: from -o's extension, else csv)."),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when available), cpu, cuda or cuda:N."),
    max_memory: Optional[str] = opt.max_memory_option("a run", examples=True),
    threads: Optional[str] = opt.THREADS,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes on stderr (rows numbered, columns by position)."),
    verbose: bool = opt.VERBOSE,
) -> None:
    """Label feature rows with a trained model (the help text: :data:`HELP`)."""
    from ..core.threads import use_threads

    require_values(model=model, features=features, tasks=tasks, id_col=id_col, output=output, format=fmt,
                   device=device, max_memory=max_memory)
    require_torch("crowdagg predict")  # before anything is read
    from ..core import memory
    from ..learning.device import resolve_device
    from ..learning.features import feature_format
    from ..methods.registry import Param

    where = resolve_device(Param("device", "device", "auto", "").parse(device))
    memory.parse_size(max_memory)
    for option, path in (("--model", model), ("--features", features)):
        if path == "-":
            raise UsageError(f"{option} must be a file, not standard input")
    feature_format(features)
    n_threads = steps.check_threads(threads)
    side = steps.side_inputs(model=model, features=features, tasks=tasks)
    planned, _ = steps.plan_outputs([steps.Output("--output", output or "-", LABEL_FIELDS, then=LABEL_THEN, fmt=fmt)],
                                    [], side)
    with use_threads(n_threads):
        from ..learning.features import read_features
        from ..learning.model_file import load

        trained = load(model, max_memory=max_memory)
        feats = read_features(features, tasks_path=tasks, id_col=id_col, max_memory=max_memory)
        k = len(trained.classes)
        steps.check_render_memory(feats.n_rows, 1 + (k if proba else 0), 2,
                                  f"{feats.n_rows:,} output rows × {k:,} classes", max_memory)
        table = predict_table(trained, feats, proba=proba, device=str(where))
        if not quiet:
            for line in notes(trained, feats):
                err(line)
        steps.render_and_commit(planned, {"--output": lambda f: _render(table, f)})


def notes(trained: Any, feats: Any) -> list[str]:
    """What predict assumed, for stderr: rows without ids numbered from 0, columns taken by position -- an array's
    for a model that knows its features' names, and a table's for a model saved without them (before models kept
    them: a reordered table is fed as it is)."""
    lines = []
    if feats.ids is None:
        lines.append(f"predict: features {feats.source} have no task ids (no --tasks, not an .npz with 'ids' or a "
                     f"table): the rows are named by their number, 0 to {feats.n_rows - 1:,}")
    if feats.columns is None and trained.feature_names is not None:
        lines.append(f"predict: features {feats.source} have no column names: their {len(trained.feature_names):,} "
                     f"columns are taken in the order of the model's ({_shown(trained.feature_names)})")
    if feats.columns is not None and trained.feature_names is None:
        lines.append(f"predict: the model has no feature names (saved before models kept them): the "
                     f"{len(feats.columns):,} columns of features {feats.source} are taken by position, in the "
                     f"table's order ({_shown(list(feats.columns))}), not matched by name")
    return lines


def _shown(names: Any, limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f", ... ({len(names):,} in all)" if len(names) > limit else "")


def predict_table(trained: Any, feats: Any, *, proba: bool, device: str = "cpu") -> dict[str, Any]:
    """The output's columns: ``task, label, confidence`` (+ ``p_<class>``), one row per feature row."""
    import numpy as np

    from ..learning.features import by_name
    from ..methods.blocks import TieBreaker, argmax_random_ties
    from ..methods.result import task_table

    names = feats.row_names()
    x = feats.x if feats.x.ndim != 2 else by_name(feats.x, feats.columns, trained.feature_names,
                                                   f"features {feats.source}")
    p = trained.predict_proba(x, device=device)
    labels = argmax_random_ties(p, TieBreaker(names, 0))
    confidence = p[np.arange(len(labels)), labels]
    cols = task_table(names, labels, trained.classes, confidence, posteriors=p if proba else None, arrow=False)
    cols.pop("n_answers", None)  # a prediction has no answers behind it
    return cols


def _render(table: dict[str, Any], fmt: str) -> Any:
    from ..io.render import render_chunks

    return render_chunks(table, fmt, key="task")
