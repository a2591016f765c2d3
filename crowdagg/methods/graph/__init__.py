"""Graph inference on the worker--task graph: belief propagation (:mod:`.bp`), mean-field variational Bayes
(:mod:`.mf`) and Karger--Oh--Shah message passing (:mod:`.kos`).

The answers form a bipartite graph (tasks on one side, workers on the
other, one edge per answer).  These methods pass messages along its edges
(ALGORITHMS.md §6; Liu, Peng & Ihler 2012; Ok et al. 2016; Karger, Oh &
Shah 2011/2014; Kim, Cho, Kim & Ok 2022): the task side in task-ordered
blocks of the engine's grid, the worker side in worker-ordered blocks
(:func:`crowdagg.engine.grid.worker_grid`), the kernels in
:mod:`crowdagg.kernels`.  Messages are per-edge outputs that stay with
their block; BP and KOS cross from one side to the other through the
answers' worker order, so they run on the local engine only, while MF's
statistics are sums over tasks (Dawid--Skene's) and run on Dask too.

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import INIT, SEED, Method, Param, max_iter, tol

_BP = Method(
    "bp", "crowdagg.methods.graph.bp:BeliefPropagation",
    "belief propagation: sum-product messages on the worker-task graph, each worker's confusion integrated "
    "out under a prior (exact on trees, optimal on sparse random graphs)",
    "z_i uniform; worker u's confusion θ_u ~ prior, answers y_iu ~ θ_u[z_i, :]; θ_u integrated out: "
    "worker factors g_u(z) = E[Π_j θ_u[z_j, y_ju]]. Sum-product messages along the answers, damped, until "
    "no message moves more than tol. one-coin: accuracy q ~ Beta(a, b) on a grid of cells (exact O(n_u × "
    "grid) messages); confusion: Dirichlet rows (alpha diagonal, beta off), deepBP's Monte-Carlo messages "
    "over `samples` prior draws, and (proposal=posterior) a worker with many answers importance-samples "
    "`samples` draws of its own from a Dirichlet near its posterior (fitted after a mean-field warm-up), "
    "weighted prior/proposal. --workers: the posterior mean confusion and accuracy.",
    "Liu, Peng & Ihler, Variational inference for crowdsourcing, NIPS 2012; Ok, Oh, Shin & Yi, Optimality "
    "of belief propagation for crowdsourced classification, ICML 2016; Kim, Cho, Kim & Ok, Robust deep "
    "learning from crowds with belief propagation, AISTATS 2022",
    (SEED, max_iter(100),
     Param("tol", float, 5e-4, "stop when no message changed by more than this in a sweep; 0 runs max_iter",
           0.0, 0.5),
     Param("worker_model", "choice", "one-coin", "one-coin (an accuracy per worker, Beta prior, on a grid) "
           "or confusion (full confusion, Dirichlet rows, Monte-Carlo messages)",
           choices=("one-coin", "confusion")),
     Param("prior", "numbers", (2.0, 1.0), "the worker prior: (a, b) of Beta(a, b) on the accuracy "
           "(one-coin), or (alpha, beta) of each confusion row's Dirichlet, alpha on the diagonal (confusion); "
           "2,1 as Liu et al.'s and deepBP's code", 1e-3, 1e4, "Beta(a, b) / Dir(α, β)", size=2),
     Param("grid", int, 32, "cells of the one-coin accuracy's grid (error ~1/grid², table in the docs)",
           2, 4096, "discrete prior"),
     Param("samples", int, 400, "prior draws of the confusion model's Monte-Carlo messages (deepBP: 400)",
           1, 100_000, "S"),
     Param("proposal", "choice", "posterior", "where the confusion model's draws come from: posterior (a worker "
           "with many answers draws its own from a Dirichlet near its posterior, importance-weighted) or prior "
           "(the shared prior draws only, deepBP's)", choices=("posterior", "prior")),
     Param("damping", float, 0.0, "share of the previous worker-to-task message kept each sweep", 0.0,
           0.99),
     Param("start", "choice", "vote", "vote (task messages from the soft majority vote) or uniform "
           "(worker messages 1/K, deepBP's)", choices=("vote", "uniform"))),
    gold=True, kind="categorical", engines=("local",), rank=100,
    quick_params={"max_iter": 15, "samples": 50},
)

_MF = Method(
    "mf", "crowdagg.methods.graph.mf:MeanField",
    "mean-field variational Bayes for Dawid-Skene: Dirichlet posteriors on each worker's confusion (or one-coin "
    "Beta accuracy) and on the class prior, ELBO ascent",
    "π ~ Dir(γ0), z_i ~ Cat(π), answer ~ Cat(θ_u[z_i, :]), rows θ_u[k, :] ~ Dir(prior: a on the diagonal, b off "
    "it), or one-coin p_u ~ Beta(a, b). q(z)q(θ)q(π) by coordinate ascent from soft majority vote: E-step "
    "log q_i(k) = E log π_k + Σ_u E log θ_u[k, y_iu] (ψ(β) − ψ(Σβ)); β_u = prior + expected counts, γ = γ0 + "
    "Σ q_i. Stops on the ELBO's relative change. Over-confident (marginals near 0/1) and can read an extreme "
    "spammer as an adversary (Kim et al. 2022 §4.1).",
    "Liu, Peng & Ihler, Variational inference for crowdsourcing, NeurIPS 2012; Kim, Cho, Kim & Ok, "
    "Robust deep learning from crowds with belief propagation, AISTATS 2022 (App. B, deepMF)",
    (SEED, max_iter(100), tol(1e-6),
     Param("worker_model", "choice", "confusion", "confusion (a Dirichlet per row of each worker's confusion) or "
           "one-coin (a Beta on each worker's accuracy, errors uniform)", choices=("confusion", "one-coin")),
     Param("prior", "numbers", (2.0, 1.0), "two pseudo-counts: each confusion row's Dirichlet on / off the "
           "diagonal, or one-coin Beta(a, b) (deepBP's code: 2,1)", 1e-6, 1e9, "α", size=2),
     Param("class_prior", float, 1.0, "Dirichlet concentration γ0 of the class proportions (1: uniform, one "
           "pseudo-task per class)", 1e-6, 1e9, "γ"),
     INIT),
    gold=True, kind="categorical", engines=("local", "dask"), rank=110,
    quick_params={"max_iter": 15},
)

_KOS = Method(
    "kos", "crowdagg.methods.graph.kos:KOS",
    "Karger-Oh-Shah iterative message passing (binary): decisions and a reliability per worker, no probabilities",
    "Answers L_ij = ±1. x_{i→j} = Σ_{j'≠j} L_ij' y_{j'→i}, y_{j→i} = Σ_{i'≠i} L_i'j x_{i'→j}, from y ~ N(1, 1); "
    "messages divided by their largest |y| each round; label sign(Σ_j L_ij y_{j→i}); a task no message reaches "
    "(belief 0) gets its vote, a tied vote drawn by the seed. Posteriors are one-hot at the decision (0.5/0.5 on a "
    "tied vote): KOS gives no probabilities. --workers: "
    "reliability (the worker's total message per answer over the largest |x|, in [-1, 1]; < 0 reads as an "
    "adversary). Binary only.",
    "Karger, Oh & Shah, Iterative learning for reliable crowdsourcing systems, NeurIPS 2011; "
    "Budget-optimal task allocation for reliable crowdsourcing systems, Operations Research 62(1), 2014",
    (SEED, max_iter(100),
     Param("tol", float, 1e-6, "stop when no normalised message changes by more than this; 0 runs max_iter",
           0.0, 0.5)),
    gold=True, kind="categorical", engines=("local",), rank=120,
    quick_params={"max_iter": 15},
)


DECLARATIONS: tuple = (_BP, _MF, _KOS)
