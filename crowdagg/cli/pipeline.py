"""The steps of a command that reads answers, fits a method and writes files.

``aggregate`` is these steps in order; ``train``, ``predict`` and
``workers`` take the ones they need instead of copying them:

1. :func:`check_method`, :func:`check_read_options`, :func:`check_threads` (the two together for the
   options a report command shares: :func:`check_fit_run`) -- everything that can be refused before
   reading a byte (a bad parameter never waits for a
   large input to load);
2. :func:`plan_outputs` -- where each output lands and in which format,
   refusing an output that is also an input (before and after the inputs
   are expanded), then the expanded inputs themselves;
3. :func:`read_labels` (``--truth``, ``--gold``), :func:`load` (the answers);
4. :func:`check_render_memory` -- the outputs' size is known once the data
   is: refused before fitting, not after; :func:`scan_spammers` and
   :func:`drop_spammers` -- the spammer criteria (the detector, the
   near-chance rule), and the answers without the workers they flag
   (``aggregate --drop-spammers``);
5. :func:`fit` -- the method, with the progress display and timings;
6. :func:`render_and_commit` -- every output rendered first, then all
   written or none (:func:`crowdagg.io.output.commit`).

Heavy modules (numpy, pandas, the methods) are imported inside the steps,
so importing this module (``crowdagg --help``) stays light.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, overload

from ..errors import UsageError
from .options import FitRun, Spelling, method_params, split_list
from .plumbing import err, progress

if TYPE_CHECKING:  # pragma: no cover
    from ..data.annotations import AnnotationSet
    from ..data.numeric import NumericAnswers
    from ..io.output import Target
    from ..io.read import Inputs
    from ..methods.numeric.base import NumericResult
    from ..methods.result import AggregationResult

#: The method whose fit the near-chance rule reads in ``aggregate --drop-spammers`` (``crowdagg workers``' default).
SPAMMER_METHOD = "ds"
#: ``(how messages name it, path)``: an input as the checks of stdin and of outputs name it.
Named = tuple[str, Optional[str]]


# --------------------------------------------------------------------------- 1. before reading
def check_method(
    method: str,
    flags: dict[str, Any],
    pairs: list[str],
    *,
    gold: Optional[str] = None,
    save_workers: Optional[str] = None,
    init_workers: Optional[str] = None,
    spelling: Optional[Spelling] = None,
) -> tuple[Any, dict[str, Any]]:
    """The method's declaration and its parameters, every one checked, before any input is read.

    The parameters are parsed from the declaration alone; then the method's
    class is imported (the run needs it) and checks them again as a whole
    (``init`` naming the method itself ...), so an unavailable method (a
    missing extra) fails here, before a large input is read.

    ``flags``: the common parameter flags (``{"seed": 3, "tol": None}``);
    ``pairs``: the ``-p name=value`` items.  ``--gold``, ``--save-workers``
    and ``--init-workers`` are refused for a method that does not declare them; ``spelling``: the
    command's own spelling of a parameter (:func:`~crowdagg.cli.options.flag`), for the refusals.
    """
    from ..methods.registry import get as get_spec

    spec = get_spec(method)
    params = method_params(spec, flags, pairs, spelling)
    if gold is not None and not spec.gold:
        raise UsageError(f"--gold does not apply to method {method!r}")
    for option, value in (("--save-workers", save_workers), ("--init-workers", init_workers)):
        if value is not None and not spec.init_workers:
            raise UsageError(f"{option} does not apply to method {method!r} (it learns no reusable worker model)")
    spec.load()(**params).check_params()  # every method parameter: before reading anything
    return spec, params


def check_read_options(
    *, duplicates: str, blank_labels: str, rejected: str, max_memory: Optional[str], classes: Optional[str]
) -> Optional[list[str]]:
    """The options of reading answers, checked before reading; returns ``--classes`` as a list."""
    from ..core import memory
    from ..data.annotations import DUPLICATE_POLICIES, check_blank_labels
    from ..io.platforms import check_rejected_policy

    if duplicates not in DUPLICATE_POLICIES:
        raise UsageError(f"--duplicates must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}")
    check_blank_labels(blank_labels)
    check_rejected_policy(rejected)
    memory.parse_size(max_memory)
    return split_list(classes)


def check_threads(value: Optional[str]) -> Optional[int]:
    """``--threads N`` checked, for :func:`crowdagg.core.threads.use_threads`; None without it (``$CROWDAGG_THREADS``
    checked here, before reading), so that the run keeps the policy's own defaults for what the user did not
    give: all cores for the kernels, torch's count by the size of its work (:mod:`crowdagg.core.threads`)."""
    from ..core import threads

    if value is None:
        threads.count()  # a bad $CROWDAGG_THREADS: a usage error now
        return None
    return threads.parse(value)


