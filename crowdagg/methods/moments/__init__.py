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

_SPECTRAL_MODEL = (
    "Dawid-Skene (y_n ~ Cat(d); answers ~ Cat(A_m[:, y_n]), independent given y_n). Workers in three groups; "
    "group views x_g = sums of one-hot answers; moments E[x_a x_b^T] (worker pairs) and E[x_a ⊗ x_b ⊗ x_c] "
    "(worker triples across the groups); symmetrised, whitened, robust tensor power method -> group matrices C_g "
    "and prior d; per worker A_m ∝ E[x_m x_alt^T] (diag(d) C_alt^T)^-1, clipped at 1e-6, columns normalised; class "
    "order from the data (groups matched by their cross moment, then the average worker diagonally dominant)."
)

_CPD_MODEL = (
    "Dawid-Skene moments: mu_m = A_m d, R_mm' = A_m D A_m'^T, T_mm'm'' = [[D; A_m, A_m', A_m'']] (a rank-K CPD "
    "coupled across worker triples). Minimises the squared residuals of the first-order moments, of every pair "
    "sharing >= min_pair_tasks tasks and of every triple sharing >= min_triple_tasks tasks (no other pair or "
    "triple enters: P K^2 + T K^3 numbers, never M^3 K^3), columns of A_m and d on the simplex, by alternating "
    "optimisation (a block per worker, then the prior) with an inner ADMM; started from the majority-vote "
    "histogram, classes ordered by the average confusion's diagonal."
)

_MULTISPA_MODEL = (
    "Dawid-Skene workers: the joint answers of two workers on a shared task are R_mj = A_m D A_j^T. Each worker's "
    "full-rank R_mj (rows: its answers) are stacked into Z_m = A_m [D A_j^T ...]; the successive projection "
    "algorithm picks K vertex columns of the column-normalised Z_m as A_m. Each worker's columns are matched to "
    "the least-squares fit Y_m = (sum_j R_mj B_j)(sum_j B_j^T B_j)^+ ~ A_m D of its co-occurrences with the "
    "partners already placed (B_j), so that the class order is common; then one common order is chosen by the "
    "average confusion's trace."
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
        "spectral", "crowdagg.methods.moments.spectral:SpectralDS",
        "Spectral-DS: three-view tensor decomposition of the answer moments, then Dawid-Skene EM (Spectral-D&S)",
        _SPECTRAL_MODEL,
        "Zhang, Chen, Zhou & Jordan, Spectral methods meet EM: a provably optimal algorithm for crowdsourcing, "
        "NeurIPS 2014; JMLR 17(102), 2016",
        (*SHARED, refine("ds"),
         Param("restarts", int, 100, "random starts of the tensor power method per component", 1, 10**6,
               "L (restarts)"),
         Param("power_iter", int, 100, "power iterations per start (and for the best start again)", 1, 10**6,
               "N (iterations)"),
         Param("groups", "choice", "balanced", "how the workers are split into three groups: balanced (equal "
               "answer counts, largest workers first) or round-robin (worker code mod 3, the authors' code)",
               choices=("balanced", "round-robin"))),
        gold=True, kind="categorical", engines=("local", "dask"), rank=70,
        quick_params={"restarts": 10, "power_iter": 20, "refine_iter": 15},
    ),
    Method(
        "cpd", "crowdagg.methods.moments.cpd:CoupledCPD",
        "coupled CPD of 1st/2nd/3rd-order moments by AO-ADMM (TensorADMM), for dense crowds",
        _CPD_MODEL,
        "Traganitis, Pages-Zamora & Giannakis, Blind multiclass ensemble classification, IEEE Trans. Signal "
        "Processing 66(18), 2018, doi:10.1109/TSP.2018.2860562",
        (*SHARED, refine("none"),
         Param("max_iter", int, 100, "outer sweeps at most (each updates every worker's matrix, then the prior)",
               1, 10**7, "outer_max_iter"),
         Param("inner_iter", int, 10, "ADMM steps per block and sweep", 1, 10**6, "inner_max_iter"),
         Param("tol", float, 1e-6, "stop when the relative L1 change of the confusion matrices and of the prior "
               "over a sweep are below this; 0 runs max_iter", 0.0, 0.5, "outer_tol"),
         Param("min_pair_tasks", int, 5, "second-order moments only of worker pairs sharing at least this many "
               "tasks", 1, 10**9),
         Param("min_triple_tasks", int, 20, "third-order moments only of worker triples sharing at least this "
               "many tasks (their K^3 histograms are noisy below; none kept: 1st/2nd order only, with a "
               "warning)", 1, 10**9)),
        gold=True, kind="categorical", engines=("local", "dask"), rank=80,
        quick_params={"max_iter": 15, "inner_iter": 5},
    ),
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
        quick_params={"max_iter": 5},
    ),
)
