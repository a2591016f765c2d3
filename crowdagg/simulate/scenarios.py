"""Named scenarios from the seed papers: a registry ``name -> Scenario``.

* ``maxmig-independent``, ``maxmig-naive-majority``, ``maxmig-correlated``:
  Cao, Xu, Kong & Wang (ICLR 2019), "Max-MIG: an information theoretic
  approach for joint learning from crowds", arXiv:1905.13436, cases 4.1--4.3
  (H): independent seniors, plus naive juniors, plus copiers.
* ``deepbp``: Kim, Cho, Kim & Ok (AISTATS 2022), "Robust deep learning from
  crowds with belief propagation", arXiv:2111.00734 §4: one-coin Beta(2, 1)
  workers (``worker_prior`` sets the Beta, as in its Fig. 2) on an
  (l, r)-regular graph, plus extreme spammers.
* ``tutorial-spammers``: Ibrahim, Traganitis, Fu et al., ICASSP 2025
  tutorial "Learning from crowdsourced noisy labels", effect of spammers
  (and malicious workers).
* ``multispa-demo``: Ibrahim, Fu, Kargas & Huang (NeurIPS 2019),
  "Crowdsourcing via pairwise co-occurrences: identifiability and
  algorithms", after ``main_demo.m``/``generate_confusion_mat.m``.
* ``em-trap``: a crowd where Dawid--Skene EM started from majority vote
  converges to a bad local optimum (ours; :func:`_em_trap` says why), the
  case the moment methods' starts are for (ICASSP 2025 tutorial, Part I:
  "MV initialisation breaks down when most workers are poor").
* ``tanno-flippers``, ``tanno-hammer-spammer``: Tanno, Saeedi,
  Sankaranarayanan, Alexander & Silberman (CVPR 2019), "Learning from noisy
  labels by regularized estimation of annotator confusion" §3 (MNIST):
  a group of 5 annotators of one type, one label per item, with features.
* ``geocrowdnet-sparse``: Ibrahim, Nguyen & Fu (ICLR 2023), "Deep learning
  from crowdsourced labels: coupled cross-entropy minimization,
  identifiability, and regularization", as the ICASSP 2025 tutorial shows
  it: machine-like annotators of accuracy 15--85 %, each labelling 10 % of
  the items, with features.
* ``dense-heavy``: a dense crowd with one heavy worker (ours; the graph
  methods' dense speed setting): a thousand one-coin workers with about a thousand answers each, one of them
  a spammer on 10% of the tasks (:func:`_dense_heavy` says why).

Each scenario is registered once, with its one-line description (what
``crowdagg simulate --list-scenarios`` prints), by :func:`scenario`; its
``plan`` turns the caller's arguments (:class:`Given`) into a
:class:`~crowdagg.simulate.crowd.Plan`, checking the sizes it fixes and the
arguments it has no use for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core import memory
from ..errors import UsageError, param
from ..methods.blocks import one_coin_matrices
from .args import check_per_task, check_size, fixed, prior_arg, unused
from .assignment import heavy_worker, team_batches
from .crowd import Plan
from .workers import (
    constant_matrices,
    crowd_matrices,
    ds_matrices,
    maxmig_seniors,
    multispa_matrices,
    pairwise_flipper_matrices,
)


@dataclass(frozen=True)
class Given:
    """The arguments of ``simulate(...)`` a scenario may read; ``None`` where not given."""

    n_tasks: int | None
    n_workers: int | None
    n_classes: int | None
    per_task: int | None
    tasks_per_worker: int | None
    prior: Sequence[float] | None
    skill: tuple[float, float]
    spammers: float | None
    adversaries: float
    extreme_spammers: int
    max_memory: memory.MaxMemory
    worker_prior: tuple[float, float] | None = None


#: ``plan(name, rng, given)`` -> the scenario's :class:`Plan`.
PlanFn = Callable[[str, np.random.Generator, Given], Plan]


@dataclass(frozen=True)
class Scenario:
    """A named scenario: its one-line description and the function that plans it."""

    name: str
    description: str
    plan: PlanFn

    def build(self, rng: np.random.Generator, given: Given) -> Plan:
        return self.plan(self.name, rng, given)


#: Every scenario, by name, in registration order (the order listed and named in errors).
REGISTRY: dict[str, Scenario] = {}


def scenario(name: str, description: str) -> Callable[[PlanFn], PlanFn]:
    """Register the decorated plan function as scenario ``name``."""

    def register(plan: PlanFn) -> PlanFn:
        if name in REGISTRY:
            raise ValueError(f"scenario {name!r} is registered twice")
        REGISTRY[name] = Scenario(name, description, plan)
        return plan

    return register


# ------------------------------------------------------------------- Max-MIG
_MAXMIG_N_TASKS = 12_500


def _maxmig(name: str, given: Given, juniors: np.ndarray, junior_kind: str, junior_copy_of: np.ndarray) -> Plan:
    """The five seniors followed by ``juniors``, everyone on every task; M and K = 2 are fixed."""
    prior = prior_arg(given.prior, 2)
    confusion = np.concatenate([maxmig_seniors(), juniors])
    kinds = ["senior"] * 5 + [junior_kind] * juniors.shape[0]
    copy_of = np.concatenate([np.full(5, -1, dtype=np.int64), junior_copy_of])
    m = confusion.shape[0]
    fixed(name, "n_workers", given.n_workers, m)
    fixed(name, "n_classes", given.n_classes, 2)
    unused(name, per_task=given.per_task, tasks_per_worker=given.tasks_per_worker)
    n = _MAXMIG_N_TASKS if given.n_tasks is None else given.n_tasks
    check_size(n, m, 2, n * m + n * given.extreme_spammers, given.max_memory)
    return Plan(n, confusion, kinds, prior, "dense", copy_of=copy_of)


@scenario(
    "maxmig-independent",
    "Max-MIG case 4.1 (H): 5 binary seniors A-E with the paper's Dogs-vs-Cats expertise, dense, N=12500",
)
def _maxmig_independent(name: str, rng: np.random.Generator, given: Given) -> Plan:
    return _maxmig(name, given, np.empty((0, 2, 2)), "", np.empty(0, dtype=np.int64))


@scenario(
    "maxmig-naive-majority",
    "Max-MIG case 4.2 (H): 5 seniors + 5 juniors who always answer class 0, dense, N=12500",
)
def _maxmig_naive_majority(name: str, rng: np.random.Generator, given: Given) -> Plan:
    return _maxmig(name, given, constant_matrices(5, 2, 0), "junior_constant", np.full(5, -1, dtype=np.int64))


@scenario(
    "maxmig-correlated",
    "Max-MIG case 4.3 (H): 5 seniors + 5 juniors copying senior A (2) or C (3), dense, N=12500",
)
def _maxmig_correlated(name: str, rng: np.random.Generator, given: Given) -> Plan:
    sources = np.array([0, 0, 2, 2, 2], dtype=np.int64)  # juniors 5, 6 copy senior A (0); 7, 8, 9 copy C (2)
    return _maxmig(name, given, maxmig_seniors()[sources], "copier", sources)


# -------------------------------------------------------------------- deepBP
@scenario(
    "deepbp",
    "deepBP §4: binary one-coin workers q ~ Beta(2,1) (or --worker-prior A,B) on a (3,4)-regular graph, "
    "N=1000, M=750, plus --extreme-spammers labelling every task",
)
def _deepbp(name: str, rng: np.random.Generator, given: Given) -> Plan:
    """deepBP §4's crowd: accuracies ``q ~ Beta(worker_prior)`` (default (2, 1)), l = 3, r = 4."""
    fixed(name, "n_classes", given.n_classes, 2)
    n = 1000 if given.n_tasks is None else given.n_tasks
    ell = 3 if given.per_task is None else given.per_task
    r = 4 if given.tasks_per_worker is None else given.tasks_per_worker
    m = fixed(name, "n_workers", given.n_workers, math.ceil(n * ell / r))
    check_per_task(m, ell)
    check_size(n, m, 2, n * ell + n * given.extreme_spammers, given.max_memory)
    a, b = (2.0, 1.0) if given.worker_prior is None else given.worker_prior
    q = rng.beta(a, b, size=m)
    return Plan(n, one_coin_matrices(q, 2), ["onecoin"] * m, prior_arg(given.prior, 2), "regular", ell)


