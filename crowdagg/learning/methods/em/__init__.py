"""EM trainers: the classifier is the prior of the true label, the answers' confusions are fit in closed form.
"""

from ....methods.registry import Method, Param
from .. import DS_FEATURES, QUICK, TRAIN_PARAMS

DECLARATIONS = (
    Method(
        "raykar", "crowdagg.learning.methods.em.raykar:Raykar",
        "Raykar / AggNet: EM with the classifier as the prior of the true label, closed-form confusions",
        DS_FEATURES + " Each epoch one EM round: E-step q_n ∝ f_θ(x_n) Π_m A_m[:, answer] (soft majority vote "
        "at the start; no class prior: f_θ is one), M-step A_m from the expected counts with s pseudo-answers per "
        "cell, then one epoch of the classifier on the cross-entropy to q.",
        "Raykar et al., Learning from crowds, JMLR 11, 2010; Albarqouni et al., AggNet, IEEE TMI 35(5), 2016, "
        "doi:10.1109/TMI.2016.2528120",
        TRAIN_PARAMS + (
            Param("smoothing", float, 1.0, "Dirichlet pseudo-count per confusion cell in the M-step (1: the MAP of "
                  "spark-crowd's Beta(2, 2) prior)", 0.0, 1e9, "Dirichlet(1 + s) prior"),
        ),
        kind="trainer", requires="train", rank=40, quick_params=QUICK,
    ),
)
