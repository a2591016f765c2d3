"""``crowdagg workers``: the annotator report -- one row per worker (+ the pair table, the figures)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

import typer

from ..core.threads import use_threads
from ..errors import UsageError
from . import options as opt
from . import pipeline as steps
from .options import require_values
from .plumbing import err, handle_errors

HELP = """Report on each annotator: who is good, who is a spammer, who agrees with whom.

One row per worker, in input order (--sort COLUMN, -COLUMN descending):
worker, answers, the method's estimated accuracy, accuracy_low and
accuracy_high (a 95% Wilson interval on the share of its answers right,
each counted with its task's posterior by the other workers' answers;
empty for a method whose posterior is not a product over the answers,
such as mv, iwmv or ds-clust, with a note),
chance_accuracy (the share a
spammer with its answer frequencies would get right), recall_<class> (its confusion's diagonal), worst_class
and worst_recall, capacity (bits of the estimated confusion as a channel: 0
for a spammer), raykar_yu (Raykar-Yu spammer score: 0 when the answer
ignores the truth), agreement (share of its answers equal to the method's
label), spam_score (the cross-covariance spammer detector, run on the
answers alone; empty where it had too few co-labels to judge),
chance_bound (bits an answer carries at most, by the method's accuracy
and the worker's answers), spammer (flagged by the detector or by the
near-chance rule, chance_bound under 0.06 bits; empty where neither
flagged and the detector skipped) and flagged_by (covariance, chance,
both or empty).  A detector's flag is withdrawn where the fit shows the
worker right more often than chance_accuracy (one-sided score test,
Benjamini-Hochberg at 10% over its flags): a light worker's covariances
look like a spammer's for want of data, not for want of skill.  With --gold,
gold_answers and gold_accuracy too.  A method
without a confusion matrix per worker (glad, ds-clust) leaves recall_*,
worst_*, capacity and raykar_yu empty; one without a worker accuracy (glad, kos) leaves
chance_bound empty and the detector alone flags.  aggregate
--drop-spammers removes the workers this command flags with -m ds.

A table on a terminal (80 columns: the interval, the verdict; every
column in the CSV); CSV (or --format) when piped or with -o.  stderr says
how many workers each criterion flagged, how many the detector skipped
and which flags it withdrew, then one summary line.  With many classes the
detector's fit (pairs x classes^3) is skipped above a budget, with a note
(--detector always forces it).

\b
Examples:
  crowdagg workers labels.csv
  crowdagg workers labels.csv -m ds --gold gold.csv -o workers.csv --pairs pairs.csv --plot figures/
  crowdagg workers labels.csv -f jsonl | jq -c 'select(.spammer) | {worker, answers, accuracy}'
"""

#: The figures ``--plot DIR`` writes: key -> file name.
FIGURES = {"--plot confusions": "confusions.png", "--plot accuracy": "answers_accuracy.png"}


@handle_errors({**opt.DETECTOR_SPELLING, **opt.SMOOTHING_BY_P})
@opt.fit_run_options
def workers(
    input: list[str] = typer.Argument(..., metavar="INPUT...", help="Answers file(s) (CSV/TSV/JSON/JSONL/Parquet, optionally .gz; MTurk, Toloka, Label Studio exports), - for stdin, a directory, or a quoted glob; several are read as one data set."),
    method: str = opt.METHOD,
    output: Optional[str] = opt.output_option("Write the report here instead of standard output (format from the extension)."),
    fmt: Optional[str] = opt.format_option("csv, tsv, jsonl, json or parquet (default: a table on a terminal, else csv; -o: from its extension)."),
    gold: Optional[str] = typer.Option(None, "--gold", help="Known labels (task,label): add each worker's answers on these tasks (gold_answers) and the share that is right (gold_accuracy), as crowdsourcing platforms score workers.  They score; the fit does not use them."),
    gold_task_col: Optional[str] = opt.GOLD_TASK_COL,
    gold_label_col: Optional[str] = opt.GOLD_LABEL_COL,
    pairs: Optional[str] = typer.Option(None, "--pairs", help="Write the worker x worker agreement table here: one row per pair of workers sharing a task (worker_a, worker_b, shared_tasks, agreement, chance_agreement, kappa); copying or colluding pairs stand out with kappa near 1."),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="DIR", help="Write figures into DIR (made if missing): confusions.png, the estimated confusion matrices of the 16 most active workers, and answers_accuracy.png, answers against estimated accuracy with spammers marked.  Needs pip install 'crowdagg[plot]'."),
    min_partners: int = opt.MIN_PARTNERS,
    near_chance: bool = opt.NEAR_CHANCE,
    min_shared: int = opt.MIN_SHARED,
    detector: str = opt.DETECTOR,
    sort: Optional[str] = typer.Option(None, "--sort", metavar="COLUMN", help="Order the rows by COLUMN (one of the report's columns, e.g. accuracy, answers, spam_score), ascending; -COLUMN (or --sort=-COLUMN) descending.  Missing cells last; ties keep the input order.  Default: the input order."),
    *,
    run: opt.FitRun,
) -> None:
    """The annotator report (the help text: :data:`HELP`)."""
    # 1. Everything that can be checked without reading the data.
    for path in input:
        require_values(input=path)
    require_values(output=output, format=fmt, gold=gold, pairs=pairs, plot=plot, **run.texts())
    side = steps.side_inputs(gold=gold)
    steps.check_stdin(input, side)
    spec, params = steps.check_method(method, run.flags(), run.param_, spelling=opt.SMOOTHING_BY_P)
    if spec.kind == "numeric":  # (aggregate's --numeric; this report's columns are a categorical model's)
        raise UsageError(f"method {method!r} aggregates numeric answers: `crowdagg aggregate --numeric -m {method} "
                         "--workers FILE` writes its workers' weights; `crowdagg workers` reports categorical methods")
    class_list, n_threads = steps.check_fit_run(run)
    steps.check_detector(detector)
    if sort is not None:
        from ..reports.workers import check_sort

        check_sort(sort, None, gold is not None)  # the fixed columns now; recall_<class> once the classes are read
    with _plot_dir(plot):  # made when missing (figures are planned like any output); removed if the run fails
        own = spec.load().worker_param_names  # None: the method's worker model is (or implies) a confusion
        confusion = own is None
        planned, sources = steps.plan_outputs(_outputs(output, fmt, pairs, plot, confusion), input, side)
        on_terminal = output is None and fmt is None and planned["--output"].target.is_terminal()
        if on_terminal:
            del planned["--output"]
        with use_threads(n_threads):
            # 2. Gold, the data, the fit, the detector.
            gold_labels = steps.read_labels(gold, gold_task_col, gold_label_col, option="--gold", what="gold") \
                if gold is not None else None
            data = steps.load(sources, **run.reading(class_list))
            from ..engine import LocalEngine
            from ..reports.workers import (
                check_sort,
                method_columns,
                pair_agreement,
                report_columns,
                sort_report,
                worker_report,
            )

            n_columns = len(report_columns(data.classes, gold is not None, method_columns(own)))
            steps.check_render_memory(data.n_workers, n_columns, 2, f"a report of {data.n_workers:,} workers",
                                      run.max_memory)
            result = steps.fit(data, method, params, quiet=run.quiet, max_memory=run.max_memory)
            engine = LocalEngine(data)
            if sort is not None:
                check_sort(sort, data.classes, gold is not None)
            scan, flags = steps.scan_spammers(data, engine, result, method=method, seed=run.seed,
                                              max_memory=run.max_memory, quiet=run.quiet, chance=near_chance,
                                              detector=detector, min_partners=min_partners, min_shared=min_shared)
            if not result.has_confusion:
                _say_no_confusion(method, plot is not None)
            _say_no_interval(result)
            # 3. The report, the pairs, the figures: all rendered, then all written or none.
            from ..core import timing

            with timing.stage("report"):
                report = worker_report(data, result, scan=scan, chance=near_chance, gold=gold_labels, engine=engine)
                shown = report if sort is None else sort_report(report, sort)  # the figures index the input order
            with timing.stage("pairs"):
                pair_table = pair_agreement(data, engine, max_memory=run.max_memory) if pairs is not None else None
            if pair_table is not None:
                steps.check_render_memory(len(pair_table), 4, 2, f"--pairs table of {len(pair_table):,} worker pairs",
                                          run.max_memory)
            steps.render_and_commit(planned, _renderers(report, shown, pair_table, result, data.classes))
            err(f"workers: {steps.flag_summary(flags)}")
        if on_terminal:
            from ..reports.workers import print_table

            print_table(shown, sys.stdout, caption="recall per class, capacity and every digit: --format csv, or -o FILE")


@contextmanager
def _plot_dir(path: Optional[str]) -> Iterator[None]:
    """``--plot DIR``, before reading: matplotlib installed, DIR a directory -- made when missing, so that its
    figures are planned like any output, and removed again (with the parents this made, while empty) when the
    run fails."""
    if path is None:
        yield
        return
    from ..errors import UsageError, os_reason
    from ..reports.plot import require

    require()
    if path == "-" or (os.path.lexists(path) and not os.path.isdir(path)):
        raise UsageError(f"--plot {path}: not a directory (--plot writes its figures into a directory)")
    made = []
    here = os.path.abspath(path)
    while not os.path.lexists(here):
        made.append(here)
        here = os.path.dirname(here)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--plot {path}: cannot make the directory: {os_reason(exc)}") from None
    try:
        yield
    except BaseException:
        for directory in made:  # deepest first; one that holds something stays, and so do its parents
            try:
                os.rmdir(directory)
            except OSError:
                break
        raise


def _say_no_confusion(method: str, plot: bool) -> None:
    """A note on stderr: this method estimates no confusion matrices, so its report leaves those columns empty
    (and ``--plot`` draws no confusions.png)."""
    from ..methods.api import get_method
    from ..methods.registry import METHODS
    from ..reports.workers import CONFUSION_COLUMNS

    having = ", ".join(n for n in METHODS if getattr(get_method(n), "worker_param_names", ()) is None)
    figure = f"; --plot draws no {FIGURES['--plot confusions']}" if plot else ""
    # ds-clust does estimate confusions, one per cluster of workers: say so, or "none" reads as a wrong claim.
    shared = (" (its workers share their cluster's confusion: aggregate --workers names each one's cluster)"
              if getattr(get_method(method), "worker_form", None) == "clusters" else "")
    err(f"Note: method {method!r} estimates no confusion matrices per worker{shared}: {CONFUSION_COLUMNS} are left "
        f"empty{figure} (methods that estimate them: {having})")


def _say_no_interval(result: Any) -> None:
    """A note on stderr where the report leaves the accuracy interval empty: ``result``'s posterior is not a
    product over the answers (:func:`~crowdagg.reports.workers.posterior_form`), so no leave-one-out posterior
    judges a worker by the others."""
    from ..methods.api import get_method
    from ..methods.base import PRODUCT
    from ..methods.registry import METHODS
    from ..reports.workers import INTERVAL_COLUMNS, posterior_form

    if posterior_form(result) == PRODUCT:
        return
    having = ", ".join(n for n in METHODS if getattr(get_method(n), "posterior_form", "") == PRODUCT
                       and getattr(get_method(n), "worker_param_names", ()) is None)
    err(f"Note: method {result.method!r} gives no posterior without a worker's answers (its posteriors are not a "
        f"product of per-worker confusions): {INTERVAL_COLUMNS} are left empty (methods that give them: {having})")


def _outputs(output: Optional[str], fmt: Optional[str], pairs: Optional[str], plot: Optional[str],
             confusion: bool) -> list[steps.Output]:
    """The report (stdout unless -o), and --pairs and --plot's figures when asked (the confusion matrices' for
    a method that has them)."""
    from ..reports.workers import LEADING, PAIR_COLUMNS

    planned = [steps.Output("--output", output or "-", LEADING, then=".*", fmt=fmt)]
    if pairs:
        planned.append(steps.Output("--pairs", pairs, PAIR_COLUMNS))
    if plot:
        for key, name in FIGURES.items():
            if key == "--plot confusions" and not confusion:
                continue
            planned.append(steps.Output("--plot", os.path.join(plot, name), (), fmt="png", formats=("png",), key=key))
    return planned


def _renderers(report: Any, shown: Any, pair_table: Any, result: Any, classes: tuple[str, ...]) -> dict[str, Any]:
    """How each output is rendered (only the planned ones are called): ``shown``, the report in --sort's order, as
    the table; ``report``, in the input order, for the figures."""
    from ..io.render import render_chunks
    from ..reports import plot
    from ..reports.workers import table_columns

    return {
        "--output": lambda fmt: render_chunks(table_columns(shown), fmt, key="worker"),
        "--pairs": lambda fmt: render_chunks(table_columns(pair_table), fmt, key="worker_a"),
        "--plot confusions": lambda fmt: plot.confusion_grid(report, result.confusion, classes),
        "--plot accuracy": lambda fmt: plot.answers_vs_accuracy(report, len(classes)),
    }
