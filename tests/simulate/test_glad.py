"""Tests of ``simulate(model="glad")``: worker abilities, task difficulties, and answers drawn from them."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats
from scipy.special import expit

from crowdagg.errors import DataError, UsageError
from crowdagg.methods.blocks import one_coin_matrices
from crowdagg.simulate import SimulatedCrowd, glad, simulate


def _p_correct(c: SimulatedCrowd) -> np.ndarray:
    """The model's P(answer = truth) of every answer: sigma(alpha * beta), 1/K for a NaN ability."""
    assert c.ability is not None and c.task_beta is not None
    a = c.ability[c.worker]
    return np.where(np.isnan(a), 1.0 / c.n_classes, expit(a * c.task_beta[c.task]))


def _correct(c: SimulatedCrowd) -> np.ndarray:
    return c.label == c.truth[c.task]


# ------------------------------------------------------------ the answers
def test_per_answer_accuracy_is_sigmoid_of_ability_times_beta() -> None:
    # 240k answers, K = 3, with adversaries (alpha < 0) and spammers (NaN: accuracy 1/3), spread 1.5.
    c = simulate(40_000, 300, 3, 6, model="glad", difficulty_spread=1.5, spammers=0.1, adversaries=0.1, seed=21)
    p = _p_correct(c)
    hit = _correct(c)
    assert p.min() < 0.05 and p.max() > 0.99, "the draw spans near-impossible to near-certain answers"
    # Overall: the number of correct answers is a sum of independent Bernoulli(p): |z| < 4.
    sd = math.sqrt(np.sum(p * (1 - p)))
    assert abs(hit.sum() - p.sum()) < 4 * sd
    # Calibration: in each of 20 bins of p (12k answers each) the empirical rate matches the mean p
    # within 4 binomial standard deviations (<= 0.018).
    order = np.argsort(p, kind="stable")
    for chunk in np.array_split(order, 20):
        pb, hb = p[chunk], hit[chunk]
        sd_b = math.sqrt(np.sum(pb * (1 - pb))) / chunk.size
        assert abs(hb.mean() - pb.mean()) < 4 * sd_b + 1e-12, (pb.mean(), hb.mean())
    # Each kind on its own, against its own mean p.
    for kind in ("glad", "adversary", "spammer"):
        sel = c.worker_kind[c.worker] == kind
        sd_k = math.sqrt(np.sum(p[sel] * (1 - p[sel]))) / sel.sum()
        assert abs(hit[sel].mean() - p[sel].mean()) < 4 * sd_k, kind
    sel = c.worker_kind[c.worker] == "adversary"
    assert hit[sel].mean() < 0.3, "adversaries are right less often than the others"


def test_wrong_answers_are_uniform_over_the_other_classes() -> None:
    k = 4
    c = simulate(30_000, 100, k, 5, model="glad", skill=(0.3, 0.7), seed=22)
    wrong = ~_correct(c)
    y = c.truth[c.task[wrong]]
    offset = (c.label[wrong].astype(np.int64) - y) % k  # 1..K-1; 0 would be the truth
    assert offset.min() >= 1 and wrong.sum() > 40_000
    counts = np.zeros((k, k - 1))
    np.add.at(counts, (y, offset - 1), 1)
    expected = counts.sum(axis=1, keepdims=True) / (k - 1)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # df = K (K - 2) = 8: P(chi2_8 > 40) ~ 3e-6.
    assert chi2 < 40.0, counts
    # and the wrong classes do not depend on the worker's ability either
    strong = c.ability[c.worker[wrong]] > np.median(c.ability)
    for part in (strong, ~strong):
        share = np.bincount(offset[part] - 1, minlength=k - 1) / part.sum()
        np.testing.assert_allclose(share, 1 / (k - 1), atol=0.015)  # sd ~ 0.003


class _FixedUniforms:
    """A stand-in for ``np.random.Generator`` whose ``random(n)`` returns the given values."""

    def __init__(self, u: list[float]) -> None:
        self.u = np.asarray(u)

    def random(self, n: int) -> np.ndarray:
        assert n == self.u.shape[0]
        return self.u


def test_sampler_keeps_class_codes_beyond_int16() -> None:
    """(Labels were int16 beyond 127 classes: class 40,000 wrapped to a negative code.)"""
    k, n = 40_000, 2_000
    rng = np.random.default_rng(40)
    truth = rng.integers(k - 100, k, n)
    ability = np.array([-30.0, 30.0])  # one always wrong, one always right
    worker = np.arange(n) % 2
    label = glad.sample_labels(rng, ability, np.ones(n), worker, np.arange(n), truth, k)
    assert label.min() >= 0 and label.max() < k
    np.testing.assert_array_equal(label[worker == 1], truth[worker == 1])
    assert (label[worker == 0] != truth[worker == 0]).all()


