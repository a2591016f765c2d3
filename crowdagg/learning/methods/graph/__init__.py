"""Graph trainers: the aggregators of :mod:`crowdagg.methods.graph` with the classifier as each task's prior.

deepMF and deepBP (Kim, Cho, Kim & Ok, AISTATS 2022): variational inference over the true labels on the
worker--task graph -- mean field (:mod:`.deepmf`) or belief propagation with Monte-Carlo worker messages
(:mod:`.deepbp`) -- alternated with classifier updates on the inferred marginals, the worker confusions under a
Dirichlet prior integrated out (BP) or given Dirichlet posteriors (MF).  Declarations only (standard library).
"""

from dataclasses import replace

from ....methods.registry import Method, Param
from .. import QUICK, TRAIN_PARAMS

_REFERENCE = ("Kim, Cho, Kim & Ok, Robust deep learning from crowds with belief propagation, AISTATS 2022, "
              "arXiv:2111.00734")

#: Full-batch training (the paper's; batch_size is not read) takes one optimiser step an epoch: the paper's 200
#: epochs, and lr 1e-2 where its Table 2 has 1e-4, which left music's classifier under-fit (:mod:`.deepmf`).
_DEFAULTS = {"epochs": 200, "lr": 1e-2}
_TRAIN = tuple(replace(p, default=_DEFAULTS[p.name]) if p.name in _DEFAULTS else p for p in TRAIN_PARAMS)

_SHARED = (
    Param("prior", "numbers", (2.0, 1.0), "the Dirichlet prior of each row of a worker's confusion: A on the "
          "diagonal, B off it (-p prior=A,B; 2,1 as the paper's code and as bp's and mf's)", 1e-3, 1e4, "α"),
    Param("clip", float, 0.9, "the clipping c of the classifier's output: every class probability capped at c, "
          "the clipped mass spread evenly over the other classes (1/K: the features ignored; >= 1: off)",
          1e-6, 10.0, "c"),
)

#: deepBP's prior when none is given: the paper's, carried to K classes by its mean accuracy (:mod:`.deepbp`).
_PRIOR_K = ("the Dirichlet prior of each row of a worker's confusion: A on the diagonal, B off it (-p prior=A,B); "
            "default 2(K-1), 1: the prior mean accuracy 2/3 of the paper's 2, 1 for two classes (which it is there), "
            "where 2, 1 would say 2/(K+1) and lets a class be emptied into its neighbour")

_MODEL = ("z_i ~ Cat(Clip(f_φ(x_i), c)); worker u's confusion rows θ_u[k, :] ~ Dir(α_k) (A on the diagonal, B off "
          "it), answers y_iu ~ Cat(θ_u[z_i, :]). Each epoch (full batch, as the paper): f̂ = Clip(f_φ(x), c), q = the "
          "inferred marginals of z given f̂ as each task's prior and the answers, then φ trained on KL(q ‖ f̂) (the "
          "loss on the clipped f̂: a prediction beyond c gets no gradient). ")

DECLARATIONS = (
    Method(
        "deepmf", "crowdagg.learning.methods.graph.deepmf:DeepMF",
        "deepMF: mean-field inference of the true labels with the classifier as their prior, alternated with "
        "classifier updates on the inferred marginals",
        _MODEL + "deepMF: one mean-field sweep an epoch, q_i(k) ∝ f̂_i(k) exp Σ_u E[log θ_u[k, y_iu]] under the "
        "Dirichlet posteriors β_u = α + expected counts of the previous q (β starts at α), then β from q. "
        "--workers: the posterior mean confusions β_u / Σβ_u.",
        _REFERENCE,
        _TRAIN + _SHARED,
        kind="trainer", requires="train", rank=60, quick_params=QUICK,
    ),
    Method(
        "deepbp", "crowdagg.learning.methods.graph.deepbp:DeepBP",
        "deepBP: belief propagation on the worker-task graph with the classifier as each task's factor, workers' "
        "confusions integrated out by Monte-Carlo messages, alternated with classifier updates on the beliefs",
        _MODEL + "deepBP: q = BP(f̂, y, α), sum-product on the worker-task graph with f̂ as the task factors and "
        "each worker's confusion integrated out by Monte-Carlo messages over `samples` draws from the prior "
        "(proposal=posterior: a worker with many answers importance-samples its own draws near its posterior), "
        "at most bp_iters sweeps or until no message moves more than bp_tol, the messages carried from epoch to "
        "epoch. --workers: the posterior mean confusions at the final messages.",
        _REFERENCE,
        _TRAIN + (replace(_SHARED[0], default=None, help=_PRIOR_K), _SHARED[1]) + (
            Param("samples", int, 400, "draws of each worker's confusion in the Monte-Carlo messages (the paper: "
                  "400)", 1, 100_000, "S"),
            Param("bp_iters", int, 100, "the most BP sweeps an epoch (the paper: 100)", 1, 100_000, "T"),
            Param("bp_tol", float, 0.03, "an epoch's BP stops when no message moved more than this in a sweep (the "
                  "paper's code: 0.03)", 0.0, 0.5),
            Param("proposal", "choice", "posterior", "where the draws come from: posterior (a worker with many "
                  "answers draws its own near its mean-field posterior, importance-weighted: bp's default) or "
                  "prior (the shared prior draws only: the paper's)", choices=("posterior", "prior")),
        ),
        kind="trainer", requires="train", rank=61, quick_params={**QUICK, "samples": 40, "bp_iters": 10},
    ),
)
