"""Synthetic crowds with known truth and known worker models.

:func:`simulate` draws a ground truth ``y_n ~ Cat(prior)``, one confusion
matrix per worker and a task--worker assignment graph, then samples each
answer from the Dawid--Skene model

.. math::

    \\tilde y_n^{(m)} \\mid y_n = k \\;\\sim\\; \\mathrm{Cat}(C_m[k, :]),

with ``C_m = confusion[m]`` row-stochastic (``confusion[worker, true,
observed]``, the layout of every crowdagg result; the transpose of the
column-stochastic ``A_m`` of the tutorial seed).  Answers are drawn for all
edges at once by inverse-CDF sampling on the cumulative confusion rows, so
ten million answers take a few seconds and O(L) memory.  ``model="glad"``
replaces the confusion matrices by worker abilities and task difficulties
(Whitehill et al. 2009; :mod:`~crowdagg.simulate.glad`): a worker's
accuracy then depends on the task.

The package:

* :mod:`~crowdagg.simulate.workers` -- worker models (confusion-matrix
  generators, GLAD abilities) and their registry, :data:`MODELS` being its
  descriptions;
* :mod:`~crowdagg.simulate.glad` -- the GLAD model: abilities, task
  parameters, expected accuracies and the sampling of answers;
* :mod:`~crowdagg.simulate.assignment` -- assignment graphs (random,
  (l, r)-regular, dense, Bernoulli) and their registry, :data:`ASSIGNMENTS`;
* :mod:`~crowdagg.simulate.scenarios` -- the seed papers' scenarios, each
  registered once with its description (:data:`SCENARIOS`);
* :mod:`~crowdagg.simulate.crowd` -- :class:`SimulatedCrowd`, the plan of a
  crowd and the sampling that realises it;
* :mod:`~crowdagg.simulate.args` -- argument checks;
* here -- :func:`simulate`, the entry point.

Worker models and scenarios follow the seed papers:

* Dawid & Skene (1979), "Maximum likelihood estimation of observer
  error-rates using the EM algorithm", doi:10.2307/2346806 (``model="ds"``;
  ``"onecoin"`` is its homogeneous special case).
* Whitehill, Ruvolo, Wu, Bergsma & Movellan (NIPS 2009), "Whose vote should
  count more: optimal integration of labels from labelers of unknown
  expertise" (``model="glad"``, its multiclass form).
* Cao, Xu, Kong & Wang (ICLR 2019), "Max-MIG: an information theoretic
  approach for joint learning from crowds", arXiv:1905.13436
  (``maxmig-*`` scenarios: independent, naive-majority and correlated crowds).
* Kim, Cho, Kim & Ok (AISTATS 2022), "Robust deep learning from crowds with
  belief propagation", arXiv:2111.00734 (``deepbp``: one-coin Beta(2, 1)
  workers on an (l, r)-regular graph, plus extreme spammers).
* Ibrahim, Traganitis, Fu et al., ICASSP 2025 tutorial "Learning from
  crowdsourced noisy labels" (``tutorial-spammers``: spammers and malicious
  workers), and Ibrahim, Fu, Kargas & Huang (NeurIPS 2019), "Crowdsourcing
  via pairwise co-occurrences: identifiability and algorithms"
  (``multispa-demo``, after ``main_demo.m``/``generate_confusion_mat.m``).

Every random draw comes from one ``np.random.default_rng(seed)``: the same
arguments and seed give identical arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..core import memory
from ..core.checks import check_float, check_int, check_seed
from ..errors import UsageError, param
from ..methods.blocks import one_coin_matrices
from .args import check_per_task, check_size, choice_arg, prior_arg, skill_arg, unused, worker_prior_arg
from .assignment import REGISTRY as _ASSIGNMENTS
from .crowd import Plan, SimulatedCrowd, realise
from .glad import DEFAULT_DIFFICULTY_SPREAD, MAX_DIFFICULTY_SPREAD, expected_accuracy, task_betas
from .scenarios import REGISTRY as _SCENARIOS
from .scenarios import Given
from .workers import REGISTRY as _MODELS
from .workers import crowd_matrices, glad_workers

__all__ = ["ASSIGNMENTS", "MODELS", "SCENARIOS", "SimulatedCrowd", "simulate"]

#: Worker models accepted by ``simulate(model=...)`` (name -> one-line description).
MODELS: dict[str, str] = {name: spec.description for name, spec in _MODELS.items()}

#: Assignment graphs accepted by ``simulate(assignment=...)`` (name -> one-line description).
ASSIGNMENTS: dict[str, str] = {name: a.description for name, a in _ASSIGNMENTS.items() if not a.scenario_only}

#: Named scenarios from the seed papers (name -> one-line description).
SCENARIOS: dict[str, str] = {name: s.description for name, s in _SCENARIOS.items()}


def simulate(
    n_tasks: int | None = None,
    n_workers: int | None = None,
    n_classes: int | None = None,
    per_task: int | None = None,
    *,
    model: str = "ds",
    skill: tuple[float, float] = (0.6, 0.9),
    difficulty_spread: float | None = None,
    spammers: float | None = None,
    adversaries: float = 0.0,
    extreme_spammers: int = 0,
    worker_prior: Sequence[float] | None = None,
    assignment: str = "random",
    tasks_per_worker: int | None = None,
    prior: Sequence[float] | None = None,
    scenario: str | None = None,
    seed: int = 0,
    max_memory: memory.MaxMemory = None,
) -> SimulatedCrowd:
    """Draw a synthetic crowd from a Dawid--Skene-type or GLAD model with known parameters.

    Generative model: ``y_n ~ Cat(prior)`` for each task; each worker ``w``
    has a row-stochastic confusion matrix ``C_w[true, observed]``; an
    assignment graph says who labels what; worker ``w`` answers task ``n``
    with ``Cat(C_w[y_n, :])``, independently across answers (except copiers,
    who repeat another worker's answer).  Under ``model="glad"`` worker ``w``
    has an ability ``alpha_w`` and task ``n`` a parameter ``beta_n > 0``
    instead, and the answer is ``y_n`` with probability ``sigma(alpha_w
    beta_n)``, otherwise one of the other K - 1 classes uniformly at random.

    Parameters
    ----------
    n_tasks : int, optional
        N, number of tasks (default 1000, or the scenario's own default).
    n_workers : int, optional
        M, number of regular workers, not counting ``extreme_spammers``
        (default 50; derived from ``tasks_per_worker`` for ``"regular"``).
    n_classes : int, optional
        K >= 2 (default 2).
    per_task : int, optional
        Workers per task for ``"random"`` and ``"regular"`` (default 5;
        ignored by ``"dense"``).
    model : {"ds", "onecoin", "hammer-spammer", "glad"}
        Worker model for the workers that are neither spammers nor adversaries:

        * ``"ds"`` (Dawid & Skene 1979): each diagonal entry ``C_w[k, k] ~
          Uniform(skill)`` independently; the remaining ``1 - C_w[k, k]`` of
          row ``k`` is split over the other classes by a Dirichlet(1, ..., 1)
          draw.
        * ``"onecoin"``: one accuracy ``p_w ~ Uniform(skill)``, errors uniform,
          ``C_w = p_w I + (1 - p_w)/(K - 1) (11^T - I)``.
        * ``"hammer-spammer"`` (per annotator, as in MBEM; Tanno et al. 2019
          §3): hammers are one-coin with accuracy ``skill[1]`` (pass
          ``skill=(x, 1.0)`` for perfect hammers); a fraction ``spammers`` of
          the workers (default 0.5) answer uniformly at random.
        * ``"glad"`` (Whitehill et al., NIPS 2009, multiclass form): ability
          ``alpha_w = logit(p_w)``, ``p_w ~ Uniform(skill)`` -- ``p_w`` is the
          worker's accuracy on a task with ``beta = 1``, the median task;
          task parameters ``log beta_n ~ N(0, difficulty_spread^2)``
          (``1 / beta_n`` is the task's difficulty); ``P(correct) =
          sigma(alpha_w beta_n)``, errors uniform over the other classes.
          Spammers answer uniformly at random (``alpha = 0`` for K = 2, NaN
          for K > 2); adversaries have ``alpha_w = -logit(p_w)`` (needs
          ``skill`` above 1/2).  The true parameters are
          :attr:`SimulatedCrowd.ability` and :attr:`SimulatedCrowd.task_beta`;
          :attr:`SimulatedCrowd.confusion` holds each worker's expected
          one-coin confusion over the difficulty distribution.
    skill : (float, float)
        Range ``[low, high]`` of worker accuracy, ``0 <= low <= high <= 1``
        (``"glad"``: ``0 < low <= high < 1``, the accuracy on the median task).
    difficulty_spread : float, optional
        ``"glad"`` only: standard deviation of ``log beta``, in [0, 5]
        (default 1.0, about a third of the tasks with ``beta`` outside
        ``[1/e, e]``; 0 gives every task ``beta = 1``, a one-coin crowd with
        accuracies ``p_w``).
    spammers : float
        Fraction of workers who are spammers (tutorial seed §7.1): every row
        of ``C_w`` is the same distribution ``s_w ~ Dirichlet(1, ..., 1)``
        (uniform under ``"hammer-spammer"``), so answers are independent of
        the truth.
    adversaries : float
        Fraction of malicious workers: for a random derangement ``pi`` of the
        classes, ``C_w[k, pi(k)] = a_w ~ Uniform(skill)`` and the rest of the
        row is uniform, so ``P(pi(k) | k) > P(k | k)``.  Needs ``skill`` above
        ``1/K``.  ``spammers + adversaries`` must not exceed 1.
    extreme_spammers : int
        Extra workers (appended after the others, kind
        ``"extreme_spammer"``) who label **every** task uniformly at random
        (deepBP §4.1).
    worker_prior : (float, float), optional
        ``scenario="deepbp"`` only: the Beta(a, b) prior its one-coin
        accuracies are drawn from (default (2, 1), deepBP §4); deepBP's
        Fig. 2 varies it as ``(alpha_1, alpha_1 / 2)`` for ``alpha_1`` from
        0.2 to 2, ``alpha_1 < 1`` being a sparse prior (most workers near
        accuracy 0 or 1: hammers and adversaries).  Both must be finite and
        positive.
    assignment : {"random", "regular", "dense"}
        ``"random"``: each task gets ``per_task`` distinct workers, the set
        uniform among all such sets.  ``"regular"``: configuration-model
        (``per_task``, ``tasks_per_worker``)-regular bipartite graph with
        repeated pairs rewired away; task degree is exactly ``per_task`` and
        worker degrees are as equal as possible (at most
        ``ceil(n_tasks * per_task / n_workers)``).  The deepBP code fills
        tasks greedily and is only approximately regular too.  ``"dense"``:
        every worker labels every task.
    tasks_per_worker : int, optional
        r for ``"regular"``; when given, ``n_workers = ceil(n_tasks *
        per_task / r)`` (an explicit, different ``n_workers`` is an error).
    prior : sequence of float, optional
        Class prior (normalised); default uniform.
    scenario : str, optional
        A named setting from the seed papers (see :data:`SCENARIOS`).  It
        replaces ``model``, ``skill``, ``assignment``, ``spammers`` and
        ``adversaries`` unless listed below; the sizes marked "may override"
        follow explicit arguments, and an explicit size the scenario fixes
        must equal the fixed value (else :class:`UsageError`).  Every
        scenario honours ``prior``, ``extreme_spammers`` and ``seed``.

        * ``"maxmig-independent"`` (Max-MIG §4.1, (H)): 5 binary seniors
          A--E, dense, row ``[P(.|cat), P(.|dog)]`` with accuracies
          (cat, dog) = A (0.8, 0.6), B (0.6, 0.6), C (0.6, 0.9),
          D (0.7, 0.7), E (0.7, 0.6) as in the paper's App. B.1 (class 0 is
          cat).  N = 12500 (may override); M = 5, K = 2 fixed.
        * ``"maxmig-naive-majority"`` (§4.2): the 5 seniors plus 5 juniors
          (kind ``"junior_constant"``) who always answer class 0.  M = 10.
        * ``"maxmig-correlated"`` (§4.3): the 5 seniors plus 5 copiers:
          workers 5, 6 repeat senior A's (worker 0) answer on every task,
          workers 7, 8, 9 repeat senior C's (worker 2), as in the paper
          (the Dogs code copies A and B instead).  ``copy_of`` records it.
        * ``"deepbp"`` (Kim et al. 2022 §4): binary one-coin workers with
          accuracy ``q ~ Beta(2, 1)`` (some below 1/2) on an (l, r)-regular
          graph, l = 3, r = 4, N = 1000, M = ceil(N l / r) = 750; N,
          ``per_task`` (l) and ``tasks_per_worker`` (r) may override;
          ``worker_prior`` replaces Beta(2, 1).
        * ``"tutorial-spammers"`` (ICASSP'25 tutorial, "effect of
          spammers"): N = 10000, M = 20, K = 4 (all may override), DS workers
          with ``skill``; a fraction ``spammers`` (default 0.3) are spammers
          and ``adversaries`` malicious.  Dense, or ``"random"`` with
          ``per_task`` workers per task when ``per_task`` is given.
        * ``"multispa-demo"`` (MultiSPA ``main_demo.m``): N = 10000, M = 25,
          K = 3 (may override); each worker labels each task independently
          w.p. 0.2 (a task left unlabelled gets one random worker, so every
          task is answered); matrices as ``generate_confusion_mat(M, K,
          -4)``: K class specialists, one worse-than-random worker, the rest
          random (rows ``rand(K)`` normalised).
        * ``"em-trap"`` (ours, for issue 16's moment methods): N = 10000 (may
          override), K = 3 and M = 39 fixed.  The tasks fall at random into
          three batches, each labelled by its own team of 3 workers
          (accuracy 0.9, each labelling 70% of its batch and nothing else;
          team 0 swaps classes 0 and 1, team 1 swaps 1 and 2, team 2 is
          right; kinds ``"swapping_team"``, ``"team"``), beside 30 honest
          one-coin workers of accuracy 0.6 labelling each task w.p. 0.07.
          Dawid--Skene EM from majority vote converges to a hybrid of the
          batches' frames (accuracy ~.53), a local optimum whose
          log-likelihood is ~2000 below that of EM from the true parameters
          (~.94); see :func:`crowdagg.simulate.scenarios._em_trap`.
        * ``"dense-heavy"`` (ours, the graph methods' dense speed setting): N =
          200,000, M = 1,000, K = 2, ``per_task`` = 5 (all may override):
          1M answers, each task by 5 distinct workers; worker 0 (kind
          ``"heavy_spammer"``) answers a random 10% of the tasks uniformly
          at random, the other M - 1 are one-coin with accuracy ~
          ``Uniform(skill)`` (``spammers``, ``adversaries`` honoured) and
          share the rest of the answers, ~1,000 each; see
          :func:`crowdagg.simulate.scenarios._dense_heavy`.
        * ``"tanno-flippers"`` (Tanno et al., CVPR 2019, §3, MNIST): N = 10000,
          M = 5, K = 10 (all may override) pairwise flippers, right w.p.
          ``p_w ~ Uniform(skill)``, otherwise one fixed other class per true
          class (drawn uniformly per worker and class); each item labelled by
          ``per_task`` (default 1: the paper's "one label per image") distinct
          annotators drawn uniformly.  With :attr:`SimulatedCrowd.features`:
          64-d class-conditional Gaussians, class means 6 apart.
        * ``"tanno-hammer-spammer"``: the same with hammer--spammers per label
          (each answer right w.p. ``p_w``, otherwise a uniformly random other
          class: one-coin workers; the mean confusion is diagonally dominant
          iff the mean ``p_w`` exceeds 1/K).
        * ``"geocrowdnet-sparse"`` (Ibrahim, Nguyen & Fu, ICLR 2023, as the
          ICASSP'25 tutorial shows it): N = 10000, M = 10, K = 5 (may
          override); DS rows with diagonal ~ Uniform(0.15, 0.85) (``skill`` is
          not read); each annotator labels each item w.p. 0.1 (an unlabelled
          item gets one random annotator); features as above.
    seed : int
        Seed of the one ``np.random.default_rng`` used for every draw.
    max_memory : int, str or None
        Refuse (:class:`~crowdagg.errors.ResourceError`), before drawing
        anything, a crowd whose answers and text would need more memory
        than this (bytes or ``"4G"``; default 80% of the available memory).

    Returns
    -------
    SimulatedCrowd
        Answers sorted by task (and by worker within a task), truth,
        confusion matrices ``(n_workers, K, K)`` including extreme spammers,
        prior and worker kinds; for ``"glad"`` also the true ``ability``
        ``(n_workers,)`` and ``task_beta`` ``(n_tasks,)``; for the trainers'
        scenarios the tasks' ``features`` ``(n_tasks, 64)``.

    Raises
    ------
    UsageError
        For an invalid argument; the message names it and shows the value.

    Examples
    --------
    >>> crowd = simulate(200, 20, 3, 4, spammers=0.2, seed=1)
    >>> crowd.task.shape, crowd.confusion.shape
    ((800,), (20, 3, 3))
    >>> data = crowd.to_annotations()
    >>> glad = simulate(500, 30, 3, 5, model="glad", difficulty_spread=1.5, seed=2)
    >>> glad.ability.shape, glad.task_beta.shape
    ((30,), (500,))
    """
    n_tasks_v = None if n_tasks is None else check_int("n_tasks", n_tasks, 1)
    n_workers_v = None if n_workers is None else check_int("n_workers", n_workers, 1)
    n_classes_v = None if n_classes is None else check_int("n_classes", n_classes, 2)
    per_task_v = None if per_task is None else check_int("per_task", per_task, 1)
    r_v = None if tasks_per_worker is None else check_int("tasks_per_worker", tasks_per_worker, 1)
    n_extreme = check_int("extreme_spammers", extreme_spammers, 0)
    worker_prior_v = worker_prior_arg(worker_prior)
    skill_v = skill_arg(skill)
    spam_given = None if spammers is None else check_float("spammers", spammers, 0.0, 1.0)
    spam = 0.0 if spam_given is None else spam_given
    adv = check_float("adversaries", adversaries, 0.0, 1.0)
    model = choice_arg("model", model, tuple(MODELS))
    spread_given = (
        None
        if difficulty_spread is None
        else check_float("difficulty_spread", difficulty_spread, 0.0, MAX_DIFFICULTY_SPREAD)
    )
    assignment = choice_arg("assignment", assignment, tuple(ASSIGNMENTS))
    if spam + adv > 1.0:
        raise UsageError(f"{param('spammers')} + {param('adversaries')} must not exceed 1, got {spam} + {adv} = {spam + adv}")
    rng = np.random.default_rng(check_seed(seed))
    memory.parse_size(max_memory)

    if worker_prior_v is not None and scenario != "deepbp":
        raise UsageError(
            f"{param('worker_prior')} is only used with {param('scenario')}='deepbp', got "
            f"{param('scenario')}={scenario!r}"
        )
    if scenario is not None:
        scenario = choice_arg("scenario", scenario, tuple(SCENARIOS))
        unused(scenario, difficulty_spread=spread_given)
        given = Given(
            n_tasks=n_tasks_v, n_workers=n_workers_v, n_classes=n_classes_v,
            per_task=per_task_v, tasks_per_worker=r_v, prior=prior,
            skill=skill_v, spammers=spam_given, adversaries=adv,
            extreme_spammers=n_extreme, max_memory=max_memory, worker_prior=worker_prior_v,
        )  # fmt: skip
        return realise(rng, _SCENARIOS[scenario].build(rng, given), n_extreme)

    spec = _MODELS[model]
    if spread_given is not None and not spec.task_parameters:
        raise UsageError(
            f"{param('difficulty_spread')} is only used with {param('model')}='glad', got {param('model')}={model!r}"
        )
    if spec.task_parameters and not (0.0 < skill_v[0] and skill_v[1] < 1.0):
        raise UsageError(
            f"{param('model')}={model!r} draws ability logit(p), p ~ Uniform({param('skill')}); "
            f"{param('skill')} must lie strictly between 0 and 1, got {skill!r}"
        )
    n = 1000 if n_tasks_v is None else n_tasks_v
    k = 2 if n_classes_v is None else n_classes_v
    ell = 5 if per_task_v is None else per_task_v
    prior_v = prior_arg(prior, k)
    if r_v is not None and assignment != "regular":
        raise UsageError(f"{param('tasks_per_worker')} is only used with {param('assignment')}='regular', got {param('assignment')}={assignment!r}")
    if assignment == "regular" and r_v is not None:
        derived = math.ceil(n * ell / r_v)
        if n_workers_v is not None and n_workers_v != derived:
            raise UsageError(
                f"{param('n_workers')}={n_workers_v} contradicts {param('tasks_per_worker')}={r_v}: a "
                f"({ell}, {r_v})-regular graph on {n} tasks has ceil({n}*{ell}/{r_v}) = {derived} workers"
            )
        m = derived
    else:
        m = 50 if n_workers_v is None else n_workers_v
    if spam_given is None:
        spam = spec.default_spammers
    if assignment != "dense":
        check_per_task(m, ell)
    check_size(n, m, k, n * (m if assignment == "dense" else ell) + n * n_extreme, max_memory)
    if not spec.task_parameters:
        confusion, kinds = crowd_matrices(rng, m, k, model, skill_v, spam, adv)
        return realise(rng, Plan(n, confusion, kinds, prior_v, assignment, ell), n_extreme)
    spread = DEFAULT_DIFFICULTY_SPREAD if spread_given is None else spread_given
    ability, kinds = glad_workers(rng, m, k, skill_v, spam, adv)
    task_beta = task_betas(rng, n, spread)
    confusion = one_coin_matrices(expected_accuracy(ability, spread, k), k)
    plan = Plan(n, confusion, kinds, prior_v, assignment, ell, ability=ability, task_beta=task_beta)
    return realise(rng, plan, n_extreme)