def check_fit_run(run: FitRun) -> tuple[Optional[list[str]], Optional[int]]:
    """A report command's shared options (:class:`~crowdagg.cli.options.FitRun`) checked before reading:
    :func:`check_read_options`, then :func:`check_threads`; returns ``--classes`` as a list and the thread
    count."""
    classes = check_read_options(duplicates=run.duplicates, blank_labels=run.blank_labels, rejected=run.rejected,
                                 max_memory=run.max_memory, classes=run.classes)
    return classes, check_threads(run.threads)


def check_engine(method: str, engine: str, scheduler: Optional[str], params: Mapping[str, Any], *,
                 input_format: Optional[str], duplicates: str) -> None:
    """``--engine``: the method and its parameters run on it, and the Dask engine's read options (before reading)."""
    from ..methods.api import check_engine as check_method_engine

    check_method_engine(method, engine, params)
    if engine != "dask":
        if scheduler is not None:
            raise UsageError("--scheduler applies to --engine dask only")
        return
    from ..engine.dask import require_distributed
    from ..io.dask_read import FORMATS

    require_distributed()
    if input_format is not None and input_format.lower() not in FORMATS:
        raise UsageError(f"--engine dask reads {', '.join(FORMATS)}, not --input-format {input_format}")
    if duplicates != "keep":
        raise UsageError(f"--engine dask keeps repeated answers (--duplicates keep), not --duplicates {duplicates}: "
                         "use the local engine")


def side_inputs(**paths: Optional[str]) -> list[Named]:
    """The files given to options (``truth=..., init_workers=...``) as the checks name them: ``--truth FILE``."""
    return [(f"--{option.replace('_', '-')} {path}", path) for option, path in paths.items() if path is not None]


def check_stdin(inputs: Sequence[str], side: Sequence[Named] = (), named: str = "INPUT") -> None:
    """Standard input is read once at most, by the inputs and the side inputs together (before any expansion).
    ``named``: how messages name the inputs (``INPUT``, the argument; ``--labels`` for train's option)."""
    from ..io.read import check_stdin_once

    check_stdin_once([(f"{named} {p}", p) for p in inputs] + list(side))


# --------------------------------------------------------------------------- 2. outputs and inputs
@dataclass(frozen=True)
class Output:
    """One file a command may write.

    ``writes`` and ``then``: its leading fields, by which an earlier run's
    output is recognised in a directory or pattern given as an input
    (:func:`crowdagg.io.output.resolve`).  ``fmt``: an explicit
    ``--format``; ``formats``: what it can be written as (default: the
    table formats).  ``directory``: a path ending in ``/`` or naming an
    existing directory is a directory of parts (:mod:`crowdagg.io.parts`),
    not refused.  ``key``: how :func:`plan_outputs` files it, where one
    option writes several files (``--plot DIR``'s figures); default the option.
    """

    option: str
    path: str
    writes: tuple[str, ...]
    then: str = ""
    fmt: Optional[str] = None
    formats: Optional[tuple[str, ...]] = None
    directory: bool = False
    key: str = ""


@dataclass(frozen=True)
class Planned:
    """An output resolved: where it lands, and its format."""

    target: Target
    fmt: str


