"""Mutual-information trainers: a classifier and a crowds aggregator trained to agree on each task, not to fit
the answers (Max-MIG).  No generative answer model: robust to annotators who copy one another or answer one
class whatever the item.
"""

from ....methods.registry import Method, ModuleGroup, Param
from .. import QUICK, TRAIN_PARAMS

DECLARATIONS = (
    Method(
        "maxmig", "crowdagg.learning.methods.mig.maxmig:MaxMIG",
        "Max-MIG: classifier and crowds aggregator trained jointly to maximise their f-mutual information gain",
        "The classifier h(x) = softmax(f_θ(x)) and the aggregator g(y) = softmax(Σ_m W^m[:, y^m] + log p), one "
        "free K×K matrix per annotator from the log of its counts against the centred vote, maximise "
        "MIG^KL = mean_i (1 + log m_ii) - mean_{i≠j} m_ij, m_ij = Σ_c h(x_i)_c g(y_j)_c / p_c, over each "
        "minibatch. Copiers and annotators answering one class get weight zero at the optimum. Labels: h, or the "
        "data-crowds forecaster Normalize(h ⊙ g ⊘ p) with forecaster=true; selection on -MIG^KL of the held-out "
        "answers. The annotators' confusions (--workers) are those the training answers imply given h: W scores "
        "classes, it is no answer model.",
        "Cao, Xu, Kong & Wang, Max-MIG: an information theoretic approach for joint learning from crowds, ICLR "
        "2019, arXiv:1905.13436",
        TRAIN_PARAMS + (
            Param("prior", "choice", "fixed", "the class prior p in g's bias and m_ij: fixed (uniform: the paper's "
                  "LabelMe and CIFAR-10 setting) or learned (softmax(φ) from uniform, trained with the aggregator: "
                  "its Dogs-vs-Cats and LUNA16 setting, for classes far from balanced)",
                  choices=("fixed", "learned"), paper="p"),
            Param("forecaster", bool, False, "the labels of the training tasks from the data-crowds forecaster "
                  "Normalize(h ⊙ g ⊘ p), the classifier and every answer combined (the paper's Table 3), instead "
                  "of the classifier h alone; predict always uses h", paper="ζ"),
            Param("calibrate", bool, True, "with forecaster: scale g's answer logits by the temperature with which "
                  "g best predicts the classifier h on the answered tasks (cross-entropy), as g trained is "
                  "over-confident and the product follows it (false: the paper's product as is)"),
            Param("aggregator_init", "choice", "agreement", "the aggregator's start, the log of each annotator's "
                  "counts against a soft label of the answers: agreement (the vote with each annotator weighted by "
                  "its chance-corrected agreement with the others and a group of copies counted once: one answering "
                  "one class everywhere, or a copy, adds nothing; annotators of one skill vote alike), votes (the "
                  "plain soft majority vote: the paper's eq. 2, trapped when many annotators answer one class or "
                  "copy one another) or centred (each annotator's own answer shares taken from its votes, copies "
                  "once: reads a rare class as news)",
                  choices=("agreement", "votes", "centred")),
            Param("aggregator_lr_scale", float, 1.0, "the aggregator's learning rate (W and the learned prior) as "
                  "a multiple of lr (the paper: 1 on LabelMe, 0.1 on CIFAR-10)", 1e-3, 1e3),
        ),
        kind="trainer", requires="train", rank=45, quick_params=QUICK,
        groups=(ModuleGroup("aggregator", lr="aggregator_lr_scale", help="the crowds aggregator: one K×K matrix W^m "
                            "per annotator, and φ of the learned prior"),),
    ),
)
