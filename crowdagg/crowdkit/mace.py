"""crowd-kit's ``MACE``: crowdagg's ``mace`` (:mod:`crowdagg.methods.mace.mace`) under crowd-kit's names and layouts.

The fit is crowdagg's ``mace`` with crowd-kit's settings (``n_restarts``
starts of ``n_iter`` iterations, ``method`` "vb" or "em", ``alpha``,
``beta``, ``default_noise``, ``random_state`` as the seed); the attributes
are crowd-kit's: ``probas_`` (tasks × labels, both in order of first
appearance, the index named ``task``), ``labels_`` (``agg_label``; a tie
goes to the first column), ``spamming_`` (n_workers, 2: the spamming and
competence weights of the last E-step, sub-normalised under "vb"),
``thetas_`` (n_workers, labels: the spam distributions' weights), workers
in order of first appearance, ``theta_priors_``, ``strategy_priors_`` (None
under "em") and ``smoothing_`` (0.01 / labels, what crowd-kit's "em" adds;
its ``smoothing`` argument is kept but, as in crowd-kit, not used).

Kept different on purpose (crowd-kit is wrong; ``tests/methods/mace`` shows
it): crowd-kit's M-step reads its spam counts, grouped by sorted worker and
label, as rows of its own first-appearance codes, so unless the two orders
agree a worker's spam distribution is another's (bluebird: .750 against
.861 once the rows are put back); its restarts all draw with one
``random_state``, the same start ``n_restarts`` times, where these are
seeded starts keyed on the worker names; a task's answer probabilities are
added as logs, not multiplied (no underflow, no ``+ 1e-8``).  So the
labels match crowd-kit's where its orders agree, and are better elsewhere.
Two more: a NaN label does not vote here, where crowd-kit's ``pd.factorize``
code -1 reads it as the *last* label of its order; and ``n_iter=0``, which
in crowd-kit keeps the starts' own E-step, runs one iteration here (one is
the fewest crowdagg's loop runs).
``verbose`` is accepted for crowd-kit's signature: no progress bar is drawn.
``random_state``: an integer, None (seed 0: reproducible, where crowd-kit's
None draws fresh) or a numpy ``RandomState`` / ``Generator`` (one seed
drawn from it), as crowd-kit takes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._answers import Answers, check_count, check_number, seed_of, top_labels

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class MACE:
    """Multi-Annotator Competence Estimation with crowd-kit's ``MACE`` signature (Hovy et al., NAACL-HLT 2013).

    Each worker spams on an answer with some probability, then answering
    from its own distribution over the labels, and otherwise gives the
    true label; variational Bayes with Beta(``alpha``, ``beta``) on the
    spamming and Dirichlet(10) on the spam distribution (``method="vb"``)
    or maximum likelihood with crowd-kit's smoothing (``"em"``), the best
    of ``n_restarts`` seeded starts.  Fitted: ``probas_``, ``labels_``,
    ``spamming_``, ``thetas_``, ``theta_priors_``, ``strategy_priors_``,
    ``smoothing_``; see :mod:`crowdagg.crowdkit.mace`.
    """

    def __init__(self, n_restarts: int = 10, n_iter: int = 50, method: str = "vb", smoothing: float = 0.1,
                 default_noise: float = 0.5, alpha: float = 0.5, beta: float = 0.5, random_state: int | None = 0,
                 verbose: int = 0) -> None:
        self.n_restarts, self.n_iter, self.method, self.smoothing = n_restarts, n_iter, method, smoothing
        self.default_noise, self.alpha, self.beta = default_noise, alpha, beta
        self.random_state, self.verbose = random_state, verbose

    def __repr__(self) -> str:
        names = ("n_restarts", "n_iter", "method", "smoothing", "default_noise", "alpha", "beta", "random_state",
                 "verbose")
        return f"MACE({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def fit(self, data: pd.DataFrame) -> MACE:
        import pandas as pd

        from ..methods.mace.mace import MACE as Mace

        check_count(self.n_restarts, "n_restarts")
        check_count(self.n_iter, "n_iter")
        check_number(self.smoothing, "smoothing")
        seed = seed_of(self.random_state)
        if self.method not in ("vb", "em"):
            raise ValueError(f"method must be 'vb' or 'em', got {self.method!r}")
        ans = Answers(data)
        labels = pd.Index(ans.uniques("label"))  # crowd-kit's pd.factorize: first appearance, whatever pandas
        k, w = len(labels), len(ans.workers)
        self.smoothing_ = 0.01 / k if k else 0.01
        vb = self.method == "vb"
        self.theta_priors_ = np.tile([float(self.alpha), float(self.beta)], (w, 1)) if vb else None
        self.strategy_priors_ = np.full((w, k), 10.0) if vb else None
        if ans.n_answers == 0:
            self.spamming_, self.thetas_ = np.empty((0, 2)), np.empty((0, 0))
            self.probas_ = pd.DataFrame()
            self.labels_ = top_labels(self.probas_)
            return self
        # n_iter 0 runs crowd-kit's start and E-step: one iteration is the fewest crowdagg's loop runs
        fit = Mace(n_init=max(int(self.n_restarts), 1), max_iter=max(int(self.n_iter), 1), m_step=self.method,
                   alpha=self.alpha, beta=self.beta, default_noise=self.default_noise,
                   seed=seed).fit(ans.data)
        classes = pd.Index(list(ans.classes), dtype=object).get_indexer(list(labels))
        self.spamming_ = fit.model_params["spamming_weights"]
        self.thetas_ = fit.model_params["theta_weights"][:, classes]
        self.probas_ = pd.DataFrame(fit.posteriors[:, classes], index=ans.tasks.rename("task"), columns=labels)
        self.labels_ = top_labels(self.probas_)
        return self

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:
        return self.fit(data).labels_

    def fit_predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        return self.fit(data).probas_
