r"""Iterative weighted majority voting as published: Li & Yu 2014, Algorithm 1 (arXiv:1411.4086).

With K classes, worker m's weight :math:`v_m` and :math:`\hat w_m` its
estimated accuracy:

1. start with :math:`v_m = 1` (majority vote);
2. :math:`\hat y_n = \arg\max_k \sum_{m \in M_n} v_m 1[\tilde y_n^{(m)} = k]`;
3. :math:`\hat w_m = \frac{1}{|N_m|} \sum_{n \in N_m} 1[\tilde y_n^{(m)} = \hat y_n]`,
   the share of worker m's answers equal to the labels (no smoothing);
4. :math:`v_m = K \hat w_m - 1`;

and 2--4 again until no label changes (the paper's convergence), or
``max_iter`` revotes.  The paper derives the weight from its bound on the
error rate of a weighted vote of one-coin workers; it is the log-odds
:math:`\log((K-1) w / (1 - w))` linearised at chance.  A worker at chance
(:math:`\hat w = 1/K`) has weight 0, a worker below chance a negative
weight (its answer counts against the class it names), a perfect one
:math:`K - 1`.  ``wmv`` (:mod:`.wmv`) iterates the same way with the
log-odds themselves, of a Laplace-smoothed accuracy.

Ties are broken by draws keyed on the seed and the task name, fixed for
the run (the paper leaves them open).  ``posteriors`` are
:math:`\mathrm{softmax}_k \sum_m v_m 1[\tilde y^{(m)} = k]`: the labels'
scores on a probability scale, not a fitted model's probabilities; a task
without answers gets ``prior``, their mean over the others.
``worker_params``: ``accuracy`` :math:`\hat w` (1/K for a worker without
answers) and ``weight`` :math:`v`; the one-coin confusions of the
accuracies are reported (``result.confusion``).  Each revote is one pass
over the engine's blocks, O(L K).
"""

from __future__ import annotations

import numpy as np

from .wmv import WeightedMajorityVote


def paper_weights(accuracy: np.ndarray, n_classes: int) -> np.ndarray:
    r"""Li & Yu's weights :math:`v_m = K \hat w_m - 1` (n_workers,)."""
    return n_classes * np.asarray(accuracy, dtype=np.float64) - 1.0


class IterativeWeightedMajorityVote(WeightedMajorityVote):
    __doc__ = __doc__
    name = "iwmv"
    #: Its scores are not a product of the reported confusions (Σ v, not Σ log-odds): nothing to take a worker out of.
    posterior_form = ""

    @staticmethod
    def worker_accuracy(agree: np.ndarray, answers: np.ndarray, n_classes: int) -> np.ndarray:
        """The share of each worker's answers equal to the labels (n_workers,); 1/K without answers (weight 0)."""
        return np.where(answers > 0, agree / np.maximum(answers, 1.0), 1.0 / n_classes)

    @staticmethod
    def vote_weights(accuracy: np.ndarray, n_classes: int) -> np.ndarray:
        return paper_weights(accuracy, n_classes)
