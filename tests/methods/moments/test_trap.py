"""Acceptance, issue 16, "Where EM from majority vote fails": the moment methods' starts escape the trap.

On the ``em-trap`` crowd (:func:`crowdagg.simulate.scenarios._em_trap`:
three task batches, each with its own confident team, two of them swapping
a class pair, and a weak honest crowd on every batch) Dawid--Skene EM from
majority vote (``ds``) converges to a hybrid of the batches' frames.  It is a
local optimum, not a crowd short of information: EM started from the true
parameters reaches the higher accuracy with a higher log-likelihood (checked
here and, with more care, in tests/simulate/test_em_trap.py).  Pass/fail:

* ``refine=ds`` from at least two moment methods ends at least 10 points
  more accurate than ``ds``;
* each raw estimate (``refine=none``) is more accurate than ``ds``.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg import aggregate
from crowdagg.methods.em.ds import DawidSkene
from crowdagg.simulate import simulate

MOMENT_METHODS = ("spectral", "cpd", "multispa", "cnmf")
SEED = 0
#: Accuracy points a refined moment method must gain over ds (the issue's 10).
MARGIN = 0.10


@pytest.fixture(scope="module")
def trap():
    crowd = simulate(scenario="em-trap", seed=SEED)
    data = crowd.to_annotations()
    ds = aggregate(data, "ds", seed=SEED)
    from_truth = DawidSkene(seed=SEED, init=np.eye(crowd.n_classes)[crowd.truth]).fit(data)
    return crowd, data, ds, from_truth


@pytest.fixture(scope="module")
def moments(trap):
    _, data, _, _ = trap
    return {name: {refine: aggregate(data, name, seed=SEED, refine=refine) for refine in ("none", "ds")}
            for name in MOMENT_METHODS}


def accuracy(result, crowd) -> float:
    return float(np.mean(result.labels == crowd.truth))


def figures(trap, moments) -> str:
    crowd, _, ds, from_truth = trap
    rows = [f"ds {accuracy(ds, crowd):.4f} (log-lik {ds.objective[-1]:.1f}); EM from the truth "
            f"{accuracy(from_truth, crowd):.4f} (log-lik {from_truth.objective[-1]:.1f})"]
    for name, runs in moments.items():
        rows.append(f"{name}: raw {accuracy(runs['none'], crowd):.4f}, refine=ds {accuracy(runs['ds'], crowd):.4f} "
                    f"(log-lik {runs['ds'].objective[-1]:.1f})")
    return "\n".join(rows)


def test_ds_from_majority_vote_is_trapped_where_em_from_the_truth_is_not(trap) -> None:
    crowd, _, ds, from_truth = trap
    assert accuracy(from_truth, crowd) >= accuracy(ds, crowd) + MARGIN
    # the higher accuracy with the higher likelihood: ds sits in a worse local optimum, not a relabelled one
    assert from_truth.objective[-1] > ds.objective[-1] + 1000


@pytest.mark.parametrize("name", MOMENT_METHODS)
def test_each_raw_moment_estimate_beats_ds(trap, moments, name: str) -> None:
    crowd, _, ds, _ = trap
    assert accuracy(moments[name]["none"], crowd) > accuracy(ds, crowd), figures(trap, moments)


def test_refine_ds_from_two_moment_methods_ends_ten_points_above_ds(trap, moments) -> None:
    crowd, _, ds, from_truth = trap
    escaped = [name for name, runs in moments.items() if accuracy(runs["ds"], crowd) >= accuracy(ds, crowd) + MARGIN]
    assert len(escaped) >= 2, figures(trap, moments)
    for name in escaped:  # out of the trap: EM from a moment start ends at the optimum EM from the truth finds
        refined = moments[name]["ds"]
        assert refined.objective[-1] > ds.objective[-1] + 1000, figures(trap, moments)
        assert abs(accuracy(refined, crowd) - accuracy(from_truth, crowd)) < 0.01, figures(trap, moments)
