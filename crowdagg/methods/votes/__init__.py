"""Vote-based methods: majority vote (:mod:`.mv`), weighted (:mod:`.wmv`, :mod:`.iwmv`), worker agreement (:mod:`.wawa`),
Bayesian weighted average (:mod:`.bwa`).

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import SEED, Method, Param, max_iter

DECLARATIONS = (
    Method(
        "mv", "crowdagg.methods.votes.mv:MajorityVote",
        "majority vote; ties broken by a seeded random draw; confidence = vote share",
        "label = argmax_k Σ_m 1[answer_m = k]; posteriors are the vote shares.",
        "the baseline of every crowdsourcing paper (e.g. Snow et al., EMNLP 2008)",
        (SEED,),
        kind="categorical", engines=("local", "dask"), rank=10,
    ),
    Method(
        "wmv", "crowdagg.methods.votes.wmv:WeightedMajorityVote",
        "weighted majority vote, one-coin log-odds weights from each worker's smoothed agreement with the vote "
        "(iterated; Li & Yu's own weights are iwmv)",
        "p_m = (agree_m + 1)/(n_m + 2) against the current labels; weight w_m = log((K-1) p_m/(1-p_m)); "
        "revote until no label changes.",
        "the one-coin MAP weights (for two classes: Nitzan & Paroush, Optimal decision rules in uncertain "
        "dichotomous choice situations, International Economic Review 23(2), 1982), iterated as in Li & Yu's IWMV "
        "(arXiv:1411.4086)",
        (SEED, max_iter(50)),
        kind="categorical", engines=("local", "dask"), rank=20,
        quick_params={"max_iter": 15},
    ),
    Method(
        "iwmv", "crowdagg.methods.votes.iwmv:IterativeWeightedMajorityVote",
        "iterative weighted majority vote as published (Li & Yu 2014): weight K·accuracy - 1, revote until no "
        "label changes",
        "start: v_m = 1 (majority vote); repeat: y_n = argmax_k Σ_m v_m 1[answer_m = k], w_m = share of worker "
        "m's answers equal to y, v_m = K w_m - 1; until no label changes. Posteriors: softmax_k Σ_m v_m "
        "1[answer_m = k] (a score, not a fitted probability).",
        "Li & Yu, Error rate bounds and iterative weighted majority voting for crowdsourcing, arXiv:1411.4086, "
        "2014, Algorithm 1",
        (SEED, max_iter(50)),
        kind="categorical", engines=("local", "dask"), rank=52,
        quick_params={"max_iter": 15},
    ),
    Method(
        "wawa", "crowdagg.methods.votes.wawa:Wawa",
        "worker agreement with aggregate: skill = agreement with the majority vote, then skill-weighted vote",
        "s_m = share of worker m's answers equal to the majority vote; label = argmax_k Σ_m s_m 1[answer_m = k].",
        "Toloka crowd-kit, Wawa (worker agreement with aggregate)",
        (SEED,),
        kind="categorical", engines=("local", "dask"), rank=30,
    ),
    Method(
        "bwa", "crowdagg.methods.votes.bwa:BayesianWeightedAverage",
        "Bayesian weighted average: one-vs-rest per class, each worker's answers a noisy reading of the task's "
        "score with a per-worker precision (Gamma prior set from the data); precision-weighted vote shares",
        "per class k: y = 1[answer = k] ~ N(z_n, 1/v_m), z_n ~ N(μ, 1/λ), v_m ~ Gamma(a_v/2, b_v/2) with "
        "b_v = a_v·4(1-1/K)·Σ_n W_n z_n(1-z_n)/L from the vote shares; alternate μ = mean z, v_m = (a_v + N_m)/"
        "(b_v + Σ (z_n - y)²), z_n = (λμ + Σ v_m y)/(λ + Σ v_m) from the shares until each class's scores stop "
        "moving (allclose rtol=tol); posteriors: the class scores normalised per task.",
        "Li, Rubinstein & Cohn, Truth inference at scale: a Bayesian model for adjudicating highly redundant "
        "crowd annotations, WWW 2019 (arXiv:1902.08918)",
        (SEED, max_iter(500),
         Param("tol", float, 1e-3, "a class stops when no task's score moves by more than 1e-8 + tol × |score| "
               "(the authors' np.allclose rtol); 0 runs max_iter", 0.0, 0.5),
         Param("a_v", float, 15.0, "shape of the Gamma prior on each worker's precision, in pseudo-answers "
               "(the authors' 15)", 1e-6, 1e9, "a_v"),
         Param("lam", float, 1.0, "precision λ of the N(μ, 1/λ) prior on each task's score, in pseudo-answers "
               "of precision 1 (the authors' 1)", 0.0, 1e9, "λ"),
         Param("prior_correction", bool, True, "scale the prior's rate by 4(1 - 1/K) (the authors' default); "
               "false: the answers' variance under the vote alone", paper="prior correction")),
        kind="categorical", engines=("local", "dask"), rank=130,
        quick_params={"max_iter": 20},
    ),
)