def test_sampler_inverts_the_rotated_cdf() -> None:
    # K = 3, truth 2, p = sigma(0 * 1) = 0.5: [0, 0.5) -> 2, [0.5, 0.75) -> 0, [0.75, 1) -> 1 (2+1, 2+2 mod 3).
    # Worker 1 has a NaN ability: p = 1/3.  Worker 2: alpha = 40, p = 1 to double precision.
    alpha = np.array([0.0, np.nan, 40.0])
    beta = np.array([1.0])
    u = [0.0, 0.4999, 0.5, 0.7499, 0.75, 0.999999, 0.3, 0.34, 0.9, 0.999999999]
    worker = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 2])
    task = np.zeros(10, dtype=np.int64)
    label = glad.sample_labels(_FixedUniforms(u), alpha, beta, worker, task, np.full(10, 2), 3)  # type: ignore[arg-type]
    assert label.dtype == np.int8
    np.testing.assert_array_equal(label, [2, 2, 0, 0, 1, 1, 2, 0, 1, 2])
    # int16 beyond 127 classes, and the last wrong class for u just below 1
    big = glad.sample_labels(_FixedUniforms([1 - 2**-53]), np.zeros(1), beta, np.zeros(1, int), np.zeros(1, int), np.array([5]), 200)  # type: ignore[arg-type]
    assert big.dtype == np.int16 and big[0] == 4  # 5 + 199 (mod 200)


# ----------------------------------------------------- the true parameters
def test_abilities_are_logits_of_uniform_skill() -> None:
    c = simulate(20, 5000, 2, 2, model="glad", skill=(0.55, 0.95), seed=23)
    assert c.ability is not None and c.ability.shape == (5000,) and c.ability.dtype == np.float64
    p = expit(c.ability)
    assert p.min() >= 0.55 and p.max() <= 0.95
    assert stats.kstest(p, stats.uniform(0.55, 0.40).cdf).pvalue > 1e-3
    assert set(c.worker_kind) == {"glad"}


@pytest.mark.parametrize("spread", [0.5, 1.0, 2.5])
def test_log_betas_are_normal_with_the_given_spread(spread: float) -> None:
    c = simulate(20_000, 10, 2, 2, model="glad", difficulty_spread=spread, seed=24)
    assert c.task_beta is not None and c.task_beta.shape == (20_000,)
    log_beta = np.log(c.task_beta)
    assert stats.kstest(log_beta, stats.norm(0.0, spread).cdf).pvalue > 1e-3
    # sd of the sample sd ~ spread / 200: 2% is > 4 of them
    assert abs(log_beta.std() / spread - 1) < 0.02


def test_default_spread_is_one_and_varies_the_tasks() -> None:
    c = simulate(10_000, 20, 2, 3, model="glad", seed=25)
    assert c.task_beta is not None
    log_beta = np.log(c.task_beta)
    assert abs(log_beta.std() - glad.DEFAULT_DIFFICULTY_SPREAD) < 0.03
    outside = np.mean(np.abs(log_beta) > 1)  # P(|z| > 1) = 0.317
    assert abs(outside - 0.317) < 0.02


def test_zero_spread_is_a_one_coin_crowd() -> None:
    c = simulate(3000, 20, 3, 20, model="glad", difficulty_spread=0, seed=26)
    assert c.ability is not None
    np.testing.assert_array_equal(c.task_beta, 1.0)
    np.testing.assert_allclose(c.confusion, one_coin_matrices(expit(c.ability), 3), rtol=0, atol=1e-15)


def test_spammers_adversaries_and_extreme_spammers() -> None:
    for k, spam_alpha in ((2, 0.0), (3, np.nan)):
        c = simulate(200, 40, k, 5, model="glad", spammers=0.25, adversaries=0.25, extreme_spammers=2, seed=27)
        assert c.ability is not None
        kinds = c.worker_kind
        assert (kinds == "spammer").sum() == 10 and (kinds == "adversary").sum() == 10
        np.testing.assert_array_equal(kinds[40:], ["extreme_spammer"] * 2)
        uniform = np.isin(kinds, ["spammer", "extreme_spammer"])
        np.testing.assert_array_equal(c.ability[uniform], spam_alpha)
        np.testing.assert_allclose(c.confusion[uniform], 1 / k)
        adv = kinds == "adversary"
        assert np.all(c.ability[adv] < 0)
        assert np.all((expit(-c.ability[adv]) >= 0.6) & (expit(-c.ability[adv]) <= 0.9)), "mirror of skill"
        assert np.all(c.ability[kinds == "glad"] > 0)


