"""Method declarations: names, one-line summaries, models, references and parameters.

This module is the registry.  It is light (standard library only), so
``crowdagg --help`` and ``crowdagg methods`` never import method code,
numpy-heavy libraries or numba; a method's class is imported when it is
fitted (:meth:`Method.load`).

Each method declares its parameters once, as :class:`Param` (name, type,
default, allowed range, one-line help, the paper's name for it).  From that
declaration come the library's validation (:meth:`Param.check`), the CLI's
``-p name=value`` (:meth:`Param.parse`) and the common flags ``--max-iter``
/ ``--tol`` / ``--seed``, and ``crowdagg methods NAME``.

Adding a method: write its module under ``crowdagg/aggregators/`` (a class
with the mathematics) and add one :class:`Method` entry below; nothing in
``crowdagg/cli.py`` changes.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError, param


@dataclass(frozen=True)
class Param:
    """One declared parameter of a method.

    ``kind`` is ``int``, ``float`` or ``bool``; values must lie in
    [``low``, ``high``].  ``paper`` is the symbol or name the method's paper
    uses for it.  ``kind`` ``str`` (for now only ``init``, until the
    registry's kind ``"method"`` lands) takes one of ``choices`` or a
    registered method's name, and in the library also an array (checked
    against the data by the method).
    """

    name: str
    kind: type
    default: Any
    help: str
    low: float = -math.inf
    high: float = math.inf
    paper: str = ""
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        """``value`` validated (a :class:`~crowdagg.errors.UsageError` naming the parameter otherwise)."""
        from ..core import checks

        if self.kind is int:
            return checks.check_int(self.name, value, int(self.low), None if math.isinf(self.high) else int(self.high))
        if self.kind is float:
            return checks.check_float(self.name, value, self.low, self.high)
        if self.kind is bool:
            if not isinstance(value, bool):
                raise UsageError(f"{param(self.name)} must be true or false, got {value!r}")
            return value
        if self.kind is str:
            if type(value).__module__ == "numpy" and hasattr(value, "shape"):
                return value  # a posterior given in the library: the method checks it against the data
            if not isinstance(value, str) or (value not in self.choices and value not in METHODS):
                raise UsageError(f"{param(self.name)} must be {self.describe_type()}, got {value!r}")
            return value
        raise TypeError(f"unsupported parameter kind {self.kind!r}")  # pragma: no cover - declarations

    def parse(self, text: str) -> Any:
        """A value given as text (``-p name=value``), converted to the declared type and checked."""
        value: Any = text.strip()
        if self.kind is str:
            return self.check(value)
        try:
            if not value.isascii() or "_" in value:
                raise ValueError(value)  # "1_0", non-ASCII digits: not how a number is written here
            if self.kind is int:
                value = int(value)
            elif self.kind is float:
                value = float(value)
            elif self.kind is bool:
                low = value.lower()
                if low not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                value = low in ("true", "1", "yes")
        except ValueError:
            raise UsageError(f"{param(self.name)} must be {self.describe_type()}, got {text!r}") from None
        return self.check(value)

    def describe_type(self) -> str:
        if self.kind is str:
            return f"{', '.join(self.choices)} or a method ({', '.join(METHODS)})"
        return {int: "an integer", float: "a number", bool: "true or false"}.get(self.kind, str(self.kind))

    def describe_range(self) -> str:
        lo, hi = self.low, self.high
        if self.kind in (bool, str) or (math.isinf(lo) and math.isinf(hi)):
            return ""
        fmt = (lambda v: str(int(v))) if self.kind is int else (lambda v: f"{v:g}")
        if math.isinf(hi):
            return f">= {fmt(lo)}"
        return f"{fmt(lo)} .. {fmt(hi)}"


#: The parameters the CLI has flags for (``--seed``, ``--max-iter``, ``--tol``).
COMMON_FLAGS = ("seed", "max_iter", "tol")

SEED = Param("seed", int, 0, "seed of every random choice (tie-breaks, restarts)", 0, 2**63 - 1)


def max_iter(default: int, paper: str = "") -> Param:
    return Param("max_iter", int, default, "iteration cap", 1, 10**7, paper)


def tol(default: float) -> Param:
    return Param("tol", float, default, "stop when the relative objective change is below this; 0 runs max_iter", 0.0, 0.5)


N_INIT = Param("n_init", int, 1, "starts of EM (the first from majority vote, the others seeded random); the best "
               "log-likelihood is kept", 1, 1000)


#: The start strategies an iterative method's ``init`` names besides another method (crowdagg.methods.starts).
START_CHOICES = ("soft-vote", "hard-vote")

INIT = Param("init", str, "soft-vote", "how EM starts: soft-vote (vote shares), hard-vote (one-hot majority labels), "
             "or another method's name (its output, unrefined)", choices=START_CHOICES)


@dataclass(frozen=True)
class Method:
    """A registered method: what ``crowdagg methods`` shows and where its class lives."""

    name: str
    target: str  # "module:Class", imported on first use
    summary: str
    model: str
    reference: str
    params: tuple[Param, ...] = ()
    gold: bool = False  # takes --gold (known labels that clamp tasks)
    init_workers: bool = False  # can start from a saved worker model (--init-workers) and save one
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise UsageError(
            f"method {self.name!r} does not take {param(name)}; it takes: "
            + ", ".join(param(p) for p in self.param_names)
        )

    def load(self) -> type:
        """The aggregator class (imports its module)."""
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


_EM_MODEL = (
    "y_n ~ Cat(d); given y_n = k, worker m answers ~ Cat(A_m[:, k]), independently. EM from soft majority "
    "vote: E-step q_n(k) ∝ d_k Π_m A_m[answer, k]; M-step A_m[k', k] ∝ s + Σ q_n(k) 1[answer = k'], "
    "d_k ∝ s + Σ_n q_n(k)."
)

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "mv", "crowdagg.methods.votes.mv:MajorityVote",
            "majority vote; ties broken by a seeded random draw; confidence = vote share",
            "label = argmax_k Σ_m 1[answer_m = k]; posteriors are the vote shares.",
            "the baseline of every crowdsourcing paper (e.g. Snow et al., EMNLP 2008)",
            (SEED,),
        ),
        Method(
            "wmv", "crowdagg.methods.votes.wmv:WeightedMajorityVote",
            "weighted majority vote, log-odds weights from each worker's agreement with the vote (iterated)",
            "p_m = (agree_m + 1)/(n_m + 2) against the current labels; weight w_m = log((K-1) p_m/(1-p_m)); "
            "revote until no label changes.",
            "Li & Yu, Error rate bounds and iterative weighted majority voting for crowdsourcing, arXiv:1411.4086",
            (SEED, max_iter(50)),
        ),
        Method(
            "wawa", "crowdagg.methods.votes.wawa:Wawa",
            "worker agreement with aggregate: skill = agreement with the majority vote, then skill-weighted vote",
            "s_m = share of worker m's answers equal to the majority vote; label = argmax_k Σ_m s_m 1[answer_m = k].",
            "Toloka crowd-kit, Wawa (worker agreement with aggregate)",
            (SEED,),
        ),
        Method(
            "ds", "crowdagg.methods.em.ds:DawidSkene",
            "Dawid-Skene EM, full confusion matrix per worker (soft-MV init, Dirichlet smoothing)",
            _EM_MODEL + " Entries are floored at 1e-10 when s = 0.",
            "Dawid & Skene, Maximum likelihood estimation of observer error-rates using the EM algorithm, "
            "Applied Statistics 28(1), 1979, doi:10.2307/2346806",
            (SEED, max_iter(200), tol(1e-6),
             Param("smoothing", float, 0.0, "Dirichlet pseudo-count per confusion cell and class (0: entries "
                   "floored at 1e-10)", 0.0, 1e9, "Dirichlet(1 + s) prior"),
             N_INIT, INIT),
            gold=True, init_workers=True,
        ),
        Method(
            "onecoin", "crowdagg.methods.em.onecoin:OneCoinDawidSkene",
            "one-coin Dawid-Skene EM: one accuracy per worker, errors uniform over other classes",
            "A_m[k', k] = p_m if k' = k else (1 - p_m)/(K - 1); M-step p_m = (s/K + Σ q_n(answer)) / (n_m + s).",
            "Dawid & Skene 1979 with the one-coin (symmetric) worker model, e.g. Liu, Peng & Ihler, "
            "Variational inference for crowdsourcing, NeurIPS 2012",
            (SEED, max_iter(200), tol(1e-6),
             Param("smoothing", float, 1.0, "pseudo-answers at chance accuracy 1/K per worker", 0.0, 1e9,
                   "Beta prior strength"),
             N_INIT, INIT),
            gold=True, init_workers=True,
        ),
    )
}


def get(name: str) -> Method:
    """The method registered as ``name``."""
    try:
        return METHODS[name]
    except KeyError:
        raise UsageError(f"unknown method {name!r}; valid methods: {', '.join(METHODS)}") from None


__all__ = ["Param", "Method", "METHODS", "COMMON_FLAGS", "get"]
