"""``crowdagg simulate``: a synthetic crowd with known truth, written as CSV files."""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import UsageError
from . import options as opt
from .options import require_values
from .plumbing import err, handle_errors, write_stdout

#: How this command spells the library's parameters in messages.
SPELLING = {
    "n_tasks": "--tasks", "n_workers": "--workers", "n_classes": "--classes", "outdir": "--output",
    "difficulty_spread": "--difficulty-spread", "worker_prior": "--worker-prior",
    "features": "--features", "dim": "--feature-dim", "feature_dim": "--feature-dim", "separation": "--separation",
}


@handle_errors(SPELLING)
def simulate(
    output: Optional[str] = opt.output_option("Directory for labels.csv, truth.csv, confusion.csv, workers.csv and, for --model glad, tasks.csv (required)."),
    tasks: Optional[int] = typer.Option(None, "--tasks", help="Number of tasks (default 1000, or the scenario's)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Number of workers (default 50, or the scenario's)."),
    classes: Optional[int] = typer.Option(None, "--classes", help="Number of classes (default 2, or the scenario's)."),
    per_task: Optional[int] = typer.Option(None, "--per-task", help="Answers per task (default 5, or the scenario's)."),
    model: str = typer.Option("ds", "--model", help="Worker model: ds (full confusion, diagonal ~ U(skill)), onecoin, hammer-spammer, or glad (ability logit(p), p ~ U(skill), times a per-task beta: P(correct) = sigmoid(ability*beta))."),
    skill: str = typer.Option("0.6,0.9", "--skill", help="Range LOW,HIGH of worker accuracy (glad: accuracy on the median task, beta = 1; strictly between 0 and 1)."),
    difficulty_spread: Optional[float] = typer.Option(None, "--difficulty-spread", help="glad only: standard deviation of log beta across tasks, 0 to 5 (default 1; 0: every task alike). 1/beta is a task's difficulty."),
    spammers: Optional[float] = typer.Option(None, "--spammers", help="Fraction of spammers (answers independent of the truth); default 0 (hammer-spammer: 0.5, tutorial-spammers: 0.3)."),
    adversaries: float = typer.Option(0.0, "--adversaries", help="Fraction of adversarial workers."),
    extreme_spammers: int = typer.Option(0, "--extreme-spammers", help="Extra workers who label every task at random."),
    worker_prior: Optional[str] = typer.Option(None, "--worker-prior", help="--scenario deepbp only: A,B of the Beta prior of the workers' accuracy (default 2,1; deepBP Fig. 2: A,A/2, sparse for A < 1)."),
    assignment: str = typer.Option("random", "--assignment", help="random (per-task distinct workers), regular ((l,r)-regular with l=--per-task, r=--tasks-per-worker) or dense."),
    tasks_per_worker: Optional[int] = typer.Option(None, "--tasks-per-worker", help="r of an (l,r)-regular assignment."),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="A seed paper's scenario (see `crowdagg simulate --list-scenarios`)."),
    list_scenarios: bool = typer.Option(False, "--list-scenarios", help="List the named scenarios and exit."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    features: Optional[str] = typer.Option(None, "--features", help="Also write features for `crowdagg train`: FILE.npy (one row per task, drawn from a Gaussian per true class) and tasks.txt beside it (the rows' task ids). Inside --output, `crowdagg train --features FILE.npy` then finds labels.csv too."),
    feature_dim: Optional[int] = typer.Option(None, "--feature-dim", help="--features only: dimension of the features (default 64)."),
    separation: Optional[float] = typer.Option(None, "--separation", help="--features only: distance between any two class means, in noise standard deviations (default 3.0; the Bayes error between two classes is Phi(-separation/2))."),
    max_memory: Optional[str] = opt.max_memory_option("a crowd"),
    verbose: bool = opt.VERBOSE,
) -> None:
    """Write a synthetic crowd with known truth and worker models.

    Files: labels.csv (task,worker,label), truth.csv (task,label),
    confusion.csv (worker,true_label,observed_label,probability) and
    workers.csv (worker,kind,accuracy,n_answers).  With --model glad,
    workers.csv is (worker,kind,alpha,accuracy,n_answers), alpha each
    worker's true ability, and tasks.csv (task,beta,n_answers) holds each
    task's true beta; confusion.csv and accuracy are then each worker's
    average over the task difficulties.

    \b
    Example: crowdagg simulate --tasks 10000 --workers 200 --classes 5 --per-task 5 --spammers 0.1 --seed 1 -o sim/

    \b
    Example: crowdagg simulate --model glad --difficulty-spread 1.5 --tasks 5000 --classes 3 --seed 1 -o glad/

    \b
    Example: crowdagg simulate --classes 4 --features sim/features.npy -o sim/ && crowdagg train --features sim/features.npy --method raykar
    """
    from ..io.read import DIRECTORY, output_format
    from ..simulate import SCENARIOS
    from ..simulate import simulate as run_simulation

    require_values(output=output, scenario=scenario, max_memory=max_memory, worker_prior=worker_prior,
                   features=features)
    if list_scenarios:
        write_stdout("".join(f"{k}\t{v}\n" for k, v in SCENARIOS.items()))
        return
    if not output:
        raise UsageError("simulate needs --output DIR (where labels.csv, truth.csv, ... are written)")
    output_format(None, output, "--output", DIRECTORY)
    try:
        lo, hi = (float(x) for x in skill.split(","))
    except ValueError:
        raise UsageError(f"--skill must be LOW,HIGH (e.g. 0.6,0.9), got {skill!r}") from None
    beta: tuple[float, ...] | None = None
    if worker_prior is not None:
        try:
            beta = tuple(float(x) for x in worker_prior.split(","))
        except ValueError:
            raise UsageError(f"--worker-prior must be A,B (e.g. 0.5,0.25), got {worker_prior!r}") from None
    crowd = run_simulation(
        tasks, workers, classes, per_task, model=model, skill=(lo, hi), difficulty_spread=difficulty_spread, spammers=spammers,
        adversaries=adversaries, extreme_spammers=extreme_spammers, worker_prior=beta, assignment=assignment,
        tasks_per_worker=tasks_per_worker, scenario=scenario, seed=seed, max_memory=max_memory,
    )
    if features is None and (feature_dim is not None or separation is not None):
        raise UsageError(f"{'--feature-dim' if feature_dim is not None else '--separation'} shapes the features: "
                         "give --features FILE.npy too")
    extra = []
    if features is not None:
        from ..simulate.features import feature_files

        extra = feature_files(
            crowd.truth, crowd.task_names(), crowd.n_classes, features, outdir=output,
            dim=64 if feature_dim is None else feature_dim, separation=3.0 if separation is None else separation,
            seed=seed, max_memory=max_memory,
        )
    written = crowd.write(output, extra)
    err(
        f"wrote {len(crowd.task)} answers on {len(crowd.truth)} tasks by {crowd.confusion.shape[0]} workers: "
        + ", ".join(str(p) for p in written)
    )
