"""Moment methods: Spectral-DS (:mod:`.spectral`), coupled CPD (:mod:`.cpd`), MultiSPA (:mod:`.multispa`) and
coupled NMF (:mod:`.cnmf`).

They estimate every worker's confusion matrix and the class prior from
low-order statistics of the answers -- first-, second- and third-order
co-occurrences of workers on shared tasks (:mod:`crowdagg.kernels.cooc`) --
instead of from a start: the estimates come with identifiability
guarantees (ALGORITHMS.md §3--§5; the ICASSP 2025 tutorial, Part I) and
need no majority vote.  The shared mechanics (the floor, the fallback for
workers the statistics cannot identify, the decoding, the permutation,
``refine=ds``) are in :mod:`.estimate` and :mod:`.align`.

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import SEED, Method, Param, max_iter, tol

_CHOICES = ("none", "ds")


def refine(default: str) -> Param:
    """The ``refine`` parameter, with the method's published default."""
    return Param("refine", "choice", default, "none: the moment estimate itself; ds: Dawid-Skene EM started from it "
                 "(the papers' '-D&S' variants)", choices=_CHOICES, paper="refinement")


#: EM iterations of the refinement (``refine=ds``); it stops earlier at ds's tolerance (1e-6).
REFINE_ITER = Param("refine_iter", int, 200, "EM iterations of refine=ds at most (it stops at ds's tolerance, 1e-6, "
                    "before): 1 is Zhang et al.'s one-step EM, 10 their code's", 1, 10**7)

#: Every moment method's own parameters come after these.
SHARED = (SEED, REFINE_ITER)

_MULTISPA_MODEL = (
    "Dawid-Skene workers: the joint answers of two workers on a shared task are R_mj = A_m D A_j^T. Each worker's "
    "full-rank R_mj (rows: its answers) are stacked into Z_m = A_m [D A_j^T ...]; the successive projection "
    "algorithm picks K vertex columns of the column-normalised Z_m as A_m. Each worker's class order is tied to "
    "its partners' through G_mj = A_m^+ R_mj (A_j^+)^T (a permuted diagonal), then one common order is chosen by "
    "the average confusion's trace."
)
_IBRAHIM = ("Ibrahim, Fu, Kargas & Huang, Crowdsourcing via pairwise co-occurrences: identifiability and "
            "algorithms, NeurIPS 2019, arXiv:1909.12325")
_MIN_PARTNERS = Param(
    "min_partners", int, 8, "co-labelling workers with a full-rank K×K co-occurrence matrix a worker needs to be "
    "estimated (more than min_partners·K - K columns): 2 as the 2021 code (> K columns), 8 as the 2019 code "
    "(> 7K); the others get the soft-vote fallback", 1, 10**6, "> 7K columns")
_PRIOR = Param("prior", "choice", "uniform", "class prior: uniform (as published), or estimate (from the full-rank "
               "pairs by pseudo-inverse, prior_estim.m)", choices=("uniform", "estimate"), paper="prior_flag")

DECLARATIONS: tuple[Method, ...] = (
    Method(
        "multispa", "crowdagg.methods.moments.multispa:MultiSPA",
        "MultiSPA: confusion matrices from pairwise co-occurrences by successive projection (no EM)",
        _MULTISPA_MODEL + " Workers with fewer than min_partners full-rank partners, or a rank-deficient "
        "estimate, get their answers against the soft majority vote (said on stderr). Labels by MAP.",
        _IBRAHIM,
        (*SHARED, refine("none"), _MIN_PARTNERS, _PRIOR),
        gold=True, kind="categorical", engines=("local", "dask"), rank=90,
    ),
    Method(
        "cnmf", "crowdagg.methods.moments.cnmf:CoupledNMF",
        "coupled NMF (MultiSPA-KL): all confusion matrices and the prior fitted jointly to the pair "
        "co-occurrences by KL divergence, from MultiSPA",
        "min over A_m, d of sum over pairs with rank(R_mj) > 1 of KL(R_mj || A_m D A_j^T); block coordinate "
        "descent: per worker 3 mirror-descent (exponentiated-gradient) steps with Armijo backtracking (step 0.1, "
        "x0.9, sigma 1e-3, down to 1e-5), then one on the prior; started from MultiSPA (workers it could not "
        "estimate from the soft-vote counts). Labels by MAP.",
        _IBRAHIM + " (MultiSPA-KL)",
        (*SHARED, refine("none"), max_iter(10, "max_iter"), tol(1e-6), _MIN_PARTNERS, _PRIOR),
        gold=True, kind="categorical", engines=("local", "dask"), rank=95,
    ),
)