def test_uniform_workers_answer_independently_of_the_truth() -> None:
    c = simulate(6000, 10, 3, model="glad", assignment="dense", spammers=0.3, extreme_spammers=1, seed=28)
    for w in np.flatnonzero(np.isin(c.worker_kind, ["spammer", "extreme_spammer"])):
        sel = c.worker == w
        counts = np.zeros((3, 3))
        np.add.at(counts, (c.truth[c.task[sel]], c.label[sel]), 1)
        expected = counts.sum(1, keepdims=True) / 3  # uniform answers whatever the truth
        chi2 = ((counts - expected) ** 2 / expected).sum()
        assert chi2 < 30.0  # df = 6: P(chi2_6 > 30) ~ 4e-5


# ------------------------------------------------ the expected confusion
@pytest.mark.parametrize("spread", [0.3, 1.0, 2.0, 5.0])
def test_expected_accuracy_against_quadrature(spread: float) -> None:
    alpha = np.array([-6.0, -1.0, -0.05, 0.0, 0.2, 1.0, 2.2, 9.0])

    def reference(a: float) -> float:
        f = lambda z: expit(a * math.exp(spread * z)) * stats.norm.pdf(z)  # noqa: E731
        kink = [-math.log(abs(a)) / spread] if a != 0 else None
        return integrate.quad(f, -30, 30, points=kink, limit=400, epsabs=1e-13)[0]

    got = glad.expected_accuracy(alpha, spread, 4)
    np.testing.assert_allclose(got, [reference(a) for a in alpha], rtol=0, atol=1e-10)
    # symmetric in alpha: E sigma(-x) = 1 - E sigma(x)
    np.testing.assert_allclose(glad.expected_accuracy(-alpha, spread, 4), 1 - got, atol=1e-12)
    np.testing.assert_array_equal(glad.expected_accuracy(np.array([np.nan]), spread, 4), [0.25])


def test_confusion_is_the_expectation_over_task_difficulty() -> None:
    # Dense, 20k tasks: a worker's empirical accuracy has sd <= 0.0035 (answers) plus the spread
    # of the 20k tasks' mean sigma (<= 0.0035); 0.02 is > 4 of both together.
    c = simulate(20_000, 6, 3, model="glad", assignment="dense", skill=(0.4, 0.95), difficulty_spread=1.2, seed=29)
    assert c.ability is not None
    idx = np.arange(3)
    np.testing.assert_allclose(c.confusion, one_coin_matrices(c.confusion[:, 0, 0], 3), atol=1e-15)
    np.testing.assert_allclose(c.confusion[:, idx, idx].T, np.broadcast_to(glad.expected_accuracy(c.ability, 1.2, 3), (3, 6)))
    hit = _correct(c)
    for w in range(6):
        assert abs(hit[c.worker == w].mean() - c.confusion[w, 0, 0]) < 0.02
    np.testing.assert_allclose(c.worker_accuracy(), c.confusion[:, 0, 0])


# ------------------------------------------------------- reproducibility
def test_same_seed_same_arrays_different_seed_differs() -> None:
    def run(seed: int) -> SimulatedCrowd:
        return simulate(300, 20, 4, 3, model="glad", spammers=0.1, adversaries=0.1, extreme_spammers=1, seed=seed)

    a, b, other = run(31), run(31), run(32)
    for name in ("task", "worker", "label", "truth", "confusion", "prior", "ability", "task_beta", "worker_kind"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.label, other.label)
    assert not np.array_equal(a.ability, other.ability)
    assert not np.array_equal(a.task_beta, other.task_beta)


def test_other_models_have_no_glad_parameters() -> None:
    for model in ("ds", "onecoin", "hammer-spammer"):
        c = simulate(30, 6, 3, 2, model=model, seed=1)
        assert c.ability is None and c.task_beta is None
    s = simulate(30, scenario="deepbp", seed=1)
    assert s.ability is None and s.task_beta is None