def plan_outputs(
    outputs: Sequence[Output], inputs: Sequence[str], side: Sequence[Named] = (), named: str = "INPUT"
) -> tuple[dict[str, Planned], Inputs]:
    """Resolve every output (by option) and expand the inputs, refusing an output that is an input (``named``: how
    messages name the inputs, as :func:`check_stdin`).

    The order matters for which error a user sees first, and is kept: an
    output that is an input as named (before any expansion); then each
    output's format; then the inputs are expanded once, leaving this run's
    earlier outputs out of directories and patterns, and that same list is
    checked again -- by identity -- and is what is read.
    """
    from ..io.output import (
        check_binary,
        check_distinct,
        check_not_inputs,
        check_outside,
        is_directory_spec,
        resolve,
        resolve_directory,
    )
    from ..io.parts import check_part_format
    from ..io.read import check_stdin_once, expand_inputs, output_format
    from ..io.render import OUTPUT_FORMATS

    parts = [o.directory and is_directory_spec(o.path) for o in outputs]
    dirs = {i: resolve_directory(o.path, o.option, writes=o.writes, then=o.then)
            for i, (o, d) in enumerate(zip(outputs, parts)) if d}
    for o, d in zip(outputs, parts):  # a file not there yet, before it is resolved: its directory may be one to make
        for directory in dirs.values():
            if not d and not os.path.lexists(o.path):
                check_outside(directory, f"{o.option} {o.path}", o.path)
    targets = [dirs[i] if d else resolve(o.path, o.option, writes=o.writes, then=o.then)
               for i, (o, d) in enumerate(zip(outputs, parts))]
    check_distinct(targets)
    check_not_inputs(targets, [(f"{named} {p}", p) for p in inputs] + list(side))
    # A directory's format by the same rules as a file's, from its name without the slash (out.parquet/).
    formats = [output_format(o.fmt, (o.path.rstrip("/") or o.path) if d else o.path, o.option,
                             o.formats or OUTPUT_FORMATS) for o, d in zip(outputs, parts)]
    for o, d, fmt, target in zip(outputs, parts, formats, targets):
        if d:
            check_part_format(fmt, f"{o.option} {o.path}", target.gzip)
    for target, fmt in zip(targets, formats):
        check_binary(target, fmt)
    sources = expand_inputs(inputs, outputs=targets)
    read_as = [(f"{named} {f}" if f == g else f"{f}, from {named} {g}", f) for f, g in zip(sources, sources.given)]
    check_stdin_once(read_as + list(side))
    check_not_inputs(targets, read_as + list(side))
    return {o.key or o.option: Planned(t, f) for o, t, f in zip(outputs, targets, formats)}, sources


# --------------------------------------------------------------------------- 3. reading
def read_labels(
    path: str, task_col: Optional[str], label_col: Optional[str], *, option: str = "", what: str = "truth"
) -> dict[str, str]:
    """A ``task,label`` file: the one given to ``option`` (``--truth``, ``--gold``), or the command's own input.

    Its column overrides are spelled ``{option}-task-col`` and
    ``{option}-label-col`` (``--truth-task-col``; plain ``--task-col`` for
    the command's own input), which is how errors name them.
    """
    from ..io.read import read_task_labels

    prefix = f"{option}-" if option else "--"
    return read_task_labels(
        path, task_col=task_col, label_col=label_col, what=what,
        options={"task": f"{prefix}task-col", "label": f"{prefix}label-col"},
    )


def read_values(
    path: str, task_col: Optional[str], label_col: Optional[str], *, option: str = "", what: str = "truth"
) -> dict[str, float]:
    """A ``task,value`` file (``evaluate --numeric``): :func:`read_labels`' columns and spelling, each value a
    finite number (:func:`crowdagg.io.read.read_task_values`)."""
    from ..io.read import read_task_values

    prefix = f"{option}-" if option else "--"
    return read_task_values(
        path, task_col=task_col, label_col=label_col, what=what,
        options={"task": f"{prefix}task-col", "label": f"{prefix}label-col"},
    )


