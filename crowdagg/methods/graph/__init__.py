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

from ..registry import SEED, Method, Param, max_iter

DECLARATIONS: tuple = (
    Method(
        "bp", "crowdagg.methods.graph.bp:BeliefPropagation",
        "belief propagation: sum-product messages on the worker-task graph, each worker's confusion integrated "
        "out under a prior (exact on trees, optimal on sparse random graphs)",
        "z_i uniform; worker u's confusion θ_u ~ prior, answers y_iu ~ θ_u[z_i, :]; θ_u integrated out: "
        "worker factors g_u(z) = E[Π_j θ_u[z_j, y_ju]]. Sum-product messages along the answers, damped, until "
        "no message moves more than tol. one-coin: accuracy q ~ Beta(a, b) on a grid of cells (exact O(n_u × "
        "grid) messages); confusion: Dirichlet rows (alpha diagonal, beta off), deepBP's Monte-Carlo messages "
        "over `samples` prior draws. --workers: the posterior mean confusion and accuracy.",
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
               "2,1 as Liu et al.'s and deepBP's code", 1e-3, 1e4, "Beta(a, b) / Dir(α, β)"),
         Param("grid", int, 32, "cells of the one-coin accuracy's grid (error ~1/grid², table in the docs)",
               2, 4096, "discrete prior"),
         Param("samples", int, 400, "prior draws of the confusion model's Monte-Carlo messages (deepBP: 400)",
               1, 100_000, "S"),
         Param("damping", float, 0.0, "share of the previous worker-to-task message kept each sweep", 0.0,
               0.99),
         Param("start", "choice", "vote", "vote (task messages from the soft majority vote) or uniform "
               "(worker messages 1/K, deepBP's)", choices=("vote", "uniform"))),
        gold=True, kind="categorical", engines=("local",), rank=100,
    ),
)
