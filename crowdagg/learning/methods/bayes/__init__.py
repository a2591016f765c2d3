"""Fully Bayesian trainers: Dirichlet posteriors on the class proportions and on every annotator's confusion,
the classifier as a second prior factor of the true label, fitted by natural-gradient stochastic variational
inference (BayesDGC).
"""

from ....methods.registry import Method, Param
from .. import QUICK, TRAIN_PARAMS

DECLARATIONS = (
    Method(
        "bayesdgc", "crowdagg.learning.methods.bayes.bayesdgc:BayesDGC",
        "BayesDGC: the classifier as a prior of the true label, Dirichlet posteriors on "
        "every annotator's confusion rows (and the class proportions), natural-gradient SVI",
        "π ~ Dir(α⁰) (held uniform unless learn_class_prior); each annotator's confusion row ν_jk ~ Dir(β⁰_k) "
        "(β⁰ on the diagonal, off it); p(y_i) ∝ π_{y_i} τ(x_i)_{y_i} (the network τ as a second prior factor); "
        "answers ~ Cat(ν_j[y_i, :]). "
        "Mean-field q(π) q(ν) q(y) by natural-gradient SVI: per minibatch the local step log q(y_i) = E log π + "
        "log τ(x_i) + Σ_j E log ν_j[·, L_ij] (ψ(β) − ψ(Σβ)), then η ← (1 − ρ_t) η + ρ_t (η⁰ + N/|B| Σ_batch "
        "statistics) for every ν_jk's (and π's) natural parameters, ρ_t = (t + τ)^(−κ), and one Adam step of the "
        "network on the cross-entropy of log τ(x) against q. With a constant network, a full batch and ρ = 1 it "
        "is mf's mean-field Bayesian Dawid-Skene (learn_class_prior=true).",
        "Li, Huang & Chen, Crowdsourcing aggregation with deep Bayesian learning (BayesDGC), Science China "
        "Information Sciences, 2021; Hoffman, Blei, Wang & Paisley, Stochastic variational "
        "inference, JMLR 14, 2013 (the step sizes)",
        TRAIN_PARAMS + (
            Param("learn_class_prior", bool, False, "learn the class proportions π ~ Dir(α⁰) as the paper does (true), "
                  "or hold π uniform (false, the default: the network, fit to q, learns the class frequencies itself, "
                  "so E log π counts them a second time and the larger classes grow epoch after epoch -- labelme's "
                  "training labels .66 against .83; with true and a constant network the fit is mf's)", paper="π"),
            Param("class_prior", float, 1.1, "Dirichlet concentration α⁰ of the class proportions π, with "
                  "learn_class_prior=true (the paper: 1.1)", 1e-6, 1e9, "α⁰"),
            Param("prior", "numbers", (5.0, 2.0), "two pseudo-counts: each confusion row's Dirichlet β⁰ on and off "
                  "the diagonal (the paper: 5, 2, annotators better than chance)", 1e-6, 1e9, "β⁰", size=2),
            Param("step_delay", float, 1.0, "delay τ of the natural-gradient step size ρ_t = (t + τ)^(-κ), t = 1, 2, "
                  "... the minibatches so far (the paper states no schedule: SVI's Robbins-Monro one)", 0.0, 1e9,
                  "τ"),
            Param("step_decay", float, 0.75, "forgetting rate κ of the step size ρ_t = (t + τ)^(-κ); (0.5, 1] "
                  "meets Robbins-Monro's conditions; 0 keeps ρ = 1 (with a full batch: the closed-form "
                  "mean-field update)", 0.0, 1.0, "κ"),
        ),
        kind="trainer", requires="train", rank=50, quick_params=QUICK,
    ),
)