def read_predictions(path: str, task_col: Optional[str], label_col: Optional[str]) -> Any:
    """The command's own predictions file (``evaluate``): its labels with, where it has them, the ``p_<class>``
    posteriors and the ``confidence`` column (:func:`crowdagg.io.read.read_predictions`)."""
    from ..io.read import read_predictions as read

    return read(path, task_col=task_col, label_col=label_col, what="predicted",
                options={"task": "--task-col", "label": "--label-col"})


def read_worker_model(path: str, max_memory: Any) -> dict[str, Any]:
    """A worker model saved with ``--save-workers``."""
    from ..io.read import read_bytes
    from ..methods.model_file import from_json

    data, display = read_bytes(path, max_memory)
    return from_json(data, display, max_memory)


def load(sources: Inputs, **options: Any) -> AnnotationSet:
    """The answers (:func:`crowdagg.io.read.load_annotations` with the read options); sizes noted for the timings."""
    from ..core import timing
    from ..io.read import load_annotations
    from ..kernels import announce_compilation

    announce_compilation(sys.stderr)
    data = load_annotations(sources, **options)
    timing.note(answers=data.n_answers, tasks=data.n_tasks, workers=data.n_workers, classes=data.n_classes)
    return data


def load_numeric(sources: Inputs, **options: Any) -> NumericAnswers:
    """Numeric answers (:func:`crowdagg.io.read.load_numeric` with the read options); sizes noted for the timings."""
    from ..core import timing
    from ..io.read import load_numeric as read_numeric
    from ..kernels import announce_compilation

    announce_compilation(sys.stderr)
    data = read_numeric(sources, **options)
    timing.note(answers=data.n_answers, tasks=data.n_tasks, workers=data.n_workers)
    return data


@contextmanager
def engine_scope(engine: str, scheduler: Optional[str], n_threads: Optional[int]) -> Iterator[Any]:
    """The run's Dask client for ``--engine dask`` (a local cluster of ``n_threads`` worker processes, else of the
    thread policy's count, closed on exit, unless ``--scheduler``); None for the local engine."""
    if engine != "dask":
        yield None
        return
    from ..engine.dask import connect

    with connect(scheduler, n_threads) as client:
        yield client


def load_on(client: Any, sources: Inputs, **options: Any) -> tuple[AnnotationSet, Any]:
    """The answers and the engine that fits them: :func:`load` and the local engine (None) without a Dask
    client; with one, the files read on its cluster (:func:`crowdagg.io.dask_read.read_distributed`)."""
    if client is None:
        return load(sources, **options), None
    from ..core import timing
    from ..io.dask_read import read_distributed

    with timing.stage("read"):
        data, engine = read_distributed(sources, client, **options)
    timing.note(answers=data.n_answers, tasks=data.n_tasks, workers=data.n_workers, classes=data.n_classes,
                partitions=len(engine.parts), blocks=engine.n_blocks)
    return data, engine


# --------------------------------------------------------------------------- 4.-6. fit and write
def check_render_memory(n_rows: int, n_float: int, n_text: int, what: str, max_memory: Any) -> None:
    """Refuse an output table whose text would not fit in memory (``n_float``/``n_text`` columns of ``n_rows``)."""
    from ..core.memory import check
    from ..io.render import estimate_text_bytes

    check(estimate_text_bytes(n_rows, n_float, n_text), what, max_memory, advice="leave out --proba or --workers")