# Digests of the four files of these crowds, taken from the code before the GLAD model was added:
# the other models' draws and files must not change.
_BEFORE_GLAD = {
    "ds": "76ea507c79e0478fb6d20146316c040b00f0bb6cfdbc67560b09720044d49b0f",
    "onecoin": "db9368431c7fe6f62b7183110add0f0cbed6d6ce61d1603272d6cd6d2d049d19",
    "hammer-spammer": "34f0ee7f053cdd471ca695eae187cb656e6d75713f1b66812867b26e4aae94e4",
}


@pytest.mark.parametrize("model", list(_BEFORE_GLAD))
def test_other_models_write_the_same_bytes_as_before(model: str, tmp_path: Path) -> None:
    c = simulate(60, 8, 3, 3, model=model, spammers=0.25, adversaries=0.125, extreme_spammers=1, seed=7)
    paths = c.write(tmp_path)
    assert [p.name for p in paths] == ["labels.csv", "truth.csv", "confusion.csv", "workers.csv"]
    assert hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest() == _BEFORE_GLAD[model]


# ------------------------------------------------------------------ files
def test_write_adds_alpha_and_a_tasks_file(tmp_path: Path) -> None:
    c = simulate(50, 8, 3, 4, model="glad", spammers=0.25, adversaries=0.125, extreme_spammers=1, seed=33)
    assert c.ability is not None and c.task_beta is not None
    paths = c.write(tmp_path / "g")
    assert [p.name for p in paths] == ["labels.csv", "truth.csv", "confusion.csv", "workers.csv", "tasks.csv"]
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == sorted(p.name for p in paths)
    text = {p.name: p.read_text() for p in paths}
    assert text["workers.csv"].splitlines()[0] == "worker,kind,alpha,accuracy,n_answers"
    assert text["tasks.csv"].splitlines()[0] == "task,beta,n_answers"
    workers = pd.read_csv(tmp_path / "g" / "workers.csv")
    np.testing.assert_array_equal(workers["worker"], c.worker_names())
    np.testing.assert_array_equal(workers["alpha"], c.ability)  # exact: shortest round-trip text, NaN as ""
    assert (workers["alpha"].isna() == np.isin(c.worker_kind, ["spammer", "extreme_spammer"])).all()
    w_spam = int(np.flatnonzero(c.worker_kind == "spammer")[0])
    assert f"\nw{w_spam},spammer,,{float(c.worker_accuracy()[w_spam])!r}," in text["workers.csv"]
    np.testing.assert_array_equal(workers["accuracy"], c.worker_accuracy())
    tasks = pd.read_csv(tmp_path / "g" / "tasks.csv")
    np.testing.assert_array_equal(tasks["task"], c.task_names())
    np.testing.assert_array_equal(tasks["beta"], c.task_beta)
    np.testing.assert_array_equal(tasks["n_answers"], np.bincount(c.task, minlength=50))
    # the answers read back are the crowd's
    labels = pd.read_csv(tmp_path / "g" / "labels.csv", dtype=str)
    np.testing.assert_array_equal(labels["label"].astype(int), c.label)


def test_binary_crowd_writes_every_alpha(tmp_path: Path) -> None:
    c = simulate(30, 6, 2, 3, model="glad", spammers=0.5, seed=34)
    c.write(tmp_path)
    alpha = pd.read_csv(tmp_path / "workers.csv")["alpha"]
    assert not alpha.isna().any() and (alpha[c.worker_kind == "spammer"] == 0).all()


def test_write_refuses_inconsistent_glad_parameters(tmp_path: Path) -> None:
    c = simulate(20, 5, 2, 2, model="glad", seed=35)
    assert c.ability is not None and c.task_beta is not None
    good_ability, good_beta = c.ability, c.task_beta
    cases = [
        ("ability", good_ability[:-1], "ability has shape"),
        ("task_beta", good_beta[:-1], "task_beta must hold 20"),
        ("task_beta", np.where(np.arange(20) == 3, -1.0, good_beta), "finite positive"),
        ("task_beta", None, "go together"),
    ]
    for field, value, message in cases:
        c.ability, c.task_beta = good_ability, good_beta
        setattr(c, field, value)
        with pytest.raises(DataError, match=message):
            c.write(tmp_path / "out")
        assert not (tmp_path / "out").exists()


def test_write_leaves_nothing_when_the_tasks_file_fails(tmp_path: Path) -> None:
    c = simulate(20, 4, 2, 2, model="glad", seed=36)
    out = tmp_path / "existing"
    out.mkdir()
    (out / "tasks.csv").mkdir()  # the fifth file cannot be written: none is
    with pytest.raises(DataError, match="is a directory"):
        c.write(out)
    assert sorted(p.name for p in out.iterdir()) == ["tasks.csv"]


