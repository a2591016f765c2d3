"""The loop (crowdagg.methods.loop): each stop rule, objective direction, the warnings."""

from __future__ import annotations

import dataclasses
import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import ConvergenceWarning
from crowdagg.methods import registry
from crowdagg.methods.base import IterativeAggregator, make_result
from crowdagg.methods.loop import (
    MAXIMISE,
    MINIMISE,
    NO_OBJECTIVE,
    AbsoluteGain,
    InnerOptimizer,
    NoLabelChanged,
    RelativeChange,
    Residual,
    Step,
    check_optimizer,
    iterate,
)


def scripted(values, rule, *, tol=1e-3, max_iter=50, start_objective=None, direction=MAXIMISE, n_init=1):
    """Run ``iterate`` on steps that return ``values[start][i]`` in turn; the best run and the calls."""
    calls = []

    def start(s, rng):
        return SimpleNamespace(s=s, i=0), (start_objective[s] if start_objective else None)

    def step(state):
        value = values[state.s][state.i]
        state.i += 1
        return value

    run = iterate(start, step, rule=rule, max_iter=max_iter, seed=0, tol=tol, n_init=n_init,
                  direction=direction, callback=lambda it, f: calls.append((it, f)))
    return run, calls


def test_relative_change_stops_at_the_first_small_relative_change():
    f = [-100.0, -50.0, -40.0, -39.99, -39.98]  # |(-39.99) - (-40)| = .01 <= 1e-3 * 40 = .04 at step 4
    run, calls = scripted([[Step(objective=v) for v in f]], RelativeChange())
    assert run.converged and run.n_iter == 4 and run.trace == f[:4]
    assert calls == [(i + 1, v) for i, v in enumerate(f[:4])]
    # the start's objective is the first comparison: -100 -> -100.05 stops at step 1
    run, _ = scripted([[Step(objective=-100.05)] * 3], RelativeChange(), start_objective=[-100.0])
    assert run.converged and run.n_iter == 1
    # tol = 0 runs max_iter and does not count as converged
    run, _ = scripted([[Step(objective=-1.0)] * 7], RelativeChange(), tol=0.0, max_iter=7)
    assert not run.converged and run.n_iter == 7
    assert not RelativeChange().warns(0.0) and RelativeChange().warns(1e-6)


def test_no_label_changed_stops_when_a_step_changes_nothing():
    run, calls = scripted([[Step(changed=c) for c in (5, 2, 1, 0, 3)]], NoLabelChanged())
    assert run.converged and run.n_iter == 4 and run.trace == []
    assert [it for it, _ in calls] == [1, 2, 3, 4] and all(math.isnan(f) for _, f in calls)
    run, _ = scripted([[Step(changed=1)] * 3], NoLabelChanged(), max_iter=3)
    assert not run.converged and NoLabelChanged().warns(0.0)


def test_residual_stops_when_the_largest_change_is_at_most_tol():
    res = [0.5, 0.1, 0.002, 0.001, 0.0001]
    run, _ = scripted([[Step(residual=r, objective=float(i)) for i, r in enumerate(res)]], Residual("messages"),
                      tol=1e-3)
    assert run.converged and run.n_iter == 4 and run.trace == [0.0, 1.0, 2.0, 3.0]
    run, _ = scripted([[Step(residual=0.0)] * 5], Residual("messages"), tol=0.0, max_iter=5)
    assert not run.converged and run.n_iter == 5  # tol = 0 runs max_iter
    with pytest.raises(TypeError, match="Step\\(residual=...\\)"):
        scripted([[Step(objective=1.0)]], Residual("messages"))


def test_absolute_gain_is_crowd_kit_s_rule():
    """crowd-kit: loss = -inf; each iteration: if new_loss - loss < tol: break; loss = new_loss."""
    f = [-10.0, -5.0, -4.5, -4.49, -4.0]
    run, _ = scripted([[Step(objective=v) for v in f]], AbsoluteGain(), tol=0.1)
    assert run.converged and run.n_iter == 4  # -4.49 - (-4.5) = .01 < .1
    # a fall stops, even with tol = 0
    run, _ = scripted([[Step(objective=v) for v in (-10.0, -9.0, -9.5, -1.0)]], AbsoluteGain(), tol=0.0)
    assert run.converged and run.n_iter == 3
    # minimising: the gain is f_prev - f
    run, _ = scripted([[Step(objective=v) for v in (10.0, 5.0, 4.95, 1.0)]], AbsoluteGain(), tol=0.1,
                      direction=MINIMISE)
    assert run.converged and run.n_iter == 3
    # no start objective: step 1 never stops (crowd-kit's -inf), even on an enormous tol
    run, _ = scripted([[Step(objective=v) for v in (1.0, 1.0)]], AbsoluteGain(), tol=1e9)
    assert run.n_iter == 2


