"""``crowdagg aggregate``: answers in, one label per task out (+ worker model, evaluation)."""

from __future__ import annotations

from typing import Any, Optional

import typer

from ..core.threads import use_threads
from ..errors import UsageError
from ..io.parts import LABEL_FIELDS, LABEL_THEN
from . import options as opt
from . import pipeline as steps
from .options import require_values
from .plumbing import handle_errors

HELP = f"""Aggregate answers into one label per task.

Writes task,label,confidence (+ n_answers and p_<class> with --proba),
one row per task in input order.  With --numeric the answers are numbers
and a numeric method (mean, the default; median, catd, crh) writes
task,value.

{opt.method_list()}

Inputs and outputs: a directory or pattern given as INPUT leaves out this
run's own earlier outputs (said on stderr), so a run can be repeated; an
output that is an input in any other way is refused.

\b
Example: cat answers.jsonl | crowdagg aggregate - --method mv --format jsonl | jq .label
"""

#: The leading fields of each output, by which an earlier run's output is recognised in an input directory
#: (--workers and --task-params: their header, from the method's declaration, :func:`header`).
TABLE_FIELDS = LABEL_FIELDS
MODEL_FIELDS = ("format", "version")


@handle_errors(opt.DETECTOR_SPELLING)
def aggregate(
    input: list[str] = typer.Argument(..., metavar="INPUT...", help="Answers file(s) (CSV/TSV/JSON/JSONL/Parquet, optionally .gz; MTurk, Toloka, Label Studio exports), - for stdin, a directory, or a quoted glob ('batches/*.parquet'); several are read as one data set."),
    method: Optional[str] = typer.Option(None, "--method", "-m", help="Aggregation method (see `crowdagg methods`; default ds, or mean with --numeric)."),
    numeric: bool = typer.Option(False, "--numeric", help="The answers are numbers (a rating, a count, an estimate): read each as a finite number and write one value per task (task,value) with a numeric method: mean (default), median, catd, crh.  --workers writes each worker's weight (catd: and variance; crh: and loss), deviation and n_answers."),
    output: Optional[str] = opt.output_option("Write here instead of stdout (a regular file is replaced atomically). A directory (a trailing /, or an existing directory: new, empty or an earlier run's) gets one part per partition, part-00000.csv ..., each CSV/TSV part with the header, and _SUCCESS; with --engine dask the workers write them (they must share this filesystem); the local engine writes one part."),
    fmt: Optional[str] = opt.format_option("csv, tsv, jsonl, json or parquet (default: from -o's extension, else csv)."),
    proba: bool = typer.Option(False, "--proba", help="Add n_answers and one p_<class> posterior column per class."),
    workers: Optional[str] = typer.Option(None, "--workers", help="Write each worker's parameters here: its confusion matrix (long form) and accuracy, or, for a method whose worker model is not a confusion, one row per worker (worker, each parameter, n_answers)."),
    drop_spammers: bool = typer.Option(False, "--drop-spammers", help="First flag spammers as `crowdagg workers` does with its default method, and fit without their answers: the cross-covariance detector (on the answers alone) and, unless --no-near-chance, the near-chance rule on a ds fit (one extra ds fit, default parameters and --seed; it also withdraws the detector's flags of workers it shows right more often than chance); the workers either flags are removed (--min-partners, --min-shared, --detector tune the detector).  stderr says how many each flagged and how many workers and answers were removed.  Every task still gets its row (one left without answers gets the class prior).  Local engine only."),
    near_chance: bool = opt.NEAR_CHANCE,
    min_partners: int = opt.MIN_PARTNERS,
    min_shared: int = opt.MIN_SHARED,
    detector: str = opt.DETECTOR,
    exclude_workers: Optional[str] = opt.EXCLUDE_WORKERS,
    relabel: Optional[str] = opt.RELABEL,
    budget: Optional[int] = opt.BUDGET,
    task_params: Optional[str] = typer.Option(None, "--task-params", help="Write one row per task here: task, each per-task parameter of the method, n_answers (task and n_answers for a method without any)."),
    save_workers: Optional[str] = opt.SAVE_WORKERS,
    init_workers: Optional[str] = opt.INIT_WORKERS,
    truth: Optional[str] = opt.TRUTH,
    truth_task_col: Optional[str] = opt.TRUTH_TASK_COL,
    truth_label_col: Optional[str] = opt.TRUTH_LABEL_COL,
    gold: Optional[str] = opt.GOLD,
    gold_task_col: Optional[str] = opt.GOLD_TASK_COL,
    gold_label_col: Optional[str] = opt.GOLD_LABEL_COL,
    classes: Optional[str] = opt.CLASSES,
    duplicates: str = opt.DUPLICATES,
    blank_labels: str = opt.BLANK_LABELS,
    rejected: str = opt.REJECTED,
    input_format: Optional[str] = opt.INPUT_FORMAT,
    task_col: Optional[str] = opt.TASK_COL,
    worker_col: Optional[str] = opt.WORKER_COL,
    label_col: Optional[str] = opt.LABEL_COL,
    seed: Optional[int] = opt.SEED,
    max_iter: Optional[int] = opt.MAX_ITER,
    tol: Optional[float] = opt.TOL,
    smoothing: Optional[float] = opt.SMOOTHING,
    param_: list[str] = opt.PARAM,
    max_memory: Optional[str] = opt.max_memory_option("a run", examples=True),
    threads: Optional[str] = opt.THREADS,
    engine: str = opt.ENGINE,
    scheduler: Optional[str] = opt.SCHEDULER,
    quiet: bool = opt.QUIET,
    verbose: bool = opt.VERBOSE,
) -> None:
    """Aggregate answers into one label per task (the help text: :data:`HELP`)."""
    from ..methods.api import check_kind

    # 1. Everything that can be checked without reading the data.
    for path in input:
        require_values(input=path)
    numeric, method = check_kind(method, numeric)
    if numeric:
        refused = {"--proba": proba, "--drop-spammers": drop_spammers, "--exclude-workers": exclude_workers,
                   "--relabel": relabel, "--budget": budget, "--task-params": task_params,
                   "--save-workers": save_workers, "--init-workers": init_workers, "--truth": truth, "--gold": gold,
                   "--classes": classes, "--smoothing": smoothing, "--engine": engine != "local",
                   "--scheduler": scheduler, "--truth-task-col": truth_task_col, "--truth-label-col": truth_label_col,
                   "--gold-task-col": gold_task_col, "--gold-label-col": gold_label_col,
                   "--min-partners": min_partners != opt.MIN_PARTNERS.default,
                   "--min-shared": min_shared != opt.MIN_SHARED.default, "--detector": detector != opt.DETECTOR.default,
                   "--no-near-chance": near_chance != opt.NEAR_CHANCE.default}
        return aggregate_numeric(
            input, method, refused, output=output, fmt=fmt, workers=workers, duplicates=duplicates,
            blank_labels=blank_labels, rejected=rejected, input_format=input_format, task_col=task_col,
            worker_col=worker_col, label_col=label_col, flags={"seed": seed, "max_iter": max_iter, "tol": tol},
            param_=param_, max_memory=max_memory, threads=threads, quiet=quiet)
    require_values(
        output=output, format=fmt, workers=workers, task_params=task_params, truth=truth, gold=gold,
        input_format=input_format, classes=classes, max_memory=max_memory,
        save_workers=save_workers, init_workers=init_workers, exclude_workers=exclude_workers, relabel=relabel,
    )
    check_budget(relabel, budget)
    if exclude_workers == "-":
        raise UsageError("--exclude-workers reads a file of worker ids, not standard input")
    steps.check_detector(detector)
    side = steps.side_inputs(truth=truth, gold=gold, init_workers=init_workers, exclude_workers=exclude_workers)
    steps.check_stdin(input, side)
    spec, params = steps.check_method(
        method, {"seed": seed, "max_iter": max_iter, "tol": tol, "smoothing": smoothing}, param_,
        gold=gold, save_workers=save_workers, init_workers=init_workers,
    )
    class_list = steps.check_read_options(
        duplicates=duplicates, blank_labels=blank_labels, rejected=rejected, max_memory=max_memory, classes=classes
    )
    n_threads = steps.check_threads(threads)
    steps.check_engine(method, engine, scheduler, {**params, "gold": gold, "init_workers": init_workers},
                       input_format=input_format, duplicates=duplicates)
    if not drop_spammers:  # they tune --drop-spammers alone: without it they would change nothing, silently
        tuning = [spelt for spelt, value, declared in (
            ("--min-partners", min_partners, opt.MIN_PARTNERS), ("--min-shared", min_shared, opt.MIN_SHARED),
            ("--detector", detector, opt.DETECTOR), ("--no-near-chance", near_chance, opt.NEAR_CHANCE),
        ) if value != declared.default]
        if tuning:
            raise UsageError(f"{' and '.join(tuning)} tune{'s' if len(tuning) == 1 else ''} --drop-spammers; give "
                             "--drop-spammers too (or `crowdagg workers` to see the flags)")
    for option, given in (("--drop-spammers", drop_spammers), ("--exclude-workers", exclude_workers is not None)):
        if given and engine != "local":
            raise UsageError(f"{option} runs on the local engine (the workers' answers are removed in this "
                             f"process), not --engine {engine}")
    headers = {option: header(spec.load(), option) for option, path in
               (("--workers", workers), ("--task-params", task_params)) if path}
    planned, sources = steps.plan_outputs(
        _outputs(output, fmt, workers, save_workers, task_params, headers, relabel), input, side)
    if engine == "dask":  # standard input, JSON: refused before a cluster is started
        from ..io.dask_read import check_sources

        check_sources(sources, input_format)
    # 2.-4. run under the thread count: every file read (--gold, --init-workers and --truth too), the fit,
    # the outputs.
    with use_threads(n_threads), steps.engine_scope(engine, scheduler, n_threads) as cluster:
        # 2. Side inputs, then the data and the fit.
        if gold is not None:
            params["gold"] = steps.read_labels(gold, gold_task_col, gold_label_col, option="--gold", what="gold")
        if init_workers is not None:
            params["init_workers"] = steps.read_worker_model(init_workers, max_memory)
        truth_labels = steps.read_labels(truth, truth_task_col, truth_label_col, option="--truth") if truth else None
        excluded = None if exclude_workers is None else (exclude_workers, steps.read_worker_ids(exclude_workers,
                                                                                              max_memory))
        data, fit_engine = steps.load_on(
            cluster, sources, input_format=input_format, task_col=task_col, worker_col=worker_col,
            label_col=label_col, classes=class_list, duplicates=duplicates, max_memory=max_memory, rejected=rejected,
            blank_labels=blank_labels,
        )
        if excluded is not None:  # the hand-picked list first: the detector judges the crowd that is left
            data = steps.exclude_workers(data, *excluded)
        if drop_spammers:
            data = steps.drop_spammers(data, seed=seed, max_memory=max_memory, quiet=quiet, chance=near_chance,
                                       detector=detector, min_partners=min_partners, min_shared=min_shared)
        _check_output_memory(data, proba=proba, headers=headers, max_memory=max_memory,
                             labels_here=not (fit_engine is not None and planned["--output"].target.kind == "dir"),
                             relabel=None if relabel is None else min(budget or data.n_tasks, data.n_tasks))
        result = steps.fit(data, method, params, quiet=quiet, max_memory=max_memory, engine=fit_engine,
                           summary=True)
        # 3. Evaluation (it can fail: nothing written yet).
        summary = None
        if truth_labels is not None:
            from ..reports.evaluate import evaluate_run

            summary = evaluate_run(data, result, truth_labels, params.get("gold"))
        plan = None if relabel is None else relabel_plan(result, budget, seed=seed, quiet=quiet, engine=fit_engine)
        # 4. Render everything, then write all or nothing.
        renderers = _renderers(result, proba, headers, planned["--output"], fit_engine)
        if plan is not None:
            renderers["--relabel"] = _relabel_renderer(plan, result, budget)
        steps.render_and_commit(planned, renderers)
        if summary is not None:
            steps.report_evaluation(summary)


