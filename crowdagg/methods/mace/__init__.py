"""MACE: multi-annotator competence estimation (:mod:`.mace`).

This ``__init__`` holds the family's declaration only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method module).
"""

from ..registry import SEED, Method, Param, max_iter

DECLARATIONS = (
    Method(
        "mace", "crowdagg.methods.mace.mace:MACE",
        "MACE: each worker spams with some probability, answering from its own spam distribution, and otherwise "
        "answers the truth (variational Bayes, the best of seeded restarts)",
        "y_t uniform over the K classes; worker w spams on an answer with probability 1 − c_w, answering from its "
        "spam distribution θ_w, and otherwise gives y_t: P(a | k) = (1 − c_w) θ_w[a] + c_w [a = k]. "
        "Priors (m_step=vb): Beta(alpha, beta) pseudo-counts on (spamming, competence), Dirichlet(strategy_prior) "
        "on θ_w; E-step q_t(k) ∝ Π_e (s θ[a_e] + c [a_e = k]) with each answer's expected spam and competent "
        "counts; M-step exp E log of the Beta and Dirichlet posteriors (m_step=em: the counts plus smoothing/K, "
        "normalised). Each of n_init starts draws every worker's weights from U(1, 2 + default_noise) keyed on its "
        "name; the best log marginal likelihood is kept (crowd-kit 1.4.2's MACE). --workers: competence (the "
        "posterior probability of not spamming), spamming (1 − competence).",
        "Hovy, Berg-Kirkpatrick, Vaswani & Hovy, Learning whom to trust with MACE, NAACL-HLT 2013, 1120-1130 "
        "(aclanthology N13-1132)",
        (SEED, max_iter(50, "n_iter"),
         Param("tol", float, 0.0, "stop when the relative change of the log marginal likelihood is below this; 0 "
               "(crowd-kit's) runs max_iter", 0.0, 0.5),
         Param("n_init", int, 10, "random starts (crowd-kit's n_restarts), each worker's drawn from its name under "
               "the seed; the best log marginal likelihood is kept", 1, 1000, "n_restarts"),
         Param("m_step", "choice", "vb", "vb: variational Bayes with the Beta and Dirichlet priors (crowd-kit's "
               "default); em: maximum likelihood of the smoothed counts", choices=("vb", "em"), paper="method"),
         Param("alpha", float, 0.5, "Beta prior pseudo-count of spamming (vb)", 1e-6, 1e9, "α"),
         Param("beta", float, 0.5, "Beta prior pseudo-count of competence, not spamming (vb)", 1e-6, 1e9, "β"),
         Param("strategy_prior", float, 10.0, "Dirichlet pseudo-count of each class in a worker's spam "
               "distribution (vb; the authors' and crowd-kit's 10)", 1e-6, 1e9),
         Param("smoothing", float, 0.01, "em: pseudo-count added to each expected count, divided by the number of "
               "classes (crowd-kit's 0.01/K)", 1e-10, 1e9),
         Param("default_noise", float, 0.5, "width of the starts: each weight drawn from U(1, 2 + default_noise) "
               "and normalised (crowd-kit's scipy uniform(1, 1 + default_noise))", 0.0, 1e6)),
        gold=True, kind="categorical", engines=("local", "dask"), rank=65,
        quick_params={"max_iter": 10, "n_init": 2},
    ),
)
