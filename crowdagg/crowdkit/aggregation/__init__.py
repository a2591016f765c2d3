"""crowd-kit's module path: ``from crowdkit.aggregation import X`` becomes ``from crowdagg.crowdkit.aggregation import X``
(and ``crowdkit.aggregation.utils``' evaluation helpers are :mod:`crowdagg.crowdkit.aggregation.utils`).

Every class of the surface, imported from its module (one object each, so
``isinstance`` checks and monkeypatching are shared with
:mod:`crowdagg.crowdkit`, which re-exports these), under the name a
crowd-kit user's code imports them by.
"""

from __future__ import annotations

from .._answers import NotFittedError
from ..dawid_skene import DawidSkene, OneCoinDawidSkene
from ..glad import GLAD
from ..gold_majority_vote import GoldMajorityVote
from ..kos import KOS
from ..mace import MACE
from ..majority_vote import MajorityVote
from ..mmsr import MMSR
from ..wawa import Wawa
from ..zero_based_skill import ZeroBasedSkill

__all__ = ["GLAD", "KOS", "MACE", "MMSR", "DawidSkene", "GoldMajorityVote", "MajorityVote", "NotFittedError",
           "OneCoinDawidSkene", "Wawa", "ZeroBasedSkill"]
