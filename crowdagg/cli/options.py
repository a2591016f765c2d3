"""Options and option checks shared by the commands, each defined once.

A command's signature takes its options from here (``verbose: bool =
options.VERBOSE``), so a flag is spelled, typed and documented the same on
every command that has it; where the help must say something about the
command (``--format``'s default), a small factory takes that text.  The
method options (``--method``, ``--seed``, ``-p NAME=VALUE`` ...) and their
help come from the declarations in :mod:`crowdagg.methods.registry`, which
is standard library only: building these options imports no method code,
so ``crowdagg --help`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import typer

from ..errors import UsageError

#: How a command spells a library parameter where that differs from the default (``n_tasks`` -> ``--tasks``).
Spelling = Mapping[str, str]

#: Method parameters that have a flag of their own; the others are set with ``-p name=value``.
PARAM_FLAGS = ("seed", "max_iter", "tol", "smoothing")


# --------------------------------------------------------------------------- parameter names as flags
def flag(name: str, spelling: Spelling | None = None) -> str:
    """The CLI spelling of a library parameter: ``max_iter`` -> ``--max-iter``, ``n_init`` -> ``-p n_init``."""
    if spelling and name in spelling:
        return spelling[name]
    if name not in PARAM_FLAGS:
        from ..methods.registry import METHODS

        if any(name in m.param_names for m in METHODS.values()):
            return f"-p {name}"
    return "--" + name.replace("_", "-")


def method_params(spec: Any, flags: dict[str, Any], pairs: list[str], spelling: Spelling | None = None) -> dict[str, Any]:
    """The method's parameters from the common flags and ``-p name=value`` (checked against its declaration).

    ``spelling``: how this command spells a parameter where that differs from
    :func:`flag` (``crowdagg train``: ``dropout`` -> ``-p dropout``), so that
    a refusal lists the options and the ``-p`` parameters as what they are.
    """
    params: dict[str, Any] = {}
    for key, value in flags.items():
        if value is not None:
            if key not in spec.param_names:
                raise UsageError(f"{flag(key, spelling)} does not apply to method {spec.name!r}; "
                                 + takes(spec.param_names, spelling))
            params[key] = value
    for item in pairs:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise UsageError(f"-p/--param wants name=value, got {item!r}")
        if name not in spec.param_names:
            raise UsageError(f"method {spec.name!r} does not take -p {name}; " + takes(spec.param_names, spelling))
        declared = spec.param(name)
        if name in params:
            how = f"{flag(name, spelling)} and -p {name}=" if flags.get(name) is not None else f"-p {name}= twice"
            raise UsageError(f"{name} is given twice ({how})")
        params[name] = declared.parse(text)
    return params


def takes(names: Sequence[str], spelling: Spelling | None = None) -> str:
    """What a method takes, as a command spells it: its options, then its ``-p`` parameters apart
    (``it takes: --seed, --max-iter; and -p NAME=VALUE for: n_init, init``)."""
    spelled = [flag(n, spelling) for n in names]
    options = [s for s in spelled if not s.startswith("-p ")]
    by_p = [s[3:] for s in spelled if s.startswith("-p ")]
    text = "it takes: " + (", ".join(options) if options else "no options")
    return text + (f"; and -p NAME=VALUE for: {', '.join(by_p)}" if by_p else "")


# --------------------------------------------------------------------------- value checks
def require_values(**given: Optional[str]) -> None:
    """An option given as an empty string is a usage error, not the default in disguise."""
    for name, value in given.items():
        if value is not None and value.strip() == "":
            spelled = name.upper() if name in ("input", "predictions") else flag(name)
            raise UsageError(f"{spelled} is empty; give a path or value (- means standard input/output)")


def split_list(value: Optional[str]) -> Optional[list[str]]:
    """``--classes a,b,c`` as a list; an empty entry is a usage error."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",")]
    if not all(items):
        raise UsageError(f"--classes has an empty entry: {value!r}")
    return items


