"""crowd-kit-compatible classes: switch by changing one import.

::

    # from crowdkit.aggregation import GLAD, DawidSkene, MajorityVote, OneCoinDawidSkene, Wawa
    from crowdagg.crowdkit import GLAD, DawidSkene, MajorityVote, OneCoinDawidSkene, Wawa

    df = pd.DataFrame({"task": ..., "worker": ..., "label": ...})
    labels = DawidSkene(n_iter=100).fit_predict(df)        # Series indexed by task, named agg_label
    probas = DawidSkene(n_iter=100).fit_predict_proba(df)  # DataFrame, one column per label

The classes take Toloka crowd-kit's (1.4) constructor arguments, methods and
fitted attributes with its names and layouts, and follow *its* observable
behaviour on the installed pandas where it differs from ``crowdagg
aggregate`` -- so that results match crowd-kit's, computed by crowdagg's
kernels (the vote counts and the fused EM pass of :mod:`crowdagg.kernels`).
``tests/test_crowdkit_oracle.py`` checks this against crowd-kit itself on
every real dataset:

* the order of the classes is crowd-kit's majority-vote order, which
  depends on the pandas major version: first appearance in the frame under
  pandas 3, sorted under pandas 2 (its ``value_counts`` groups sorted up to
  2.x); a tie goes to the first class in that order (crowd-kit's
  ``idxmax``), not to a seeded draw.  Dawid--Skene and one-coin keep that
  column order in ``probas_``, ``priors_`` and ``errors_``; a weighted vote
  (``MajorityVote`` with ``skills``, Wawa's ``predict``) sorts rows and
  columns (crowd-kit's ``groupby``), in pandas' order for mixed types
  (numbers before text);
* dtypes as crowd-kit's: ``labels_`` inferred as ``idxmax`` does (text in
  an object column comes back as pandas 3's ``str``); ``errors_`` columns
  ``str`` for text labels under pandas 3, else object; after an EM
  iteration ``probas_`` columns take the label column's dtype; numbers in
  an object column stay object in ``labels_`` (``idxmax`` infers text
  only); with pandas' nullable labels (``Int64``, ``Float64``, ...) the
  skills of a vote and a vote weighted by them are ``Float64``, and after
  an EM iteration the classes are sorted (crowd-kit's E-step aligns its
  log-prior with object columns: a sorted union), ties included;
* ``DawidSkene`` starts from majority-vote shares, runs E-step then M-step
  (so ``errors_``/``priors_`` are one M-step ahead of ``probas_``), and stops
  when crowd-kit's loss -- its ELBO per answer, with the log-prior counted
  once per answer -- rises by less than ``tol`` (a fall stops it too); at
  most ``n_iter`` iterations; ``n_iter=0`` gives the majority vote;
* ``errors_`` has a row per (worker, observed label) pair that occurs in
  the data (in order of first appearance), columns the true labels; cells
  are clipped at 1e-10 before each worker's columns are normalised;
  ``probas_`` after an iteration carries crowd-kit's 1e-10 floor;
* row orders: after an EM iteration tasks are in order of first
  appearance; the majority vote (and ``n_iter=0``) in its class order's
  rule (first appearance under pandas 3, sorted under 2); Wawa sorts them;
  ids and labels of mixed types (``1`` and ``"a"``) are answered, as
  crowd-kit answers them;
* empty input gives empty results of crowd-kit's shapes and dtypes;
* ``GLAD`` keeps crowd-kit's fixed class prior (uniform over the labels in
  order of first appearance, or ``labels_priors``), starts at alpha = 1,
  log beta = 1, runs its M-step as scipy's conjugate gradient stopped
  after ``m_step_max_iter`` iterations (``gtol=m_step_tol``) on its Q (the
  expected complete-data log-likelihood plus the log-densities of the
  priors on alpha and log beta), stops when Q per (answer, class) rises
  by less than ``tol`` -- the first iteration against the start's Q *not*
  divided --, takes ``probas_``/``labels_`` from the E-step before the
  last M-step, and lays them out as crowd-kit: ``probas_`` with tasks and
  labels sorted (columns named ``variable``, their dtype as crowd-kit's
  E-step makes it), ``alphas_`` by worker and ``betas_`` (log beta) by
  task in order of first appearance, their indexes with ``pd.unique``'s
  dtypes.  Its M-step stops far from converged and its line search makes
  the result sensitive to the last bit of Q: multiplying its Q and
  gradient by 1 + 1e-15 moves crowd-kit's own bluebird abilities by 6e-3
  after six iterations.  The two agree step for step (to ~1e-6 after two
  iterations on the real datasets), but after several their rounding
  differences have grown to ~1e-3 .. 1e-1 and a label at a near-tie may
  differ (about one task in a thousand on rte, sentiment, trec and web,
  ``benchmarks/crowdkit_glad_reference.py``); with each
  M-step run to convergence (``m_step_max_iter=1000, m_step_tol=1e-8``)
  they agree to ~1e-5.

Kept different on purpose, where crowd-kit is wrong or inconsistent:

* a NaN label is no answer, everywhere: crowd-kit drops it from the vote
  but keeps it elsewhere (a task with only NaN answers keeps a row, the
  loss counts it, ``skills_`` count it as wrong, one-coin reads it as the
  last label); a NaN gold label is no gold; NaN task or worker ids are a
  ValueError;
* a task whose voters all have weight 0 (MajorityVote with ``skills``,
  Wawa) gets the mean vote share of the other tasks, as in ``crowdagg
  aggregate``, instead of a row of NaN; ``skills`` must be finite,
  non-negative and name each worker once (crowd-kit divides by a negative
  total, flipping the vote, and counts a repeated worker twice);
* a gold label that no answer used is a class whose starting share is 0 on
  the other tasks (crowd-kit leaves them NaN, so its first prior averages
  the gold tasks only);
* ``initial_error`` columns that are not labels of the data (crowd-kit
  carries them on as extra classes whose probabilities are NaN) are
  dropped; with ``"assign"`` a label of the data without a column, or a
  repeated row, is a ValueError (crowd-kit gives NaN probabilities);
* ``n_iter``/``tol`` are checked (a non-negative integer, a number);
* messages are spelled right (``on_missing_skill``);
* ``GLAD`` answers empty input and boolean labels (crowd-kit raises), and
  refuses what crowd-kit fits into NaN: a ``labels_priors`` without some
  label of the answers, a prior mean missing for a worker or task; and a
  ``labels_priors`` naming a NaN label (crowd-kit counts it among the
  classes but drops its column).  A prior mean given for a worker or task
  without answers is not used (crowd-kit aligns it in, its Q turns -inf and
  its M-step's line search runs on that).  Priors and means given as text
  ("0.5") are refused, as crowd-kit's arithmetic refuses them;
* a prior or gold label equal to a label of the answers but of another
  type (``True`` for the label ``1``) is a ValueError (crowd-kit compares
  them equal and then fails in pandas).

Exact ties are broken alike, but a near-tie that rounding makes a tie in
one implementation and not the other (the sums run in another order) may
go either way, and ``tol=0`` may then stop a different iteration.

``true_labels`` (gold) clamps those tasks in every step, as crowd-kit does;
a gold label no answer used becomes one more class, after the others.

The pandas layer (:class:`_Answers`: codes, indexes, crowd-kit's orders
and dtypes) is this module's; the fitting is crowdagg's.  ``DawidSkene``
and ``OneCoinDawidSkene`` are no second EM: they run in the loop every
iterative method of crowdagg runs in (:func:`crowdagg.methods.loop.iterate`)
on its fused EM kernel, with crowd-kit's start, M-step, loss and stopping
rule as settings (:class:`_EM`); a crowd-kit class of that family is its
M-step over :class:`_EM` and the attributes it adds (``OneCoinDawidSkene``
is a dozen lines).  ``GLAD`` runs in the same loop on the kernels of
crowdagg's ``glad`` (:mod:`crowdagg.kernels.glad`'s block functions on the
local engine: the E-step, the objective and its gradient), with crowd-kit's start, M-step,
Q and stopping rule as its settings (:class:`_GladEM`).

Speed: text columns (pandas 3's Arrow-backed ``str``) are encoded by Arrow's
dictionary encoding (:func:`crowdagg.data.vocab.encode`), the votes and the
worker agreement are the vote family's block functions on the local engine
(:mod:`crowdagg.methods.blocks`: one numba pass per block each), and results are built from the
encoded distinct values, with no Python object per answer: on 1M answers
MajorityVote and Wawa run several times faster than crowd-kit
(``benchmarks/bench_crowdkit_surface.py``).
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .methods.blocks import clamp_posteriors, fill_empty_rows, one_coin_matrices, soft_majority_vote
from .methods.loop import MAXIMISE, AbsoluteGain, Run, Step, StopRule, iterate
from .methods.starts import SOFT_VOTE, resolve_start

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .data.annotations import AnnotationSet

#: crowd-kit's floor on probabilities (errors, priors, posteriors in its loss).
EPS = 1e-10

COLUMNS = ["task", "worker", "label"]


class NotFittedError(ValueError, AttributeError):
    """``predict`` before ``fit`` (the same bases as scikit-learn's, which crowd-kit raises)."""


class _MissingColumn(KeyError, AttributeError):
    """A missing ``task`` or ``worker`` column for ``GLAD``: crowd-kit's GLAD reads them as attributes
    (``data.worker``), an AttributeError; a KeyError as a missing column is for the other classes."""


def _first_appearance() -> bool:
    """Whether crowd-kit's majority vote keeps tasks and labels in order of first appearance.

    Its ``data[["task", "label"]].value_counts().unstack("label")`` takes
    the order of ``value_counts``' groups: sorted under pandas 2, in order of
    first appearance under pandas 3 (whose ``DataFrame.value_counts`` groups
    with ``sort=False``).  That order is its ties' order (``idxmax`` takes
    the first column) and, through Dawid--Skene's start, the classes' order
    of every EM result.
    """
    import pandas as pd

    return int(pd.__version__.split(".", 1)[0]) >= 3


def _arrow_text(column: Any) -> bool:
    import pandas as pd

    return isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow"


def _factorize(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(int64 codes, distinct values) in order of first appearance, as ``pd.factorize``, with crowd-kit's dtypes.

    An Arrow-backed text column (pandas 3's default ``str``) is encoded by
    Arrow's dictionary encoding (:func:`crowdagg.data.vocab.encode`, a direct
    table for ids like ``t17``): several times faster than pandas' hashing of
    the strings; the distinct values are taken from the column itself, so
    they keep its dtype.
    """
    import pandas as pd

    if _arrow_text(column):
        import pyarrow as pa

        from .data.vocab import encode

        values = pa.array(column.array)
        if pa.types.is_large_string(values.type) and values.nbytes < 2**31 - 1:
            values = values.cast(pa.string())  # pandas keeps large_string; the id fast path reads 32-bit offsets
        codes = encode(values)[0].astype(np.int64)
        # codes are in order of first appearance: a value is new where the running maximum grows
        top = np.maximum.accumulate(codes) if len(codes) else codes
        first = np.flatnonzero(np.concatenate([[True], top[1:] > top[:-1]])) if len(codes) else codes
        return codes, pd.Index(column.array.take(first))
    codes, uniques = pd.factorize(column)
    return codes.astype(np.int64, copy=False), pd.Index(uniques).infer_objects()


def _sort_order(values: pd.Index) -> np.ndarray:
    """The permutation that sorts ``values`` as pandas' ``groupby(sort=True)`` does (mixed types included)."""
    import pandas as pd

    if _arrow_text(values):  # UTF-8 byte order is code point order, Python's order of str
        import pyarrow as pa
        import pyarrow.compute as pc

        from .data.vocab import numpy_of

        return numpy_of(pc.sort_indices(pa.array(values.array))).astype(np.int64)
    rank = pd.factorize(values, sort=True)[0]  # pandas' safe sort: numbers before text, as groupby
    order = np.empty(len(rank), dtype=np.int64)
    order[rank] = np.arange(len(rank))
    return order


class _Answers:
    """A crowd-kit answers frame as flat codes plus the pandas indexes to label results with.

    ``tasks``, ``workers``: pandas Index of the ids in order of first
    appearance (their original dtype); ``classes``: the distinct labels in
    crowd-kit's majority-vote order (:func:`_first_appearance`: first
    appearance under pandas 3, sorted under pandas 2), then any ``extra``
    labels; ``task``, ``worker``, ``label``: int64 codes per answer, in row
    order; ``data``: the same answers as an
    :class:`~crowdagg.data.annotations.AnnotationSet` (sorted by task) for the kernels.
    """

    def __init__(self, frame: pd.DataFrame, extra: Any = ()) -> None:
        import pandas as pd

        frame = frame[COLUMNS]  # a missing column is a KeyError, as in crowd-kit
        missing = frame["label"].isna()
        if missing.any():  # a NaN answer does not vote
            frame = frame[~missing.to_numpy()]
        if frame["task"].isna().any() or frame["worker"].isna().any():
            raise ValueError("task and worker ids may not be missing (NaN)")
        self.n_answers = len(frame)
        self.label_dtype = frame["label"].dtype
        self.task, self.tasks = _factorize(frame["task"])
        self.worker, self.workers = _factorize(frame["worker"])
        self.label, classes = _factorize(frame["label"])
        if not _first_appearance():  # crowd-kit's majority vote sorts its classes under pandas 2
            order = _sort_order(classes)
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            self.label, classes = rank[self.label], classes[order]
        extra = [c for c in pd.unique(pd.Series(list(extra), dtype=object)) if c not in classes]
        if extra:  # True is 1 to Python (and to crowd-kit's ``==``), not to an Index of ints: ambiguous
            same = pd.Index([*classes, *extra], dtype=object)
            if same.has_duplicates:
                twin = same[same.duplicated()][0]
                twin = twin.item() if isinstance(twin, np.generic) else twin
                answer = next(c for c in classes.tolist() if c == twin)  # an error path: a scan is fine
                raise ValueError(f"label {twin!r} (of a prior or gold label) equals the label {answer!r} of the "
                                 "answers but is of another type: give it as the answers' labels are")
        self.classes = classes.append(pd.Index(extra)) if extra else classes
        self.answered = classes  # the labels of the answers (the others come from gold)
        self._frame = frame  # the answers kept (for :meth:`uniques`; the same columns, no copy)
        self._data: AnnotationSet | None = None
        self._engine: Any = None

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def data(self) -> AnnotationSet:
        if self._data is None:
            from .data.annotations import AnnotationSet
            from .errors import CrowdaggWarning

            with warnings.catch_warnings():  # crowd-kit counts repeated answers silently
                warnings.simplefilter("ignore", CrowdaggWarning)
                self._data = AnnotationSet.from_codes(
                    self.task, self.worker, self.label,
                    n_tasks=len(self.tasks), n_workers=len(self.workers), n_classes=self.n_classes,
                )
        return self._data

    @property
    def engine(self) -> Any:
        """The local engine over :attr:`data` (the votes and agreements run on its blocks)."""
        if self._engine is None:
            from .engine import LocalEngine

            self._engine = LocalEngine(self.data)
        return self._engine

    def uniques(self, name: str) -> Any:
        """``pd.unique`` of the column ``name`` ("task", "worker" or "label") as crowd-kit computes it.

        The distinct values in order of first appearance with the dtype
        ``pd.unique`` gives them (an object column of numbers stays object,
        a categorical stays categorical: crowd-kit's ``tasks_``/``workers_``
        and GLAD's labels), taken from one row per value, not by hashing
        the column again.
        """
        import pandas as pd

        codes = {"task": self.task, "worker": self.worker, "label": self.label}[name]
        first = np.sort(np.unique(codes, return_index=True)[1])  # sorted: the codes may be in another order
        return pd.unique(self._frame[name].iloc[first])

    # ------------------------------------------------------------- labelled views
    def probas(self, q: np.ndarray, rows: np.ndarray | None = None, classes: np.ndarray | None = None) -> pd.DataFrame:
        """Tasks × classes; ``rows``, ``classes``: the order of the tasks and of the columns (default: as is)."""
        import pandas as pd

        columns = self.classes
        if classes is not None:
            q, columns = q[:, classes], columns[classes]
        tasks = self.tasks
        if rows is not None:
            q, tasks = q[rows], tasks[rows]
        return pd.DataFrame(q, index=tasks.rename("task"), columns=columns.rename("label"), copy=False)

    def priors(self, p: np.ndarray) -> pd.Series:
        import pandas as pd

        return pd.Series(p, index=self.classes.rename("label"), name="prior")

    def errors(self, errors_ot: np.ndarray) -> pd.DataFrame:
        """Rows (worker, observed label) for the pairs in the data, in order of first appearance."""
        import pandas as pd

        k = self.n_classes
        cells = pd.unique(self.worker * k + self.label)
        w, y = cells // k, cells % k
        index = pd.MultiIndex.from_arrays([self.workers[w], self.classes[y]], names=["worker", "label"])
        # crowd-kit's columns come from joining the probabilities onto the answers (one index of the answers'
        # column names and the labels): a text dtype (pandas 3's ``str``) stays, any other becomes object
        text = isinstance(self.classes.dtype, pd.StringDtype)
        columns = pd.Index(list(self.classes), dtype=self.classes.dtype if text else object)
        return pd.DataFrame(errors_ot[w, y], index=index, columns=columns)

    def worker_skills(self, values: np.ndarray, sort: bool) -> pd.Series:
        import pandas as pd

        workers = self.workers
        if sort:
            order = _sort_order(workers)
            values, workers = values[order], workers[order]
        return pd.Series(values, index=workers.rename("worker"), name="skill")

    def subset(self, keep: np.ndarray) -> _Answers:
        """The answers ``keep`` (a mask), re-encoded: ids and labels no kept answer uses are gone."""
        import copy

        out = copy.copy(self)
        out._data = None
        out._engine = None
        out._frame = self._frame[keep]
        out.n_answers = int(keep.sum())
        for codes, names in (("task", "tasks"), ("worker", "workers")):
            kept, index = np.unique(getattr(self, codes)[keep], return_inverse=True)
            setattr(out, codes, index.astype(np.int64))
            setattr(out, names, getattr(self, names)[kept])
        kept, index = np.unique(self.label[keep], return_inverse=True)
        out.label, out.classes = index.astype(np.int64), self.classes[kept]
        out.answered = out.classes
        return out


#: tasks × labels float tables a vote holds at once: the counts (the shares, in place), a reordered copy for a
#: weighted vote, ``probas_`` and its row-sorted copy.
_VOTE_TABLES = 4


def _labels(probas: pd.DataFrame) -> pd.Series:
    """The most probable label of each row; a tie goes to the first column (crowd-kit's ``idxmax``)."""
    import pandas as pd

    if probas.size == 0:
        return pd.Series(dtype=object, name="agg_label")
    codes = np.argmax(probas.to_numpy(), axis=1)
    labels = pd.Series(probas.columns[codes], index=probas.index, name="agg_label")
    # idxmax infers text only: object columns holding text give pandas 3's ``str``, numbers stay object
    return labels.infer_objects() if pd.api.types.infer_dtype(labels, skipna=False) == "string" else labels


def _as_masked(values: Any, dtype: Any) -> Any:
    """``values`` (floats) as pandas' nullable ``Float64`` where ``dtype`` is a nullable (masked) dtype, as
    crowd-kit's come out: its skills compare such labels into ``boolean`` and average them into ``Float64``,
    and a vote weighted by ``Float64`` skills sums into ``Float64``."""
    return values.astype("Float64") if _masked(dtype) and len(values) else values


def _masked(dtype: Any) -> bool:
    """Whether ``dtype`` is one of pandas' nullable (masked) numbers or booleans (``Int64``, ``Float64``, ...)."""
    import pandas as pd

    return isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in "iufb" and not isinstance(
        dtype, (pd.ArrowDtype, pd.CategoricalDtype, pd.StringDtype))


def _shares(votes: np.ndarray) -> np.ndarray:
    """Vote shares per task; a task without weight gets the mean share of the others (as ``aggregate``)."""
    total = votes.sum(axis=1)
    empty = total == 0
    votes /= np.where(empty, 1.0, total)[:, None]  # in place: the counts are ours
    if empty.any():
        fill_empty_rows(votes, empty)
    return votes


def _accuracy(ans: _Answers, label_of_task: np.ndarray) -> np.ndarray:
    """Each worker's share of answers equal to ``label_of_task`` (class codes) of their task, shape (n_workers,).

    A repeated identical answer (same task, worker and label) counts once, as crowd-kit's ``get_accuracy``.
    """
    from .methods.blocks import agreement_with_block

    labels = np.ascontiguousarray(label_of_task, dtype=np.int64)
    right, total = ans.engine.map_reduce(agreement_with_block, (labels, True))[0]
    return right / np.maximum(total, 1.0)


def _check_count(value: Any, name: str) -> None:
    """A non-negative integer setting (``n_iter``, ``m_step_max_iter``): a ValueError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def _check_number(value: Any, name: str) -> None:
    """A tolerance (``tol``, ``m_step_tol``): any number but NaN (crowd-kit's -inf never stops)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or np.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")


# --------------------------------------------------------------------------- majority vote
class MajorityVote:
    """Majority vote, optionally weighted by per-worker ``skills`` (crowd-kit's ``MajorityVote``).

    ``probas_`` (tasks × labels) are the (weighted) vote shares, ``labels_``
    the most voted label -- a tie goes to the first column --, ``skills_``
    each worker's share of answers equal to ``labels_`` (unweighted; a
    repeated identical answer counted once; workers sorted).  Rows and
    columns: without ``skills`` in crowd-kit's majority-vote order
    (:func:`_first_appearance`: first appearance under pandas 3, sorted
    under pandas 2); with ``skills`` sorted (crowd-kit's ``groupby``).

    ``on_missing_skill`` says what to do with a worker absent from
    ``skills``: ``"error"``, ``"ignore"`` (drop their answers) or ``"value"``
    (weight ``default_skill``).
    """

    probas_: pd.DataFrame
    labels_: pd.Series

    def __init__(self, default_skill: float | None = None, on_missing_skill: str = "error") -> None:
        self.default_skill = default_skill
        self.on_missing_skill = on_missing_skill

    def __repr__(self) -> str:
        return f"MajorityVote(default_skill={self.default_skill!r}, on_missing_skill={self.on_missing_skill!r})"

    def fit(self, data: pd.DataFrame, skills: pd.Series | None = None) -> MajorityVote:
        ans = _Answers(data)
        weights = None
        if skills is not None:
            ans, weights = self._weighted(ans, skills)
        self._vote(ans, weights)
        if skills is not None:
            self.probas_ = _as_masked(self.probas_, skills.dtype)
        return self

    def _vote(self, ans: _Answers, weights: np.ndarray | None, skills: bool = True) -> np.ndarray | None:
        """Fit on encoded answers with per-worker ``weights`` (None: one vote each).

        Returns each worker's skill by worker code (None without answers or
        without ``skills``: Wawa's weighted vote does not need them).
        """
        import pandas as pd

        if ans.n_answers == 0:
            self.probas_ = pd.DataFrame(index=pd.Index([], name="task"), columns=pd.Index([], name="label"),
                                        dtype=float)
            self.labels_ = pd.Series(dtype=object, name="agg_label")
            self.skills_ = pd.Series(dtype=float, index=pd.Index([], name="worker"), name="skill")
            return None
        from .core import memory
        from .methods.blocks import COUNTS, Posterior, Vote, posterior_block

        k = ans.n_classes
        n_tasks = len(ans.tasks)
        # The vote tables are tasks × labels: refused up front with their size, never left to the OOM killer.
        memory.check(8.0 * (_VOTE_TABLES * n_tasks * k + 2 * ans.n_answers), f"{n_tasks:,} tasks × {k:,} labels",
                     advice="the vote shares are tasks × labels: use fewer labels")
        engine = ans.engine
        _, outs = engine.map_reduce(posterior_block, Posterior(Vote(weights), rows=COUNTS, labels=False), keep=True)
        shares = _shares(engine.gather(outs)[0])
        # crowd-kit's order: a weighted vote groups with sort=True; a plain one takes value_counts' order
        # (its classes are already in it: see _Answers)
        weighted = weights is not None
        columns = _sort_order(ans.classes) if weighted else None
        rows = _sort_order(ans.tasks) if weighted or not _first_appearance() else None
        best = np.argmax(shares if columns is None else shares[:, columns], axis=1)  # idxmax: ties to the first
        label_of_task = best if columns is None else columns[best]
        self.probas_ = ans.probas(shares, rows=rows, classes=columns)
        codes = label_of_task if rows is None else label_of_task[rows]
        self.labels_ = pd.Series(ans.classes.take(codes), index=self.probas_.index, name="agg_label")
        if not skills:
            return None
        accuracy = _accuracy(ans, label_of_task)
        self.skills_ = _as_masked(ans.worker_skills(accuracy, sort=True), ans.label_dtype)
        return accuracy

    def _weighted(self, ans: _Answers, skills: pd.Series) -> tuple[_Answers, np.ndarray]:
        """The answers to vote with and each worker's weight (by worker code), after ``on_missing_skill``."""
        import pandas as pd

        skills = pd.Series(skills, dtype=np.float64)
        if skills.index.has_duplicates:
            raise ValueError(f"skills lists worker {skills.index[skills.index.duplicated()][0]!r} more than once")
        if (skills < 0).any() or np.isinf(skills).any():
            raise ValueError("skills are vote weights: they must be finite and non-negative")
        policy = self.on_missing_skill
        if policy != "value" and self.default_skill is not None:
            raise ValueError('default_skill is used but on_missing_skill is not "value"')
        weights = np.array(skills.reindex(ans.workers), dtype=np.float64)
        unknown = np.isnan(weights)
        if policy == "error":
            if unknown.any():
                n = int(np.bincount(ans.worker, minlength=len(ans.workers))[unknown].sum())
                raise ValueError(
                    f"Skill value is missing in {n} assignments. Specify skills for every used "
                    "worker or use a different 'on_missing_skill' value."
                )
        elif policy == "ignore":
            if unknown.any():
                keep = ~unknown[ans.worker]
                lost = len(ans.tasks) - len(np.unique(ans.task[keep]))
                if lost:
                    raise ValueError(
                        f"{lost} tasks have no workers with known skills. Provide skills for at least one worker "
                        "of each task or use a different 'on_missing_skill' value."
                    )
                kept_workers = np.flatnonzero(~unknown)
                ans = ans.subset(keep)
                weights = weights[kept_workers]
        elif policy == "value":
            if self.default_skill is None:
                raise ValueError('Default skill value must be specified when using on_missing_skill="value"')
            weights[unknown] = self.default_skill
        else:
            raise ValueError(f"Unknown option {policy!r} of \"on_missing_skill\" argument.")
        return ans, weights

    def fit_predict(self, data: pd.DataFrame, skills: pd.Series | None = None) -> pd.Series:
        return self.fit(data, skills).labels_

    def fit_predict_proba(self, data: pd.DataFrame, skills: pd.Series | None = None) -> pd.DataFrame:
        return self.fit(data, skills).probas_


class Wawa:
    """Worker Agreement With Aggregate (crowd-kit's ``Wawa``).

    ``fit``: each worker's skill is their share of answers equal to the
    majority vote (``skills_``); ``predict``: the vote weighted by those
    skills (``probas_``, ``labels_``, rows and columns sorted).  ``skills_``
    is not updated after the weighted vote.  ``fit_predict`` encodes the
    answers once for both steps.
    """

    def __repr__(self) -> str:
        return "Wawa()"

    def fit(self, data: pd.DataFrame) -> Wawa:
        self._fit(_Answers(data))
        return self

    def _fit(self, ans: _Answers) -> np.ndarray | None:
        """Fit on encoded answers; returns each worker's skill by worker code (None without answers)."""
        mv = MajorityVote()
        accuracy = mv._vote(ans, None)
        self.skills_ = mv.skills_
        return accuracy

    def _vote(self, ans: _Answers, weights: np.ndarray | None) -> MajorityVote:
        mv = MajorityVote()
        mv._vote(ans, weights, skills=False)
        if weights is not None:
            mv.probas_ = _as_masked(mv.probas_, self.skills_.dtype)
        self.probas_, self.labels_ = mv.probas_, mv.labels_
        return mv

    def _predict(self, data: pd.DataFrame) -> MajorityVote:
        if not hasattr(self, "skills_"):
            raise NotFittedError("This Wawa instance is not fitted yet: call fit first")
        ans = _Answers(data)
        if len(self.skills_) == 0:
            return self._vote(ans, None)
        ans, weights = MajorityVote()._weighted(ans, self.skills_)
        return self._vote(ans, weights)

    def predict(self, data: pd.DataFrame) -> pd.Series:
        return self._predict(data).labels_

    def predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        return self._predict(data).probas_

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:
        self._fit_predict(data)
        return self.labels_

    def fit_predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        self._fit_predict(data)
        return self.probas_

    def _fit_predict(self, data: pd.DataFrame) -> None:
        ans = _Answers(data)
        weights = self._fit(ans)
        self._vote(ans, weights)


# --------------------------------------------------------------------------- Dawid-Skene
#: Dense workers × labels² float tables DawidSkene holds at once beyond crowdagg's own EM (its memory check).
_DENSE_TABLES = 6


class _Flavour:
    """What crowd-kit's iterative classes share as settings of crowdagg's loop: its stop rule (the objective rising
    by less than ``tol``, a fall stopping too, ``n_iter`` a budget) and one start; the flavour supplies
    ``start(index, rng)`` and ``step(state)``."""

    stop_rule: ClassVar[StopRule] = AbsoluteGain()
    objective_direction: ClassVar[str] = MAXIMISE

    def fit(self, n_iter: int, tol: float) -> Run:
        """Run crowdagg's loop with these settings: one start, at most ``n_iter`` steps."""
        return iterate(self.start, self.step, rule=self.stop_rule, direction=self.objective_direction,  # type: ignore[attr-defined]
                       max_iter=n_iter, tol=tol, seed=0)


class _EM(_Flavour):
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

    def __init__(self, ans: _Answers, clamp: np.ndarray, initial: Any = None) -> None:
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
        from .methods.em.ds import em_memory

        d = self.data
        need, what = em_memory(d)
        return need + 8.0 * _DENSE_TABLES * d.n_workers * d.n_classes ** 2, what


    def start(self, index: int, rng: np.random.Generator) -> tuple[_EMState, None]:
        from .engine import LocalEngine
        from .kernels.em import EMParams, em_block

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
        from .kernels.em import EMParams, em_block

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
        _check_count(self.n_iter, "n_iter")
        _check_number(self.tol, "tol")

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
        ans = _Answers(data, extra)
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

    def _run(self, ans: _Answers, clamp: np.ndarray, initial_error: pd.DataFrame | None) -> None:
        """Fit the EM flavour ``_em`` in crowdagg's loop, then label its state as crowd-kit does."""
        from .core import memory
        from .kernels.em import em_block

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
        sort = not run.n_iter and not _first_appearance()  # n_iter=0: the majority vote's order
        self.probas_ = ans.probas(q, rows=_sort_order(ans.tasks) if sort else None)
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
        self.labels_ = _labels(self.probas_)
        self._fitted(ans, state.counts)

    def fit_predict(self, data: pd.DataFrame, true_labels: pd.Series | None = None,
                    initial_error: pd.DataFrame | None = None) -> pd.Series:
        return self.fit(data, true_labels, initial_error).labels_

    def fit_predict_proba(self, data: pd.DataFrame, true_labels: pd.Series | None = None,
                          initial_error: pd.DataFrame | None = None) -> pd.DataFrame:
        return self.fit(data, true_labels, initial_error).probas_

    def _fitted(self, ans: _Answers, counts: np.ndarray) -> None:
        """Hook for what a subclass adds to the fitted attributes (``counts``: the last M-step's statistics)."""

    def _first_errors(
        self, ans: _Answers, counts: np.ndarray, present: np.ndarray, initial_error: pd.DataFrame
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

    def _fitted(self, ans: _Answers, counts: np.ndarray) -> None:
        self.skills_ = ans.worker_skills(_OneCoinEM.skills(counts, ans.data.answers_per_worker), sort=False)



# --------------------------------------------------------------------------- GLAD
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


class _GladEM(_Flavour):
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
        from .methods.glad.glad import glad_memory

        d = self.data
        need, what = glad_memory(d)
        return need + 8.0 * d.n_tasks * d.n_classes, what


    def start(self, index: int, rng: np.random.Generator) -> tuple[_GladState, float]:
        from .engine import LocalEngine

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
        from .kernels.glad import _e_step

        n_w = self.data.n_workers
        # unchecked: x is ours, of the data's sizes, and the clamp is all -1
        state.posteriors = _e_step(state.engine, state.x[:n_w], state.x[n_w:], self.log_prior, self.clamp)
        state.moved = False

    def q_value(self, state: _GladState, x: np.ndarray) -> tuple[float, np.ndarray]:
        """crowd-kit's Q at ``x`` with the last E-step's posteriors, and its gradient (shaped as ``x``)."""
        from .kernels.glad import _objective

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
        _check_count(self.n_iter, "n_iter")
        _check_number(self.tol, "tol")
        _check_count(self.m_step_max_iter, "m_step_max_iter")
        _check_number(self.m_step_tol, "m_step_tol")

    def fit(self, data: pd.DataFrame) -> GLAD:
        import pandas as pd

        from .core import memory

        self._check()
        priors = self.labels_priors
        if priors is not None and not isinstance(priors, pd.Series):
            raise ValueError(f"labels_priors must be a pandas Series indexed by label, got {type(priors).__name__}")
        if priors is not None and priors.index.hasnans:  # as a NaN answer, a NaN label is no class
            raise ValueError("labels_priors names a missing label (NaN)")
        absent = [name for name in ("worker", "task") if name not in getattr(data, "columns", ())]
        if absent:  # in crowd-kit's order
            raise _MissingColumn(f"the answers have no {absent[0]!r} column")
        ans = _Answers(data, () if priors is None else priors.index)
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
        rows = _sort_order(ans.tasks)  # crowd-kit's groupby sorts the tasks
        self.probas_ = pd.DataFrame(state.posteriors.post[np.ix_(rows, classes)], index=ans.tasks[rows].rename("task"),
                                    columns=columns)
        self.labels_ = _labels(self.probas_)
        # crowd-kit's E-step compares labels and classes (``label == variable``) and adds the log-prior: nullable
        # labels (numbers, or text of pd.NA in Python storage) compare into ``boolean``, and a nullable prior
        # stays nullable -- either way its posteriors come out Float64
        dtype = ans.label_dtype
        na_text = isinstance(dtype, pd.StringDtype) and dtype.storage == "python" and dtype.na_value is pd.NA
        if na_text or _masked(dtype) or (priors is not None and _masked(priors.dtype)):
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


def _glad_log_prior(ans: _Answers, priors: pd.Series | None) -> np.ndarray:
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
    values = _numbers(priors, "labels_priors")[at]
    if not np.isfinite(values).all() or (values < 0).any() or not values.sum() > 0:
        raise ValueError("labels_priors must be finite, non-negative and not all 0")
    with np.errstate(divide="ignore"):  # a class of prior 0 is never the label
        if priors.dtype.kind in "iuf" and not isinstance(priors.dtype, pd.ArrowDtype):
            # crowd-kit takes the log of the Series: in its precision (float32 for float32 or Int16, float16 for
            # int8), which its posteriors carry
            return np.log(priors.iloc[at]).to_numpy(dtype=np.float64, na_value=np.nan)
        return np.log(values)


def _numbers(values: pd.Series, name: str) -> np.ndarray:
    """``values`` as float64, NaN where missing; text is refused, "0.5" too (crowd-kit's arithmetic refuses it)."""
    import pandas as pd

    if pd.api.types.infer_dtype(values, skipna=True) in ("string", "bytes", "mixed"):
        raise ValueError(f"{name} must hold numbers")
    try:
        return np.asarray(values.to_numpy(dtype=np.float64, na_value=np.nan))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold numbers") from None


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
    means = _numbers(value.reindex(ids), name)
    missing = ~np.isfinite(means)
    if missing.any():
        raise ValueError(f"{name} has no finite value for {int(missing.sum()):,} {what}(s) of the answers, "
                         f"e.g. {ids[np.flatnonzero(missing)[0]]!r}")
    return means


__all__ = ["GLAD", "DawidSkene", "MajorityVote", "NotFittedError", "OneCoinDawidSkene", "Wawa"]
