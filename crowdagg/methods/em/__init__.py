"""Dawid--Skene EM (:mod:`.ds`), its one-coin variant (:mod:`.onecoin`) and its clustered workers (:mod:`.dsclust`).

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import INIT, N_INIT, SEED, Method, Param, max_iter, tol

_EM_MODEL = (
    "y_n ~ Cat(d); given y_n = k, worker m answers ~ Cat(A_m[:, k]), independently. EM from soft majority "
    "vote: E-step q_n(k) ∝ d_k Π_m A_m[answer, k]; M-step A_m[k', k] ∝ s + Σ q_n(k) 1[answer = k'], "
    "d_k ∝ s + Σ_n q_n(k)."
)

DECLARATIONS = (
    Method(
        "ds", "crowdagg.methods.em.ds:DawidSkene",
        "Dawid-Skene EM, full confusion matrix per worker (soft-MV init, Dirichlet smoothing)",
        _EM_MODEL + " Entries are floored at 1e-10 when s = 0.",
        "Dawid & Skene, Maximum likelihood estimation of observer error-rates using the EM algorithm, "
        "Applied Statistics 28(1), 1979, doi:10.2307/2346806",
        (SEED, max_iter(200), tol(1e-6),
         Param("smoothing", float, 0.0, "Dirichlet pseudo-count per confusion cell and class (0: entries "
               "floored at 1e-10)", 0.0, 1e9, "Dirichlet(1 + s) prior"),
         N_INIT, INIT),
        gold=True, init_workers=True,
        kind="categorical", engines=("local", "dask"), rank=40,
        quick_params={"max_iter": 15},
    ),
    Method(
        "onecoin", "crowdagg.methods.em.onecoin:OneCoinDawidSkene",
        "one-coin Dawid-Skene EM: one accuracy per worker, errors uniform over other classes",
        "A_m[k', k] = p_m if k' = k else (1 - p_m)/(K - 1); M-step p_m = (s/K + Σ q_n(answer)) / (n_m + s).",
        "Dawid & Skene 1979 with the one-coin (symmetric) worker model, e.g. Liu, Peng & Ihler, "
        "Variational inference for crowdsourcing, NeurIPS 2012",
        (SEED, max_iter(200), tol(1e-6),
         Param("smoothing", float, 1.0, "pseudo-answers at chance accuracy 1/K per worker", 0.0, 1e9,
               "Beta prior strength"),
         N_INIT, INIT),
        gold=True, init_workers=True,
        kind="categorical", engines=("local", "dask"), rank=50,
        quick_params={"max_iter": 15},
    ),
    Method(
        "ds-clust", "crowdagg.methods.em.dsclust:ClusteredDawidSkene",
        "Dawid-Skene with workers in clusters sharing one confusion matrix (variational EM over memberships)",
        "y_n ~ Cat(ρ); worker j in cluster c_j ~ Cat(τ) answers ~ Cat(Λ_{c_j}[:, y_n]). Mean-field EM: "
        "Λ_c[l, k] ∝ s + Σ_j φ_jc N_j[l, k], φ_jc ∝ τ_c exp(Σ N_j[l, k] log Λ_c[l, k]), "
        "q_n(k) ∝ ρ_k exp(Σ_j Σ_c φ_jc log Λ_c[answer, k]); start: workers ranked by the nuclear norm of their "
        "own confusion, cut into C groups.",
        "Imamura, Sato & Sugiyama, Analysis of minimax error rate for crowdsourcing and its application to worker "
        "clustering model, ICML 2018 (arXiv:1802.04551); peerannot's Dawid_Skene_clust (DSWC)",
        (SEED, max_iter(200), tol(1e-6),
         Param("clusters", int, 2, "number of worker clusters (peerannot's default 2); at most one per worker, "
               "more is one per worker (ds)", 1, 10**6, "L"),
         Param("smoothing", float, 0.0, "Dirichlet pseudo-count per cluster confusion cell and class (0: entries "
               "floored at 1e-10)", 0.0, 1e9, "Dirichlet(1 + s) prior"),
         N_INIT, INIT),
        gold=True,
        kind="categorical", engines=("local", "dask"), rank=55,
        quick_params={"max_iter": 15},
    ),
)
