"""The trainers: one module per method (its loss, its confusion parameterisation), declared here.

This ``__init__`` holds the family's declarations only (standard library;
:data:`crowdagg.methods.registry.TRAINERS` imports it to list the trainers,
never the method modules, which import torch).

Every trainer takes :data:`TRAIN_PARAMS` (the classifier, the optimiser,
the batches, the device, the seed and the held-out answers of model
selection; the ``crowdagg train`` flags ``--model``, ``--epochs`` ...) and
its own parameters (``-p name=value``).
"""

from ...methods.registry import SEED, Method, Param

#: The parameters every trainer takes (``crowdagg train`` has a flag for each).
TRAIN_PARAMS = (
    SEED,
    Param("model", "choice", "mlp", "the classifier: linear (softmax regression), mlp (one hidden ReLU layer with "
          "dropout: the FCNN of CrowdLayer and GeoCrowdNet on LabelMe), cnn (4 conv layers, for N×C×H×W images)",
          choices=("linear", "mlp", "cnn")),
    Param("hidden", int, 128, "units of the mlp's hidden layer (channels of the cnn's last layers)", 1, 65536),
    Param("dropout", float, 0.5, "dropout before the mlp's output layer", 0.0, 0.95),
    Param("epochs", int, 100, "passes over the training tasks (the loop's iterations)", 1, 100000),
    Param("batch_size", int, 64, "tasks per minibatch (all their training answers come with them)", 1, 10**7),
    Param("lr", float, 1e-3, "Adam's learning rate", 1e-8, 10.0),
    Param("weight_decay", float, 1e-4, "Adam's weight decay (L2) on the classifier", 0.0, 1.0),
    Param("device", "device", "auto", "where to train: auto (CUDA when available), cpu, cuda, cuda:N; mixed "
          "precision on CUDA"),
    Param("val_fraction", float, 0.1, "share of the answers held out for model selection: the epoch with the best "
          "held-out noisy-answer likelihood is kept (0: none held out, the last epoch is kept)", 0.0, 0.9),
    Param("patience", int, 0, "stop when the held-out likelihood has not improved for this many epochs (0: run "
          "every epoch; the best is kept either way)", 0, 100000),
)

#: Every trainer's cheap settings for tests (:attr:`Method.quick_params`): two epochs of a small network.
QUICK = {"epochs": 2, "hidden": 8, "batch_size": 32, "device": "cpu"}

_DS_FEATURES = ("y_n ~ Cat(f_θ(x_n)); worker m answers ~ Cat(A_m[:, y_n]) independently (A_m: columns on the "
                "simplex, A_m[answer, true]).")

#: The two-stage baselines' choice of training targets.
_TARGETS = Param("targets", "choice", "hard", "what the classifier is trained on: hard (the aggregator's labels, "
                 "one-hot: the classic baseline) or soft (its posteriors)", choices=("hard", "soft"))


def _confusion_lr_scale(default: float) -> Param:
    return Param("confusion_lr_scale", float, default, "the confusions' learning rate as a multiple of lr (deepBP "
                 "App. D: 10 for a start near the identity, whose logits must move several units)", 1e-3, 1e3)


def _geocrowdnet_params(init: str) -> tuple[Param, ...]:
    return (
        Param("lam", float, 0.01, "weight λ of the volume term -log det against the mean answer cross-entropy (0.01: "
              "the papers' CIFAR-10 setting and the COINNet configs)", 0.0, 100.0, paper="λ"),
        Param("confusion_init", "choice", init, "the confusions' start: identity (logits I, the papers' code), "
              "diagonal (logits 6I - 5: 0.98 on the diagonal for K = 8), counts (the log of each annotator's counts "
              "against the soft majority vote: the papers' mle_based start, in the right orientation)",
              choices=("identity", "diagonal", "counts")),
        _confusion_lr_scale(10.0),
    )


#: (F) starts from the counts (measured: music .811, labelme .845 against .78 / .82 from the identity); (W) from
#: the identity (its volume term spreads the stacked confusions from there: music .815, labelme .820).
_GEOCROWDNET_F_PARAMS = _geocrowdnet_params("counts")
_GEOCROWDNET_W_PARAMS = _geocrowdnet_params("identity")

