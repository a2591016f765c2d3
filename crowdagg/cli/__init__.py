"""The ``crowdagg`` command line: parse, call the library, write.

stdout carries data only; messages, warnings and progress go to stderr.
Every error is one ``Error: ...`` line -- Click's own usage errors included
-- with exit status 1 for data/runtime errors and 2 for usage errors;
``--verbose`` adds the traceback (and Click's usage line).  A run computes
and renders everything first, then writes all of its outputs or none
(:mod:`crowdagg.io.output`).  The console script enters through
:mod:`crowdagg._entry`, which installs the SIGINT/SIGTERM handlers first.

One module per command (:mod:`.aggregate`, :mod:`.workers`, :mod:`.stats`, :mod:`.evaluate`,
:mod:`.simulate`, :mod:`.train`, :mod:`.predict`, :mod:`.methods`), each thin: it declares its options and
calls the library.  What they share is defined once: the options and their
checks (:mod:`.options`), the steps of reading, fitting and writing
(:mod:`.pipeline`), and the error, warning and output handling
(:mod:`.plumbing`).  This module makes the app and registers the commands;
a new command is a module and one line here.
"""

from __future__ import annotations

import typer

from ..errors import DataError
from . import aggregate, evaluate, methods, predict, simulate, stats, train, workers
from .plumbing import Group, write_stdout

app = typer.Typer(
    name="crowdagg",
    cls=Group,
    help=(
        "Turn noisy labels from many annotators into trustworthy labels.\n\n"
        "Example: crowdagg aggregate labels.csv --method ds > labels_agg.csv"
    ),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# In the order `crowdagg --help` lists them, each with its line there: a whole sentence that fits beside the
# name on an 80-column terminal (Click's default cuts the help's first sentence at 45 characters, mid-word:
# "who is a spammer, who...").
app.command("aggregate", help=aggregate.HELP, short_help="Aggregate answers into one label per task.")(
    aggregate.aggregate)
app.command("workers", help=workers.HELP, short_help="Report on each annotator: skill, spammers, agreement.")(
    workers.workers)
app.command("stats", help=stats.HELP, short_help="How far annotators agree: Krippendorff's alpha, Fleiss' kappa.")(
    stats.stats)
app.command("evaluate", short_help="Score predicted labels against the truth.")(evaluate.evaluate)
app.command("simulate", short_help="Write a synthetic crowd with known truth.")(simulate.simulate)
app.command("train", help=train.HELP, short_help="Train a classifier from features and noisy answers.")(train.train)
app.command("predict", help=predict.HELP, short_help="Predict labels with a model saved by train --save.")(
    predict.predict)
app.command("methods", short_help="List the methods, or one method's parameters.")(methods.methods)


def _version_callback(value: bool) -> None:
    if value:
        from .. import __version__

        write_stdout(f"crowdagg {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """Turn noisy labels from many annotators into trustworthy labels."""


def run(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    return int(app(args=argv, prog_name="crowdagg", standalone_mode=False) or 0)


__all__ = ["app", "run", "DataError"]
