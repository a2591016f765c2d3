r"""GLAD's E-step, objective and gradient over the flat answer arrays, on the block grid.

GLAD (Whitehill, Ruvolo, Wu, Bergsma & Movellan, "Whose vote should count
more: optimal integration of labels from labelers of unknown expertise",
NIPS 2009) gives worker :math:`m` an ability :math:`\alpha_m \in \mathbb{R}`
and task :math:`n` a parameter :math:`\beta_n = e^{b_n} > 0` (its
difficulty is :math:`1/\beta_n`); an answer is the true class with
probability :math:`\sigma(\alpha_m \beta_n)`, otherwise one of the other
:math:`K - 1` classes, uniformly.  With :math:`z = \alpha_m \beta_n`, an
answer :math:`\tilde y` of a task whose class is :math:`c` has

.. math:: \log P(\tilde y \mid c) = \begin{cases} \log\sigma(z) & \tilde y = c \\
          \log(1 - \sigma(z)) - \log(K - 1) & \tilde y \ne c \end{cases}

so a task's class scores are :math:`\log d_c + \sum_e w_e + [\tilde y_e = c](\ell_e - w_e)`
(:math:`\ell_e` the log-probability of a right answer, :math:`w_e` of a
given wrong one): O(answers + K) per task, whatever K.

Three kernels, each one pass over the answers of a range of task blocks
(:mod:`crowdagg.kernels.schedule`; a GLAD block's accumulator is one float
per worker):

* the E-step: the posteriors (n_tasks, K), each answer's posterior of its
  own label ``q`` (n_answers,) -- all the M-step reads of them -- and the
  log-evidence per block;
* the objective of the M-step, the expected complete-data log-likelihood
  of the answers
  :math:`f = \sum_e q_e \log\sigma(z_e) + (1 - q_e)(\log(1 - \sigma(z_e)) - \log(K - 1))`,
  with its gradient: :math:`\partial f / \partial \alpha_m = \sum_{e \in m} (q_e - \sigma(z_e))\beta_{n(e)}`
  (per-block dense accumulators, added in block order) and
  :math:`\partial f / \partial b_n = \sum_{e \in n} (q_e - \sigma(z_e))\alpha_{m(e)}\beta_n`
  (written per task);
* the curvature in the abilities,
  :math:`-\partial^2 f / \partial \alpha_m^2 = \sum_{e \in m} \beta_{n(e)}^2 \sigma(z_e)(1 - \sigma(z_e))`,
  and its twin per task, :math:`\sum_{e \in n} z_e^2 \sigma(z_e)(1 - \sigma(z_e))` (the Fisher
  information of :math:`\log\beta_n`).

Block partial sums are added in block order, so every result is
bit-identical for any thread count.  One ``exp`` and one ``log1p`` per
answer: :math:`\log\sigma(z) = -\mathrm{softplus}(-z)`,
:math:`\log(1 - \sigma(z)) = \log\sigma(z) - z`, computed without overflow
for any :math:`z`.  The priors on :math:`\alpha` and :math:`b` are the
method's (:mod:`crowdagg.methods.glad.glad`): these kernels hold the
likelihood only.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .schedule import block_bounds, block_sum, run_blocks


@njit(cache=True, nogil=True, inline="always")
def _log_sigmoids(z):  # pragma: no cover - compiled
    """(log σ(z), log(1 − σ(z)), σ(z)) with one exp and one log1p, finite for every finite z."""
    if z >= 0.0:
        e = math.exp(-z)
        l1 = math.log1p(e)
        return -l1, -z - l1, 1.0 / (1.0 + e)
    e = math.exp(z)
    l1 = math.log1p(e)
    return z - l1, -l1, e / (1.0 + e)


@njit(cache=True, nogil=True)
def _e_step_blocks(
    blocks, bounds, task_ptr, worker, label, alpha, log_beta, log_prior, log_km1, clamp, post, q, loglik
):  # pragma: no cover - compiled
    """E-step over the tasks of ``blocks``: ``post[t]``, ``q[e]`` and each block's log-evidence ``loglik[b]``.

    A clamped task (``clamp[t] >= 0``) is one-hot at its gold class and adds
    its log-joint at that class; a task without answers gets the prior.
    """
    k = post.shape[1]
    s = np.empty(k)
    for i in range(blocks.shape[0]):
        b = blocks[i]
        ll = 0.0
        for t in range(bounds[b], bounds[b + 1]):
            start = task_ptr[t]
            stop = task_ptr[t + 1]
            beta = math.exp(log_beta[t])
            base = 0.0
            for c in range(k):
                s[c] = log_prior[c]
            for e in range(start, stop):
                right, wrong, _ = _log_sigmoids(alpha[worker[e]] * beta)
                wrong -= log_km1
                base += wrong
                s[label[e]] += right - wrong
            g = clamp[t]
            if g >= 0:
                ll += s[g] + base
                for c in range(k):
                    post[t, c] = 0.0
                post[t, g] = 1.0
            else:
                m = s[0]
                for c in range(1, k):
                    if s[c] > m:
                        m = s[c]
                z = 0.0
                for c in range(k):
                    s[c] = math.exp(s[c] - m)
                    z += s[c]
                inv = 1.0 / z
                for c in range(k):
                    post[t, c] = s[c] * inv
                ll += m + base + math.log(z)
            for e in range(start, stop):
                q[e] = post[t, label[e]]
        loglik[b] = ll


@njit(cache=True, nogil=True)
def _objective_blocks(
    blocks, bounds, task_ptr, worker, alpha, log_beta, q, log_km1, f_blocks, g_alpha_blocks, g_log_beta
):  # pragma: no cover - compiled
    """The M-step objective's block sums ``f_blocks[b]``, ``g_alpha_blocks[b]`` (n_workers,) and ``g_log_beta[t]``."""
    for i in range(blocks.shape[0]):
        b = blocks[i]
        ga = g_alpha_blocks[b]
        ga[:] = 0.0
        f = 0.0
        for t in range(bounds[b], bounds[b + 1]):
            beta = math.exp(log_beta[t])
            gt = 0.0
            for e in range(task_ptr[t], task_ptr[t + 1]):
                w = worker[e]
                a = alpha[w]
                right, wrong, sig = _log_sigmoids(a * beta)
                qe = q[e]
                f += qe * right + (1.0 - qe) * (wrong - log_km1)
                d = qe - sig
                ga[w] += d * beta
                gt += d * a
            g_log_beta[t] = gt * beta
        f_blocks[b] = f


