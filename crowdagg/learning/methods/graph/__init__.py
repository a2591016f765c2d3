"""Graph trainers: the aggregators of :mod:`crowdagg.methods.graph` with the classifier as each task's prior.

deepMF and deepBP (Kim, Cho, Kim & Ok, AISTATS 2022): variational inference over the true labels on the
worker--task graph -- mean field (:mod:`.deepmf`) or belief propagation (:mod:`.deepbp`) -- alternated with
classifier updates on the inferred marginals, the workers' confusions (one-coin under a Beta prior, the
paper's eq. 3, or Dirichlet rows, its code's) integrated out (BP) or given posteriors (MF).
Declarations only (standard library).
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
    Param("worker_model", "choice", "one-coin", "one-coin (the paper's eq. 3: one accuracy per worker, p_u ~ "
          "Beta(A, B), its errors spread evenly over the other classes) or confusion (the paper's code: each row "
          "of a worker's confusion its own Dirichlet, A on the diagonal, B off it)",
          choices=("one-coin", "confusion"), paper="eq. 3"),
    Param("prior", "numbers", None, "the worker prior (-p prior=A,B): Beta(A, B) on a worker's accuracy "
          "(one-coin), or each confusion row's Dirichlet, A on the diagonal, B off it (confusion); default: the "
          "paper's prior mean accuracy 2/3 -- one-coin 2,1 (the paper's), confusion 2(K-1),1 (the paper's 2,1 "
          "when K = 2; 2,1 would say 2/(K+1) and lets a class be emptied into a neighbour the workers confuse it "
          "with)", 1e-3, 1e4, "α", size=2),
    Param("clip", float, 0.9, "the clipping c of the classifier's output: every class probability capped at c, "
          "the clipped mass spread evenly over the other classes (1/K: the features ignored; >= 1: off)",
          1e-6, 10.0, "c"),
)

_MODEL = ("z_i ~ Cat(Clip(f_φ(x_i), c)); worker u's confusion θ_u one-coin (θ_u[k, k] = p_u ~ Beta(A, B), "
          "(1 - p_u)/(K - 1) off the diagonal: the paper's eq. 3) or with rows θ_u[k, :] ~ Dir(α_k) (A on the "
          "diagonal, B off it: worker_model=confusion), answers y_iu ~ Cat(θ_u[z_i, :]). Each epoch (full "
          "batch, as the paper): f̂ = Clip(f_φ(x), c), q = the inferred marginals of z given f̂ as each task's "
          "prior and the answers, then φ trained on KL(q ‖ f̂) (the "
          "loss on the clipped f̂: a prediction beyond c gets no gradient). ")

DECLARATIONS = (
    Method(
        "deepmf", "crowdagg.learning.methods.graph.deepmf:DeepMF",
        "deepMF: mean-field inference of the true labels with the classifier as their prior, alternated with "
        "classifier updates on the inferred marginals",
        _MODEL + "deepMF: one mean-field sweep an epoch, q_i(k) ∝ f̂_i(k) exp Σ_u E[log θ_u[k, y_iu]] under the "
        "Beta / Dirichlet posteriors (the prior plus the expected counts of the previous q; they start at the "
        "prior), then the posteriors from q. --workers: the posterior mean confusions.",
        _REFERENCE,
        _TRAIN + _SHARED,
        kind="trainer", requires="train", rank=60, quick_params=QUICK,
    ),
    Method(
        "deepbp", "crowdagg.learning.methods.graph.deepbp:DeepBP",
        "deepBP: belief propagation on the worker-task graph with the classifier as each task's factor, workers' "
        "confusions integrated out (one-coin on a grid, or Monte-Carlo messages), alternated with classifier "
        "updates on the beliefs",
        _MODEL + "deepBP: q = BP(f̂, y, α), sum-product on the worker-task graph with f̂ as the task factors and "
        "each worker's confusion integrated out: one-coin, over the accuracy's Beta prior on a grid of `grid` "
        "cells (exact up to the quadrature); confusion, by Monte-Carlo messages over `samples` draws from the "
        "prior (the paper's §3.2; proposal=posterior: a worker with many answers importance-samples its own "
        "draws near its posterior); at most bp_iters sweeps or until no message moves more than bp_tol, the "
        "messages carried from epoch to epoch. --workers: the posterior mean confusions at the final messages.",
        _REFERENCE,
        _TRAIN + _SHARED + (
            Param("grid", int, 32, "one-coin: cells of the accuracy's grid (as bp's: error ~1/grid²)", 2, 4096,
                  "discrete prior"),
            Param("samples", int, 400, "confusion: draws of each worker's confusion in the Monte-Carlo messages "
                  "(the paper: 400)", 1, 100_000, "S"),
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