#: The leading fields of ``--numeric``'s output.
VALUE_FIELDS = ("task", "value")


def aggregate_numeric(input: list[str], method: str, refused: dict[str, Any], *, output: Optional[str],
                      fmt: Optional[str], workers: Optional[str], duplicates: str, blank_labels: str, rejected: str,
                      input_format: Optional[str], task_col: Optional[str], worker_col: Optional[str],
                      label_col: Optional[str], flags: dict[str, Any], param_: list[str], max_memory: Optional[str],
                      threads: Optional[str], quiet: bool) -> None:
    """``crowdagg aggregate --numeric``: the steps of :mod:`.pipeline` that numeric answers take -- the checks,
    the outputs planned, :func:`crowdagg.io.read.load_numeric`, the fit, every output written or none.

    ``refused``: the options of categorical answers, by spelling, and whether each was given (a usage error).
    """
    given = [spelt for spelt, value in refused.items() if value not in (None, False, [])]
    if given:
        raise UsageError(f"{' and '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to --numeric "
                         "(numeric answers: --workers, --duplicates, --blank-labels, --rejected, the column and "
                         "read options, -p)")
    require_values(output=output, format=fmt, workers=workers, input_format=input_format, max_memory=max_memory)
    spec, params = steps.check_method(method, flags, param_)
    steps.check_read_options(duplicates=duplicates, blank_labels=blank_labels, rejected=rejected,
                             max_memory=max_memory, classes=None)
    n_threads = steps.check_threads(threads)
    steps.check_stdin(input)
    cls = spec.load()
    planned_outputs = [steps.Output("--output", output or "-", VALUE_FIELDS, fmt=fmt)]
    if workers:
        planned_outputs.append(steps.Output("--workers", workers, ("worker", *cls.worker_param_names, "deviation",
                                                                    "n_answers")))
    planned, sources = steps.plan_outputs(planned_outputs, input)
    with use_threads(n_threads):
        data = steps.load_numeric(sources, input_format=input_format, task_col=task_col, worker_col=worker_col,
                                  label_col=label_col, duplicates=duplicates, max_memory=max_memory,
                                  rejected=rejected, blank_labels=blank_labels)
        steps.check_render_memory(data.n_tasks, 1, 1, f"{data.n_tasks:,} output rows", max_memory)
        if workers:
            steps.check_render_memory(data.n_workers, len(cls.worker_param_names) + 2, 1,
                                      f"--workers table of {data.n_workers:,} workers", max_memory)
        result = steps.fit(data, method, params, quiet=quiet, max_memory=max_memory,
                           summary=True)
        from ..io.render import render_chunks

        renderers = {
            "--output": lambda f: render_chunks(result.table(arrow=True), f, key="task"),
            "--workers": lambda f: render_chunks(result.workers_table(arrow=True), f, key="worker"),
        }
        steps.render_and_commit(planned, renderers)


