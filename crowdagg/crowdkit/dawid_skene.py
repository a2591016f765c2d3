"""crowd-kit's ``DawidSkene`` and ``OneCoinDawidSkene``: its EM as settings of crowdagg's loop on the fused EM kernel.

What makes them crowd-kit's (``tests/crowdkit/test_dawid_skene.py`` checks
each against crowd-kit itself):

* ``DawidSkene`` starts from majority-vote shares, runs E-step then M-step
  (so ``errors_``/``priors_`` are one M-step ahead of ``probas_``), and stops
  when crowd-kit's loss -- its ELBO per answer, with the log-prior counted
  once per answer -- rises by less than ``tol`` (a fall stops it too); at
  most ``n_iter`` iterations; ``n_iter=0`` gives the majority vote;
* ``errors_`` has a row per (worker, observed label) pair that occurs in
  the data (in order of first appearance), columns the true labels; cells
  are clipped at 1e-10 before each worker's columns are normalised;
  ``probas_`` after an iteration carries crowd-kit's 1e-10 floor;
* ``true_labels`` (gold) clamps those tasks in every step, as crowd-kit
  does; a gold label no answer used becomes one more class, after the
  others.

They are no second EM: they run in the loop every iterative method of
crowdagg runs in (:func:`crowdagg.methods.loop.iterate`) on its fused EM
kernel, with crowd-kit's start, M-step, loss and stopping rule as settings
(:class:`_EM`); a crowd-kit class of that family is its M-step over
:class:`_EM` and the attributes it adds (``OneCoinDawidSkene`` is a dozen
lines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..methods.blocks import clamp_posteriors, one_coin_matrices, soft_majority_vote
from ..methods.loop import Step
from ..methods.starts import SOFT_VOTE, resolve_start
from ._answers import EPS, Answers, check_count, check_number, first_appearance, sort_order, top_labels
from ._loop import Flavour

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Dense workers × labels² float tables DawidSkene holds at once beyond crowdagg's own EM (its memory check).
_DENSE_TABLES = 6


class _EM(Flavour):
    r"""crowd-kit's Dawid--Skene EM as settings of crowdagg's loop, on crowdagg's fused EM kernel.

    Not a second EM: the iterations run in the loop every iterative method
    of crowdagg runs in (:func:`crowdagg.methods.loop.iterate`: the cap, the
    stop rule, the objective trace), the E-step is the kernel crowdagg's
    ``ds`` runs (:func:`~crowdagg.kernels.em.em_block` on a
    :class:`~crowdagg.engine.LocalEngine` over the answers, gold clamped inside
    it).  What makes it crowd-kit's are these settings:

    * start (:meth:`start`): the start strategy ``init`` (crowd-kit's: the
      majority-vote shares, crowdagg's ``soft-vote``,
      :func:`~crowdagg.methods.starts.resolve_start`), gold tasks one-hot
      (:func:`~crowdagg.methods.blocks.clamp_posteriors`), then one M-step
      -- with ``initial_error`` by its strategy -- and no objective
      (crowd-kit's loss starts at -inf), where crowdagg's ``ds`` goes on to
      an E-step;
    * iteration (:meth:`step`): E-step, then M-step, reporting crowd-kit's
      loss (:func:`_loss`: its ELBO per answer) -- so the fitted errors and
      prior are one M-step ahead of the posteriors;
    * stop (``stop_rule``): :class:`~crowdagg.methods.loop.AbsoluteGain`,
      the loss rising (``objective_direction``: it is maximised) by less
      than ``tol``; a fall stops too, ``tol=-inf`` never stops; ``n_iter``
      is a budget, not a failure: no warning (crowd-kit gives none);
    * floors: the log-prior and the loss read the prior floored at 1e-10,
      and the prior stays floored after an iteration (crowd-kit floors it
      in place);
    * the M-step (:meth:`m_step`), the one setting that differs between
      crowd-kit's classes.

    A crowd-kit class of the Dawid--Skene family is a subclass that
    overrides :meth:`m_step` (:class:`_OneCoinEM`), named by its public
    class's ``_em``.  Array layouts as the kernel's: ``errors`` (n_workers,
    K_observed, K_true), ``counts`` the same, ``prior`` (K,); ``clamp``
    (n_tasks,) the class code of a gold task, -1 for the others.
    """

    name: ClassVar[str] = "crowdkit.DawidSkene"  # (for resolve_start, whose messages name the method)
    init: ClassVar[str] = SOFT_VOTE

    def __init__(self, ans: Answers, clamp: np.ndarray, initial: Any = None) -> None:
        self.ans = ans
        self.data = ans.data
        self.clamp = clamp
        self.initial = initial  # (counts, present) -> (errors, initial_error frame): the first M-step's own

    @staticmethod
    def m_step(counts: np.ndarray, present: np.ndarray, n_answers: np.ndarray) -> np.ndarray:
        """errors[w, observed, true]: counts clipped at EPS on the data's pairs, each true class's column normalised."""
        num = np.where(present[:, :, None], np.maximum(counts, EPS), 0.0)
        total = num.sum(axis=1, keepdims=True)
        return num / np.where(total > 0, total, 1.0)

    def memory_needed(self) -> tuple[float, str]:
        """Bytes the fit allocates, and where they come from: crowdagg's EM need, plus the dense workers ×
        labels² tables this surface keeps beside it (errors, their logs, the M-step's and the loss's
        temporaries, the errors_ frame)."""
        from ..methods.em.ds import em_memory

        d = self.data
        need, what = em_memory(d)
        return need + 8.0 * _DENSE_TABLES * d.n_workers * d.n_classes ** 2, what


    def start(self, index: int, rng: np.random.Generator) -> tuple[_EMState, None]:
        from ..engine import LocalEngine
        from ..kernels.em import EMParams, em_block

        d, k = self.data, self.data.n_classes
        state = _EMState()
        state.present = (np.bincount(d.cell, minlength=d.n_workers * k) > 0).reshape(d.n_workers, k)
        state.engine = LocalEngine(d)
        first = resolve_start(self, d, self.init, seed=0).posterior
        q = clamp_posteriors(soft_majority_vote(d, state.engine) if first is None else first, self.clamp)
        state.post, state.last = q, None
        state.prior = q.mean(axis=0)
        state.counts = state.engine.map_reduce(em_block, EMParams(post=q))[0][0]
        if self.initial is None:
            state.errors, state.frame = self.m_step(state.counts, state.present, d.answers_per_worker), None
        else:
            state.errors, state.frame = self.initial(state.counts, state.present)
        return state, None

    def step(self, state: _EMState) -> Step:
        from ..kernels.em import EMParams, em_block

        log_e = np.log(np.where(state.present[:, :, None], state.errors, 1.0))  # absent pairs are never read
        # The E-step, its statistics and its posteriors' Σ q log q (floored at EPS, crowd-kit's) in one pass.
        state.last = EMParams(np.log(np.maximum(state.prior, EPS)), log_e, clamp=self.clamp, entropy_floor=EPS)
        (state.counts, sums, _, qlogq), _ = state.engine.map_reduce(em_block, state.last)
        prior = sums / self.data.n_tasks
        state.errors = self.m_step(state.counts, state.present, self.data.answers_per_worker)
        state.frame = None  # the fitted errors are the M-step's now, not initial_error's
        loss = _loss(state.counts, state.errors, state.present, prior, qlogq, self.ans.n_answers)
        state.prior = np.maximum(prior, EPS)  # crowd-kit's loss step floors its priors (and posteriors) in place
        return Step(objective=loss)


class _EMState:
    """One crowd-kit EM fit: its engine, the (worker, label) pairs of the data (``present``), the current prior,
    errors and the statistics they came from, the ``initial_error`` frame while the errors are its, and where
    the posteriors come from: the start's (``post``), or the last E-step's parameters (``last``)."""

    engine: Any
    post: np.ndarray
    last: Any
    present: np.ndarray
    prior: np.ndarray
    errors: np.ndarray
    counts: np.ndarray
    frame: pd.DataFrame | None


class _OneCoinEM(_EM):
    """crowd-kit's one-coin M-step as the one setting over :class:`_EM`."""

    @staticmethod
    def skills(counts: np.ndarray, n_answers: np.ndarray) -> np.ndarray:
        """Each worker's skill: the mean over its answers y of q_t(y), shape (n_workers,)."""
        return np.trace(counts, axis1=1, axis2=2) / np.maximum(n_answers, 1)

    @classmethod
    def m_step(cls, counts: np.ndarray, present: np.ndarray, n_answers: np.ndarray) -> np.ndarray:
        """Skill s on the diagonal, (1 - s)/(K - 1) off it, clipped to [EPS, 1 - EPS] on the data's pairs; not
        renormalised (crowd-kit's)."""
        mats = one_coin_matrices(cls.skills(counts, n_answers), counts.shape[1])
        return np.where(present[:, :, None], np.clip(mats, EPS, 1.0 - EPS), 0.0)


class DawidSkene:
    r"""Dawid--Skene EM with crowd-kit's ``DawidSkene`` semantics.

    Model: task t has class c with probability :math:`p_c`; worker w answers
    y with probability :math:`e_w(y \mid c)`.  Start: majority-vote shares
    :math:`q`, then :math:`p` = their mean and :math:`e` from the counts
    :math:`\sum q_t(c)` over w's answers y (clipped at 1e-10, each true
    class's column normalised).  Each iteration: E-step
    :math:`q_t(c) \propto p_c \prod e_w(y \mid c)`, M-step, and the loss
    :math:`\big(\sum_{\text{answers}} \sum_c q_t(c)(\ln e_w(y \mid c) + \ln
    p_c) - \sum_t \sum_c q_t(c) \ln q_t(c)\big) / L`; stop when it rises by
    less than ``tol``, or after ``n_iter``.  The iterations run in
    crowdagg's loop (:class:`_EM`: crowd-kit's start, M-step, loss and
    stopping rule as its settings).

    ``initial_error_strategy`` -- how ``fit(..., initial_error=frame)``
    (rows (worker, observed label), columns the true labels) enters the
    first M-step: ``"assign"`` replaces the counts (every (worker, label)
    pair of the data must be there; a frame of probabilities must have
    each worker's columns summing to 1), ``"addition"`` adds it to them
    (historical counts).

    Fitted: ``probas_`` (tasks × labels), ``priors_`` (``prior``),
    ``errors_`` (rows (worker, label), columns the true labels),
    ``labels_`` (``agg_label``), ``loss_history_``.
    """

    #: The EM flavour this class runs: its settings over crowdagg's loop.
    _em: ClassVar[type[_EM]] = _EM

    def __init__(self, n_iter: int = 100, tol: float = 1e-5, initial_error_strategy: str | None = None) -> None:
        self.n_iter = n_iter
        self.tol = tol
        self.initial_error_strategy = initial_error_strategy

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n_iter={self.n_iter!r}, tol={self.tol!r}, "
                f"initial_error_strategy={self.initial_error_strategy!r})")

    def _check(self) -> None:
        check_count(self.n_iter, "n_iter")
        check_number(self.tol, "tol")

    def _empty(self) -> None:
        import pandas as pd

        self.probas_ = pd.DataFrame()
        self.priors_ = pd.Series(dtype=float, name="prior")
        self.errors_ = pd.DataFrame()
        self.labels_ = pd.Series(dtype=float, name="agg_label")

    def fit(
        self, data: pd.DataFrame, true_labels: pd.Series | None = None, initial_error: pd.DataFrame | None = None
    ) -> DawidSkene:
        self._check()
        if true_labels is not None:
            true_labels = true_labels[true_labels.notna()]  # a missing gold label is no gold
        extra = () if true_labels is None else true_labels.to_numpy()
        ans = Answers(data, extra)
        if ans.n_answers == 0:
            self._empty()
            return self
        clamp = np.full(len(ans.tasks), -1, dtype=np.int64)
        if true_labels is not None:
            rows = ans.tasks.get_indexer(true_labels.index)
            known = rows >= 0
            clamp[rows[known]] = ans.classes.get_indexer(true_labels.to_numpy()[known])
        self._run(ans, clamp, initial_error)
        return self

    def _run(self, ans: Answers, clamp: np.ndarray, initial_error: pd.DataFrame | None) -> None:
        """Fit the EM flavour ``_em`` in crowdagg's loop, then label its state as crowd-kit does."""
        from ..core import memory
        from ..kernels.em import em_block

        initial = None
        if initial_error is not None and self.initial_error_strategy is not None:
            def initial(counts: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
                return self._first_errors(ans, counts, present, initial_error)

        em = self._em(ans, clamp, initial)
        # Refused up front with its size (crowd-kit would allocate until the OOM killer stops it).
        memory.check(*em.memory_needed(),
                     advice="its tables grow with workers × labels²: use MajorityVote or Wawa, or fewer labels")
        run = em.fit(self.n_iter, self.tol)
        state: _EMState = run.state
        self.loss_history_: list[float] = run.trace
        if run.n_iter:  # the last E-step's posteriors: its pass again, the blocks' rows kept (the same bits)
            q = np.maximum(state.engine.gather(state.engine.map_reduce(em_block, state.last, keep=True)[1]), EPS)
        else:
            q = state.post
        sort = not run.n_iter and not first_appearance()  # n_iter=0: the majority vote's order
        self.probas_ = ans.probas(q, rows=sort_order(ans.tasks) if sort else None)
        self.priors_ = ans.priors(state.prior)
        if run.n_iter and len(ans.classes) == len(ans.answered):
            # crowd-kit's E-step gives its columns the label column's dtype (not with a gold-only label, which
            # that dtype may not hold: astype(bool) would turn 'maybe' into a second True)
            self.probas_.columns = self.probas_.columns.astype(ans.label_dtype)
            self.priors_.index = self.probas_.columns  # its priors are the probabilities' column means
        self.errors_ = state.frame if state.frame is not None else ans.errors(state.errors)
        if run.n_iter and len(ans.classes) == len(ans.answered):
            order = _e_step_order(self.probas_.columns, self.errors_.columns)
            self.probas_, self.priors_ = self.probas_.iloc[:, order], self.priors_.iloc[order]
            self.errors_ = self.errors_.iloc[:, order]
        self.labels_ = top_labels(self.probas_)
        self._fitted(ans, state.counts)

    def fit_predict(self, data: pd.DataFrame, true_labels: pd.Series | None = None,
                    initial_error: pd.DataFrame | None = None) -> pd.Series:
        return self.fit(data, true_labels, initial_error).labels_

    def fit_predict_proba(self, data: pd.DataFrame, true_labels: pd.Series | None = None,
                          initial_error: pd.DataFrame | None = None) -> pd.DataFrame:
        return self.fit(data, true_labels, initial_error).probas_

    def _fitted(self, ans: Answers, counts: np.ndarray) -> None:
        """Hook for what a subclass adds to the fitted attributes (``counts``: the last M-step's statistics)."""

    def _first_errors(
        self, ans: Answers, counts: np.ndarray, present: np.ndarray, initial_error: pd.DataFrame
    ) -> tuple[np.ndarray, pd.DataFrame]:
        """The first M-step with ``initial_error`` by the strategy: (errors tensor, crowd-kit's frame)."""
        import pandas as pd

        if initial_error.index.has_duplicates:
            raise ValueError("initial_error has a (worker, label) row more than once")
        if list(initial_error.index.names) != ["worker", "label"]:
            raise ValueError(
                f"The index of initial_error must be ['worker', 'label'], but got {list(initial_error.index.names)}"
            )
        start = ans.errors(counts)
        if self.initial_error_strategy == "assign":
            absent = [c for c in ans.answered if c not in initial_error.columns]
            if absent:
                raise ValueError(f"initial_error has no column for the label(s) {absent} of the data")
            missing = ~start.index.isin(initial_error.index)
            if missing.any():
                n = start.index[missing].get_level_values("worker").nunique()
                raise ValueError(
                    f"All the workers in data should be in initial_error: can not find {n} workers' error matrix "
                    "in initial_error"
                )
            if (initial_error.to_numpy() <= 1.0).all():
                sums = initial_error.groupby(level="worker").sum().to_numpy()
                if not np.allclose(sums, 1.0):
                    raise ValueError("The sum of each worker's error matrix in initial_error should be 1.0")
            frame = initial_error.astype(np.float64)
            for c in ans.classes[~ans.classes.isin(initial_error.columns)]:  # a gold-only class: the data's counts
                frame[c] = start[c].reindex(frame.index).fillna(0.0)
        elif self.initial_error_strategy == "addition":
            frame = start.add(initial_error, fill_value=0.0)
        else:
            raise ValueError(
                f"Invalid initial_error_strategy: {self.initial_error_strategy!r}, should be 'assign' or 'addition'"
            )
        frame = frame.loc[:, frame.columns.isin(ans.classes)]  # columns that are no label: dropped (a mask, as
        # a list of bool labels would select rows)
        frame = frame.clip(lower=EPS)
        frame = frame / frame.groupby(level="worker").transform("sum")
        k = ans.n_classes
        w, y = np.nonzero(present)
        pairs = pd.MultiIndex.from_arrays([ans.workers[w], ans.classes[y]])
        errors = np.zeros((len(ans.workers), k, k))
        errors[w, y] = frame.reindex(index=pairs, columns=ans.classes).fillna(EPS).to_numpy()
        return errors, frame


def _e_step_order(labels: pd.Index, error_columns: pd.Index) -> np.ndarray:
    """The order of the classes after crowd-kit's E-step: its log-prior (indexed by ``labels``, the label
    column's dtype) plus a frame whose columns are ``error_columns`` (object, or ``str``) -- pandas aligns
    them, and where it does not see the two indexes as equal (pandas' nullable ``Int64``, ``Float64``,
    ``boolean``, Arrow numbers against object) the union is sorted.  Done on an empty frame: K values."""
    import pandas as pd

    aligned = (pd.Series(0.0, index=labels) + pd.DataFrame(columns=error_columns, dtype=float)).columns
    order = pd.Index(list(labels), dtype=object).get_indexer(list(aligned))
    return order if len(order) == len(labels) and (order >= 0).all() else np.arange(len(labels))


def _loss(counts: np.ndarray, errors: np.ndarray, present: np.ndarray, prior: np.ndarray, qlogq: float,
          n_answers: int) -> float:
    """crowd-kit's loss, from the statistics: the answers' expected log joint (the log-prior once per answer)
    plus the posteriors' entropy (``-qlogq``, over posteriors floored at EPS), per answer.

    ``counts[w, y, c]`` = sum of q_t(c) over w's answers y, so the per-answer sums need no pass over the answers.
    """
    log_e = np.log(np.where(present[:, :, None], np.maximum(errors, 1e-300), 1.0))
    joint = float(np.sum(counts * log_e)) + float(counts.sum(axis=(0, 1)) @ np.log(np.maximum(prior, EPS)))
    return (joint - qlogq) / n_answers


class OneCoinDawidSkene(DawidSkene):
    r"""One-coin Dawid--Skene (crowd-kit's ``OneCoinDawidSkene``): one skill per worker.

    :class:`DawidSkene` with crowd-kit's one-coin M-step (:class:`_OneCoinEM`):
    the skill :math:`s_w` is the mean over w's answers y of
    :math:`q_t(y)`; errors are :math:`s_w` on the diagonal and
    :math:`(1 - s_w)/(K - 1)` off it, on the (worker, label) pairs of the
    data, clipped to [1e-10, 1 - 1e-10] and not renormalised.  No gold, no
    ``initial_error`` (as crowd-kit).  Fitted: as :class:`DawidSkene`, plus
    ``skills_`` (``skill``, workers in order of first appearance).
    """

    _em = _OneCoinEM

    def fit(self, data: pd.DataFrame) -> OneCoinDawidSkene:  # type: ignore[override]
        return super().fit(data)  # type: ignore[return-value]

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:  # type: ignore[override]
        return self.fit(data).labels_

    def fit_predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:  # type: ignore[override]
        return self.fit(data).probas_

    def _fitted(self, ans: Answers, counts: np.ndarray) -> None:
        self.skills_ = ans.worker_skills(_OneCoinEM.skills(counts, ans.data.answers_per_worker), sort=False)