@pytest.mark.parametrize("direction, winner", [(MAXIMISE, 1), (MINIMISE, 2), (NO_OBJECTIVE, 0)])
def test_objective_direction_picks_the_restart(direction, winner):
    finals = [-5.0, -1.0, -9.0]
    values = [[Step(objective=f)] for f in finals]
    run, _ = scripted(values, RelativeChange(), tol=0.0, max_iter=1, n_init=3, direction=direction)
    assert run.state.s == winner and run.trace == [finals[winner]]


def test_a_tie_keeps_the_earlier_start_and_a_bad_direction_is_refused():
    run, _ = scripted([[Step(objective=-1.0)], [Step(objective=-1.0)]], RelativeChange(), tol=0.0, max_iter=1,
                      n_init=2)
    assert run.state.s == 0
    with pytest.raises(ValueError, match="maximise, minimise, none"):
        scripted([[Step(objective=1.0)]], RelativeChange(), direction="up")


def test_a_step_must_return_a_step():
    with pytest.raises(TypeError, match="_step must return a Step, got float"):
        scripted([[1.0]], RelativeChange())


def test_restarts_are_seeded_by_seed_and_start_index():
    seen = []

    def start(s, rng):
        seen.append(rng.random())
        return None, None

    iterate(start, lambda state: Step(objective=0.0), rule=RelativeChange(), max_iter=1, seed=7, n_init=3)
    assert seen == [np.random.default_rng([7, s]).random() for s in range(3)]


# --------------------------------------------------------------------------- through IterativeAggregator
class Fake(IterativeAggregator):
    """An iterative method whose steps are scripted (class attributes set by each test)."""

    name = "fake"
    script: list = []

    def _start(self, data, checked, start, rng):
        return SimpleNamespace(i=0), None

    def _step(self, data, state, checked):
        state.i += 1
        return self.script[min(state.i, len(self.script)) - 1]

    def _finish(self, data, run, checked):
        k = data.n_classes
        post = np.full((data.n_tasks, k), 1.0 / k)
        return make_result(self.name, data, post, np.zeros(data.n_tasks, np.int64), post[0].copy(),
                           n_iter=run.n_iter, converged=run.converged)


@pytest.fixture
def fake(monkeypatch):
    spec = dataclasses.replace(registry.METHODS["ds"], name="fake", target=f"{__name__}:Fake", gold=False,
                               init_workers=False, params=(registry.SEED, registry.max_iter(10), registry.tol(1e-3)))
    monkeypatch.setitem(registry.METHODS, "fake", spec)
    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1], n_classes=2)

    def fit(rule, script, **params):
        monkeypatch.setattr(Fake, "stop_rule", rule)
        monkeypatch.setattr(Fake, "script", script)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = Fake(**params).fit(data)
        return res, [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]

    return fit


@pytest.mark.parametrize("rule, script, message", [
    (RelativeChange(), [Step(objective=float(i)) for i in range(1, 20)],
     "fake: did not converge in max_iter=10 iterations (relative objective change still above tol=0.001); "
     "raise max_iter or loosen tol"),
    (Residual("messages"), [Step(residual=1.0)],
     "fake: did not converge in max_iter=10 iterations (largest change of the messages still above tol=0.001); "
     "raise max_iter or loosen tol"),
    (NoLabelChanged(), [Step(changed=2)], "fake: labels still changing after max_iter=10 rounds; raise max_iter"),
    (AbsoluteGain(), [Step(objective=float(i)) for i in range(1, 20)],
     "fake: did not converge in max_iter=10 iterations (objective still improving by tol=0.001 or more per "
     "iteration); raise max_iter or loosen tol"),
])
def test_the_warning_is_worded_from_the_rule(fake, rule, script, message):
    res, caught = fake(rule, script)
    assert caught == [message] and res.n_iter == 10 and not res.converged