def scan_spammers(data: AnnotationSet, engine: Any, result: Optional[AggregationResult], *, method: str,
                  seed: Optional[int], max_memory: Any, quiet: bool, chance: bool = True, detector: str = "auto",
                  **options: Any) -> tuple[Any, Any]:
    """Both spammer criteria on ``data``: the cross-covariance detector
    (:func:`crowdagg.reports.spammers.detect_spammers`, seeded by ``--seed``, else 0; ``options``: its
    ``min_partners``, ``min_shared``) and, with ``chance``, the near-chance rule on ``result`` (``method``'s fit,
    :func:`crowdagg.reports.workers.spammer_flags`), which also withdraws the detector's flags of workers it shows
    above chance; ``result`` None: the detector alone.

    ``detector`` (``--detector``): ``auto`` runs the detector unless its fit's cost bound is over
    :data:`~crowdagg.reports.spammers.MAX_FIT_COST` (a note says so and how to force it), ``always`` runs it
    whatever the cost, ``never`` leaves it out (scan None).  Its iterations are shown on a terminal (unless
    ``quiet``).  stderr says how many workers each criterion flagged, the withdrawals, the detector's skipped and
    its split (unless ``quiet``).  Returns ``(scan, flags)``: ``crowdagg workers`` and ``aggregate
    --drop-spammers`` both decide here."""
    from ..core import timing
    from ..reports.spammers import FIT_MAX_ITER, MAX_FIT_COST, detect_spammers
    from ..reports.workers import ABOVE_CHANCE_FDR, spammer_flags

    check_detector(detector)
    scan = None
    n = data.n_workers
    with timing.stage("spammers"):
        if detector != "never":
            callback, stop = progress(quiet, total=FIT_MAX_ITER, what="spammer-detector iteration",
                                      measure="change")
            try:
                scan = detect_spammers(data, engine=engine, seed=0 if seed is None else seed, max_memory=max_memory,
                                       max_cost=MAX_FIT_COST if detector == "auto" else None, callback=callback,
                                       **options)
            finally:
                stop()
        flags = spammer_flags(data, result, scan, chance=chance)
    if scan is not None and scan.over_budget:
        err(f"Note: spammer detector {scan.why}: skipped, every worker with it (--detector always runs it; "
            f"--detector never leaves it out without this note)")
    elif scan is not None:
        err(f"spammer detector: {int(scan.flagged.sum()):,} of {n:,} workers flagged as spammers, "
            f"{int(scan.skipped.sum()):,} skipped (too few co-labelled partners to judge)")
        if not quiet and scan.why:
            err(f"spammer detector: {scan.why}")
        if flags.withdrawn is not None and flags.withdrawn.any():
            err(f"spammer detector: {int(flags.withdrawn.sum()):,} of its flags withdrawn: the {method} fit shows "
                f"those workers right more often than chance (Benjamini-Hochberg at {ABOVE_CHANCE_FDR:g})")
    if flags.chance is not None:
        both = int((flags.covariance & flags.chance).sum())
        err(f"near-chance rule ({method}): {int(flags.chance.sum()):,} of {n:,} workers flagged ({both:,} also by "
            f"the detector); {int(flags.flagged.sum()):,} spammers in all")
    elif result is not None and chance:
        alone = "nothing flags (--detector never)" if detector == "never" else "the detector alone flags"
        err(f"near-chance rule: method {method!r} estimates no worker accuracy; {alone}")
    return scan, flags


#: ``--detector``'s values (:func:`scan_spammers`).
DETECTOR_CHOICES = ("auto", "always", "never")


def check_detector(detector: str) -> None:
    """``--detector`` is one of :data:`DETECTOR_CHOICES` (checked before any input is read)."""
    if detector not in DETECTOR_CHOICES:
        raise UsageError(f"--detector must be one of {', '.join(DETECTOR_CHOICES)}, got {detector!r}")


def flag_summary(flags: Any) -> str:
    """One line of what the spammer criteria decided: ``164 workers, 164 judged, 16 flagged (11 by covariance,
    1 by chance, 4 by both); 42 covariance flags withdrawn (accuracy above chance)``."""
    by = flags.flagged_by
    n = len(by)
    counts = {name: int((by == name).sum()) for name in ("covariance", "chance", "both")}
    line = (f"{n:,} workers, {int(flags.judged.sum()):,} judged, {int(flags.flagged.sum()):,} flagged as spammers ("
            + ", ".join(f"{c:,} by {name}" for name, c in counts.items()) + ")")
    if flags.withdrawn is not None and flags.withdrawn.any():
        line += f"; {int(flags.withdrawn.sum()):,} covariance flags withdrawn (accuracy above chance)"
    return line


