"""GLAD: worker ability and task difficulty (:mod:`.glad`).

This ``__init__`` holds the family's declaration only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method module).
"""

from ..registry import INIT, SEED, Method, Param, max_iter, tol

DECLARATIONS = (
    Method(
        "glad", "crowdagg.methods.glad.glad:Glad",
        "GLAD: one ability per worker and one difficulty per task (EM, L-BFGS-B M-step); 1/beta is a task's "
        "difficulty",
        "P(answer = y_n) = σ(α_m β_n), a wrong answer uniform over the other K−1 classes; α_m ~ N(1, 1), "
        "log β_n ~ N(1, 1); EM from soft majority vote: E-step q_n(k) ∝ d_k Π_m P(answer | k), M-step "
        "L-BFGS-B over all α and log β of the expected complete log-likelihood plus the log-priors; "
        "the class prior d uniform (-p prior=estimate re-estimates it). --workers: alpha (ability, < 0 worse than chance); --task-params: "
        "beta (1/beta is the task's difficulty).",
        "Whitehill, Ruvolo, Wu, Bergsma & Movellan, Whose vote should count more: optimal integration of "
        "labels from labelers of unknown expertise, NIPS 2009",
        (SEED, max_iter(100), tol(1e-6),
         Param("prior", "choice", "uniform", "class prior: uniform (fixed, as the authors' code and crowd-kit), "
               "or estimate (re-estimated each M-step; it can collapse onto the majority class: bluebird .574, "
               "web .784)", choices=("uniform", "estimate"), paper="p(Z)"),
         Param("alpha_mean", float, 1.0, "mean of the N(mean, 1) prior on each worker's ability", -100.0, 100.0,
               "α prior mean"),
         Param("log_beta_mean", float, 1.0, "mean of the N(mean, 1) prior on each task's log beta", -20.0, 20.0,
               "log β prior mean"),
         Param("m_step_max_iter", int, 200, "L-BFGS-B iterations per M-step at most", 1, 10**6),
         Param("n_init", int, 1, "starts of EM (the first from `init`, the others seeded random); the best "
               "log-posterior is kept", 1, 1000),
         INIT),
        gold=True, init_workers=True,
        kind="categorical", engines=("local",), rank=60,
        quick_params={"max_iter": 15},
    ),
)