def _outputs(output: Optional[str], fmt: Optional[str], workers: Optional[str], save_workers: Optional[str],
             task_params: Optional[str], headers: dict[str, tuple[str, ...]],
             relabel: Optional[str] = None) -> list[steps.Output]:
    """What this run writes: the labels (stdout unless -o), and --workers, --save-workers, --task-params,
    --relabel when asked."""
    from ..io.read import MODEL_FORMATS
    from ..reports.relabel import RELABEL_FIELDS

    planned = [steps.Output("--output", output or "-", TABLE_FIELDS, then=LABEL_THEN, fmt=fmt, directory=True)]
    if workers:
        planned.append(steps.Output("--workers", workers, headers["--workers"]))
    if save_workers:
        planned.append(steps.Output("--save-workers", save_workers, MODEL_FIELDS, then=".*", formats=MODEL_FORMATS))
    if task_params:
        planned.append(steps.Output("--task-params", task_params, headers["--task-params"]))
    if relabel:
        planned.append(steps.Output("--relabel", relabel, RELABEL_FIELDS))
    return planned


def check_budget(relabel: Optional[str], budget: Optional[int]) -> None:
    """``--budget`` counts the tasks ``--relabel`` writes: without it, or below 1, a usage error."""
    if budget is None:
        return
    if relabel is None:
        raise UsageError("--budget sets how many tasks --relabel writes; give --relabel FILE too")
    if budget < 1:
        raise UsageError(f"--budget must be at least 1 (the tasks --relabel writes), got {budget}")