# --------------------------------------------------------------------------- help from the registry
# Per-method text in the help comes from the declarations in crowdagg.methods.registry (standard library
# only, so `crowdagg --help` stays light): adding a method or changing a default never edits the CLI.
def method_list(declared: Mapping[str, Any] | None = None, heading: str = "Methods") -> str:
    """The method list of ``aggregate --help`` (``declared``: the registry's :data:`~crowdagg.methods.registry.METHODS`
    by default) or of ``train --help`` (:data:`~crowdagg.methods.registry.TRAINERS`, ``heading="Trainers"``):
    each declared method's name and summary, a method a line and its summary wrapped under it (declarations only:
    no method code, no torch)."""
    import textwrap

    from ..methods.registry import METHODS

    methods = METHODS if declared is None else declared
    width = max(map(len, methods))
    lines = [f"{heading} (`crowdagg methods NAME` shows one in full):"]
    for name, m in methods.items():
        lines += textwrap.wrap(m.summary, 76, initial_indent=f"  {name:<{width}}  ", subsequent_indent=" " * (width + 4))
    return "\b\n" + "\n".join(lines)  # "\b": Click keeps these lines as they are (one method per line)


def methods_that(has: Callable[[Any], bool]) -> str:
    """``ds, onecoin``: the registered methods with a property, in registry order."""
    from ..methods.registry import METHODS

    return ", ".join(name for name, m in METHODS.items() if has(m))


def param_list() -> str:
    """The ``-p`` parameters (those without a flag of their own), each with its methods, kind and range.

    ``n_init (ds, onecoin: int, 1 .. 1000), init (ds, onecoin: method, soft-vote, hard-vote or a method)``;
    methods that declare a name alike share one entry.
    """
    from ..methods.registry import METHODS

    groups: dict[tuple[str, str], list[str]] = {}
    for method_name, m in METHODS.items():
        for p in m.params:
            if p.name not in PARAM_FLAGS:
                bounds = p.describe_range()
                groups.setdefault((p.name, p.kind_name + (f", {bounds}" if bounds else "")), []).append(method_name)
    return ", ".join(f"{name} ({', '.join(names)}: {what})" for (name, what), names in groups.items())


def defaults(name: str, with_help: bool = False) -> str:
    """The declared default of parameter ``name`` per method: ``ds, onecoin: 200; wmv: 50``.

    Methods with the same default share one entry; ``with_help`` adds each
    method's own help for the parameter (where they differ in meaning).
    """
    from ..methods.registry import METHODS

    groups: dict[str, list[str]] = {}
    for method_name, m in METHODS.items():
        if name in m.param_names:
            p = m.param(name)
            value = f"{p.default:g}" if isinstance(p.default, float) else repr(p.default)
            key = f"{p.help}, default {value}" if with_help else value
            groups.setdefault(key, []).append(method_name)
    categorical = {n for n, m in METHODS.items() if m.kind == "categorical"}
    if len(groups) == 1 and set(next(iter(groups.values()))) >= categorical:
        return f"default {next(iter(groups))}"  # every categorical method (the numeric ones draw nothing): no list
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in groups.items())


# --------------------------------------------------------------------------- every command
VERBOSE = typer.Option(False, "--verbose", "-v", help="Show tracebacks on error.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress display.")
ENGINE = typer.Option(
    "local", "--engine", metavar="ENGINE",
    help="Where the fit runs: local (this process) or dask (the files read and fitted on a Dask cluster: "
         "CSV/TSV/Parquet; same output; needs pip install 'crowdagg[dask]').",
)
SCHEDULER = typer.Option(
    None, "--scheduler", metavar="ADDRESS",
    help="--engine dask: the Dask scheduler (tcp://host:8786); default: a cluster of --threads worker "
         "processes on this machine, closed at exit.",
)
THREADS = typer.Option(
    None, "--threads", metavar="N",
    help="Threads for reading and fitting (default: $CROWDAGG_THREADS, else all cores; torch, in train, one unless "
         "its batches are large). The output does not depend on it (train's: in the last bits).",
)


