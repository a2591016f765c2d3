"""The two-stage baselines: aggregate the answers with a registered method, then train the classifier on its labels.
"""

from ....methods.registry import Method, Param
from .. import QUICK, TRAIN_PARAMS

#: The two-stage baselines' choice of training targets.
_TARGETS = Param("targets", "choice", "hard", "what the classifier is trained on: hard (the aggregator's labels, "
                 "one-hot: the classic baseline) or soft (its posteriors)", choices=("hard", "soft"))

DECLARATIONS = (
    Method(
        "mv-then-train", "crowdagg.learning.methods.twostage.twostage:MVThenTrain",
        "two-stage baseline: majority vote of the training answers, then the classifier on its labels",
        "Stage 1: mv on the training answers (the held-out ones excluded). Stage 2: the classifier trained by "
        "cross-entropy to its labels (one-hot, or the vote shares with targets=soft). The inferred labels are the "
        "classifier's.",
        "the MV-then-train baseline of Rodrigues & Pereira, AAAI 2018 and Cao et al. (Max-MIG), ICLR 2019",
        TRAIN_PARAMS + (_TARGETS,),
        kind="trainer", requires="train", rank=50, quick_params=QUICK,
    ),
    Method(
        "ds-then-train", "crowdagg.learning.methods.twostage.twostage:DSThenTrain",
        "two-stage baseline: Dawid-Skene on the training answers, then the classifier on its labels",
        "Stage 1: ds (its declared defaults, the trainer's seed) on the training answers (the held-out ones "
        "excluded). Stage 2: the classifier trained by cross-entropy to its labels (one-hot, or its posteriors "
        "with targets=soft). The inferred labels are the classifier's.",
        "Dawid & Skene 1979, then a classifier: the DS-then-train baseline of Albarqouni et al. (AggNet), 2016",
        TRAIN_PARAMS + (_TARGETS,),
        kind="trainer", requires="train", rank=51, quick_params=QUICK,
    ),
)