def test_to_annotations() -> None:
    c = simulate(40, 8, 3, 3, model="glad", seed=37)
    data = c.to_annotations()
    assert (data.n_tasks, data.n_workers, data.n_classes, data.n_answers) == (40, 8, 3, 120)
    np.testing.assert_array_equal(data.label, c.label)


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"difficulty_spread": 1.0}, r"difficulty_spread is only used with model='glad', got model='ds'"),
        ({"model": "onecoin", "difficulty_spread": 0.0}, "model='onecoin'"),
        ({"scenario": "deepbp", "model": "glad", "difficulty_spread": 1.0}, "scenario 'deepbp' does not use difficulty_spread"),
        ({"model": "glad", "difficulty_spread": -0.1}, r"difficulty_spread must be a finite number in \[0, 5\]"),
        ({"model": "glad", "difficulty_spread": 5.5}, "difficulty_spread"),
        ({"model": "glad", "difficulty_spread": float("nan")}, "difficulty_spread"),
        ({"model": "glad", "difficulty_spread": True}, "difficulty_spread"),
        ({"model": "glad", "difficulty_spread": "wide"}, "difficulty_spread"),
        ({"model": "glad", "skill": (0.0, 0.9)}, "skill must lie strictly between 0 and 1"),
        ({"model": "glad", "skill": (0.6, 1.0)}, "skill must lie strictly between 0 and 1"),
        ({"model": "glad", "adversaries": 0.2, "skill": (0.3, 0.5)}, "adversaries of model='glad'.*above 0.5"),
        ({"model": "Glad"}, "unknown model 'Glad'.*ds, onecoin, hammer-spammer, glad"),
    ],
)
def test_bad_arguments_raise_usage_error(kwargs: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        simulate(**{"n_tasks": 20, **kwargs})


def test_boundary_values_are_accepted() -> None:
    c = simulate(50, 10, 2, 3, model="glad", difficulty_spread=5, skill=(0.01, 0.99), seed=38)
    assert c.task_beta is not None and np.all(np.isfinite(c.task_beta)) and np.all(c.task_beta > 0)
    assert c.ability is not None and np.all(np.isfinite(c.ability))
    a = simulate(50, 10, 2, 3, model="glad", adversaries=1.0, skill=(0.5, 0.6), seed=38)
    assert a.ability is not None and np.all(a.ability <= 0)


# ------------------------------------------------- against the GLAD kernels
def test_answers_follow_the_likelihood_of_the_glad_kernels() -> None:
    # The kernels' complete-data score at the true parameters (q = 1 for a right answer) has mean 0 and,
    # per parameter, variance equal to its curvature (the Fisher information), if and only if the answers
    # are drawn from the likelihood the kernels implement (same sigma(alpha beta), same 1/(K-1) errors).
    from crowdagg.engine import LocalEngine
    from crowdagg.kernels.glad import curvatures, objective

    c = simulate(20_000, 600, 4, 6, model="glad", difficulty_spread=1.0, adversaries=0.1, seed=41)
    assert c.ability is not None and c.task_beta is not None
    data = c.to_annotations()
    engine = LocalEngine(data)
    log_beta = np.log(c.task_beta)
    q = (data.label == c.truth[np.repeat(np.arange(c.n_tasks), np.diff(data.task_ptr))]).astype(np.float64)
    f, g_alpha, g_log_beta = objective(engine, c.ability, log_beta, q)
    h_alpha, h_log_beta = curvatures(engine, c.ability, log_beta)
    for g, h in ((g_alpha, h_alpha), (g_log_beta, h_log_beta)):
        # The sum of the scores is ~N(0, sum h): |z| < 4.  E[g^2] = h for each parameter, so the ratio
        # of the sums is 1; its sd over seeds is ~0.07 for the 600 abilities, ~0.02 for the 20k betas.
        assert abs(g.sum()) < 4 * math.sqrt(h.sum())
        assert abs(np.sum(g * g) / h.sum() - 1) < 0.25, np.sum(g * g) / h.sum()
    z = g_alpha / np.sqrt(h_alpha)  # ~400 answers per worker: close to normal
    assert abs(z.mean()) < 0.2 and 0.75 < z.var() < 1.25, (z.mean(), z.var())
    # and the true abilities beat the same abilities shrunk or stretched by 30%
    for scale in (0.7, 1.3):
        assert objective(engine, scale * c.ability, log_beta, q)[0] < f