def format_option(help: str) -> Any:
    """``--format/-f``: how stdout (or the output) is written; ``help`` says this command's formats and default."""
    return typer.Option(None, "--format", "-f", help=help)


def output_option(help: str) -> Any:
    """``--output/-o``: where the command writes; ``help`` says what lands there."""
    return typer.Option(None, "--output", "-o", help=help)


def max_memory_option(what: str, examples: bool = False) -> Any:
    """``--max-memory``: refuse up front ``what`` (``a run``, ``a crowd``) that would need more memory than this."""
    sizes = "e.g. 4G, 500M, none; " if examples else ""
    return typer.Option(
        None, "--max-memory",
        help=f"Refuse up front {what} that would need more memory than this ({sizes}default 80% of available).",
    )


def column_option(option: str, help: str) -> Any:
    """A column override (``--task-col``, ``--truth-label-col``): a header name, default detected."""
    return typer.Option(None, option, help=help)


# --------------------------------------------------------------------------- commands that read answers
INPUT_FORMAT = typer.Option(None, "--input-format", help="csv, tsv, json, jsonl or parquet (default: from content/extension).")
TASK_COL = column_option("--task-col", "Task column (default: task, an alias such as item, or a platform's column).")
WORKER_COL = column_option("--worker-col", "Worker column (default: worker, an alias such as annotator, or a platform's column).")
LABEL_COL = column_option("--label-col", "Label column (default: label, an alias such as answer, or a platform's column; MTurk radio buttons: the group, e.g. Answer.sentiment).")
CLASSES = typer.Option(None, "--classes", help="Comma-separated class set, in order (includes classes nobody chose).")
DUPLICATES = typer.Option("keep", "--duplicates", help="Repeated (task, worker) answers: keep, first, last or error.")
BLANK_LABELS = typer.Option("skip", "--blank-labels", help="Answers with a blank label (skipped questions): skip them, saying how many (their tasks keep a row), or error.")
REJECTED = typer.Option("exclude", "--rejected", help="Answers an MTurk/Toloka export marks rejected: exclude (default; counted on stderr) or keep.")
TRUTH = typer.Option(None, "--truth", help="Gold labels file: print accuracy etc. to stderr.")
TRUTH_TASK_COL = column_option("--truth-task-col", "Task column of --truth (default: task or an alias).")
TRUTH_LABEL_COL = column_option("--truth-label-col", "Label column of --truth (default: label, truth, gold, ...).")


