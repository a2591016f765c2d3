"""Minimax conditional entropy (:mod:`.minimax`): workers and tasks each bend the answers' distribution.

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import SEED, Method, Param, max_iter

DECLARATIONS = (
    Method(
        "minimax", "crowdagg.methods.entropy.minimax:MinimaxEntropy",
        "minimax conditional entropy: each answer's distribution given the true class is a softmax of a worker "
        "matrix plus a task matrix (L2-regularised), fitted by coordinate ascent with L-BFGS M-steps",
        "P(answer = l | true class k, worker j, task i) ∝ exp(σ_j[k, l] + τ_i[k, l]); uniform class prior. "
        "Alternate: each worker's σ_j (L-BFGS, ≤ inner_iter iterations) minimising -Σ q_i(k) log P + λ_w/2 ‖σ_j‖², "
        "each task's τ_i likewise with λ_t, then the posteriors q_i(k) ∝ Π P(answer | k); from the vote shares, "
        "until no posterior moves by tol. λ_w = worker_reg·K² (K: the classes the answers give), "
        "λ_t = task_reg·λ_w·(mean answers a worker / mean answers a task).",
        "Zhou, Basu, Mao & Platt, Learning from the wisdom of crowds by minimax entropy, NIPS 2012; Zhou, Liu, "
        "Platt & Meek, Aggregating ordinal labels from crowds by minimax conditional entropy, ICML 2014 (the "
        "categorical form, the authors' MinimaxEntropy_crowd_model.m)",
        (SEED, max_iter(50),
         Param("tol", float, 5e-3, "stop when no posterior entry moved by more than this in an iteration "
               "(the authors' TOL); 0 runs max_iter", 0.0, 0.5),
         Param("worker_reg", float, 0.25, "λ_worker = worker_reg × K², the L2 weight on each worker's matrix "
               "(the authors' 0.25)", 1e-6, 1e6, "λ_worker / K²"),
         Param("task_reg", float, 1.0, "λ_task = task_reg × λ_worker × (mean answers a worker / mean answers a "
               "task), the L2 weight on each task's matrix (the authors' 1)", 1e-6, 1e6, "λ_task / (λ_worker ratio)"),
         Param("inner_iter", int, 25, "L-BFGS iterations at most per worker or task problem in each M-step "
               "(minFunc's maxIter_Mstep, 25)", 1, 10_000),
         Param("inner_tol", float, 1e-3, "an M-step problem stops when its gradient's largest entry, its step's "
               "or its objective's change is at most this (minFunc's optTol and progTol, 1e-3)", 0.0, 1.0)),
        kind="categorical", engines=("local",), rank=140,
        quick_params={"max_iter": 10, "inner_iter": 10},
    ),
)
