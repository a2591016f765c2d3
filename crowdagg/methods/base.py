"""Base classes of the methods, and the services the base gives every method that declares them.

Each method is one module of mathematics in its family's package under
:mod:`crowdagg.methods` plus one declaration in that family's
``__init__.py`` (:mod:`crowdagg.methods.registry`: its kind and its
parameters, from which the checks, the CLI options and ``crowdagg methods
NAME`` come; whether it takes gold and saved worker models).  The base class owns what every
method shares: the validation of its settings and of the data, the memory
check before fitting, the services resolved once per fit
(:class:`FitContext`: the gold clamp, the start), the checks on the result.

:class:`Aggregator` is the base of a one-pass method, which implements
``_fit``.  :class:`IterativeAggregator` runs the loop of an iterative
method (:func:`crowdagg.methods.loop.iterate`): ``max_iter``, ``tol``, the
progress callback, restarts (``n_init``, seeded, the best objective in the
method's direction kept), the stop rule the method declares and the
non-convergence warning the rule words.  The method supplies ``_start``
(the initial state and objective), ``_step`` (one iteration, returning a
:class:`~crowdagg.methods.loop.Step`) and ``_finish`` (the result).
Building blocks the methods share (votes, ties, one-coin workers, the gold
clamp) are in :mod:`crowdagg.methods.blocks`; start strategies in
:mod:`crowdagg.methods.starts`.

Every method returns the one result type,
:class:`crowdagg.methods.result.AggregationResult`: posteriors, labels, the class
prior, the method's own ``worker_params`` and ``task_params``, the named
objective trace, and confusion matrices where the worker model is or implies
one (computed on demand for methods that do not fit them; a method that
declares ``worker_param_names`` has none, and ``result.confusion`` raises).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..core import memory, threads
from ..data.annotations import AnnotationSet, check_annotations
from ..errors import ConvergenceWarning, CrowdaggWarning, DataError, UsageError, param, warn
from .blocks import PROB_FLOOR as PROB_FLOOR  # re-exported: these lived here before crowdagg.methods.blocks
from .blocks import TieBreaker as TieBreaker
from .blocks import argmax_random_ties as argmax_random_ties
from .blocks import fill_empty_rows as fill_empty_rows
from .blocks import full_m_step as full_m_step
from .blocks import gold_clamp, local_engine
from .blocks import normalize_rows as normalize_rows
from .blocks import one_coin_accuracy as one_coin_accuracy
from .blocks import one_coin_matrices as one_coin_matrices
from .blocks import posterior_confusion as posterior_confusion
from .blocks import prior_m_step as prior_m_step
from .blocks import softmax_rows as softmax_rows
from .loop import MAXIMISE, InnerOptimizer, RelativeChange, Run, Step, StopRule, check_callback, iterate
from .model_file import WarmStart, coerce
from .result import AggregationResult
from .starts import Start, check_init_name, resolve_start, starting_posteriors

if TYPE_CHECKING:  # pragma: no cover
    from .model_file import SavedForm
    from .registry import Method

#: Largest smoothing accepted: far beyond any use, far below overflow.
MAX_SMOOTHING = 1e9


class FitContext(Mapping[str, Any]):
    """One fit's checked parameters, and the services the base resolved for it from the data.

    It reads as the mapping of the validated parameters (``ctx["seed"]``,
    ``ctx.get("tol", 0.0)``): a method's ``_fit`` (and an iterative
    method's ``_start``, ``_step`` and ``_finish``) receive it where they
    received that dict.  Resolved once per fit, before the method runs:

    Attributes
    ----------
    clamp : ndarray of int64, shape (n_tasks,), or None
        Gold labels as the class index each task is clamped to (-1: free),
        from :func:`~crowdagg.methods.blocks.gold_clamp`, for a method whose
        declaration says ``gold=True`` (all -1 when no gold was given); None
        for other methods.  The method's E-step applies it with
        :func:`~crowdagg.methods.blocks.clamp_posteriors` (or hands it to a
        fused kernel that does the same).
    start : Start or None
        For a method that declares ``init``: where start 0 begins
        (:func:`~crowdagg.methods.starts.resolve_start`: a posterior, and
        another method's result when this method starts from its
        parameters); None for other methods.
    warm : WarmStart or None
        For a method declared ``init_workers=True`` given a saved worker
        model: its counts in this fit's classes and workers
        (:class:`~crowdagg.methods.model_file.WarmStart`: the pseudo-counts
        the method's M-step adds, by its ``saved_form``); None otherwise.

    engine : LocalEngine (or another engine of :mod:`crowdagg.engine`)
        What maps the method's block functions over the data's grid and
        reduces their sums (``checked.engine.map_reduce(fn, params)``): the
        method never builds a workspace of its own.
    max_memory : int, float, str or None
        The fit's memory limit, for the checks of the passes the method runs
        (and of another method it runs as a step, a refinement).

    And :meth:`optimizer`: the fit's record of an inner optimiser's runs,
    said once when the fit ends.
    """

    def __init__(self, params: Mapping[str, Any], *, clamp: np.ndarray | None = None,
                 start: Start | None = None, warm: WarmStart | None = None, method: str = "",
                 engine: Any = None, max_memory: memory.MaxMemory = None) -> None:
        self.params = dict(params)
        self.engine = engine
        self.max_memory = max_memory
        self.clamp = clamp
        self.start = start
        self.warm = warm
        self.method = method
        self._optimizers: dict[str, InnerOptimizer] = {}

    def optimizer(self, what: str, advice: str = "") -> InnerOptimizer:
        """The :class:`~crowdagg.methods.loop.InnerOptimizer` of this fit named ``what`` (made on first use).

        Record each run of an inner optimiser in it (``checked.optimizer("the
        M-step").record(result, iteration)``); the base warns once, after the
        loop, when runs stopped short -- across every restart.
        """
        if what not in self._optimizers:
            self._optimizers[what] = InnerOptimizer(self.method, what, advice)
        return self._optimizers[what]

    def report_optimizers(self) -> None:
        """Say, once each, the inner optimisers whose runs stopped short (the base calls it after a fit)."""
        for tally in self._optimizers.values():
            tally.report()

    def start_posterior(self, data: AnnotationSet, start: int, rng: np.random.Generator) -> np.ndarray | None:
        """The posteriors restart ``start`` begins from: at start 0 :attr:`start`'s posterior as it is (None:
        none given, the method's soft vote, counted in its blocks on any engine); at later starts that (or the
        soft vote) blended with noise (:func:`~crowdagg.methods.starts.starting_posteriors`)."""
        first = None if self.start is None else self.start.posterior
        return first if start == 0 else starting_posteriors(data, start, rng, first, self.engine)

    def __getitem__(self, name: str) -> Any:
        return self.params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)


#: :attr:`Aggregator.posterior_form`: the posteriors are π_k Π θ_w[k, l] over a task's answers.
PRODUCT = "product"
#: :attr:`Aggregator.posterior_form`: the posteriors are a (weighted) vote's shares.
SHARES = "shares"


class Declared:
    """What every method class shares: its declaration, and its settings stored by ``__init__`` and checked
    from it (:meth:`check_params`), the data never needed.

    A subclass sets ``name``, the key of its declaration in
    :mod:`crowdagg.methods.registry` -- which gives its summary and its parameters
    (name, type, default, range).  ``__init__`` takes the declared parameters as
    keywords (and ``gold``, ``init_workers`` for methods declared to take them);
    anything else is a :class:`~crowdagg.errors.UsageError` naming what the method takes.
    :class:`Aggregator` (categorical answers) and
    :class:`~crowdagg.methods.numeric.base.NumericAggregator` (numeric answers) build on it.
    """

    name: ClassVar[str] = ""

    def __init__(self, **params: Any) -> None:
        spec = self.spec()
        allowed = set(spec.param_names) | ({"gold"} if spec.gold else set())
        allowed |= {"init_workers"} if spec.init_workers else set()
        unknown = sorted(set(params) - allowed)
        if "init_workers" in unknown:
            from .registry import METHODS

            raise UsageError(
                f"method {self.name!r} cannot start from a saved worker model ({param('init_workers')}): it defines "
                "no counts to add to its own; methods that do: "
                + ", ".join(m.name for m in METHODS.values() if m.init_workers)
            )
        if unknown:
            raise UsageError(
                f"method {self.name!r} does not take {', '.join(param(u) for u in unknown)}; it takes: "
                + (", ".join(param(p) for p in (*spec.param_names, *sorted(allowed - set(spec.param_names))))
                   or "no parameters")  # mean and median
            )
        for p in spec.params:  # None stands for the declared default
            value = params.get(p.name)
            setattr(self, p.name, p.default if value is None else value)
        if spec.gold:
            self.gold = params.get("gold")
        if spec.init_workers:
            self.init_workers = params.get("init_workers")

    @classmethod
    def spec(cls) -> Method:
        """The method's declaration (:mod:`crowdagg.methods.registry`)."""
        from .registry import get

        return get(cls.name)

    @classmethod
    def params(cls) -> tuple[str, ...]:
        """Names of the declared parameters."""
        return cls.spec().param_names

    def get_params(self) -> dict[str, Any]:
        return {p: getattr(self, p) for p in self.params()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def check_params(self) -> dict[str, Any]:
        """The settings, validated from their declarations (no data needed): name -> checked value.

        Raises :class:`~crowdagg.errors.UsageError` naming the parameter.
        The CLI calls it before reading any input; :meth:`fit` calls it too.
        """
        checked = {p.name: p.check(getattr(self, p.name)) for p in self.spec().params}
        if "init" in checked:  # the method itself, or one that gives no posteriors: refused before any data is read
            check_init_name(self.name, checked["init"])
        return checked


class Aggregator(Declared):
    """Base class of the categorical methods: settings are stored by ``__init__``, checked by :meth:`fit`.

    A subclass sets ``name`` (:class:`Declared`) and implements :meth:`_fit` (and
    :meth:`memory_needed` when it allocates more than the posteriors).
    """

    #: The checked saved worker model of this fit (``init_workers``), read by :meth:`_prepare`.
    _saved: Any = None
    #: What to do when :meth:`memory_needed` exceeds the limit.
    memory_advice: ClassVar[str] = "its posteriors alone are tasks × classes: use fewer classes"
    #: For a method declared ``init_workers``: its :class:`~crowdagg.methods.model_file.SavedForm` (what
    #: ``--save-workers`` writes, how ``--init-workers``' counts enter its fit), defined in its own module.
    saved_form: ClassVar[SavedForm | None] = None
    #: The one-number parameters its results hold per worker when they hold no worker confusion (None: they
    #: hold or imply one, and ``--workers`` is the long confusion form), and per task: the columns of
    #: ``--workers`` and ``--task-params`` (:meth:`AggregationResult.worker_columns`), declared so that the CLI
    #: can check those outputs before the fit; its results must agree.
    worker_param_names: ClassVar[tuple[str, ...] | None] = None
    task_param_names: ClassVar[tuple[str, ...]] = ()
    #: The per-task yes/no columns its results hold (:attr:`AggregationResult.flags`: twothird's ``accepted``), a
    #: verdict of its own rule on its own labels -- which a pool of methods (``auto``) could not carry.
    flag_names: ClassVar[tuple[str, ...]] = ()
    #: How its posteriors are made of the answers, so that one worker's answers can be taken out of them
    #: (:func:`crowdagg.reports.workers.leave_one_out`): :data:`PRODUCT` -- the class prior times the product of
    #: the answers' confusion entries, ``p_t(k) ∝ π_k Π θ_w[k, l]`` over task t's answers (exactly, or as a
    #: mean-field or belief-propagation approximation of it), θ its results'
    #: :attr:`~crowdagg.methods.result.AggregationResult.confusion`; :data:`SHARES` -- a vote's shares, each
    #: answer weighted by its worker's :attr:`vote_weight`; ``""`` -- otherwise (glad's product is of an ability and
    #: a difficulty, no confusion; kos' are messages).
    posterior_form: ClassVar[str] = ""
    #: For :data:`SHARES`: the worker parameter that is each worker's vote weight (None: one vote an answer).
    vote_weight: ClassVar[str | None] = None

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        """Bytes the fit will allocate beyond the data, and where they come from (for messages)."""
        return 4.0 * 8 * data.n_tasks * data.n_classes, _tasks_by_classes(data)

    def fit(
        self, data: AnnotationSet, *, callback: Any = None, max_memory: memory.MaxMemory = None,
        engine: Any = None,
    ) -> AggregationResult:
        """Aggregate ``data``.

        ``engine`` runs the method's block functions (:mod:`crowdagg.engine`):
        None or ``"local"`` for this machine's threads, or an engine object.
        ``callback(iteration, objective)`` is called after each iteration.
        ``max_memory`` (bytes or text such as ``"4G"``; default 80% of the
        available memory) bounds what the fit may allocate: a larger need is
        refused up front with :class:`~crowdagg.errors.ResourceError`.
        """
        check_annotations(data, f"{self.name}.fit(data)")  # a DataFrame: UsageError, was a bare TypeError
        if data.n_tasks == 0:
            raise DataError("no tasks to aggregate")
        check_callback(callback)
        checked = self.check_params()
        self._prepare(data, max_memory)
        need, what = self.memory_needed(data)
        if self._saved is not None:  # the saved model's counts, in this fit's classes and workers
            need += WarmStart.memory(data, self._saved, self.name)
        memory.check(need, what, max_memory, advice=self.memory_advice)
        engine = _engine(engine, data)
        context = self._context(data, checked, max_memory, engine)
        with threads.fit_scope():  # BLAS on one thread beside the kernels; torch on the policy's count
            result = self._fit(data, context, callback)
        self._check_result(data, result, context, max_memory)
        return result

    def _check_result(self, data: AnnotationSet, result: AggregationResult, context: FitContext,
                      max_memory: memory.MaxMemory) -> None:
        """What every fit's result goes through: the inner optimisers said, the warm start's workers carried,
        shapes and posteriors checked, a collapse and tasks without answers warned about."""
        context.report_optimizers()
        if context.warm is not None and result.init_model is None:
            # The warm start is the base's service: the next save carries the saved model's workers this batch
            # lacks, whether or not the method's _finish passed init_model.
            result.init_model = context.warm.model
        result.max_memory = max_memory
        result.check_shapes()
        _check_posteriors(result, "smoothing" in self.spec().param_names)
        _check_collapse(result, self.collapse_advice)
        n_empty = int(np.count_nonzero(data.answers_per_task == 0))
        if n_empty:
            warn(
                CrowdaggWarning(
                    f"{n_empty} task(s) have no answers: their posterior is {self.empty_posterior} "
                    "(n_answers = 0 in the output)"
                )
            )

    def _context(self, data: AnnotationSet, checked: dict[str, Any], max_memory: memory.MaxMemory,
                 engine: Any = None) -> FitContext:
        """The services resolved once for this fit: the gold clamp (a method declared with ``gold=True``),
        then the start (a method that declares ``init``; another method's fit is bounded by ``max_memory``;
        the votes and another method's fit run on the fit's ``engine``)."""
        spec = self.spec()
        gold = self.gold if spec.gold else None
        clamp = gold_clamp(data, gold) if spec.gold else None
        start = None
        if "init" in checked:
            # the resolved clamp, not the gold itself: another method that takes gold reads it without warning again
            start = resolve_start(self, data, checked["init"], checked["seed"], None if gold is None else clamp,
                                  max_memory, engine)
        # Every start adds the same pseudo-counts: a saved model is a prior, not a starting point.
        warm = None if self._saved is None else WarmStart(self._saved, data, self.name)
        return FitContext(checked, clamp=clamp, start=start, warm=warm, method=self.name, engine=engine,
                          max_memory=max_memory)

    def _prepare(self, data: AnnotationSet, max_memory: memory.MaxMemory) -> None:
        """Read what the fit needs besides the data before :meth:`memory_needed` runs: the saved worker model
        of a method declared ``init_workers=True`` (checked strictly, its parse bounded by ``max_memory``)."""
        given = getattr(self, "init_workers", None) if self.spec().init_workers else None
        self._saved = None if given is None else coerce(given, max_memory)

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        """The method: ``checked`` reads as the validated parameters (``checked["seed"]`` among them) and
        carries the services the base resolved (:class:`FitContext`)."""
        raise NotImplementedError

    #: What the posterior of a task without answers is, for the warning that counts them.
    empty_posterior: ClassVar[str] = "the class prior"

    #: What to try when a fit collapses onto few classes (:func:`_check_collapse`).
    collapse_advice: ClassVar[str] = "try ds, whose full confusion matrices keep each class's own error rates"


class IterativeAggregator(Aggregator):
    """A method that iterates to a fixed point; the loop lives here (and in :mod:`.loop`), the mathematics in the subclass.

    The subclass supplies pure steps:

    * :meth:`_start` -- the starting state and its objective (or None).
      Start 0 is the method's own start: for a method that declares
      ``init``, from ``checked.start`` (:class:`~crowdagg.methods.starts.Start`:
      a posterior, or another method's result whose worker model this
      method shares); later starts, when ``n_init`` is declared, draw from
      ``rng`` (seeded by the seed and the start's index).
    * :meth:`_step` -- one iteration, updating the state in place; it
      returns a :class:`~crowdagg.methods.loop.Step`: ``Step(objective=f)``,
      ``Step(residual=r)``, ``Step(changed=n)`` or several of them -- what
      the method's stop rule reads.  The objective, when given, goes into
      the result's trace and to the progress callback.
    * :meth:`_finish` -- the result from the state of the best start.

    and declares, as class attributes:

    * ``stop_rule`` -- a :class:`~crowdagg.methods.loop.StopRule` value:
      ``RelativeChange()`` (default: ``|f - f_prev| <= tol |f_prev|``),
      ``NoLabelChanged()``, ``Residual("messages")`` (``residual <= tol``),
      ``AbsoluteGain()`` (crowd-kit's: the objective improves by less than
      ``tol``);
    * ``objective_direction`` -- ``"maximise"`` (default), ``"minimise"``
      or ``"none"``: which restart wins (ties keep the earlier; none: the
      first);
    * ``objective_name`` (e.g. "log-likelihood"; default "objective") and
      ``loop_name`` (e.g. "EM"; default ""), for the non-convergence
      warning the rule words and the result's ``objective_name`` (the
      base fills the result's ``n_iter``, ``converged`` and objective trace
      from the run where ``_finish`` leaves them out);
    * ``worker_form`` -- the form of its worker parameters (``"confusion"``,
      ``"one-coin"``, ...) -- and ``starts_from``, the forms another
      method's result may have for this method to start from its
      parameters (``-p init=METHOD``) rather than from its posteriors.

    Each step receives ``checked`` (:class:`FitContext`): the checked
    parameters, the gold ``clamp`` (apply it in the E-step with
    :func:`~crowdagg.methods.blocks.clamp_posteriors`) and the resolved
    ``start``.  The iteration cap (``max_iter``), ``tol``, the progress
    callback, restarts (``n_init``) and the non-convergence warning are
    handled once, here; an inner optimiser's runs are recorded in
    ``checked.optimizer(what)`` (:meth:`FitContext.optimizer`), and the base
    says once, after the fit, when any stopped short.
    """

    stop_rule: ClassVar[StopRule] = RelativeChange()
    objective_direction: ClassVar[str] = MAXIMISE
    objective_name: ClassVar[str] = "objective"
    loop_name: ClassVar[str] = ""
    worker_form: ClassVar[str | None] = None
    starts_from: ClassVar[tuple[str, ...]] = ()

    def _start(self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator) -> tuple[Any, float | None]:
        raise NotImplementedError

    def _step(self, data: AnnotationSet, state: Any, checked: FitContext) -> Step:
        """One iteration; by default the state's own ``iterate()`` (a fused E and M step returning the
        objective), as the EM states (ds, ds-clust, mf) have it."""
        return Step(objective=state.iterate())

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        raise NotImplementedError

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        tol = checked.get("tol", 0.0)
        best = iterate(
            lambda start, rng: self._start(data, checked, start, rng),
            lambda state: self._step(data, state, checked),
            rule=self.stop_rule, max_iter=checked["max_iter"], seed=checked["seed"], tol=tol,
            n_init=checked.get("n_init", 1), direction=self.objective_direction, callback=callback,
        )
        if not best.converged and not best.halted and self.stop_rule.warns(tol):  # a halt: the method says why
            warn(ConvergenceWarning(self.stop_rule.not_converged(
                self.name, checked["max_iter"], tol, self.objective_name, self.loop_name)))
        result = self._finish(data, best, checked)
        # The run's outcome is the loop's to report: filled in where _finish left the defaults.
        if not result.n_iter:
            result.n_iter, result.converged = best.n_iter, best.converged
        if not len(result.objective) and best.trace:
            result.objective, result.objective_name = np.asarray(best.trace), result.objective_name or self.objective_name
        return result


def _engine(engine: Any, data: AnnotationSet) -> Any:
    """The engine a fit runs on: the local engine over ``data`` for None or ``"local"``, or the given engine
    (:func:`~crowdagg.methods.blocks.local_engine`)."""
    return local_engine(data, engine, "the fit's")


def _tasks_by_classes(data: AnnotationSet) -> str:
    return f"{data.n_tasks:,} tasks × {data.n_classes:,} classes"


def _check_posteriors(result: AggregationResult, smoothing: bool = False) -> None:
    """Every output finite, every row a distribution -- or a clear error, never a NaN file."""
    post = result.posteriors
    ok = np.isfinite(post).all() and np.isfinite(result.prior).all()
    if ok and post.size:
        ok = bool(np.all(np.abs(post.sum(axis=1) - 1.0) < 1e-6)) and bool(np.all(post >= 0))
    if not ok:
        raise DataError(
            f"{result.method}: the fit broke down numerically (posteriors that are not finite "
            f"probabilities); try another method{' or a smaller smoothing' if smoothing else ''}"
        )


#: A class whose share of the labels differs from its share of the answers by more than this is a collapse.
COLLAPSE_GAP = 0.25


def label_share_gap(data: AnnotationSet, labels: np.ndarray) -> tuple[float, int, float, float]:
    """How far the labels' class shares stray from the answers': (gap, class, its label share, its answer share).

    The gap is the largest difference, over the classes, between a class's
    share of the hard labels (tasks with answers) and its share of the
    answers (:attr:`~crowdagg.data.annotations.AnnotationSet.answers_per_class`).
    """
    k = data.n_classes
    answered = data.answers_per_task > 0
    if k < 2 or data.n_answers == 0:
        return 0.0, 0, 1.0, 1.0
    answer_share = data.answers_per_class / data.n_answers
    label_share = np.bincount(labels[answered], minlength=k) / np.count_nonzero(answered)
    gap = np.abs(label_share - answer_share)
    c = int(gap.argmax())
    return float(gap[c]), c, float(label_share[c]), float(answer_share[c])


def _check_collapse(result: AggregationResult, advice: str) -> None:
    """Warn once when the labels put far more (or fewer) tasks in a class than the crowd's answers do.

    Measured on the real datasets (benchmarks/bench_collapse.py): every ds
    fit stays within .10 of the answers' shares, while one-coin EM's
    collapses (trec: every task in one class; bluebird: 105 of 108)
    measure .34--.35 and wmv's on trec (a recall of .06 on one class) .28.

    On a handful of tasks a gap that size is chance, not a collapse (one
    task answered ``a`` and ``b`` gets one label: a gap of .5), so the gap
    must also exceed :data:`COLLAPSE_SIGMAS` standard errors of a label
    share drawn at the answers' share over the answered tasks
    (:func:`collapse_floor`): bluebird's 108 tasks need .14, trec's .01.
    """
    gap, c, label_share, answer_share = label_share_gap(result.data, result.labels)
    floor = collapse_floor(answer_share, int(np.count_nonzero(result.data.answers_per_task)))
    if gap > floor:
        warn(CrowdaggWarning(
            f"{result.method}: the fit may have collapsed: {label_share:.0%} of the labels are "
            f"{result.data.classes[c]!r}, against {answer_share:.0%} of the answers (a gap of {gap:.2f}, over "
            f"{COLLAPSE_GAP}); check a few labels against the truth, or {advice}"
        ))


#: How many standard errors of chance a collapse's gap must exceed beside :data:`COLLAPSE_GAP`.
COLLAPSE_SIGMAS = 3.0


def collapse_floor(answer_share: float, n_answered: int) -> float:
    """The gap over which a class's label share counts as a collapse: .25, or chance on few tasks.

    ``COLLAPSE_SIGMAS`` standard errors of the share of ``n_answered``
    labels each drawn in the class with probability ``answer_share``.
    """
    if n_answered <= 0:
        return float("inf")
    noise = COLLAPSE_SIGMAS * float(np.sqrt(answer_share * (1.0 - answer_share) / n_answered))
    return max(COLLAPSE_GAP, noise)


def make_result(
    method: str,
    data: AnnotationSet,
    post: np.ndarray,
    labels: np.ndarray,
    prior: np.ndarray,
    confusion: Any = None,
    **extra: Any,
) -> AggregationResult:
    """An :class:`AggregationResult`.

    ``confusion``: a callable computing the full confusion on demand, for
    methods whose worker parameters are something else (an array of them
    belongs in ``worker_params={"confusion": ...}``).  ``extra``: the
    result's other fields (``worker_params``, ``objective``, ...).
    """
    if confusion is not None and not callable(confusion):
        raise TypeError("make_result: confusion is a callable computing it on demand; an array of it belongs in "
                        "worker_params={'confusion': ...}")
    return AggregationResult(method=method, posteriors=post, labels=labels, prior=prior, data=data,
                             confusion_fn=confusion, **extra)
