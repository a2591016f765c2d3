"""Bayesian classifier combination: enhanced BCC with worker correlation through latent subtypes (:mod:`.ebcc`).

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import INIT, SEED, Method, Param, max_iter

_EBCC = Method(
    "ebcc", "crowdagg.methods.bayes.ebcc:EBCC",
    "enhanced Bayesian classifier combination: M latent subtypes per true class, each with its own confusion "
    "rows per worker (workers' correlated errors), mean-field VB, the best ELBO of seeded restarts",
    "τ ~ Dir(α), each class's subtype weights π_k ~ Dir(a_π/M), (y_i, g_i) ~ Cat(τ_k π_km), worker j answers "
    "~ Cat(v_j[k, m, :]) with rows v_j[k, m, :] ~ Dir(a_v on the true class, b_v off it). q(y, g)q(τ)q(π)q(v) "
    "by coordinate ascent from the start's class posteriors split at random (Dirichlet(1), keyed on task names) "
    "into subtypes: E-step log q_i(k, m) = E log τ_k + E log π_km + Σ_j E log v_j[k, m, y_ij]; M-step "
    "μ_j = prior + expected counts, η_k = a_π/M + Σ_i q_i(k, ·), ν = α + Σ_i q_i, α = class_prior + the start's "
    "class totals (empirical_prior, the authors' published runs). Stops when no class posterior "
    "moves by more than tol (the authors' rule); of n_init seeded subtype splits the best ELBO is kept. "
    "--workers: the confusion marginalised over subtypes, Σ_m E[π_km] E[v_j[k, m, :]]. One subtype is mf "
    "(worker_model=confusion, prior=a_v,b_v, class_prior=α) with empirical_prior=false.",
    "Li, Rubinstein & Cohn, Exploiting worker correlation for label aggregation in crowdsourcing, ICML 2019 "
    "(PMLR 97:3886-3895)",
    (SEED, max_iter(500),
     Param("tol", float, 1e-3, "stop when no task's class posterior moves by more than this in an iteration "
           "(the authors' rule); 0 runs max_iter", 0.0, 0.5),
     Param("subtypes", int, 10, "latent subtypes per true class (M; 1 is mf)", 1, 1000, "M"),
     Param("n_init", int, 5, "seeded random subtype splits of the same start; the best ELBO is kept", 1, 1000),
     Param("a_pi", float, 0.1, "total concentration of each class's subtype weights, Dir(a_pi/M) (the authors' 0.1: "
           "few subtypes used)", 1e-6, 1e9, "a_π"),
     Param("prior", "numbers", (4.0, 1.0), "each confusion row's Dirichlet pseudo-counts on / off the true class "
           "(the authors' a_v = 4, b_v = 1)", 1e-6, 1e9, "a_v, b_v", size=2),
     Param("class_prior", float, 1.0, "Dirichlet concentration α of the class proportions (added to the start's "
           "class totals with empirical_prior)", 1e-6, 1e9, "α"),
     Param("empirical_prior", bool, True, "the class proportions' Dirichlet holds the start's class totals, one "
           "pseudo-task per task (the authors' published runs; false: class_prior alone)"),
     INIT),
    gold=True, kind="categorical", engines=("local", "dask"), rank=115,
    quick_params={"max_iter": 15, "n_init": 2, "subtypes": 3},
)

DECLARATIONS: tuple = (_EBCC,)