@njit(cache=True, nogil=True)
def _curvature_blocks(blocks, bounds, task_ptr, worker, alpha, log_beta, h_blocks, h_task):  # pragma: no cover - compiled
    """Per block, each worker's Σ β² σ(αβ)(1 − σ(αβ)) over its answers in the block; per task Σ (αβ)² σ(1 − σ)."""
    for i in range(blocks.shape[0]):
        b = blocks[i]
        h = h_blocks[b]
        h[:] = 0.0
        for t in range(bounds[b], bounds[b + 1]):
            beta = math.exp(log_beta[t])
            b2 = beta * beta
            ht = 0.0
            for e in range(task_ptr[t], task_ptr[t + 1]):
                w = worker[e]
                a = alpha[w]
                _, _, sig = _log_sigmoids(a * beta)
                v = sig * (1.0 - sig)
                h[w] += b2 * v
                ht += a * a * v
            h_task[t] = ht * b2


#: The most workers or classes: the kernels read int32 codes (one compiled signature).
_MAX_CODES = int(np.iinfo(np.int32).max)


class GladWorkspace:
    """GLAD's local engine: the answers, the block grid, and the buffers reused across iterations.

    Parameters
    ----------
    task_ptr : int array, shape (n_tasks + 1,)
        CSR offsets of each task's answers (answers sorted by task).
    worker, label : int arrays, shape (n_answers,)
        Each answer's worker and class codes.
    n_workers, n_classes : int

    Attributes
    ----------
    post : ndarray, shape (n_tasks, K)
        The last E-step's posteriors.
    q : ndarray, shape (n_answers,)
        The last E-step's posterior of each answer's own label, ``post[task, label]``.
    bounds : ndarray of int64, shape (n_blocks + 1,)
        The task blocks (:func:`crowdagg.kernels.schedule.block_bounds`, one float per worker a block).

    The public methods check the shapes of what they are given (a
    :class:`~crowdagg.errors.DataError`, never a read outside an array);
    their ``_``-prefixed twins, for a fit's loop, trust arrays it made.
    """

    def __init__(self, task_ptr: np.ndarray, worker: np.ndarray, label: np.ndarray, n_workers: int, n_classes: int):
        from ..errors import DataError
        from .validate import check_count, check_index, check_offsets

        n_workers, n_classes = check_count(n_workers, "n_workers"), check_count(n_classes, "n_classes")
        if n_classes < 1:
            raise DataError("GLAD needs at least one class")
        for n, unit in ((n_workers, "workers"), (n_classes, "classes")):
            if n > _MAX_CODES:  # the codes are cast to int32 below: a larger one would wrap to a negative index
                raise DataError(f"GLAD's kernels take at most {_MAX_CODES:,} {unit}, got {n:,}")
        # Checked once here (one pass each, against a fit's hundreds of passes): the kernels trust them.
        worker = check_index(worker, n_workers, "worker", "worker")
        label = check_index(label, n_classes, "label", "class")
        if len(worker) != len(label):
            raise DataError(f"worker and label arrays differ in length ({len(worker):,}, {len(label):,})")
        self.n_workers, self.n_classes = n_workers, n_classes
        self.task_ptr = check_offsets(task_ptr, len(worker))
        self.n_tasks = len(self.task_ptr) - 1
        # One compiled signature for every input: int32 codes (AnnotationSet's workers already are).
        self.worker = np.ascontiguousarray(worker, dtype=np.int32)
        self.label = np.ascontiguousarray(label, dtype=np.int32)
        self.bounds = block_bounds(self.task_ptr, 8 * max(n_workers, 1))
        self.n_blocks = len(self.bounds) - 1
        # log(K - 1) of a wrong answer's share; one class has no wrong answers (their weight 1 - q is 0).
        self.log_km1 = math.log(n_classes - 1) if n_classes > 1 else 0.0
        self.post = np.zeros((self.n_tasks, n_classes))
        self.q = np.zeros(len(self.worker))
        self._per_block = np.zeros((self.n_blocks, n_workers))
        self._scalars = np.zeros(self.n_blocks)

    # -------------------------------------------------------------------------------------- checked
    def _vector(self, values: object, name: str, n: int, finite: bool = True) -> np.ndarray:
        """A float vector of ``n`` entries; ``finite``: every entry finite (NaN or inf would give NaN posteriors)."""
        from ..errors import DataError
        from .validate import as_float_array

        arr = as_float_array(values, name, 1)
        if arr.shape[0] != n:
            raise DataError(f"{name} has {arr.shape[0]:,} entries, not {n:,}")
        if finite and not np.isfinite(arr).all():
            i = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise DataError(f"{name}[{i}] is {float(arr[i])!r}: the parameters must be finite")
        return arr

    def _parameters(self, alpha: object, log_beta: object) -> tuple[np.ndarray, np.ndarray]:
        return self._vector(alpha, "alpha", self.n_workers), self._vector(log_beta, "log_beta", self.n_tasks)

    def _log_prior(self, log_prior: object) -> np.ndarray:
        """``log_prior`` (K,): -inf allowed (a class the prior rules out), NaN or +inf not, and one class possible."""
        from ..errors import DataError

        arr = self._vector(log_prior, "log_prior", self.n_classes, finite=False)
        bad = np.flatnonzero(np.isnan(arr) | (arr == np.inf))
        if bad.size:
            raise DataError(f"log_prior[{int(bad[0])}] is {float(arr[int(bad[0])])!r}: a log-probability is finite or -inf")
        if not np.isfinite(arr).any():
            raise DataError("log_prior has no finite entry: the prior rules out every class")
        return arr

    def _answer_posteriors(self, q: object) -> np.ndarray:
        """``q`` (n_answers,): each answer's posterior of its own label, in [0, 1]."""
        from ..errors import DataError

        arr = self._vector(q, "q", len(self.worker), finite=False)
        # (With a rounding's slack: an E-step's own q can exceed 1 by an ulp.)
        bad = np.flatnonzero(~((arr >= -1e-9) & (arr <= 1.0 + 1e-9)))  # NaN fails both
        if bad.size:
            raise DataError(f"q[{int(bad[0])}] is {float(arr[int(bad[0])])!r}: each answer's posterior must lie in [0, 1]")
        return arr

    def e_step(self, alpha: object, log_beta: object, log_prior: object, clamp: object = None) -> float:
        """Posteriors into :attr:`post` and :attr:`q`; returns the log-evidence of the answers.

        ``alpha`` (n_workers,), ``log_beta`` (n_tasks,), ``log_prior`` (K,),
        ``clamp`` (n_tasks,) int, -1 where a task is free (None: all free).
        The log-evidence is :math:`\\sum_n \\log \\sum_c d_c \\prod_e P(\\tilde y_e \\mid c)`,
        a clamped task's term taken at its gold class.
        """
        from ..errors import DataError
        from .validate import as_code_array

        alpha, log_beta = self._parameters(alpha, log_beta)
        log_prior = self._log_prior(log_prior)
        if clamp is None:
            clamp = np.full(self.n_tasks, -1, dtype=np.int64)
        clamp = as_code_array(clamp, "clamp")
        if clamp.shape[0] != self.n_tasks:
            raise DataError(f"clamp has {clamp.shape[0]:,} entries, not {self.n_tasks:,}")
        if self.n_tasks and (int(clamp.min()) < -1 or int(clamp.max()) >= self.n_classes):
            raise DataError(f"clamp holds a class outside -1 .. {self.n_classes - 1}")
        return self._e_step(alpha, log_beta, log_prior, np.ascontiguousarray(clamp, dtype=np.int64))

    def objective(self, alpha: object, log_beta: object, q: object = None) -> tuple[float, np.ndarray, np.ndarray]:
        """(f, ∂f/∂α (n_workers,), ∂f/∂log β (n_tasks,)): the expected complete-data log-likelihood of the
        answers given each answer's posterior of its own label ``q`` (n_answers,; default :attr:`q`)."""
        alpha, log_beta = self._parameters(alpha, log_beta)
        q = self.q if q is None else self._answer_posteriors(q)
        return self._objective(alpha, log_beta, q)

    def curvature(self, alpha: object, log_beta: object) -> np.ndarray:
        """−∂²f/∂α_m² = Σ_answers of m β² σ(αβ)(1 − σ(αβ)), shape (n_workers,) (independent of ``q``)."""
        return self._curvatures(*self._parameters(alpha, log_beta))[0]

    def curvatures(self, alpha: object, log_beta: object) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`curvature`, and per task Σ (αβ)² σ(αβ)(1 − σ(αβ)) (n_tasks,)): the diagonal of the Fisher
        information in α and log β (the Gauss--Newton part of −∂²f; the M-step's scaling)."""
        return self._curvatures(*self._parameters(alpha, log_beta))

    # -------------------------------------------------------------------------------------- trusted
    def _e_step(self, alpha: np.ndarray, log_beta: np.ndarray, log_prior: np.ndarray, clamp: np.ndarray) -> float:
        run_blocks(_e_step_blocks, self.n_blocks, self.bounds, self.task_ptr, self.worker, self.label, alpha,
                   log_beta, log_prior, self.log_km1, clamp, self.post, self.q, self._scalars)
        return float(block_sum(self._scalars))

    def _objective(self, alpha: np.ndarray, log_beta: np.ndarray, q: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        g_log_beta = np.empty(self.n_tasks)
        run_blocks(_objective_blocks, self.n_blocks, self.bounds, self.task_ptr, self.worker, alpha, log_beta, q,
                   self.log_km1, self._scalars, self._per_block, g_log_beta)
        return float(block_sum(self._scalars)), block_sum(self._per_block).copy(), g_log_beta

    def _curvatures(self, alpha: np.ndarray, log_beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h_task = np.empty(self.n_tasks)
        run_blocks(_curvature_blocks, self.n_blocks, self.bounds, self.task_ptr, self.worker, alpha, log_beta,
                   self._per_block, h_task)
        return block_sum(self._per_block).copy(), h_task

    def set_posteriors(self, post: np.ndarray) -> None:
        """Take given posteriors (n_tasks, K) as the E-step's: :attr:`post` and each answer's :attr:`q`."""
        from ..errors import DataError
        from .validate import as_float_array

        given = as_float_array(post, "post", 2)
        if given.shape != self.post.shape:
            raise DataError(f"post has shape {given.shape}, the workspace's tasks × classes are {self.post.shape}")
        bad = np.flatnonzero(~((given >= 0.0) & (given <= 1.0 + 1e-9)))  # NaN fails both
        if bad.size:
            t, c = divmod(int(bad[0]), self.n_classes)
            raise DataError(f"post[{t}, {c}] is {float(given[t, c])!r}: posteriors must lie in [0, 1]")
        self.post[...] = given
        task = np.repeat(np.arange(self.n_tasks), np.diff(self.task_ptr))
        self.q[...] = self.post[task, self.label]


__all__ = ["GladWorkspace"]