DECLARATIONS = (
    Method(
        "crowdlayer", "crowdagg.learning.methods.crowdlayer:CrowdLayer",
        "CrowdLayer: a per-annotator layer on the classifier's output, trained on every answer",
        _DS_FEATURES + " Each answer's loss is CE(A_m f_θ(x_n), answer), A_m one K×K matrix per worker from the "
        "identity (MW connection); the mean over the batch's answers.",
        "Rodrigues & Pereira, Deep learning from crowds, AAAI 2018",
        TRAIN_PARAMS,
        kind="trainer", requires="train", rank=10, quick_params=QUICK,
    ),
    Method(
        "raykar", "crowdagg.learning.methods.raykar:Raykar",
        "Raykar / AggNet: EM with the classifier as the prior of the true label, closed-form confusions",
        _DS_FEATURES + " Each epoch one EM round: E-step q_n ∝ f_θ(x_n) Π_m A_m[:, answer] (soft majority vote "
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
    Method(
        "mv-then-train", "crowdagg.learning.methods.twostage:MVThenTrain",
        "two-stage baseline: majority vote of the training answers, then the classifier on its labels",
        "Stage 1: mv on the training answers (the held-out ones excluded). Stage 2: the classifier trained by "
        "cross-entropy to its labels (one-hot, or the vote shares with targets=soft). The inferred labels are the "
        "classifier's.",
        "the MV-then-train baseline of Rodrigues & Pereira, AAAI 2018 and Cao et al. (Max-MIG), ICLR 2019",
        TRAIN_PARAMS + (_TARGETS,),
        kind="trainer", requires="train", rank=50, quick_params=QUICK,
    ),
    Method(
        "ds-then-train", "crowdagg.learning.methods.twostage:DSThenTrain",
        "two-stage baseline: Dawid-Skene on the training answers, then the classifier on its labels",
        "Stage 1: ds (its declared defaults, the trainer's seed) on the training answers (the held-out ones "
        "excluded). Stage 2: the classifier trained by cross-entropy to its labels (one-hot, or its posteriors "
        "with targets=soft). The inferred labels are the classifier's.",
        "Dawid & Skene 1979, then a classifier: the DS-then-train baseline of Albarqouni et al. (AggNet), 2016",
        TRAIN_PARAMS + (_TARGETS,),
        kind="trainer", requires="train", rank=51, quick_params=QUICK,
    ),
    Method(
        "tracereg", "crowdagg.learning.methods.tracereg:TraceReg",
        "TraceReg: per-annotator confusions pushed towards the truth by the trace of their mean",
        _DS_FEATURES + " Loss: the mean CE(A_m f_θ(x_n), answer) over the batch's answers + λ · the mean trace of "
        "the A_m over annotators, A_m = rownorm(softplus(W_m)) from W_m = δI - 5; recovers the A_m when their mean "
        "is diagonally dominant.",
        "Tanno, Saeedi, Sankaranarayanan, Alexander & Silberman, Learning from noisy labels by regularized "
        "estimation of annotator confusion, CVPR 2019",
        TRAIN_PARAMS + (
            Param("lam", float, 0.01, "weight λ of the mean trace of the confusions against the mean answer "
                  "cross-entropy (the paper's 0.01; robust over 0.001-0.1 while the trace term stays below the "
                  "cross-entropy)", 0.0, 100.0, paper="λ"),
            Param("diagonal", float, 6.0, "the confusions start at rownorm(softplus(δI - 5)): δ = 6 puts 0.956 on "
                  "the diagonal for K = 10 (the paper's listing)", 0.0, 50.0, paper="δ"),
            _confusion_lr_scale(10.0),
        ),
        kind="trainer", requires="train", rank=20, quick_params=QUICK,
    ),
    Method(
        "geocrowdnet", "crowdagg.learning.methods.geocrowdnet:GeoCrowdNet",
        "GeoCrowdNet (F) under its short name: CCEM maximising the volume of the classifier's outputs",
        _DS_FEATURES + " Loss: the mean CE(A_m f_θ(x_n), answer) over the batch's answers (CCEM) - λ log det(FᵀF/B + εI), F (B, K) the batch's classifier outputs; A_m "
        "column-softmax logits.",
        "Ibrahim, Nguyen & Fu, Deep learning from crowdsourced labels: coupled cross-entropy minimization, "
        "identifiability, and regularization, ICLR 2023",
        TRAIN_PARAMS + _GEOCROWDNET_F_PARAMS,
        kind="trainer", requires="train", rank=30, quick_params=QUICK,
    ),
    Method(
        "geocrowdnet-f", "crowdagg.learning.methods.geocrowdnet:GeoCrowdNetF",
        "GeoCrowdNet (F): CCEM maximising the volume of the classifier's outputs (many diverse items)",
        _DS_FEATURES + " Loss: the mean CE(A_m f_θ(x_n), answer) over the batch's answers (CCEM) - λ log det(FᵀF/B + εI), F (B, K) the batch's classifier outputs; A_m "
        "column-softmax logits.",
        "Ibrahim, Nguyen & Fu, Deep learning from crowdsourced labels: coupled cross-entropy minimization, "
        "identifiability, and regularization, ICLR 2023",
        TRAIN_PARAMS + _GEOCROWDNET_F_PARAMS,
        kind="trainer", requires="train", rank=31, quick_params=QUICK,
    ),
    Method(
        "geocrowdnet-w", "crowdagg.learning.methods.geocrowdnet:GeoCrowdNetW",
        "GeoCrowdNet (W): CCEM maximising the volume of the stacked confusions (class experts)",
        _DS_FEATURES + " Loss: the mean CE(A_m f_θ(x_n), answer) over the batch's answers (CCEM) - λ log det(WᵀW/M + εI), W (MK, K) the stacked confusions; A_m "
        "column-softmax logits.",
        "Ibrahim, Nguyen & Fu, Deep learning from crowdsourced labels: coupled cross-entropy minimization, "
        "identifiability, and regularization, ICLR 2023",
        TRAIN_PARAMS + _GEOCROWDNET_W_PARAMS,
        kind="trainer", requires="train", rank=32, quick_params=QUICK,
    ),
)