def relabel_plan(result: Any, budget: Optional[int], *, seed: Optional[int], quiet: bool, engine: Any = None) -> Any:
    """Score the tasks for ``--relabel`` (:func:`crowdagg.reports.relabel.relabel_plan`, its worker draw seeded by
    ``--seed``, else 0) and say on stderr what the scores used (unless ``quiet``) and when ``--budget`` is over the
    task count (always: the file has fewer rows than asked)."""
    from ..core import timing
    from ..reports.relabel import relabel_plan as plan_for
    from .plumbing import err

    with timing.stage("relabel"):
        plan = plan_for(result, seed=0 if seed is None else seed, engine=engine)
    n = len(plan.score)
    if budget is not None and budget > n:
        err(f"--budget {budget:,} is more than the {n:,} tasks: --relabel writes all of them")
    if not quiet:
        model = (f"{result.method}'s confusion matrices" if plan.worker_model == "confusion" else
                 f"one-coin workers (accuracy = agreement with {result.method}'s posteriors; {result.method} has no "
                 "confusion matrices)")
        pool = (f"all {plan.n_workers:,} workers by answer share" if plan.n_pool == plan.n_workers else
                f"{plan.n_pool:,} of {plan.n_workers:,} workers drawn by answer share")
        err(f"--relabel: {min(budget or n, n):,} of {n:,} tasks by expected information gain of one more answer "
            f"under {model}, over {pool}")
    return plan


