"""M-MSR: worker skills by robust rank-one completion of the pairs' agreement (:mod:`.mmsr`).

This ``__init__`` holds the family's declaration only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method module).
"""

from ..registry import SEED, Method, Param

DECLARATIONS = (
    Method(
        "mmsr", "crowdagg.methods.mmsr.mmsr:MMSR",
        "matrix mean-subsequence-reduced (M-MSR): each worker's skill from the agreement of co-labelled worker "
        "pairs by a robust rank 1 completion, then a log-odds weighted vote",
        "C̃_ij = (K agree_ij − 1)/(K − 1) over the pairs sharing a task (E C̃ = s sᵀ, s_i = (K p_i − 1)/(K − 1)); "
        "|C̃| ≈ u vᵀ by alternating trimmed means (each drops the F largest values above and the F smallest "
        "below the current entry, F = ⌊min partners / 2⌋ − 1) until ‖uvᵀ − u'v'ᵀ‖_F ≤ tol; |s| = u √(‖v‖/‖u‖), "
        "each worker's sign that of Σ_j n_ij C̃_ij σ_j |s_j| (n_ij shared tasks; from all positive, until none "
        "changes); s clipped to [−1/(K−1) + 1/√N, 1 − 1/√N], "
        "p = s (K−1)/K + 1/K, label = argmax_k Σ_m log((K−1) p_m/(1−p_m)) 1[answer_m = k]. --workers: skill "
        "(s), accuracy (p), weight (the log-odds; crowd-kit's skills_).",
        "Ma & Olshevsky, Adversarial crowdsourcing through robust rank-one matrix completion, NeurIPS 2020 "
        "(arXiv:2010.12181); crowd-kit's MMSR",
        (SEED,
         Param("max_iter", int, 10000, "iteration cap (0: the skills of the uniform start, crowd-kit's n_iter=0)", 0,
               10**7),
         Param("tol", float, 1e-10, "stop when the rank-one estimate moves by at most this, ‖uvᵀ − u'v'ᵀ‖_F "
               "(crowd-kit's 1e-10); 0 runs max_iter", 0.0, 0.5),
         Param("signs", "choice", "evidence", "the skills' signs: evidence (each worker the sign of Σ_j n_ij C̃_ij "
               "σ_j |s_j| over its pairs, from all positive, until none changes: rte .9275, sentiment .9032) or "
               "spectral (crowd-kit's signed-graph eigenvector, on the co-labelled pairs only: rte .8975; slow "
               "beyond ~100k pairs)", choices=("evidence", "spectral")),
         Param("start", "choice", "names", "the factors' uniform start: names (drawn by worker name: no row order "
               "changes a bit) or codes (crowd-kit's draw, numpy's RandomState(seed) over the workers in order of "
               "first appearance: on a crowd as small as crowd-kit's toy the fixed point moves with it)",
               choices=("names", "codes"))),
        kind="categorical", engines=("local", "dask"), rank=125,
        quick_params={"max_iter": 200},
    ),
)