# ------------------------------------------------------------------ tutorial
@scenario(
    "tutorial-spammers",
    "ICASSP'25 tutorial: N=10000, K=4, M=20 dense DS workers, a fraction (default 0.3) "
    "of them spammers whose answers ignore the truth",
)
def _tutorial_spammers(name: str, rng: np.random.Generator, given: Given) -> Plan:
    unused(name, tasks_per_worker=given.tasks_per_worker)
    n = 10_000 if given.n_tasks is None else given.n_tasks
    m = 20 if given.n_workers is None else given.n_workers
    k = 4 if given.n_classes is None else given.n_classes
    spam = 0.3 if given.spammers is None else given.spammers
    per_edge = m if given.per_task is None else given.per_task
    check_size(n, m, k, n * per_edge + n * given.extreme_spammers, given.max_memory)
    confusion, kinds = crowd_matrices(rng, m, k, "ds", given.skill, spam, given.adversaries)
    prior = prior_arg(given.prior, k)
    if given.per_task is None:
        return Plan(n, confusion, kinds, prior, "dense")
    check_per_task(m, given.per_task)
    return Plan(n, confusion, kinds, prior, "random", given.per_task)


# ------------------------------------------------------------------ MultiSPA
@scenario(
    "multispa-demo",
    "MultiSPA main_demo.m: N=10000, M=25, K=3, each worker labels each task w.p. 0.2; "
    "K specialists, 1 worse-than-random worker, the rest random",
)
def _multispa_demo(name: str, rng: np.random.Generator, given: Given) -> Plan:
    unused(name, per_task=given.per_task, tasks_per_worker=given.tasks_per_worker)
    n = 10_000 if given.n_tasks is None else given.n_tasks
    m = 25 if given.n_workers is None else given.n_workers
    k = 3 if given.n_classes is None else given.n_classes
    if m < k + 1:
        raise UsageError(f"scenario {name!r} needs {param('n_workers')} >= {param('n_classes')} + 1 = {k + 1}, got {m}")
    check_size(n, m, k, 0.2 * n * m + n + n * given.extreme_spammers, given.max_memory)
    confusion, kinds = multispa_matrices(rng, m, k)
    return Plan(n, confusion, kinds, prior_arg(given.prior, k), "bernoulli", p_obs=0.2)


