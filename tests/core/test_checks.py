"""Shared value checks (crowdagg.core.checks)."""

from __future__ import annotations

import pytest

from crowdagg.core.checks import check_float
from crowdagg.errors import UsageError


def test_a_number_too_large_for_a_float_is_refused_naming_it_not_an_overflow_error():
    with pytest.raises(UsageError) as info:
        check_float("spammers", 10**400, 0.0, 1.0)
    assert str(info.value) == f"spammers must be a finite number in [0, 1], got {10**400!r}"
