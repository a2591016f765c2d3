"""Vote-based methods: majority vote (:mod:`.mv`), weighted (:mod:`.wmv`, :mod:`.iwmv`), worker agreement (:mod:`.wawa`),
Bayesian weighted average (:mod:`.bwa`), zero-based skill (:mod:`.zbs`), two-thirds agreement (:mod:`.twothird`).

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
    Method(
        "zbs", "crowdagg.methods.votes.zbs:ZeroBasedSkill",
        "zero-based skill (crowd-kit's ZeroBasedSkill): skills moved toward each worker's agreement with the "
        "skill-weighted vote, by a learning rate halved every 20 iterations",
        "s_m = 1/K + eps at the start; iteration t: η_t = lr_init · lr_reduce_factor^⌊t / lr_steps_to_reduce⌋, "
        "labels = argmax_k Σ_m s_m 1[answer_m = k], s_m += η_t (a_m − s_m) with a_m the share of worker m's "
        "answers equal to the labels; the result is the vote with the last skills (its shares the posteriors). "
        "--workers: skill.",
        "Toloka crowd-kit, ZeroBasedSkill (1.4.2)",
        (SEED, max_iter(100, "n_iter"),
         Param("tol", float, 0.0, "stop once no skill moves by more than this in an iteration; 0 runs max_iter "
               "(crowd-kit's rule: it always runs n_iter)", 0.0, 0.5),
         Param("lr_init", float, 1.0, "the first learning rate (above 1 a step would overshoot the agreement it "
               "moves toward)", 0.0, 1.0, "lr_init"),
         Param("lr_steps_to_reduce", int, 20, "the learning rate is reduced at every multiple of this many "
               "iterations", 1, 10**7, "lr_steps_to_reduce"),
         Param("lr_reduce_factor", float, 0.5, "what the learning rate is multiplied by at each reduction", 0.0, 1.0,
               "lr_reduce_factor"),
         Param("eps", float, 1e-5, "every skill starts at 1/K + eps (crowd-kit's eps, used only there)", 0.0, 1.0,
               "eps")),
        kind="categorical", engines=("local", "dask"), rank=132,
        quick_params={"max_iter": 25},
    ),
    Method(
        "twothird", "crowdagg.methods.votes.twothird:TwoThird",
        "two-thirds agreement (peerannot's TwoThird): a label is accepted once 2/3 of at least 2 answers agree; "
        "other tasks are flagged accepted=false (a column of the output), their label the plurality",
        "accepted_n = [n_n ≥ min_answers] ∧ [max_k c_nk / n_n ≥ fraction] (one class alone); label = argmax_k "
        "c_nk (the plurality, ties drawn); posteriors are the vote shares. Output: task, label, confidence, "
        "accepted. --workers: accepted_agreement (share of a worker's answers on accepted tasks equal to their "
        "label).",
        "peerannot (Lefort, Charlier, Joly & Salmon), TwoThird agreement",
        (SEED,
         Param("min_answers", int, 2, "a task needs at least this many answers to be accepted (peerannot's 2)", 1,
               10**9, "minimum answers"),
         Param("fraction", float, 2 / 3, "the share of a task's answers its label needs (default 2/3: 2 of 3, "
               "4 of 6 are accepted; give a decimal below the share you mean, e.g. 0.6666 for 2/3)", 0.5, 1.0,
               "2/3")),
        kind="categorical", engines=("local", "dask"), rank=134,
    ),
)