# ------------------------------------------------------------------- EM trap
#: The teams of ``em-trap``: the class each team answers for true class 0, 1, 2 (w.p. ``_TRAP_TEAM_ACCURACY``).
_TRAP_TEAMS = ((1, 0, 2), (0, 2, 1), (0, 1, 2))
_TRAP_TEAM_SIZE = 3
_TRAP_TEAM_RATE = 0.7
_TRAP_TEAM_ACCURACY = 0.9
_TRAP_CROWD = 30
_TRAP_CROWD_RATE = 0.07
_TRAP_CROWD_ACCURACY = 0.6


def trap_matrices() -> tuple[np.ndarray, list[str]]:
    """The ``em-trap`` workers' confusion ``[w, true, observed]`` and kinds: the three teams, then the crowd."""
    k = len(_TRAP_TEAMS[0])
    idx = np.arange(k)
    mats = []
    kinds: list[str] = []
    for answers in _TRAP_TEAMS:
        # one-coin errors, with the right answer moved to the team's answer in each row
        team = one_coin_matrices(np.full(1, _TRAP_TEAM_ACCURACY), k)[0][:, np.argsort(answers)]
        mats += [team] * _TRAP_TEAM_SIZE
        kinds += ["team" if answers == tuple(idx) else "swapping_team"] * _TRAP_TEAM_SIZE
    crowd = one_coin_matrices(np.full(_TRAP_CROWD, _TRAP_CROWD_ACCURACY), k)
    return np.concatenate([np.stack(mats), crowd]), kinds + ["onecoin"] * _TRAP_CROWD


