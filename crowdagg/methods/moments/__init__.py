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

from ..registry import SEED, Method, Param

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

DECLARATIONS: tuple[Method, ...] = ()