def read_worker_ids(path: str, max_memory: Any = None) -> set[str]:
    """``--exclude-workers FILE``'s ids, one a line (surrounding blanks and blank lines ignored; no header), read
    before the answers so that a bad FILE fails fast.  FILE is read as an input is
    (:func:`~crowdagg.io.read.read_bytes`: gzip, its size against ``max_memory``;
    :func:`~crowdagg.io.read.to_utf8`: a BOM, UTF-16, a binary file and the line of a byte that is not UTF-8)."""
    from ..errors import DataError, ResourceError
    from ..io.read import read_bytes, to_utf8

    try:
        raw, display = read_bytes(path, max_memory)
        text = to_utf8(raw, display).decode("utf-8")
    except ResourceError:  # "this needs ~N (reading ... from FILE)": already says which file
        raise
    except DataError as exc:  # the reader's message starts with the path: say which option's file it is
        raise DataError(f"--exclude-workers {exc}") from None
    return {line.strip() for line in text.splitlines()} - {""}


def exclude_workers(data: AnnotationSet, path: str, wanted: set[str]) -> AnnotationSet:
    """``--exclude-workers FILE``: ``data`` without the answers of the workers ``wanted`` names (``path``'s ids,
    :func:`read_worker_ids`).  Every task stays (:meth:`~crowdagg.data.annotations.AnnotationSet.without_workers`);
    stderr counts the workers and answers removed, and the ids of FILE that name no worker of the data (the first
    few named)."""
    import numpy as np

    from ..errors import DataError

    names = [str(w) for w in data.worker_names.tolist()]
    index = {name: i for i, name in enumerate(names)}
    unknown = sorted(wanted - index.keys())
    mask = np.zeros(data.n_workers, dtype=bool)
    mask[[index[w] for w in wanted if w in index]] = True
    kept = data.without_workers(mask)
    if unknown:
        shown = ", ".join(repr(w) for w in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
        err(f"--exclude-workers: {len(unknown):,} of the {len(wanted):,} ids in {path} name no worker of the input "
            f"({shown})")
    if kept.n_answers == 0:
        raise DataError(f"--exclude-workers {path}: every worker with answers is excluded; no answers are left to "
                        "aggregate")
    err(f"--exclude-workers: removed {int(mask.sum()):,} of {data.n_workers:,} workers and their "
        f"{data.n_answers - kept.n_answers:,} of {data.n_answers:,} answers; every task keeps its row")
    return kept


def drop_spammers(data: AnnotationSet, *, seed: Optional[int], max_memory: Any, quiet: bool,
                  chance: bool = True, detector: str = "auto", **options: Any) -> AnnotationSet:
    """``--drop-spammers``: ``data`` without the answers of the workers ``crowdagg workers`` flags with its default
    method (:data:`SPAMMER_METHOD`): ds is fitted first (default parameters, ``--seed``) for the near-chance rule
    (with ``chance``) and the check of the detector's flags (:func:`scan_spammers`; ``options``: the detector's
    ``min_partners``, ``min_shared``), and the union of both criteria is removed
    (:meth:`~crowdagg.data.annotations.AnnotationSet.without_workers`: every task stays); the workers and answers
    removed said on stderr."""
    from ..engine import LocalEngine
    from ..errors import DataError

    params = {} if seed is None else {"seed": seed}
    result = fit(data, SPAMMER_METHOD, params, quiet=quiet, max_memory=max_memory)
    _, flags = scan_spammers(data, LocalEngine(data), result, method=SPAMMER_METHOD, seed=seed,
                             max_memory=max_memory, quiet=quiet, chance=chance, detector=detector, **options)
    err(f"spammers: {flag_summary(flags)}")
    kept = data.without_workers(flags.flagged)
    if kept.n_answers == 0:
        raise DataError("--drop-spammers: every worker was flagged; no answers are left to aggregate")
    err(f"--drop-spammers: removed {data.n_workers - kept.n_workers:,} of {data.n_workers:,} workers and their "
        f"{data.n_answers - kept.n_answers:,} of {data.n_answers:,} answers")
    return kept


@overload
def fit(data: NumericAnswers, method: str, params: dict[str, Any], *, quiet: bool, max_memory: Any,
        engine: Any = None, summary: bool = False) -> NumericResult: ...


@overload
def fit(data: AnnotationSet, method: str, params: dict[str, Any], *, quiet: bool, max_memory: Any,
        engine: Any = None, summary: bool = False) -> AggregationResult: ...


def fit(data: AnnotationSet | NumericAnswers, method: str, params: dict[str, Any], *, quiet: bool, max_memory: Any,
        engine: Any = None, summary: bool = False) -> AggregationResult | NumericResult:
    """Fit ``method`` on ``data`` (the progress display on a terminal unless ``quiet``) on ``engine`` (default:
    the local engine); with ``summary``, one line after it on a terminal (:func:`fit_summary`).  Numeric answers
    take a numeric method (:func:`crowdagg.methods.api.aggregate`'s ``numeric``)."""
    import time

    from ..core import timing
    from ..methods.api import aggregate as run_method

    callback, stop = progress(quiet)
    began = time.perf_counter()
    try:
        with timing.stage("fit"):
            result = run_method(data, method, callback=callback, max_memory=max_memory, engine=engine, **params)
    finally:
        stop()
    timing.note(iterations=result.n_iter, converged=result.converged)
    if summary and not quiet and sys.stderr is not None and sys.stderr.isatty():
        # (the progress display's place: a terminal only, so a pipe's or a log's stderr keeps warnings and errors)
        err(fit_summary(result, time.perf_counter() - began))
    return result


def fit_summary(result: AggregationResult | NumericResult, seconds: float) -> str:
    """``ds: 23 iterations, converged, 0.41 s`` -- a method without iterations (mv) gives its time alone."""
    steps = ""
    if result.n_iter:
        steps = (f"{result.n_iter:,} iteration{'s' if result.n_iter != 1 else ''}, "
                 f"{'converged' if result.converged else 'not converged'}, ")
    return f"{result.method}: {steps}{seconds:.2f} s"


def render_and_commit(planned: Mapping[str, Planned], render: Mapping[str, Callable[[str], Any]]) -> None:
    """Render each planned output (``render[option](fmt)``: its bytes, or its pieces as they are rendered,
    :func:`crowdagg.io.render.render_chunks`, or for a directory the function that fills it,
    :func:`crowdagg.io.parts.filler`) and write all of them or none (:func:`crowdagg.io.output.commit`).

    Pieces are rendered as they are written, so an output is never held
    whole; the time spent rendering them is the stage ``render``, the rest
    ``write``.
    """
    import time

    from ..core import timing
    from ..io.output import commit

    spent = [0.0]

    def timed(pieces: Any) -> Any:
        if callable(pieces):  # a directory's parts, written by whoever the filler sends them to
            return pieces
        return _timed(pieces)

    def _timed(pieces: Any) -> Any:
        if isinstance(pieces, (bytes, bytearray, memoryview)):
            yield pieces
            return
        it = iter(pieces)
        while True:
            t = time.perf_counter()
            piece = next(it, None)
            spent[0] += time.perf_counter() - t
            if piece is None:
                return
            yield piece

    with timing.stage("render"):  # the checks and whatever is rendered whole
        outputs = [(p.target, render[option](p.fmt)) for option, p in planned.items()]
    t1 = time.perf_counter()
    commit([(target, timed(data)) for target, data in outputs])
    timing.record("render", spent[0])
    timing.record("write", time.perf_counter() - t1 - spent[0])


def report_evaluation(summary: Any) -> None:
    """An evaluation against ``--truth`` on stderr: a table on a terminal, else one line."""
    from ..reports.evaluate import print_table, summary_line

    ev, note = summary
    if sys.stderr is not None and sys.stderr.isatty():
        print_table(ev, sys.stderr)
        if note:
            err(note.strip(", "))
    else:
        err(summary_line(ev, note))