# --------------------------------------------------------------------------- commands that fit a method
METHOD = typer.Option("ds", "--method", "-m", help="Aggregation method (see `crowdagg methods`).")
#: The near-chance spammer rule (crowdagg.reports.workers.near_chance), in ``workers`` and ``aggregate --drop-spammers``.
NEAR_CHANCE = typer.Option(True, "--near-chance/--no-near-chance", help="Flag as spammers also the workers the fitted model is confident answer near chance: the information an answer carries (capacity of the symmetric channel of the worker's estimated accuracy, at the end of its 2-standard-error interval) under 0.06 bits, as when accuracy is confidently under .64 on two classes.  Light workers are left alone (under 49 answers a binary worker is never flagged).  Methods without a worker accuracy (glad, kos): the detector alone.")
SEED = typer.Option(None, "--seed", help=f"Seed for tie-breaking and any random choice ({defaults('seed')}).")
MAX_ITER = typer.Option(None, "--max-iter", help=f"Iteration cap ({defaults('max_iter')}).")
TOL = typer.Option(None, "--tol", help=f"Stop when the relative change of the fit's objective (a log-likelihood, log marginal likelihood, log-posterior, ELBO or KL divergence; for mmsr, the change of u vᵀ (Frobenius) of its rank 1 completion; for cpd, of the confusion matrices and prior that minimise its moment residual; for kos, the largest change of its normalised messages; for catd and crh, the largest change of a task's estimates over the answers' standard deviation) is below this ({defaults('tol')}); 0 runs exactly --max-iter.")
SMOOTHING = typer.Option(None, "--smoothing", help=f"Same as -p smoothing=VALUE ({defaults('smoothing', with_help=True)}); kept for this release.")
PARAM = typer.Option([], "--param", "-p", metavar="NAME=VALUE", help=f"A parameter of the method (repeatable): {param_list()}; `crowdagg methods NAME` explains each, e.g. -p n_init=5.")
GOLD = typer.Option(None, "--gold", help=f"Known labels that clamp those tasks ({methods_that(lambda m: m.gold)}).")
GOLD_TASK_COL = column_option("--gold-task-col", "Task column of --gold.")
GOLD_LABEL_COL = column_option("--gold-label-col", "Label column of --gold.")
SAVE_WORKERS = typer.Option(None, "--save-workers", help=f"Save the fitted worker model (versioned JSON, exact floats; .json or .json.gz) for --init-workers ({methods_that(lambda m: m.init_workers)}).")
INIT_WORKERS = typer.Option(None, "--init-workers", help=f"Start from a worker model saved with --save-workers (warm start; known workers on a new batch; {methods_that(lambda m: m.init_workers)}).")


# --------------------------------------------------------------------------- the tail of a report command (stats, workers)
@dataclass(frozen=True)
class FitRun:
    """The options a command that reads answers and fits a method on them shares with the others, as one value:
    reading the answers (``--classes`` .. ``--label-col``), the method's common parameters (``--seed``,
    ``--max-iter``, ``--tol``, ``-p``) and the run's (``--max-memory``, ``--threads``, ``--quiet``,
    ``--verbose``).  :func:`fit_run_options` declares them on a command, after its own options, as
    :data:`FIT_RUN` declares each; :func:`crowdagg.cli.pipeline.check_fit_run` checks them before reading and
    :meth:`reading` gives them to :func:`crowdagg.cli.pipeline.load`."""

    classes: Optional[str]
    duplicates: str
    blank_labels: str
    rejected: str
    input_format: Optional[str]
    task_col: Optional[str]
    worker_col: Optional[str]
    label_col: Optional[str]
    seed: Optional[int]
    max_iter: Optional[int]
    tol: Optional[float]
    param_: list[str]
    max_memory: Optional[str]
    threads: Optional[str]
    quiet: bool
    verbose: bool

    def texts(self) -> dict[str, Optional[str]]:
        """The options that name a path or a value, for :func:`require_values` (an empty one is refused)."""
        return {"input_format": self.input_format, "classes": self.classes, "max_memory": self.max_memory}

    def flags(self) -> dict[str, Any]:
        """The method parameters that have a flag of their own here, for :func:`method_params`."""
        return {"seed": self.seed, "max_iter": self.max_iter, "tol": self.tol}

    def reading(self, classes: Optional[list[str]]) -> dict[str, Any]:
        """How the answers are read (:func:`crowdagg.io.read.load_annotations`' options); ``classes``: ``--classes``
        as checked (:func:`crowdagg.cli.pipeline.check_fit_run`)."""
        return {"input_format": self.input_format, "task_col": self.task_col, "worker_col": self.worker_col,
                "label_col": self.label_col, "classes": classes, "duplicates": self.duplicates,
                "max_memory": self.max_memory, "rejected": self.rejected, "blank_labels": self.blank_labels}


