"""``auto``: the method chosen from the answers alone -- candidates pooled by held-out answers (:mod:`.auto`).

This ``__init__`` holds the family's declaration only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method module).  The design, and why, is in :mod:`.auto`'s docstring.
"""

from ..registry import SEED, Method, Param

#: The candidates by default: every categorical aggregator that runs on a sparse crowd of any number of classes and
#: gives probabilities (the moment methods assume dense crowds; kos gives decisions only, and binary) -- a rule, not
#: a list chosen by the benchmark -- as the registry stood when auto was measured.  The aggregators added since
#: (iwmv, ds-clust, mace, zbs, mmsr; twothird flags rather than labels) are not in it: auto's figures and cost were
#: measured without them, and `-p candidates=...` adds them.
CANDIDATES = ("mv", "wawa", "wmv", "ds", "onecoin", "mf", "glad", "bp", "ebcc", "bwa", "minimax")

DECLARATIONS = (
    Method(
        "auto", "crowdagg.methods.auto.auto:Auto",
        "the candidates pooled by how well each predicts held-out answers (stacking); never reads truth",
        "Hide a share of the answers in each of `folds` seeded folds; fit every candidate on the rest; score "
        "its posterior q_c by the hidden answers' probability under one common model, Σ_k q_c(t, k) θ_w[k, l] "
        "with θ_w one Dawid-Skene M-step on q_c under a Dirichlet(prior: diagonal, off) row prior; stacking "
        "weights w (simplex) maximise Σ_hidden log Σ_c w_c p_c; the result is Σ_c w_c q_c of the fits on every "
        "answer (with temperature=held-out, its log tempered by one power fitted to the same hidden answers). "
        "--workers: one M-step of the common model on the pooled posterior.",
        "Yao, Vehtari, Simpson & Gelman, Using stacking to average Bayesian predictive distributions, "
        "Bayesian Analysis 13(3), 2018, doi:10.1214/17-BA1091; Dawid & Skene 1979 (the scoring model)",
        (SEED,
         Param("candidates", "methods", CANDIDATES, "the categorical aggregators pooled, each at its defaults "
               "(comma-separated)"),
         Param("folds", int, 5, "folds of hidden answers; each candidate is fitted folds + 1 times", 1, 100),
         Param("held_out", float, 0.1, "share of the answers hidden in each fold (folds × held_out <= 1; one "
               "answer of each task, drawn, is never hidden)", 0.001, 0.5),
         Param("prior", "numbers", (4.0, 1.0), "the scoring model's Dirichlet pseudo-counts of each confusion row, "
               "on and off the diagonal", 1e-3, 1e6, "Dir(α)", size=2),
         Param("pool", "choice", "stack", "stack (weights maximising the hidden answers' likelihood) or choose "
               "(the single best-scoring candidate)", choices=("stack", "choose")),
         Param("temperature", "choice", "none", "held-out (one power on the pooled log-posterior, fitted "
               "to the hidden answers) or none", choices=("held-out", "none"))),
        gold=True, kind="categorical", engines=("local",), rank=130,
        quick_params={"candidates": ("mv", "ds"), "folds": 2},
    ),
)
