"""Coupled cross-entropy trainers: a confusion per annotator on the classifier's output, fit to every answer.

CrowdLayer, TraceReg, GeoCrowdNet (F) and (W) and COINNet: the classifier's
softmax output through annotator m's matrix is the distribution of m's
answer, and the loss is the cross-entropy of the answers under it (plus each
method's regulariser).
"""

from ....methods.registry import Method, ModuleGroup, Param
from .. import DS_FEATURES, QUICK, TRAIN_PARAMS

#: The annotators' confusions, learning at ``confusion_lr_scale`` × lr, without weight decay.
CONFUSION_GROUP = ModuleGroup("confusion", lr="confusion_lr_scale", help="the annotators' confusion logits")


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

#: GeoCrowdNet's two volume terms, as its declarations' models write them.
_VOLUME_F = "λ log det(FᵀF/B + εI), F (B, K) the batch's classifier outputs"
_VOLUME_W = "λ log det(WᵀW/M + εI), W (MK, K) the stacked confusions"


def _geocrowdnet(name: str, cls: str, summary: str, volume: str, params: tuple[Param, ...], rank: int) -> Method:
    """One GeoCrowdNet declaration: the variants differ in their volume term, start and listing rank."""
    return Method(
        name, f"crowdagg.learning.methods.coupled.geocrowdnet:{cls}", summary,
        DS_FEATURES + " Loss: the mean CE(A_m f_θ(x_n), answer) over the batch's answers (CCEM) - " + volume
        + "; A_m column-softmax logits.",
        "Ibrahim, Nguyen & Fu, Deep learning from crowdsourced labels: coupled cross-entropy minimization, "
        "identifiability, and regularization, ICLR 2023",
        TRAIN_PARAMS + params,
        groups=(CONFUSION_GROUP,),
        kind="trainer", requires="train", rank=rank, quick_params=QUICK,
    )


DECLARATIONS = (
    Method(
        "crowdlayer", "crowdagg.learning.methods.coupled.crowdlayer:CrowdLayer",
        "CrowdLayer: a per-annotator layer on the classifier's output, trained on every answer",
        DS_FEATURES + " Each answer's loss is CE(A_m f_θ(x_n), answer), A_m one K×K matrix per worker from the "
        "identity (MW connection); the mean over the batch's answers.",
        "Rodrigues & Pereira, Deep learning from crowds, AAAI 2018",
        TRAIN_PARAMS,
        groups=(ModuleGroup("crowd", help="the per-annotator matrices W_m"),),
        kind="trainer", requires="train", rank=10, quick_params=QUICK,
    ),
    Method(
        "tracereg", "crowdagg.learning.methods.coupled.tracereg:TraceReg",
        "TraceReg: per-annotator confusions pushed towards the truth by the trace of their mean",
        DS_FEATURES + " Loss: the mean CE(A_m f_θ(x_n), answer) over the batch's answers + λ · the mean trace of "
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
        groups=(CONFUSION_GROUP,),
        kind="trainer", requires="train", rank=20, quick_params=QUICK,
    ),
    _geocrowdnet("geocrowdnet", "GeoCrowdNet", "GeoCrowdNet (F) under its short name: CCEM maximising the volume "
                 "of the classifier's outputs", _VOLUME_F, _GEOCROWDNET_F_PARAMS, 30),
    _geocrowdnet("geocrowdnet-f", "GeoCrowdNetF", "GeoCrowdNet (F): CCEM maximising the volume of the classifier's "
                 "outputs (many diverse items)", _VOLUME_F, _GEOCROWDNET_F_PARAMS, 31),
    _geocrowdnet("geocrowdnet-w", "GeoCrowdNetW", "GeoCrowdNet (W): CCEM maximising the volume of the stacked "
                 "confusions (class experts)", _VOLUME_W, _GEOCROWDNET_W_PARAMS, 32),
    Method(
        "coinnet", "crowdagg.learning.methods.coupled.coinnet:CoinNet",
        "COINNet: CCEM with per-item outlier vectors, so that corrupted items bend no confusion; "
        "--task-params: each item's outlier score",
        DS_FEATURES + " Outlier items add e_n^(m) (centred, one per answer) to A_m f_θ(x_n). Loss: the mean "
        "CE(A_m f_θ(x_n) + e_n^(m), answer) over the batch's answers + μ₁ (1/B) Σ_n (Σ_m ‖e_n^(m)‖² + ζ)^(p/2) + "
        "μ₂ (-log det(F_Bᵀ F_B)), F_B (B, K) the batch's classifier outputs; outlier score s_n = Σ_m ‖e_n^(m)‖².",
        "Nguyen, Ibrahim & Fu, Noisy label learning with instance-dependent outliers: identifiability via crowd "
        "wisdom, NeurIPS 2024",
        TRAIN_PARAMS + (
            Param("lam", float, 0.01, "weight μ₂ of the volume term -log det(F_Bᵀ F_B) (the code's lam1; "
                  "our_reg.yaml 0.01)", 0.0, 100.0, paper="μ₂"),
            Param("outlier_lam", float, 0.01, "weight μ₁ of the outlier sparsity term (the code's lam2; "
                  "our_reg.yaml 0.01; 1 with outlier_lr_scale=3 keeps the outlier vectors on fewer items: "
                  "a sharper outlier score, see the module docstring)", 0.0, 100.0, paper="μ₁"),
            Param("p", float, 0.4, "exponent p of the ℓ_{2,p} outlier term: below 1 it prefers few outlier items "
                  "(the code's 0.4: (·)^0.2)", 0.01, 2.0, paper="p"),
            Param("zeta", float, 1e-10, "ζ added to each item's Σ_m ‖e_n^(m)‖² before the power p/2 (keeps its "
                  "gradient finite at e = 0; the code's 1e-10)", 1e-30, 1.0, paper="ζ"),
            _GEOCROWDNET_F_PARAMS[1],
            _confusion_lr_scale(10.0),
            Param("outlier_lr_scale", float, 1.0, "the outlier vectors' learning rate as a multiple of lr (the "
                  "code: one lr for everything)", 1e-3, 1e3),
        ),
        groups=(CONFUSION_GROUP, ModuleGroup("outlier", lr="outlier_lr_scale",
                                             help="the per-answer outlier vectors e_n^(m)")),
        kind="trainer", requires="train", rank=40, quick_params=QUICK,
    ),
)