#: Each field of :class:`FitRun` as the command line declares it, in the order ``--help`` lists them.
FIT_RUN = {
    "classes": CLASSES, "duplicates": DUPLICATES, "blank_labels": BLANK_LABELS, "rejected": REJECTED,
    "input_format": INPUT_FORMAT, "task_col": TASK_COL, "worker_col": WORKER_COL, "label_col": LABEL_COL,
    "seed": SEED, "max_iter": MAX_ITER, "tol": TOL, "param_": PARAM,
    "max_memory": max_memory_option("a run", examples=True), "threads": THREADS, "quiet": QUIET, "verbose": VERBOSE,
}


def fit_run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Declare :data:`FIT_RUN`'s options on ``command`` after its own, and call it with them as one
    :class:`FitRun`, its keyword argument ``run``: the commands that share these options declare them once.

    Typer reads a command's options from its signature: the one shown here is ``command``'s without ``run``, then
    one parameter per field of :class:`FitRun` (typed as the field, defaulting to its declaration)."""
    import functools
    import inspect
    from typing import get_type_hints

    own = [p for name, p in inspect.signature(command, eval_str=True).parameters.items() if name != "run"]
    types = get_type_hints(FitRun)
    shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=declared, annotation=types[name])
              for name, declared in FIT_RUN.items()]

    @functools.wraps(command)
    def gathered(*args: Any, **kwargs: Any) -> Any:
        run = FitRun(**{name: kwargs.pop(name) for name in FIT_RUN})
        return command(*args, run=run, **kwargs)

    signature = inspect.Signature(own + shared, return_annotation=None)
    gathered.__signature__ = signature  # type: ignore[attr-defined]
    gathered.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {"return": None}
    return gathered


# --------------------------------------------------------------------------- the spammer criteria (workers, aggregate)
#: --min-partners and --min-shared default to the detector's own defaults (crowdagg.reports.spammers.MIN_PARTNERS,
#: MIN_SHARED; written out here so that --help imports no numeric code, and tested to agree).
MIN_PARTNERS = typer.Option(5, "--min-partners", min=1, metavar="N", help="The spammer detector judges a worker with at least N co-labelling partners (each sharing --min-shared tasks); the others are skipped, their spam_score and spammer empty.")
MIN_SHARED = typer.Option(20, "--min-shared", min=1, metavar="N", help="Tasks two workers must share for their covariance to count in the spammer detector.")
DETECTOR = typer.Option("auto", "--detector", metavar="WHEN", help="The cross-covariance spammer detector: auto (default) runs it unless its fit would cost over 1e10 multiply-adds (pairs x classes^3: about a minute; many classes), when it is skipped with a note; always runs it whatever the cost; never leaves it out (the near-chance rule alone).")
#: The detector's parameters as the commands spell them (its warnings name them).
DETECTOR_SPELLING = {"min_partners": "--min-partners", "min_shared": "--min-shared"}
#: How the commands that fit a method without a --smoothing flag of their own (stats, workers) spell it.
SMOOTHING_BY_P = {"smoothing": "-p smoothing"}
EXCLUDE_WORKERS = typer.Option(None, "--exclude-workers", metavar="FILE", help="Leave out the answers of the workers FILE names: one worker id a line (blank lines ignored, no header), e.g. a hand-picked list or `cut -d, -f1` of a report.  Every task still gets its row (one left without answers gets the class prior); stderr counts the workers and answers removed and the ids that name no worker.")


# --------------------------------------------------------------------------- what to relabel next (aggregate)
RELABEL = typer.Option(None, "--relabel", metavar="FILE", help="Also write the tasks whose next answer is expected to tell the most: task, score (the expected information gain of one more answer, in bits, under the fitted worker models: each worker's confusion, or a one-coin model from the agreement with the posteriors for a method without confusions; averaged over the workers by their share of the answers: in a crowd of over 100, a draw of 100 seeded by --seed), rank, label, confidence, n_answers; highest score first, equal scores by task name.  stdout is unchanged.")
BUDGET = typer.Option(None, "--budget", metavar="N", help="How many tasks --relabel writes (default: every task, ranked); more than there are writes them all, saying so.")