def header(method: Any, option: str) -> tuple[str, ...]:
    """The header ``--workers`` or ``--task-params`` will have, from what the method's class declares
    (``worker_param_names``, ``task_param_names``) by the result's own rule (:mod:`crowdagg.methods.result`)."""
    from ..methods.result import WORKERS_LONG, params_columns

    if option == "--task-params":
        return params_columns("task", method.task_param_names)
    names = method.worker_param_names
    return WORKERS_LONG if names is None else params_columns("worker", names)


def _relabel_renderer(plan: Any, result: Any, budget: Optional[int]) -> Any:
    """The renderer of ``--relabel``: the plan's top ``budget`` tasks
    (:meth:`~crowdagg.reports.relabel.RelabelPlan.table`)."""
    from ..io.render import render_chunks

    return lambda fmt: render_chunks(plan.table(result, budget), fmt, key="task")


def _check_output_memory(data: Any, *, proba: bool, headers: dict[str, tuple[str, ...]], max_memory: Any,
                         labels_here: bool = True, relabel: Optional[int] = None) -> None:
    """The outputs' size is known once the data is: refused before fitting, not after.  ``labels_here``: the
    labels are rendered in this process (not by the Dask workers, a partition each, for ``-o DIR/``)."""
    from ..methods.result import WORKERS_LONG

    k = data.n_classes
    if labels_here:
        steps.check_render_memory(
            data.n_tasks, 1 + (k + 1 if proba else 0), 2, f"{data.n_tasks:,} output rows × {k:,} classes", max_memory
        )
    workers = headers.get("--workers")
    if workers == WORKERS_LONG:  # a row per worker × class²
        steps.check_render_memory(
            data.n_workers * k * k, 3, 3,
            f"--workers table of {data.n_workers:,} workers × {k:,}² classes", max_memory,
        )
    elif workers is not None:  # a name and numbers per worker
        steps.check_render_memory(data.n_workers, len(workers) - 1, 1,
                                  f"--workers table of {data.n_workers:,} workers", max_memory)
    if "--task-params" in headers:
        steps.check_render_memory(data.n_tasks, len(headers["--task-params"]) - 1, 1,
                                  f"--task-params table of {data.n_tasks:,} tasks", max_memory)
    if relabel is not None:  # task, score, rank, label, confidence, n_answers
        steps.check_render_memory(relabel, 4, 2, f"--relabel table of {relabel:,} tasks", max_memory)


def _renderers(result: Any, proba: bool, headers: dict[str, tuple[str, ...]], output: steps.Planned,
               engine: Any) -> dict[str, Any]:
    """How each output of this command is rendered from the fit (only the planned ones are called); ``-o DIR/``:
    the parts, one per partition of ``engine`` (written on its workers), or one for the local engine (None)."""
    from ..io.render import render_chunks

    def labels(fmt: str) -> Any:
        if output.target.kind == "dir":
            from ..io.parts import filler

            return filler(result, fmt, output.target.gzip, proba=proba, engine=engine)
        return render_chunks(result.table(proba=proba, arrow=True), fmt, key="task")

    def model(fmt: str) -> bytes:
        from ..methods.model_file import to_json

        return to_json(result)

    return {
        "--output": labels,
        "--workers": params_renderer(result, "--workers", headers),
        "--task-params": params_renderer(result, "--task-params", headers),
        "--save-workers": model,
    }


def params_renderer(result: Any, option: str, headers: dict[str, tuple[str, ...]]) -> Any:
    """The renderer of ``--workers`` or ``--task-params`` (also ``crowdagg train``'s): the result's table, whose
    header must be the one declared before the fit (``headers``, to recognise an earlier run's file)."""
    from ..io.render import render_chunks

    if option == "--task-params":
        columns, cols, key = result.task_columns(), lambda: result.task_params_table(arrow=True), "task"
    else:
        columns, cols, key = result.worker_columns(), lambda: result.workers_table(arrow=True), "worker"
    if option in headers and columns != headers[option]:
        raise RuntimeError(f"method {result.method!r} declares the {option} columns {', '.join(headers[option])} "
                           f"but its result has {', '.join(columns)}")
    return lambda fmt: render_chunks(cols(), fmt, key=key)
