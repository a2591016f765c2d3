"""crowd-kit-compatible classes: switch by changing one import.

::

    # from crowdkit.aggregation import GLAD, DawidSkene, GoldMajorityVote, MajorityVote, OneCoinDawidSkene, Wawa
    from crowdagg.crowdkit.aggregation import GLAD, DawidSkene, GoldMajorityVote, MajorityVote, OneCoinDawidSkene, Wawa

    df = pd.DataFrame({"task": ..., "worker": ..., "label": ...})
    labels = DawidSkene(n_iter=100).fit_predict(df)        # Series indexed by task, named agg_label
    probas = DawidSkene(n_iter=100).fit_predict_proba(df)  # DataFrame, one column per label

The classes take Toloka crowd-kit's (1.4) constructor arguments, methods and
fitted attributes with its names and layouts, and follow *its* observable
behaviour on the installed pandas where it differs from ``crowdagg
aggregate`` -- so that results match crowd-kit's, computed by crowdagg's
kernels (the vote counts and the fused EM pass of :mod:`crowdagg.kernels`).
``tests/crowdkit/`` checks this against crowd-kit itself on every real
dataset:

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
* row orders: after an EM iteration tasks are in order of first
  appearance; the majority vote (and ``n_iter=0``) in its class order's
  rule (first appearance under pandas 3, sorted under 2); Wawa sorts them;
  ids and labels of mixed types (``1`` and ``"a"``) are answered, as
  crowd-kit answers them;
* empty input gives empty results of crowd-kit's shapes and dtypes.

What is particular to a class (Dawid--Skene's start, loss and ``errors_``
layout; GLAD's prior, M-step and Q) is said in its module's docstring.

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

The pandas layer (:class:`~crowdagg.crowdkit._answers.Answers`: codes,
indexes, crowd-kit's orders and dtypes) is shared by every class in
``crowdagg/crowdkit/_answers.py``; the fitting is crowdagg's, one module a
crowd-kit class: :mod:`~crowdagg.crowdkit.majority_vote`,
:mod:`~crowdagg.crowdkit.wawa`, :mod:`~crowdagg.crowdkit.gold_majority_vote`,
:mod:`~crowdagg.crowdkit.dawid_skene`
(``DawidSkene``, ``OneCoinDawidSkene``), :mod:`~crowdagg.crowdkit.glad`,
:mod:`~crowdagg.crowdkit.kos`, :mod:`~crowdagg.crowdkit.mace` (crowdagg's
``mace`` under crowd-kit's names; where crowd-kit's MACE is wrong, its module
says), :mod:`~crowdagg.crowdkit.mmsr` (over crowdagg's ``mmsr``).
The iterative classes run in crowdagg's loop
(:func:`crowdagg.methods.loop.iterate`) with crowd-kit's start, M-step,
loss and stopping rule as settings (:class:`~crowdagg.crowdkit._loop.Flavour`).
:mod:`crowdagg.crowdkit.aggregation` is the same classes under crowd-kit's
module path: ``from crowdkit.aggregation import ...`` becomes ``from
crowdagg.crowdkit.aggregation import ...`` and nothing else changes; so
for crowd-kit's metrics, :mod:`crowdagg.crowdkit.metrics` (``.data``:
``alpha_krippendorff``, ``consistency``, ``uncertainty``; ``.workers``:
``accuracy_on_aggregates``), on crowdagg's agreement kernels.

Speed: text columns (pandas 3's Arrow-backed ``str``) are encoded by Arrow's
dictionary encoding (:func:`crowdagg.data.vocab.encode`), the votes and the
worker agreement are the vote family's block functions on the local engine
(:mod:`crowdagg.methods.blocks`: one numba pass per block each), and results are built from the
encoded distinct values, with no Python object per answer: on 1M answers
MajorityVote and Wawa run several times faster than crowd-kit
(``benchmarks/bench_crowdkit_surface.py``).
"""

from __future__ import annotations

from ._answers import COLUMNS, EPS  # noqa: F401 -- public names of the one-module crowdagg.crowdkit, still importable
from .aggregation import (
    GLAD,
    KOS,
    MACE,
    MMSR,
    DawidSkene,
    GoldMajorityVote,
    MajorityVote,
    NotFittedError,
    OneCoinDawidSkene,
    Wawa,
    ZeroBasedSkill,
)

__all__ = ["GLAD", "KOS", "MACE", "MMSR", "DawidSkene", "GoldMajorityVote", "MajorityVote", "NotFittedError",
           "OneCoinDawidSkene", "Wawa", "ZeroBasedSkill"]
