"""Vote-based methods: majority vote (:mod:`.mv`), weighted (:mod:`.wmv`), worker agreement (:mod:`.wawa`).

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import SEED, Method, max_iter

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
        "weighted majority vote, log-odds weights from each worker's agreement with the vote (iterated)",
        "p_m = (agree_m + 1)/(n_m + 2) against the current labels; weight w_m = log((K-1) p_m/(1-p_m)); "
        "revote until no label changes.",
        "Li & Yu, Error rate bounds and iterative weighted majority voting for crowdsourcing, arXiv:1411.4086",
        (SEED, max_iter(50)),
        kind="categorical", engines=("local", "dask"), rank=20,
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
)
