"""crowd-kit's ``GLAD``: its EM as settings of crowdagg's loop, on the kernels of crowdagg's ``glad``.

``GLAD`` keeps crowd-kit's fixed class prior (uniform over the labels in
order of first appearance, or ``labels_priors``), starts at alpha = 1,
log beta = 1, runs its M-step as scipy's conjugate gradient stopped after
``m_step_max_iter`` iterations (``gtol=m_step_tol``) on its Q (the
expected complete-data log-likelihood plus the log-densities of the
priors on alpha and log beta), stops when Q per (answer, class) rises by
less than ``tol`` -- the first iteration against the start's Q *not*
divided --, takes ``probas_``/``labels_`` from the E-step before the last
M-step, and lays them out as crowd-kit: ``probas_`` with tasks and labels
sorted (columns named ``variable``, their dtype as crowd-kit's E-step
makes it), ``alphas_`` by worker and ``betas_`` (log beta) by task in
order of first appearance, their indexes with ``pd.unique``'s dtypes.

Its M-step stops far from converged and its line search makes the result
sensitive to the last bit of Q: multiplying its Q and gradient by 1 +
1e-15 moves crowd-kit's own bluebird abilities by 6e-3 after six
iterations.  The two agree step for step (to ~1e-6 after two iterations on
the real datasets), but after several their rounding differences have
grown to ~1e-3 .. 1e-1 and a label at a near-tie may differ (about one
task in a thousand on rte, sentiment, trec and web,
``benchmarks/crowdkit_glad_reference.py``); with each M-step run to
convergence (``m_step_max_iter=1000, m_step_tol=1e-8``) they agree to
~1e-5.

It runs in crowdagg's loop on the kernels of crowdagg's ``glad``
(:mod:`crowdagg.kernels.glad`'s block functions on the local engine: the
E-step, the objective and its gradient), with crowd-kit's start, M-step, Q
and stopping rule as its settings (:class:`_GladEM`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..methods.loop import Step
from ._answers import Answers, MissingColumn, as_numbers, check_count, check_number, masked, sort_order, top_labels
from ._loop import Flavour

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..data.annotations import AnnotationSet

#: The standard normal density's constant, sqrt(2 pi), as scipy's ``norm.pdf`` divides by it.
_NORM_PDF_C = math.sqrt(2.0 * math.pi)


def _log_normal_pdf(x: np.ndarray) -> np.ndarray:
    """log N(x; 0, 1) as crowd-kit computes it: the log of the density (scipy's ``norm.pdf``), so -inf once
    the density underflows (|x| > 38.6), where crowd-kit's Q is -inf and its M-step's line search backs off."""
    with np.errstate(divide="ignore", under="ignore"):
        return np.log(np.exp(-x * x / 2.0) / _NORM_PDF_C)


def _glad_columns(labels: pd.Index) -> pd.Index:
    """The columns of crowd-kit's GLAD ``probas_`` for its classes ``labels`` (its prior's index): sorted, with
    the dtype pandas gives them.

    crowd-kit builds one row per (answer, class), the classes as Python objects (``list(labels)``), sums
    them by (task, class) -- sorting the classes -- and adds its log-prior, indexed by ``labels``, on the
    class level: the columns are what pandas makes of aligning the two (an object column of numbers stays
    object, a categorical gives text, nullable integers stay nullable).  Computed here on one task's K
    cells, not over the answers.
    """
    import pandas as pd

    one_task = pd.MultiIndex.from_arrays([np.zeros(len(labels), dtype=np.int64), pd.Index(list(labels))])
    aligned = pd.Series(0.0, index=one_task).add(pd.Series(0.0, index=labels), level=1)
    return aligned.unstack().columns.rename("variable")


class _GladEM(Flavour):
    r"""crowd-kit's GLAD EM as settings of crowdagg's loop, on the kernels of crowdagg's ``glad``.

    Not a second GLAD: the iterations run in :func:`crowdagg.methods.loop.iterate`,
    and the E-step, the M-step's objective and its gradient are the block
    functions of :mod:`crowdagg.kernels.glad` on the local engine.  What makes it crowd-kit's:

    * the parameters are one vector ``x`` = (α (n_workers,), log β
      (n_tasks,)), workers and tasks in order of first appearance (as
      crowd-kit's), starting at 1 -- whatever the priors' means --, with
      a fixed class prior ``log_prior`` (K,);
    * crowd-kit's Q (:meth:`q_value`): the kernel's expected complete-data
      log-likelihood of the answers plus :math:`\sum \log N(\alpha -
      \mu_\alpha)` and :math:`\sum \log N(\log\beta - \mu_\beta)` (standard
      normal densities, -inf where they underflow; a NaN Q counts as
      -inf), with its gradient;
    * start (:meth:`start`): an E-step, and Q *not* divided by the number
      of rows: crowd-kit compares its first normalised Q with it;
    * iteration (:meth:`step`): an E-step (skipped where the parameters have
      not moved since the last one: it would give the same posteriors),
      then the M-step (:meth:`m_step`: scipy's conjugate gradient on -Q,
      ``maxiter`` and ``gtol`` the constructor's, from the current point),
      reporting Q / (n_answers × K) -- so the fitted α, log β are one M-step
      ahead of the posteriors;
    * stop (``stop_rule``): :class:`~crowdagg.methods.loop.AbsoluteGain`,
      ``Q - Q_prev < tol``; ``n_iter`` is a budget, no warning (none from
      the conjugate gradient either: crowd-kit stops it at ``maxiter`` on
      purpose);
    * one class: crowd-kit's data term is 0 × ∞ on every row, NaN, which
      its sum skips: the data term and its gradient are 0, only the priors
      move α and log β.

    ``means`` (n_workers + n_tasks,) are the priors' means, laid out as ``x``.
    """

    name: ClassVar[str] = "crowdkit.GLAD"

    def __init__(self, data: AnnotationSet, log_prior: np.ndarray, means: np.ndarray, m_step_max_iter: int,
                 m_step_tol: float) -> None:
        self.data = data
        self.log_prior = log_prior
        self.means = means
        self.m_step_max_iter = m_step_max_iter
        self.m_step_tol = m_step_tol
        self.n_rows = data.n_answers * data.n_classes  # crowd-kit's frame: one row per (answer, class)
        self.clamp = np.full(data.n_tasks, -1, dtype=np.int64)  # crowd-kit's GLAD takes no gold

    def memory_needed(self) -> tuple[float, str]:
        """Bytes the fit allocates, and where they come from: crowdagg's GLAD need (its L-BFGS-B history
        bounds the conjugate gradient's few vectors), plus the ``probas_`` frame this surface builds beside it."""
        from ..methods.glad.glad import glad_memory

        d = self.data
        need, what = glad_memory(d)
        return need + 8.0 * d.n_tasks * d.n_classes, what


    def start(self, index: int, rng: np.random.Generator) -> tuple[_GladState, float]:
        from ..engine import LocalEngine

        d = self.data
        state = _GladState()
        state.engine = LocalEngine(d)
        state.x = np.ones(d.n_workers + d.n_tasks)
        self.e_step(state)
        return state, self.q_value(state, state.x)[0]

    def step(self, state: _GladState) -> Step:
        if state.moved:
            self.e_step(state)
        self.m_step(state)
        return Step(objective=self.q_value(state, state.x)[0] / self.n_rows)

    def e_step(self, state: _GladState) -> None:
        """The posteriors and each answer's posterior of its own label (``state.posteriors``) at ``x``."""
        from ..kernels.glad import _e_step

        n_w = self.data.n_workers
        # unchecked: x is ours, of the data's sizes, and the clamp is all -1
        state.posteriors = _e_step(state.engine, state.x[:n_w], state.x[n_w:], self.log_prior, self.clamp)
        state.moved = False

    def q_value(self, state: _GladState, x: np.ndarray) -> tuple[float, np.ndarray]:
        """crowd-kit's Q at ``x`` with the last E-step's posteriors, and its gradient (shaped as ``x``)."""
        from ..kernels.glad import _objective

        n_w = self.data.n_workers
        if self.data.n_classes > 1:
            f, g_alpha, g_log_beta = _objective(state.engine, x[:n_w], x[n_w:], state.posteriors)
            grad = np.concatenate([g_alpha, g_log_beta])
        else:
            f, grad = 0.0, np.zeros_like(x)
        dev = x - self.means
        log_pdf = _log_normal_pdf(dev)
        value = f + float(log_pdf[:n_w].sum()) + float(log_pdf[n_w:].sum())
        return (-math.inf if math.isnan(value) else value), grad - dev

    def m_step(self, state: _GladState) -> None:
        """crowd-kit's M-step: scipy's conjugate gradient on -Q over ``x``, from ``x``, stopped at its budget."""
        from scipy.optimize import minimize

        def negative(x: np.ndarray) -> tuple[float, np.ndarray]:
            value, grad = self.q_value(state, np.ascontiguousarray(x, dtype=np.float64))
            return -value, -grad

        # jac=True: Q and its gradient come from one kernel pass (scipy caches the gradient by x; the iterates
        # are those of crowd-kit's separate fun and jac)
        result = minimize(negative, state.x, method="CG", jac=True, tol=self.m_step_tol,
                          options={"disp": False, "maxiter": self.m_step_max_iter})
        state.x = np.ascontiguousarray(result.x, dtype=np.float64)
        state.moved = True


class _GladState:
    """One crowd-kit GLAD fit: the local engine, the last E-step's ``posteriors`` (each block's posteriors and
    ``q``), the parameters ``x`` = (α, log β), and whether they ``moved`` since that E-step."""

    engine: Any
    posteriors: Any
    x: np.ndarray
    moved: bool


class GLAD:
    r"""GLAD with crowd-kit's ``GLAD`` semantics (Whitehill et al., "Whose vote should count more", NIPS 2009).

    Model: worker w has ability :math:`\alpha_w`, task t the parameter
    :math:`\beta_t > 0` (its difficulty is :math:`1/\beta_t`); an answer is
    the true class with probability :math:`\sigma(\alpha_w \beta_t)`, any
    other of the K classes with :math:`(1 - \sigma(\alpha_w\beta_t))/(K-1)`.
    The class prior is fixed: uniform over the labels in order of first
    appearance, or ``labels_priors`` (a Series indexed by label, which may
    name labels no answer used: more classes).  EM from :math:`\alpha = 1`,
    :math:`\log\beta = 1`: E-step, then an M-step of at most
    ``m_step_max_iter`` conjugate-gradient iterations (scipy's, ``gtol =
    m_step_tol``) on crowd-kit's Q, the expected complete-data
    log-likelihood plus the log-densities of :math:`\alpha_w - \mu_w` and
    :math:`\log\beta_t - \nu_t` under N(0, 1) (``alphas_priors_mean``,
    ``betas_priors_mean``: Series by worker and by task, or a number;
    default 1).  Stop when Q per (answer, class) rises by less than ``tol``
    (a fall stops too; the first iteration compares with the start's Q
    *not* divided, as crowd-kit does), or after ``n_iter``.  The iterations
    run in crowdagg's loop on the kernels of crowdagg's ``glad``
    (:class:`_GladEM`).

    Fitted: ``probas_`` (tasks sorted × labels sorted, the columns named
    ``variable``) and ``labels_`` (``agg_label``) from the E-step before the
    last M-step; ``alphas_`` (``alpha``, by worker) and ``betas_``
    (``beta``, by task: **log** β, as crowd-kit's), in order of first
    appearance; ``priors_`` (the class prior), ``loss_history_``; and what
    crowd-kit's ``_init`` leaves: ``tasks_``, ``workers_``, ``prior_labels_``
    (``pd.unique`` of the columns, or the prior's index), the priors' means
    ``alphas_priors_mean_``, ``betas_priors_mean_`` (as given, or 1 by id).  A
    repeated (task, worker) answer counts again, as in crowd-kit.

    ``silent`` is accepted for crowd-kit's signature: no progress bar is drawn.

    Kept different on purpose: a NaN label is no answer (as in the other
    classes here); empty input and boolean labels give results (crowd-kit
    raises); ``labels_priors`` must give every label of the answers a finite
    non-negative prior, and the priors' means every worker and task a finite
    number (crowd-kit fits NaN); the settings are checked.
    """

    def __init__(
        self,
        n_iter: int = 100,
        tol: float = 1e-5,
        silent: bool = True,
        labels_priors: pd.Series | None = None,
        alphas_priors_mean: pd.Series | float | None = None,
        betas_priors_mean: pd.Series | float | None = None,
        m_step_max_iter: int = 25,
        m_step_tol: float = 1e-2,
    ) -> None:
        self.n_iter = n_iter
        self.tol = tol
        self.silent = silent
        self.labels_priors = labels_priors
        self.alphas_priors_mean = alphas_priors_mean
        self.betas_priors_mean = betas_priors_mean
        self.m_step_max_iter = m_step_max_iter
        self.m_step_tol = m_step_tol

    def __repr__(self) -> str:
        names = ("n_iter", "tol", "silent", "labels_priors", "alphas_priors_mean", "betas_priors_mean",
                 "m_step_max_iter", "m_step_tol")
        return f"GLAD({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def _check(self) -> None:
        check_count(self.n_iter, "n_iter")
        check_number(self.tol, "tol")
        check_count(self.m_step_max_iter, "m_step_max_iter")
        check_number(self.m_step_tol, "m_step_tol")

    def fit(self, data: pd.DataFrame) -> GLAD:
        import pandas as pd

        from ..core import memory

        self._check()
        priors = self.labels_priors
        if priors is not None and not isinstance(priors, pd.Series):
            raise ValueError(f"labels_priors must be a pandas Series indexed by label, got {type(priors).__name__}")
        if priors is not None and priors.index.hasnans:  # as a NaN answer, a NaN label is no class
            raise ValueError("labels_priors names a missing label (NaN)")
        if not isinstance(data, pd.DataFrame):
            Answers.columns_of(data)  # the TypeError every class gives for answers that are no DataFrame
        absent = [name for name in ("worker", "task") if name not in data.columns]
        if absent:  # in crowd-kit's order
            raise MissingColumn(f"the answers have no {absent[0]!r} column")
        ans = Answers(data, () if priors is None else priors.index)
        # crowd-kit's ids and classes, as its ``_init`` leaves them (``pd.unique`` of the columns)
        self.tasks_, self.workers_ = ans.uniques("task"), ans.uniques("worker")
        self.prior_labels_ = ans.uniques("label") if priors is None else priors.index
        if ans.n_answers == 0:
            self._empty()
            return self
        labels = pd.Index(self.prior_labels_)  # crowd-kit's classes
        workers, tasks = pd.Index(self.workers_), pd.Index(self.tasks_)
        # the priors' means as crowd-kit keeps them: as given, or 1 by id
        self.alphas_priors_mean_ = pd.Series(1.0, index=workers) if self.alphas_priors_mean is None \
            else self.alphas_priors_mean
        self.betas_priors_mean_ = pd.Series(1.0, index=tasks) if self.betas_priors_mean is None \
            else self.betas_priors_mean
        means = np.concatenate([_prior_means(self.alphas_priors_mean, workers, "alphas_priors_mean", "worker"),
                                _prior_means(self.betas_priors_mean, tasks, "betas_priors_mean", "task")])
        em = _GladEM(ans.data, _glad_log_prior(ans, priors), means, self.m_step_max_iter, self.m_step_tol)
        # Refused up front with its size (crowd-kit would allocate until the OOM killer stops it).
        memory.check(*em.memory_needed(), advice="the posteriors are tasks × labels: use fewer labels")
        run = em.fit(self.n_iter, self.tol)
        state: _GladState = run.state
        self.loss_history_: list[float] = run.trace
        columns = _glad_columns(labels)
        classes = pd.Index(list(ans.classes), dtype=object).get_indexer(list(columns))
        rows = sort_order(ans.tasks)  # crowd-kit's groupby sorts the tasks
        self.probas_ = pd.DataFrame(state.posteriors.post[np.ix_(rows, classes)], index=ans.tasks[rows].rename("task"),
                                    columns=columns)
        self.labels_ = top_labels(self.probas_)
        # crowd-kit's E-step compares labels and classes (``label == variable``) and adds the log-prior: nullable
        # labels (numbers, or text of pd.NA in Python storage) compare into ``boolean``, and a nullable prior
        # stays nullable -- either way its posteriors come out Float64
        dtype = ans.label_dtype
        na_text = isinstance(dtype, pd.StringDtype) and dtype.storage == "python" and dtype.na_value is pd.NA
        if na_text or masked(dtype) or (priors is not None and masked(priors.dtype)):
            self.probas_ = self.probas_.astype("Float64")
        self.priors_ = priors if priors is not None else pd.Series(1.0 / len(labels), index=labels)
        n_w = len(workers)
        if run.n_iter:  # crowd-kit names the indexes when it rebuilds the Series from the M-step's vector
            workers, tasks = workers.rename("worker"), tasks.rename("task")
        self.alphas_ = pd.Series(state.x[:n_w], index=workers, name="alpha")
        self.betas_ = pd.Series(state.x[n_w:], index=tasks, name="beta")
        return self

    def _empty(self) -> None:
        import pandas as pd

        self.probas_ = pd.DataFrame()
        self.labels_ = pd.Series(dtype=float, name="agg_label")
        self.alphas_ = pd.Series(dtype=float, name="alpha")
        self.betas_ = pd.Series(dtype=float, name="beta")
        self.priors_ = pd.Series(dtype=float) if self.labels_priors is None else self.labels_priors
        self.alphas_priors_mean_ = pd.Series(dtype=float) if self.alphas_priors_mean is None \
            else self.alphas_priors_mean
        self.betas_priors_mean_ = pd.Series(dtype=float) if self.betas_priors_mean is None \
            else self.betas_priors_mean
        self.loss_history_ = []

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:
        return self.fit(data).labels_

    def fit_predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        return self.fit(data).probas_


def _glad_log_prior(ans: Answers, priors: pd.Series | None) -> np.ndarray:
    """The log class prior by class code (K,): uniform, or ``labels_priors`` (checked) at each class."""
    import pandas as pd

    k = ans.n_classes
    if priors is None:
        return np.full(k, np.log(1.0 / k))
    if priors.index.has_duplicates:
        raise ValueError(f"labels_priors lists label {priors.index[priors.index.duplicated()][0]!r} more than once")
    at = pd.Index(list(priors.index), dtype=object).get_indexer(list(ans.classes))
    if (at < 0).any():
        raise ValueError(f"labels_priors has no prior for the label(s) {list(ans.classes[at < 0])} of the answers")
    values = as_numbers(priors, "labels_priors")[at]
    if not np.isfinite(values).all() or (values < 0).any() or not values.sum() > 0:
        raise ValueError("labels_priors must be finite, non-negative and not all 0")
    with np.errstate(divide="ignore"):  # a class of prior 0 is never the label
        if priors.dtype.kind in "iuf" and not isinstance(priors.dtype, pd.ArrowDtype):
            # crowd-kit takes the log of the Series: in its precision (float32 for float32 or Int16, float16 for
            # int8), which its posteriors carry
            return np.log(priors.iloc[at]).to_numpy(dtype=np.float64, na_value=np.nan)
        return np.log(values)

def _prior_means(value: Any, ids: pd.Index, name: str, what: str) -> np.ndarray:
    """The priors' means ``value`` (None: 1, a number, or a Series by id) at each of ``ids``, checked."""
    import pandas as pd

    if value is None:
        return np.ones(len(ids))
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
        return np.full(len(ids), float(value))
    if not isinstance(value, pd.Series):
        raise ValueError(f"{name} must be a number or a pandas Series indexed by {what}, got {type(value).__name__}")
    if value.index.has_duplicates:
        raise ValueError(f"{name} lists {what} {value.index[value.index.duplicated()][0]!r} more than once")
    means = as_numbers(value.reindex(ids), name)
    missing = ~np.isfinite(means)
    if missing.any():
        raise ValueError(f"{name} has no finite value for {int(missing.sum()):,} {what}(s) of the answers, "
                         f"e.g. {ids[np.flatnonzero(missing)[0]]!r}")
    return means
