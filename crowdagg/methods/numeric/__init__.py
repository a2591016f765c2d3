"""Numeric methods: one value per task from numeric answers (``crowdagg aggregate --numeric``).

The per-task average (:mod:`.averages`: ``mean``, ``median``) and the
continuous truth-discovery methods that weight each worker by how far their
answers sit from the estimates (:mod:`.catd`, :mod:`.crh`), on
:class:`~crowdagg.data.numeric.NumericAnswers`.  Their base and result are
:mod:`.base`.

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import Method, Param, max_iter

#: Stop rule of the iterated methods: the largest change of a task's estimate, relative to the answers' spread.
_TOL = Param("tol", float, 1e-6, "stop when no task's estimate moves by more than tol × the standard deviation of "
             "all answers in an iteration; 0 runs max_iter", 0.0, 0.5)

DECLARATIONS = (
    Method(
        "mean", "crowdagg.methods.numeric.averages:Mean",
        "the mean of each task's answers (the default of --numeric)",
        "value_n = (1/|M_n|) Σ_m x_mn.  --workers: deviation (root-mean-square distance of the worker's answers "
        "from the estimates).",
        "the baseline of every truth-discovery paper (e.g. Li et al., VLDB 2014)",
        (),
        kind="numeric", engines=("local",), rank=300,
    ),
    Method(
        "median", "crowdagg.methods.numeric.averages:Median",
        "the median of each task's answers (robust to a wild answer: a typo's extra digit)",
        "value_n = median_m x_mn (the mean of the two middle answers for an even count).  --workers: deviation.",
        "the robust baseline of truth discovery (e.g. Li et al., SIGMOD 2014)",
        (),
        kind="numeric", engines=("local",), rank=310,
    ),
    Method(
        "catd", "crowdagg.methods.numeric.catd:CATD",
        "confidence-aware truth discovery: each worker weighted by the upper confidence bound of their error "
        "variance, so that a worker with few answers is trusted less",
        "from the median, alternate w_m = χ²(α/2; N_m) / Σ_n (x_mn − v_n)² (the reciprocal of the upper end "
        "of the (1 − α) interval of the worker's variance; N_m answers) and v_n = Σ_m w_m x_mn / Σ_m w_m.  "
        "--workers: weight, variance (the upper bound, 1/weight), deviation.",
        "Li, Li, Gao, Su, Zhao, Demirbas, Fan & Han, A confidence-aware approach for truth discovery on "
        "long-tail data, PVLDB 8(4), 2014 (VLDB 2015), doi:10.14778/2735496.2735505",
        (max_iter(100), _TOL,
         Param("alpha", float, 0.05, "significance of the chi-square interval of each worker's variance (the "
               "paper's 0.05)", 1e-6, 0.999, "α")),
        kind="numeric", engines=("local",), rank=320,
        quick_params={"max_iter": 10},
    ),
    Method(
        "crh", "crowdagg.methods.numeric.crh:CRH",
        "conflict resolution on heterogeneous data: each worker weighted by −log of their share of the total "
        "normalised loss",
        "from the median, alternate w_m = −log(L_m / Σ_m' L_m'), L_m = Σ_n (x_mn − v_n)² / std_n (each task's "
        "squared loss normalised by the standard deviation of its answers), and v_n = Σ_m w_m x_mn / Σ_m w_m.  "
        "--workers: weight, loss (L_m), deviation.",
        "Li, Li, Gao, Zhao, Fan & Han, Resolving conflicts in heterogeneous data by truth discovery and source "
        "reliability estimation, SIGMOD 2014, doi:10.1145/2588555.2610509",
        (max_iter(100), _TOL),
        kind="numeric", engines=("local",), rank=330,
        quick_params={"max_iter": 10},
    ),
)

#: The default method of ``--numeric`` (and ``numeric=True``): the mean, whose error on the one real set with
#: truth (emotion: MAE 12.0, r .725) is below the median's (13.5, .634) -- answers on a bounded scale
#: rarely hold the wild values a median is for; ``-m median`` where they do.
DEFAULT = "mean"