def test_a_converged_fit_and_tol_zero_do_not_warn(fake):
    res, caught = fake(Residual("messages"), [Step(residual=1.0), Step(residual=1e-4)])
    assert caught == [] and res.converged and res.n_iter == 2
    res, caught = fake(Residual("messages"), [Step(residual=1.0)], tol=0.0)
    assert caught == [] and res.n_iter == 10


def test_ds_words_are_kept():
    from crowdagg.methods.api import aggregate

    data = AnnotationSet.from_codes([0, 0, 0, 1, 1, 1, 2, 2, 2], [0, 1, 2] * 3, [0, 0, 1, 1, 1, 0, 0, 1, 1])
    with pytest.warns(ConvergenceWarning) as caught:
        aggregate(data, "ds", max_iter=1, tol=1e-12)
    assert str(caught[0].message) == ("ds: EM did not converge in max_iter=1 iterations (relative log-likelihood "
                                      "change still above tol=1e-12); raise max_iter or loosen tol")


# --------------------------------------------------------------------------- inner optimisers
def test_check_optimizer_warns_naming_the_method_and_iteration():
    ok = SimpleNamespace(success=True, message="CONVERGENCE", nit=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_optimizer(ok, "glad", "the abilities")  # silent
    bad = SimpleNamespace(success=False, message="ABNORMAL_TERMINATION_IN_LNSRCH", nit=17)
    with pytest.warns(ConvergenceWarning) as caught:
        check_optimizer(bad, "glad", "the M-step of the abilities", iteration=4)
    assert str(caught[0].message) == (
        "glad: the optimiser of the M-step of the abilities did not converge at iteration 4 after 17 iterations "
        "(ABNORMAL_TERMINATION_IN_LNSRCH); the fit goes on from its last point")


def test_check_optimizer_reads_a_real_scipy_result():
    scipy_optimize = pytest.importorskip("scipy.optimize")

    def rosen(x):
        return float((1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2)

    result = scipy_optimize.minimize(rosen, np.array([-1.2, 1.0]), method="L-BFGS-B", options={"maxiter": 2})
    assert not result.success
    with pytest.warns(ConvergenceWarning, match=r"^ds: the optimiser of a test did not converge after 2 iterations"):
        check_optimizer(result, "ds", "a test")


class Inner(Fake):
    """A scripted method whose every step runs an inner optimiser that stops short on odd iterations."""

    name = "fake"

    def _step(self, data, state, checked):
        state.i += 1
        checked.optimizer("the M-step of a test", advice="raise -p m_step_max_iter").record(
            SimpleNamespace(success=state.i % 2 == 0, message=b"STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT", nit=5),
            state.i)
        return Step(objective=-1.0 / state.i)


def test_an_inner_optimiser_stopping_short_is_said_once_per_fit_by_the_base(fake, monkeypatch):
    """Ten EM iterations, five M-steps cut short: one warning, after the fit, saying how many and why the first."""
    spec = dataclasses.replace(registry.METHODS["fake"], target=f"{__name__}:Inner")
    monkeypatch.setitem(registry.METHODS, "fake", spec)
    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1], n_classes=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Inner(tol=0.0).fit(data)
    said = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert said == ["fake: the optimiser of the M-step of a test did not converge in 5 of its 10 runs (the first at "
                    "iteration 1 after 5 iterations: STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT); the fit went on "
                    "from their last points; raise -p m_step_max_iter"]


def test_an_inner_optimiser_record_by_hand():
    tally = InnerOptimizer("glad", "the abilities")
    tally.record(SimpleNamespace(success=True, message="OK", nit=2), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tally.report()  # every run converged: silent
    tally.record(SimpleNamespace(success=False, message="", nit=None))
    with pytest.warns(ConvergenceWarning, match=r"^glad: the optimiser of the abilities did not converge in 1 of its "
                                                r"2 runs \(the first: no reason given\); the fit went on"):
        tally.report()


# --------------------------------------------------------------------------- hostile: restarts that end badly
@pytest.mark.parametrize("direction, finals, winner", [
    (MAXIMISE, [math.nan, -5.0, -9.0], 1),
    (MINIMISE, [math.nan, 5.0, 9.0], 1),
    (MAXIMISE, [-5.0, math.nan, -1.0], 2),
    (MINIMISE, [math.nan, math.nan, 3.0], 2),
])
def test_a_start_ending_on_nan_never_wins_over_a_finite_one(direction, finals, winner):
    """A diverged start (NaN objective: a loss that blew up) compares false with everything: it must not stick
    as the best just because it came first."""
    values = [[Step(objective=f)] for f in finals]
    run, _ = scripted(values, RelativeChange(), tol=0.0, max_iter=1, n_init=3, direction=direction)
    assert run.state.s == winner


def test_iterate_refuses_no_start():
    with pytest.raises(ValueError, match="n_init"):
        iterate(lambda s, rng: (None, None), lambda state: Step(objective=0.0), rule=RelativeChange(),
                max_iter=1, seed=0, n_init=0)


class Bare(Fake):
    """A method whose _finish leaves the run's outcome out of its result."""

    def _finish(self, data, run, checked):
        k = data.n_classes
        post = np.full((data.n_tasks, k), 1.0 / k)
        return make_result(self.name, data, post, np.zeros(data.n_tasks, np.int64), post[0].copy())


def test_the_base_fills_in_the_run_s_outcome_a_finish_leaves_out(fake, monkeypatch):
    monkeypatch.setitem(registry.METHODS, "fake", dataclasses.replace(registry.METHODS["fake"], target=f"{__name__}:Bare"))
    monkeypatch.setattr(Bare, "name", "fake")
    monkeypatch.setattr(Bare, "stop_rule", RelativeChange())
    monkeypatch.setattr(Bare, "script", [Step(objective=float(v)) for v in (-10.0, -5.0, -5.0)])
    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1], n_classes=2)
    res = Bare().fit(data)
    assert res.n_iter == 3 and res.converged
    np.testing.assert_array_equal(res.objective, [-10.0, -5.0, -5.0])
    assert res.objective_name == "objective"
    monkeypatch.setattr(Bare, "script", [Step(objective=float(i)) for i in range(1, 20)])
    with pytest.warns(ConvergenceWarning):
        res = Bare().fit(data)
    assert res.n_iter == 10 and not res.converged  # not the defaults (0, True) after a non-convergence warning


