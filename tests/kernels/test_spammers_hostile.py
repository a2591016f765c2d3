"""The spammer detector's public kernels called directly with hostile arguments: a DataError, never a crash.

``apply_filled`` and ``null_energy`` were bare compiled functions: a pair or a slot past the arrays wrote outside
them (a segmentation fault of the interpreter).
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.errors import DataError
from crowdagg.kernels.spammers import apply_filled, null_energy


def _filled(**kw):
    args = dict(pairs=np.array([[0, 1]]), cov=np.ones((1, 2, 2)), v=np.ones((2, 2, 1)), q=np.ones((2, 2, 1)),
                out=np.zeros((2, 2, 1)))
    args.update(kw)
    return args


@pytest.mark.parametrize("kw, match", [
    (dict(pairs=np.array([[0, 10**7]])), "outside 0 .. 1"),
    (dict(pairs=np.array([[-1, 0]])), "outside 0 .. 1"),
    (dict(pairs=np.array([0, 1])), r"\(P, 2\)"),
    (dict(cov=np.ones((2, 2, 2))), "do not agree"),
    (dict(q=np.ones((3, 2, 1))), "do not agree"),
    (dict(out=np.zeros((2, 2, 4))), "do not agree"),
    (dict(out=np.zeros((2, 2, 1), dtype=np.float32)), "out"),
])
def test_apply_filled_refuses_pairs_and_shapes_that_do_not_fit(kw, match):
    with pytest.raises(DataError, match=match):
        apply_filled(**_filled(**kw))


def test_apply_filled_still_adds_the_residual_product():
    args = _filled()
    apply_filled(**args)
    # (cov - V_a V_bᵀ) Q_b = (1 - 1) · 2 = 0 for every entry: nothing added
    np.testing.assert_array_equal(args["out"], 0.0)


@pytest.mark.parametrize("kw, match", [
    (dict(position=np.array([10**7, 0])), "outside -1 .. 0"),
    (dict(worker=np.array([0, 5])), "worker"),
    (dict(g=np.ones((3, 1))), "do not agree"),
    (dict(t=np.ones((1, 2, 2))), "do not agree"),
    (dict(out=np.zeros(3)), "do not agree"),
])
def test_null_energy_refuses_codes_and_shapes_that_do_not_fit(kw, match):
    args = dict(worker=np.array([0, 1]), position=np.array([0, -1]), g=np.ones((2, 1)), t=np.ones((1, 1, 1)),
                out=np.zeros(1))
    args.update(kw)
    with pytest.raises(DataError, match=match):
        null_energy(**args)