@scenario(
    "em-trap",
    "EM trap: N=10000, K=3, 3 task batches each labelled by its own team of 3 confident workers (two teams "
    "swap a class pair) + 30 weak honest workers on every batch; MV-started ds ends in a bad local optimum",
)
def _em_trap(name: str, rng: np.random.Generator, given: Given) -> Plan:
    """A crowd where Dawid--Skene EM from majority vote is trapped in a bad local optimum.

    The tasks fall at random into three batches.  Each batch has its own
    team of three confident workers (accuracy 0.9, each labelling 70% of
    its batch and nothing else): team 0 swaps classes 0 and 1 (say, a
    guideline misread), team 1 swaps classes 1 and 2, team 2 is right.  A
    crowd of 30 honest but weak workers (one-coin, accuracy 0.6, each
    labelling each task w.p. 0.07, about two answers a task) labels every
    batch.  Within a batch the team outvotes the crowd, so majority vote is
    right on batch 2 and follows the swap on batches 0 and 1.

    Why EM from majority vote is trapped: started there, each team looks
    accurate in its own batch's frame and the crowd, which links the
    batches, looks like a blur of the three frames; within a batch the
    team's confident answers outweigh that blur, so no E-step moves a batch
    out of its frame, and EM converges to this hybrid.  It is not a
    relabelling of the truth (no one permutation of the classes fits all
    three batches): its log-likelihood is far below that of EM started
    from the true parameters, which reaches ~.94 accuracy where the hybrid
    has ~.53.  The crowd carries the information (it co-labels with every
    team); only the start is wrong.

    What the moment methods need holds: the workers' average confusion is
    diagonally dominant (30 honest workers to 6 swapping ones), every worker
    shares hundreds of tasks with many others (pairs and triples; the teams
    of different batches share none), and the teams are near-specialists
    for every class (separability).  Spectral-DS's three round-robin group
    views are not conditionally independent given the class here (the batch
    is a common cause of who answers), which its derivation assumes.

    N = 10000 (may override); K = 3 and M = 39 are fixed; ``prior`` is honoured.
    """
    unused(name, per_task=given.per_task, tasks_per_worker=given.tasks_per_worker)
    confusion, kinds = trap_matrices()
    m, k, _ = confusion.shape
    fixed(name, "n_workers", given.n_workers, m)
    fixed(name, "n_classes", given.n_classes, k)
    n = 10_000 if given.n_tasks is None else given.n_tasks
    per_task = _TRAP_TEAM_SIZE * _TRAP_TEAM_RATE + _TRAP_CROWD * _TRAP_CROWD_RATE + 1
    check_size(n, m, k, per_task * n + n * given.extreme_spammers, given.max_memory)
    n_teams = len(_TRAP_TEAMS)

    def graph(g: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return team_batches(g, n, n_teams, _TRAP_TEAM_SIZE, _TRAP_TEAM_RATE, _TRAP_CROWD, _TRAP_CROWD_RATE)

    return Plan(n, confusion, kinds, prior_arg(given.prior, k), "batches", graph=graph)


# ---------------------------------------------------------------- dense crowd
#: ``dense-heavy``: the heavy worker's share of the tasks, and the defaults N, M, answers per task.
_HEAVY_SHARE = 0.1
_DENSE_N_TASKS = 200_000
_DENSE_N_WORKERS = 1000
_DENSE_PER_TASK = 5


@scenario(
    "dense-heavy",
    "dense crowd with a heavy worker: N=200000, K=2, M=1000 one-coin workers (accuracy ~ U(skill)), 5 per task "
    "(1M answers, ~1000 a worker); worker 0 is a spammer answering 10% of the tasks at random",
)
def _dense_heavy(name: str, rng: np.random.Generator, given: Given) -> Plan:
    """A dense crowd with one heavy worker: the graph methods' dense speed setting ("1M answers, 1,000 workers, one
    of them answering 10% of all tasks").

    Every task gets ``per_task`` (default 5) distinct workers; worker 0
    answers a uniformly chosen 10% of the tasks (kind ``"heavy_spammer"``,
    uniformly at random, as the near-chance heavy workers of temp and rte,
    deepBP App. H), the other M - 1 workers share the remaining answers at
    random (:func:`~crowdagg.simulate.assignment.heavy_worker`), about
    ``N * per_task / M`` each.  They are one-coin with accuracy ~
    ``Uniform(skill)``; ``spammers`` and ``adversaries`` are fractions of
    them, as in the generic path.  With the defaults (N = 200,000, M =
    1,000) that is 1,000,000 answers, ~980 per worker and 20,000 for worker
    0: the graph where a per-worker pass meets long rows (an exact
    leave-one-out message is O(n_u^2) per worker) and one worker's row is
    twenty times the others'.  N, M, K and ``per_task`` may override;
    ``prior`` and ``extreme_spammers`` are honoured.
    """
    unused(name, tasks_per_worker=given.tasks_per_worker)
    n = _DENSE_N_TASKS if given.n_tasks is None else given.n_tasks
    m = _DENSE_N_WORKERS if given.n_workers is None else given.n_workers
    k = 2 if given.n_classes is None else given.n_classes
    ell = _DENSE_PER_TASK if given.per_task is None else given.per_task
    if ell > m - 1:  # a task without worker 0 takes its per_task workers from the other m - 1
        raise UsageError(
            f"scenario {name!r} draws each task's {param('per_task')}={ell} workers from the {m - 1} besides the "
            f"heavy worker 0; {param('n_workers')} must exceed {ell}, got {m}"
        )
    check_size(n, m, k, n * ell + n * given.extreme_spammers, given.max_memory)
    spam = 0.0 if given.spammers is None else given.spammers
    crowd, kinds = crowd_matrices(rng, m - 1, k, "onecoin", given.skill, spam, given.adversaries)
    confusion = np.concatenate([np.full((1, k, k), 1.0 / k), crowd])

    def graph(g: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return heavy_worker(g, n, m, ell, _HEAVY_SHARE)

    return Plan(n, confusion, ["heavy_spammer", *kinds], prior_arg(given.prior, k), "heavy", graph=graph)


# ------------------------------------------------------- trainers' scenarios
#: Features of the trainers' scenarios: dimension, and the distance between class means in noise units
#: (:func:`crowdagg.simulate.features.gaussian_features`): 6 makes each pair of classes all but separable
#: (pairwise Bayes error Φ(-3) = 0.13 %), the stand-in for MNIST's digits (a CNN's ~99 %).
_FEATURE_DIM = 64
_FEATURE_SEPARATION = 6.0
_TANNO_N_TASKS = 10_000
_TANNO_N_WORKERS = 5
_TANNO_N_CLASSES = 10


def _tanno(name: str, given: Given, draw: Callable[[int, int], np.ndarray], kind: str) -> Plan:
    """Tanno et al. §3's group: M = 5 annotators of one type, K = 10, each item labelled by ``per_task``
    (default 1) distinct annotators drawn uniformly; ``draw(m, k)`` their matrices."""
    unused(name, tasks_per_worker=given.tasks_per_worker, spammers=given.spammers)
    n = _TANNO_N_TASKS if given.n_tasks is None else given.n_tasks
    m = _TANNO_N_WORKERS if given.n_workers is None else given.n_workers
    k = _TANNO_N_CLASSES if given.n_classes is None else given.n_classes
    ell = 1 if given.per_task is None else given.per_task
    check_per_task(m, ell)
    if k > _FEATURE_DIM:
        raise UsageError(f"scenario {name!r} draws {_FEATURE_DIM}-dimensional features: {param('n_classes')} must "
                         f"not exceed {_FEATURE_DIM}, got {k}")
    check_size(n, m, k, n * ell + n * given.extreme_spammers + n * _FEATURE_DIM / 2, given.max_memory)
    confusion = draw(m, k)
    return Plan(n, confusion, [kind] * m, prior_arg(given.prior, k), "random", ell,
                features=(_FEATURE_DIM, _FEATURE_SEPARATION))


@scenario(
    "tanno-flippers",
    "Tanno et al. §3: N=10000, K=10, M=5 pairwise flippers (right w.p. p ~ U(skill), else one fixed other "
    "class per true class), one random annotator per item (--per-task for more), 64-d Gaussian features",
)
def _tanno_flippers(name: str, rng: np.random.Generator, given: Given) -> Plan:
    """Tanno et al. (CVPR 2019) §3, MNIST: a group of pairwise flippers, one label per item.

    Each annotator is right with probability ``p_w ~ Uniform(skill)`` --
    the mean skill p of the paper is the middle of ``skill``, its jitter
    ``Normal(p, 10^-2)`` the width of the range -- and otherwise answers
    one fixed other class per true class, drawn uniformly for each (worker,
    class).  The mean confusion is diagonally dominant while p exceeds the
    largest share of wrong answers the group sends to one class (with 5
    annotators: at least (1 - p)/5, up to (1 - p) when their targets
    coincide); Tanno's Fig. 3 shades p below about 0.25--0.3 as not
    diagonally dominant.  "One label per image" (the paper's sparse regime):
    each item is labelled by ``per_task`` = 1 annotator drawn uniformly
    (``per_task`` = M is its dense regime).  Features: 64-d class-conditional
    Gaussians with class means 6 apart (MNIST's stand-in).  N = 10000, M =
    5, K = 10 and ``per_task`` may override; ``prior`` and
    ``extreme_spammers`` are honoured.
    """
    return _tanno(name, given, lambda m, k: pairwise_flipper_matrices(rng, m, k, given.skill), "flipper")


@scenario(
    "tanno-hammer-spammer",
    "Tanno et al. §3: N=10000, K=10, M=5 hammer-spammers (each answer right w.p. p ~ U(skill), else a uniformly "
    "random other class), one random annotator per item (--per-task for more), 64-d Gaussian features",
)
def _tanno_hammer_spammer(name: str, rng: np.random.Generator, given: Given) -> Plan:
    """Tanno et al. (CVPR 2019) §3, MNIST: a group of hammer--spammers, one label per item.

    Per label, as the paper words it and its Fig. 8 draws it (a diagonal of
    p_w on every row): each answer is right with probability ``p_w ~
    Uniform(skill)``, otherwise a uniformly random other class -- one-coin
    workers.  (MBEM's per-annotator hammer--spammer, where a worker is
    either perfect or random, is ``simulate(model="hammer-spammer")``.)  The
    mean confusion is diagonally dominant iff the mean p exceeds 1/K.
    Sizes, assignment and features as ``tanno-flippers``.
    """
    return _tanno(name, given, lambda m, k: one_coin_matrices(rng.uniform(*given.skill, size=m), k),
                  "hammer_spammer")


#: ``geocrowdnet-sparse``: the tutorial's share of the items each annotator labels, and its accuracy range.
_SPARSE_P_OBS = 0.1
_SPARSE_SKILL = (0.15, 0.85)


@scenario(
    "geocrowdnet-sparse",
    "GeoCrowdNet (ICLR'23) as the ICASSP'25 tutorial shows it: N=10000, K=5, M=10 annotators of accuracy 15-85% "
    "(DS rows), each labelling each item w.p. 0.1, 64-d Gaussian features",
)
def _geocrowdnet_sparse(name: str, rng: np.random.Generator, given: Given) -> Plan:
    """GeoCrowdNet's identifiability setting (Ibrahim, Nguyen & Fu, ICLR 2023; tutorial seed, Part II).

    The tutorial's experiment: annotators sampled from a pool of machine
    classifiers of accuracy 15--85 %, each labelling 10 % of the items.
    Here each annotator's row k has ``C[k, k] ~ Uniform(0.15, 0.85)`` and
    the rest split by a Dirichlet(1) draw (``model="ds"``'s rows: errors
    concentrated on a few classes, as a classifier's are), and labels each
    item independently w.p. 0.1 (an item left unlabelled gets one random
    annotator, as ``multispa-demo``): about one label per item, so no
    majority vote, no conditional independence to lean on.  Features:
    64-d class-conditional Gaussians with class means 6 apart, so the
    classifier's outputs F are nearly one-hot and span the simplex (the
    sufficiently scattered condition GeoCrowdNet (F) assumes).  N = 10000,
    M = 10, K = 5 may override; ``skill`` is not read (the tutorial's
    range is fixed); ``prior`` and ``extreme_spammers`` are honoured.
    """
    unused(name, per_task=given.per_task, tasks_per_worker=given.tasks_per_worker, spammers=given.spammers)
    n = 10_000 if given.n_tasks is None else given.n_tasks
    m = 10 if given.n_workers is None else given.n_workers
    k = 5 if given.n_classes is None else given.n_classes
    if k > _FEATURE_DIM:
        raise UsageError(f"scenario {name!r} draws {_FEATURE_DIM}-dimensional features: {param('n_classes')} must "
                         f"not exceed {_FEATURE_DIM}, got {k}")
    check_size(n, m, k, _SPARSE_P_OBS * n * m + n + n * given.extreme_spammers + n * _FEATURE_DIM / 2,
               given.max_memory)
    confusion = ds_matrices(rng, m, k, _SPARSE_SKILL)
    return Plan(n, confusion, ["ds"] * m, prior_arg(given.prior, k), "bernoulli", p_obs=_SPARSE_P_OBS,
                features=(_FEATURE_DIM, _FEATURE_SEPARATION))