def test_a_numpy_iteration_cap_at_its_types_maximum_still_iterates():
    """max_iter = np.uint8(255): max_iter + 1 wrapped to 0 in numpy arithmetic, and no iteration ran."""
    steps = []

    def step(state):
        steps.append(1)
        return Step(objective=1.0)

    run = iterate(lambda s, rng: (None, None), step, rule=RelativeChange(), max_iter=np.uint8(255), seed=0, tol=0.5)
    assert run.n_iter == 2 and run.converged and len(steps) == 2


def test_no_improvement_stops_after_patience_steps_without_a_better_objective():
    from crowdagg.methods.loop import NoImprovement

    since = [0, 0, 1, 2, 0, 1, 2, 3]  # the trainer's count of epochs since its best
    steps = [[Step(objective=float(i), since_best=s) for i, s in enumerate(since)]]
    run, _ = scripted(steps, NoImprovement(), tol=3, direction=MINIMISE)
    assert run.converged and run.n_iter == 8
    run, _ = scripted(steps, NoImprovement(), tol=2, direction=MINIMISE)
    assert run.converged and run.n_iter == 4
    run, _ = scripted(steps, NoImprovement(), tol=0, max_iter=8, direction=MINIMISE)  # 0: every iteration
    assert not run.converged and run.n_iter == 8
    assert not NoImprovement().warns(3.0)  # the best iteration is kept: running out is not a failure


def test_a_halted_step_ends_the_run_untaken_not_converged_and_without_the_loops_warning(fake):
    """Step(halted=True): the step was not taken (M-MSR's factors would leave the float range), so the run ends
    there -- the trace and n_iter the previous step's, not converged -- and the loop's "raise max_iter" warning,
    which would be wrong advice, is left to the method."""
    script = [Step(residual=1.0, objective=3.0), Step(residual=0.5, objective=2.0), Step(halted=True),
              Step(residual=0.0, objective=0.0)]
    run, calls = scripted([script], Residual("rounds"), tol=1e-3)
    assert run.halted and not run.converged and run.n_iter == 2 and run.trace == [3.0, 2.0]
    assert calls == [(1, 3.0), (2, 2.0)]
    res, caught = fake(Residual("messages"), script)
    assert caught == [] and res.n_iter == 2 and not res.converged
