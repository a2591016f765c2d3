"""The latent-class E-step (crowdagg.kernels.latent.latent_block) against a slow numpy twin, as DS's E-step in the
square case, with -inf and empty tasks, its task-keyed draws, and the same bits over any partitioning of its blocks."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine, Part
from crowdagg.errors import DataError, UsageError
from crowdagg.kernels.em import EMParams, em_block
from crowdagg.kernels.latent import LatentParams, latent_block
from crowdagg.methods.blocks import TieBreaker
from tests.methods.test_vote_blocks import PartEngine


def crowd(rng: np.random.Generator, n_tasks: int, n_workers: int, k: int) -> AnnotationSet:
    """Tasks of 0-6 answers (some none), named out of order, K classes."""
    per = rng.integers(0, 7, n_tasks)
    task = np.repeat(np.arange(n_tasks), per)
    worker = rng.integers(0, n_workers, task.size)
    label = rng.integers(0, k, task.size)
    names = [f"t{i}" for i in rng.permutation(n_tasks)]
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k,
                                    task_names=names)


def tables(rng: np.random.Generator, n_tasks: int, n_workers: int, k: int, n_latent: int):
    """A log table [worker, observed, latent] (columns on the simplex) and per-task log priors."""
    log_table = np.log(rng.dirichlet(np.ones(k), size=(n_workers, n_latent)).transpose(0, 2, 1).copy())
    log_prior = np.log(rng.dirichlet(np.ones(n_latent), size=n_tasks))
    return log_table, log_prior


def twin(data: AnnotationSet, params: LatentParams):
    """Plain numpy, one task at a time: (latent posterior, class posterior, log-likelihood, draws, counts, totals)."""
    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    n_latent = params.log_table.shape[2]
    post, ll = np.zeros((n, n_latent)), 0.0
    draws = np.zeros(n, dtype=np.int64)
    counts, tot = np.zeros((w, k, n_latent)), np.zeros(n_latent)
    if params.draw_seed is not None:
        u = TieBreaker(data.task_names, params.draw_seed).draws(np.arange(n), params.draw_round + 1)[:, -1]
    for t in range(n):
        ans = range(data.task_ptr[t], data.task_ptr[t + 1])
        s = params.log_prior[t] + sum((params.log_table[data.worker[e], data.label[e]] for e in ans),
                                      np.zeros(n_latent))
        m = s.max()
        ll += m + np.log(np.exp(s - m).sum())
        q = np.exp(s - m) / np.exp(s - m).sum()
        post[t] = q
        if params.draw_seed is not None:
            cum = np.cumsum(q)
            hit = np.flatnonzero((cum > u[t] * cum[-1]) & (q > 0))
            draws[t] = hit[0] if hit.size else np.flatnonzero(q > 0)[-1]
        weight = np.eye(n_latent)[draws[t]] if params.counts == "draws" else q
        tot += weight
        for e in ans:
            counts[data.worker[e], data.label[e]] += weight
    classes = np.zeros((n, k))
    if params.latent_class is not None:
        for z, c in enumerate(params.latent_class):
            classes[:, c] += post[:, z]
    return post, classes, ll, draws, counts, tot


def run(engine, params: LatentParams):
    sums, outs = engine.map_reduce(latent_block, params, keep=True)
    return sums, engine.gather(outs)


#: (K, K_latent, map): the identity, subtypes of each class (EBCC's), a class without a state.
SHAPES = {
    "square 2": (2, 2, None),
    "square 4": (4, 4, None),
    "subtypes": (3, 7, np.array([0, 0, 1, 1, 1, 2, 2])),
    "two of five": (2, 5, np.array([1, 0, 1, 1, 0])),
    "class left out": (3, 4, np.array([0, 2, 2, 0])),
}


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("counts", [None, "posterior", "draws"])
def test_matches_the_twin_and_any_partitioning_gives_the_same_bits(rng, monkeypatch, shape, counts):
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 100)  # many uneven blocks
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)
    k, n_latent, latent_class = SHAPES[shape]
    data = crowd(rng, 500, 13, k)
    log_table, log_prior = tables(rng, data.n_tasks, 13, k, n_latent)
    params = LatentParams(log_table, log_prior, latent_class, draw_seed=11, draw_round=3, counts=counts)
    post, classes, ll, draws, c, tot = twin(data, params)
    results = [run(LocalEngine(data), params)]
    assert LocalEngine(data).n_blocks >= 5
    for n_parts in (2, 7):
        results.append(run(PartEngine(data, n_parts), params))
    sums, out = results[0]
    np.testing.assert_allclose(out["latent"], post, rtol=1e-12, atol=1e-15)
    assert sums[0] == pytest.approx(ll, rel=1e-12)
    np.testing.assert_array_equal(out["draws"], draws)
    if latent_class is not None:
        np.testing.assert_allclose(out["classes"], classes, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(out["classes"].sum(axis=1), 1.0, rtol=1e-12)
    else:
        assert "classes" not in out
    if counts is None:
        assert len(sums) == 1
    else:
        np.testing.assert_allclose(sums[1], c, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sums[2], tot, rtol=1e-12)
        assert sums[1].sum() == pytest.approx(data.n_answers) and sums[2].sum() == pytest.approx(data.n_tasks)
    for other_sums, other_out in results[1:]:  # every partitioning: the same bits
        for a, b in zip(sums, other_sums, strict=True):
            assert np.array_equal(a, b)
        for key in out:
            assert np.array_equal(out[key], other_out[key]), key


def test_the_square_case_is_the_ds_e_step_bit_for_bit(rng):
    """K_latent = K, the identity map, one prior for every task: em_block's E-step -- posteriors, log-likelihood
    and expected counts with the same bits (the same arithmetic, task by task)."""
    for k in (2, 3, 5):
        data = crowd(rng, 300, 9, k)
        log_table, _ = tables(rng, 300, 9, k, k)
        log_d = np.log(rng.dirichlet(np.ones(k)))
        part = LocalEngine(data).part
        (counts, tot, ll), post = em_block(part, 0, EMParams(log_d, log_table), True)
        (ll2, counts2, tot2), out = latent_block(part, 0, LatentParams(log_table, np.tile(log_d, (300, 1)),
                                                                      counts="posterior"), True)
        assert np.array_equal(out["latent"], post) and ll2 == ll
        assert np.array_equal(counts2, counts) and np.array_equal(tot2, tot)


def test_a_task_without_answers_gets_its_normalised_prior(rng):
    data = AnnotationSet.from_codes([0, 0, 2], [0, 1, 1], [1, 0, 1], n_tasks=4, n_workers=2, n_classes=2)
    log_table, _ = tables(rng, 4, 2, 2, 3)
    prior = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [1, 1, 1], [0.7, 0.2, 0.1]])
    _, out = run(LocalEngine(data), LatentParams(log_table, np.log(prior * 5.0), np.array([0, 1, 1])))
    for t in (1, 3):
        np.testing.assert_allclose(out["latent"][t], prior[t] / prior[t].sum(), rtol=1e-15)
        np.testing.assert_allclose(out["classes"][t], [prior[t, 0], prior[t, 1:].sum()], rtol=1e-15)


def test_minus_inf_rules_a_state_out_without_nan(rng):
    """-inf in a task's prior or in an answer's row: that state's posterior is exactly 0, the rest finite."""
    data = crowd(rng, 200, 6, 3)
    log_table, log_prior = tables(rng, 200, 6, 3, 4)
    log_prior[:, 3] = -np.inf  # no task may be in state 3
    log_table[2, 1, 0] = -np.inf  # worker 2 never answers 1 from state 0
    params = LatentParams(log_table, log_prior, np.array([0, 1, 2, 2]), draw_seed=5, counts="posterior")
    (ll, counts, _), out = run(LocalEngine(data), params)
    post = out["latent"]
    assert np.isfinite(post).all() and np.isfinite(ll) and np.isfinite(counts).all()
    assert (post[:, 3] == 0.0).all() and (out["draws"] != 3).all()
    said = [t for t in range(200) if any(data.worker[e] == 2 and data.label[e] == 1
                                         for e in range(data.task_ptr[t], data.task_ptr[t + 1]))]
    assert said and (post[said, 0] == 0.0).all() and (out["draws"][said] != 0).all()
    np.testing.assert_allclose(post, twin(data, params)[0], rtol=1e-12, atol=1e-15)


def test_a_task_every_state_is_ruled_out_for_is_an_error_naming_it(rng):
    """Z = 0 has no posterior: a DataError naming the task, not a row of NaN."""
    data = crowd(rng, 50, 4, 2)
    log_table, log_prior = tables(rng, 50, 4, 2, 2)
    t = int(np.flatnonzero(data.answers_per_task > 0)[7])
    e = int(data.task_ptr[t])
    log_prior[t, 0] = -np.inf
    log_table[data.worker[e], data.label[e], 1] = -np.inf
    with pytest.raises(DataError, match=rf"task {t} \('{data.task_names[t]}'\): every latent state has probability 0"):
        run(LocalEngine(data), LatentParams(log_table, log_prior))
    log_prior[:] = 0.0
    empty = int(np.flatnonzero(data.answers_per_task == 0)[0])
    log_prior[empty] = -np.inf  # a task without answers, ruled out by its prior alone
    with pytest.raises(DataError, match=f"task {empty} .*: every latent state"):
        run(LocalEngine(data), LatentParams(log_table, log_prior))


# --------------------------------------------------------------------------- draws
def test_draws_are_tiebreakers_stream_keyed_by_name_seed_and_round(rng, monkeypatch):
    """A task's draw is the inverse CDF of its posterior at TieBreaker's draw ``round``: the same whatever its row,
    the grid, or the thread; another seed or round draws again, and over many rounds the draws follow q."""
    data = crowd(rng, 300, 8, 3)
    log_table, log_prior = tables(rng, 300, 8, 3, 3)

    def draws(d, prior, seed, r, engine=None):
        return run(engine or LocalEngine(d), LatentParams(log_table, prior, draw_seed=seed, draw_round=r))[1]

    first = draws(data, log_prior, 4, 0)
    assert np.array_equal(draws(data, log_prior, 4, 0)["draws"], first["draws"])
    assert not np.array_equal(draws(data, log_prior, 5, 0)["draws"], first["draws"])
    assert not np.array_equal(draws(data, log_prior, 4, 1)["draws"], first["draws"])
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 50)
    assert np.array_equal(draws(data, log_prior, 4, 0, PartEngine(data, 3))["draws"], first["draws"])
    # the tasks in reverse order (rows and names): each keeps its draw
    order = np.arange(data.n_tasks)[::-1]
    task = np.repeat(np.arange(data.n_tasks), data.answers_per_task[order])
    pieces = [np.arange(data.task_ptr[t], data.task_ptr[t + 1]) for t in order]
    e = np.concatenate(pieces)
    rev = AnnotationSet.from_codes(task, data.worker[e], data.label[e], n_tasks=data.n_tasks,
                                   n_workers=data.n_workers, n_classes=3, task_names=np.asarray(data.task_names)[order])
    assert np.array_equal(draws(rev, log_prior[order], 4, 0)["draws"], first["draws"][order])
    # the frequencies over rounds: q, within a few standard errors (a fixed seed: the same numbers every run)
    rounds = np.stack([draws(data, log_prior, 4, r)["draws"] for r in range(400)])
    freq = np.stack([(rounds == z).mean(axis=0) for z in range(3)], axis=1)
    err = np.sqrt(first["latent"] * (1 - first["latent"]) / 400) + 1e-3
    assert (np.abs(freq - first["latent"]) < 5 * err).all()


def test_draws_need_names_and_a_seed():

    part = Part(0, 1, 0, np.array([0, 1]), np.array([0, 1]), np.array([0], np.int32), np.array([1], np.int8), 1, 2)
    with pytest.raises(UsageError, match="keyed by task name"):
        latent_block(part, 0, LatentParams(np.zeros((1, 2, 2)), np.zeros((1, 2)), draw_seed=1), True)
    with pytest.raises(UsageError, match="counts of the draws need a"):
        LatentParams(np.zeros((1, 2, 2)), np.zeros((1, 2)), counts="draws")


# --------------------------------------------------------------------------- bad input: errors, never a crash
GOOD_PART = ("Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], np.int32), np.array([0, 1], np.int8),"
             " 2, 2, ['a'])")
CASES = {
    "table nan": ("LatentParams(np.full((2, 2, 3), np.nan), np.zeros((1, 3)))", "log_table[0, 0, 0] is nan"),
    "prior inf": ("LatentParams(np.zeros((2, 2, 3)), np.full((1, 3), np.inf))", "log_prior[0, 0] is inf"),
    "table 2-D": ("LatentParams(np.zeros((2, 2)), np.zeros((1, 2)))", "log_table must be a 3-D array"),
    "prior text": ("LatentParams(np.zeros((2, 2, 2)), np.full((1, 2), 'a', object))", "log_prior must hold numbers"),
    "states differ": ("LatentParams(np.zeros((2, 2, 3)), np.zeros((1, 2)))", "log_prior has 2 latent states"),
    "no states": ("LatentParams(np.zeros((2, 2, 0)), np.zeros((1, 0)))", "no latent states"),
    "map length": ("LatentParams(np.zeros((2, 2, 3)), np.zeros((1, 3)), [0, 1])", "latent_class maps 2 latent"),
    "map negative": ("LatentParams(np.zeros((2, 2, 3)), np.zeros((1, 3)), [0, -1, 1])", "latent_class holds -1"),
    "map float": ("LatentParams(np.zeros((2, 2, 3)), np.zeros((1, 3)), [0.5, 1, 1])", "latent_class codes must"),
    "map class": ("LatentParams(np.zeros((2, 2, 3)), np.zeros((1, 3)), [0, 1, 2])",
                  "latent_class holds 2, not one of the data's 2 classes"),
    "table workers": ("LatentParams(np.zeros((5, 2, 3)), np.zeros((1, 3)))", "log_table has shape (5, 2, 3)"),
    "table classes": ("LatentParams(np.zeros((2, 3, 3)), np.zeros((1, 3)))", "log_table has shape (2, 3, 3)"),
    "prior rows": ("LatentParams(np.zeros((2, 2, 3)), np.zeros((0, 3)))", "log_prior has 0 rows"),
    "seed text": ("LatentParams(np.zeros((2, 2, 2)), np.zeros((1, 2)), draw_seed='x')", "draw_seed must be an int"),
    "round negative": ("LatentParams(np.zeros((2, 2, 2)), np.zeros((1, 2)), draw_round=-1)", "draw_round must be"),
    "counts word": ("LatentParams(np.zeros((2, 2, 2)), np.zeros((1, 2)), counts='all')", "counts must be None"),
    "not params": ("{'log_table': 1}", "latent_block takes LatentParams"),
}


def test_bad_parameters_are_errors_never_a_crash():
    from tests.crashes import refusals

    calls = {name: f"latent_block({GOOD_PART}, 0, {params}, True)" for name, (params, _) in CASES.items()}
    found = refusals("from crowdagg.engine import Part\nfrom crowdagg.kernels.latent import LatentParams, latent_block",
                     calls)
    for name, (_, message) in CASES.items():
        assert message in found[name], (name, found[name])


def test_the_kernels_uniform_is_the_streams_bit_for_bit(rng):
    """crowdagg.kernels.draws.uniform (inside kernels) and uniforms (numpy, TieBreaker's): the same draws."""
    from numba import njit

    from crowdagg.kernels.draws import uniform, uniforms

    @njit
    def table(keys, n):
        out = np.empty((keys.shape[0], n))
        for i in range(keys.shape[0]):
            for j in range(n):
                out[i, j] = uniform(keys[i], j)
        return out

    keys = rng.integers(0, 2**63, 1_000, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    keys[:3] = [0, 2**64 - 1, 2**63]
    got = table(keys, 70)
    assert np.array_equal(got, uniforms(keys, 70))
    assert got.min() >= 0.0 and got.max() < 1.0


# --------------------------------------------------------------------------- the one E-step: gold, entropy, DS's
def clamped_twin(data: AnnotationSet, params: LatentParams):
    """Plain numpy with gold and the entropy floor: a clamped task keeps only its class's states (log Z theirs; none
    with evidence: uniform over them, log Z -inf).  (latent posterior, class posterior, log-likelihood, Σ f log f,
    counts, totals)."""
    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    n_latent = params.log_table.shape[2]
    cls = np.arange(n_latent) if params.latent_class is None else params.latent_class
    prior = np.broadcast_to(params.log_prior, (n, n_latent))
    post, classes, ll, h = np.zeros((n, n_latent)), np.zeros((n, k)), 0.0, 0.0
    counts, tot = np.zeros((w, k, n_latent)), np.zeros(n_latent)
    for t in range(n):
        ans = range(data.task_ptr[t], data.task_ptr[t + 1])
        s = prior[t] + sum((params.log_table[data.worker[e], data.label[e]] for e in ans), np.zeros(n_latent))
        g = -1 if params.clamp is None else int(params.clamp[t])
        if g >= 0:
            s = np.where(cls == g, s, -np.inf)
        m = s.max()
        if m == -np.inf:
            q = (cls == g) / (cls == g).sum()
            ll += -np.inf
        else:
            q = np.exp(s - m) / np.exp(s - m).sum()
            ll += m + np.log(np.exp(s - m).sum())
        post[t] = q
        np.add.at(classes[t], cls, q)
        f = np.maximum(q, params.entropy_floor)
        h += float((f * np.log(f)).sum())
        tot += q
        for e in ans:
            counts[data.worker[e], data.label[e]] += q
    return post, classes, ll, h, counts, tot


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("shared", [False, True], ids=["per-task prior", "shared prior"])
def test_gold_and_the_entropy_floor_match_the_twin_over_any_partitioning(rng, monkeypatch, shape, shared):
    """A clamp keeps a task in its class's states (the one-hot row under the identity, EBCC's subtypes of its class
    otherwise), its evidence theirs; the entropy term is Σ max(q, floor) log max(q, floor); a 1-D prior is every
    task's.  The twin's values, and the same bits for any partitioning."""
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 100)
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)
    k, n_latent, latent_class = SHAPES[shape]
    data = crowd(rng, 500, 13, k)
    log_table, log_prior = tables(rng, data.n_tasks, 13, k, n_latent)
    if shared:
        log_prior = log_prior[0]
    kept = np.arange(k) if latent_class is None else np.unique(latent_class)  # classes some state maps to
    clamp = np.where(rng.random(data.n_tasks) < 0.2, rng.choice(kept, data.n_tasks), -1)
    params = LatentParams(log_table, log_prior, latent_class, counts="posterior", clamp=clamp, entropy_floor=1e-8)
    post, classes, ll, h, c, tot = clamped_twin(data, params)
    results = [run(LocalEngine(data), params)] + [run(PartEngine(data, n), params) for n in (2, 7)]
    (ll_, counts, tot_, h_), out = results[0]
    np.testing.assert_allclose(out["latent"], post, rtol=1e-12, atol=1e-15)
    assert ll_ == pytest.approx(ll, rel=1e-12) and h_ == pytest.approx(h, rel=1e-12)
    np.testing.assert_allclose(counts, c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tot_, tot, rtol=1e-12)
    held = out["classes"] if latent_class is not None else out["latent"]
    np.testing.assert_array_equal(held[clamp >= 0].argmax(axis=1), clamp[clamp >= 0])
    np.testing.assert_allclose(held[clamp >= 0].max(axis=1), 1.0, rtol=1e-15)  # all the mass at the gold class
    if latent_class is None:  # the identity: gold is exactly the one-hot row
        assert np.array_equal(out["latent"][clamp >= 0], np.eye(k)[clamp[clamp >= 0]])
    for other_sums, other_out in results[1:]:
        for a, b in zip(results[0][0], other_sums, strict=True):
            assert np.array_equal(a, b)
        assert np.array_equal(out["latent"], other_out["latent"])


def test_the_sums_add_the_entropy_last_and_only_when_asked(rng):
    data = crowd(rng, 60, 4, 3)
    log_table, log_prior = tables(rng, 60, 4, 3, 3)
    part = LocalEngine(data).part
    plain, _ = latent_block(part, 0, LatentParams(log_table, log_prior))
    with_h, _ = latent_block(part, 0, LatentParams(log_table, log_prior, entropy_floor=0.0))
    counted, _ = latent_block(part, 0, LatentParams(log_table, log_prior, counts="posterior", entropy_floor=0.0))
    assert len(plain) == 1 and len(with_h) == 2 and len(counted) == 4
    assert with_h[0] == plain[0] == counted[0] and with_h[1] == counted[3] < 0.0  # Σ q log q: minus the entropy
    post = run(LocalEngine(data), LatentParams(log_table, log_prior))[1]["latent"]
    safe = np.where(post > 0, post, 1.0)
    assert with_h[1] == pytest.approx(float((post * np.log(safe)).sum()), rel=1e-12)


def test_a_shared_prior_row_is_the_tiled_prior_bit_for_bit(rng):
    data = crowd(rng, 300, 9, 3)
    log_table, log_prior = tables(rng, 300, 9, 3, 5)
    latent_class = np.array([0, 0, 1, 2, 2])
    shared = run(LocalEngine(data), LatentParams(log_table, log_prior[4], latent_class, counts="posterior"))
    tiled = run(LocalEngine(data), LatentParams(log_table, np.tile(log_prior[4], (300, 1)), latent_class,
                                                counts="posterior"))
    for a, b in zip(shared[0], tiled[0], strict=True):
        assert np.array_equal(a, b)
    for key in ("latent", "classes"):
        assert np.array_equal(shared[1][key], tiled[1][key])


def test_a_gold_class_without_evidence_is_uniform_over_its_states_and_minus_inf_evidence(rng):
    """Every state of a task's gold class ruled out by its answers: no NaN, its class's states share the mass, the
    log-likelihood says -inf (DS's gold under the identity: the one-hot row)."""
    data = crowd(rng, 40, 3, 2)
    t = int(np.flatnonzero(data.answers_per_task > 0)[0])
    e = int(data.task_ptr[t])
    log_table, log_prior = tables(rng, 40, 3, 2, 4)
    latent_class = np.array([0, 1, 1, 0])
    log_table[data.worker[e], data.label[e], [1, 2]] = -np.inf  # the answer rules class 1's states out
    clamp = np.full(40, -1)
    clamp[t] = 1
    (ll,), out = run(LocalEngine(data), LatentParams(log_table, log_prior, latent_class, clamp=clamp))
    assert ll == -np.inf and np.isfinite(out["latent"]).all()
    np.testing.assert_array_equal(out["latent"][t], [0.0, 0.5, 0.5, 0.0])
    np.testing.assert_array_equal(out["classes"][t], [0.0, 1.0])
    square = LatentParams(log_table[:, :, [0, 1]], log_prior[:, [0, 1]], clamp=clamp)
    (ll,), out = run(LocalEngine(data), square)
    assert ll == -np.inf and np.array_equal(out["latent"][t], [0.0, 1.0])


CLAMP_CASES = {
    "not a class": ("np.zeros((2, 2, 3)), np.zeros((1, 3)), [0, 1, 1], clamp=[2]", DataError,
                    "clamp holds 2 for task 0 ('a'), not a class (-1 .. 1)"),
    "below -1": ("np.zeros((2, 2, 2)), np.zeros((1, 2)), clamp=[-2]", DataError, "clamp holds -2 for task 0"),
    "no state": ("np.zeros((2, 2, 3)), np.zeros((1, 3)), [0, 0, 0], clamp=[1]", DataError,
                 "clamp holds 1 for task 0 ('a'): no latent state maps to that class"),
    "no map": ("np.zeros((2, 2, 3)), np.zeros((1, 3)), clamp=[1]", DataError, "need a latent_class map"),
    "short": ("np.zeros((2, 2, 2)), np.zeros((1, 2)), clamp=np.array([], np.int64)", DataError,
              "clamp holds 0 tasks, the data has 1"),
    "float": ("np.zeros((2, 2, 2)), np.zeros((1, 2)), clamp=[0.5]", DataError, "clamp codes must be integers"),
    "floor text": ("np.zeros((2, 2, 2)), np.zeros((1, 2)), entropy_floor='x'", DataError,
                   "entropy_floor must be a number"),
    "floor negative": ("np.zeros((2, 2, 2)), np.zeros((1, 2)), entropy_floor=-1.0", DataError,
                       "entropy_floor must be >= 0"),
    "prior 3-D": ("np.zeros((2, 2, 2)), np.zeros((1, 1, 2))", DataError, "log_prior must be a 2-D array"),
    "shared prior states": ("np.zeros((2, 2, 2)), np.zeros(3)", DataError, "log_prior has 3 latent states"),
}


@pytest.mark.parametrize("case", list(CLAMP_CASES), ids=list(CLAMP_CASES))
def test_bad_gold_floor_or_prior_is_a_data_error_naming_it(case):
    args, error, message = CLAMP_CASES[case]
    part = eval(GOOD_PART, {"Part": Part, "np": np})
    with pytest.raises(error) as caught:
        latent_block(part, 0, eval(f"LatentParams({args})", {"LatentParams": LatentParams, "np": np}), True)
    assert message in str(caught.value)


def test_ds_e_step_is_the_latent_kernel_with_the_identity_map_bit_for_bit(rng):
    """Dawid--Skene's E-step (EMState, through em_block) after a few iterations, with gold: the latent kernel with
    K states, the identity map, DS's class prior as the shared row and the same clamp gives the same posteriors,
    log-likelihood and expected counts, to the bit -- one kernel."""
    from crowdagg.methods.blocks import full_m_step
    from crowdagg.methods.em.ds import EMState

    for k in (2, 3, 5):
        data = crowd(rng, 400, 11, k)
        clamp = np.where(rng.random(400) < 0.1, rng.integers(0, k, 400), -1)
        state = EMState(LocalEngine(data), None, clamp, full_m_step, 0.0)
        for _ in range(3):
            state.iterate()
        ds_post = state.posteriors()
        ds_ll = state.e_step()
        ds_counts, ds_tot = state._stats
        params = LatentParams(np.log(state.conf_ot), np.log(state.prior), clamp=clamp, counts="posterior")
        (ll, counts, tot), out = run(LocalEngine(data), params)
        assert np.array_equal(out["latent"], ds_post) and ll == ds_ll
        assert np.array_equal(counts, ds_counts) and np.array_equal(tot, ds_tot)


@pytest.mark.parametrize("k", [2, 3])
def test_log_scores_that_overflow_are_an_error_naming_the_task_not_a_row_of_nan(rng, k):
    """Finite log-scores near 1e308 sum to +inf (two answers), or +inf and -inf to NaN: the E-step would give a
    row of NaN and a NaN log-likelihood; it is a DataError naming the task, in both the two-state and the general
    loop, and through the public latent_posterior."""
    from crowdagg.methods.blocks import latent_posterior

    data = crowd(rng, 50, 4, k)
    t = int(np.flatnonzero(data.answers_per_task >= 2)[0])
    name = data.task_names[t]
    log_table, log_prior = tables(rng, 50, 4, k, k)
    huge = np.full_like(log_table, 1e308)
    with pytest.raises(DataError, match=rf"task {t} \('{name}'\): its log-scores .* overflow to \+inf or NaN"):
        run(LocalEngine(data), LatentParams(huge, log_prior))
    e = int(data.task_ptr[t])
    mixed = huge.copy()
    mixed[data.worker[e], data.label[e], 0] = -np.inf  # inf + -inf: NaN in one state, +inf in the others
    with pytest.raises(DataError, match="overflow to"):
        run(LocalEngine(data), LatentParams(mixed, log_prior))
    with pytest.raises(DataError, match="overflow to"):
        latent_posterior(data, huge, np.zeros(k))
    got = latent_posterior(data, log_table, log_prior)  # (finite scores: unchanged)
    assert np.isfinite(got.latent).all() and np.isfinite(got.loglik)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ("n_latent=3, log_prior=np.zeros(3), log_table=np.zeros((1, 1, 1))", DataError, r"log_table has shape \(1, 1, 1\)"),
    ("n_latent=3, log_prior=np.zeros(1), log_table=np.zeros((W, K, 3))", DataError, r"log_prior \(1,\)"),
    ("n_latent=3, log_prior=np.zeros(3), log_table=np.zeros((W, K, 3)), latent_class=np.full(3, 10**6)", DataError,
     "latent_class must map each of the 3 latent states to a class 0 .. 2; got values 1000000"),
    ("n_latent=3, log_prior=np.zeros(3), log_table=np.zeros((W, K, 3)), latent_class=np.zeros(2, int)", DataError,
     r"got shape \(2,\)"),
    ("n_latent=4, log_prior=np.zeros(4), log_table=np.zeros((W, K, 4)), clamp=np.zeros(N, int)", DataError,
     "need a latent_class map"),
    ("n_latent=3, mode=GIVEN, given=np.zeros((1, 3))", DataError, "given has 1 rows"),
    ("n_latent=3, mode=GIVEN", DataError, "needs the given rows"),
    ("n_latent=4, mode=VOTE", DataError, "the vote's start is over the 3 classes"),
    ("n_latent=3, mode=7", UsageError, "mode must be E_STEP, GIVEN or VOTE"),
    ("n_latent=3, log_prior=np.zeros(3), log_table=np.zeros((W, K, 3)), count_mode=2", UsageError,
     "counts of the draws need a draw_seed"),
    ("n_latent=0, log_prior=np.zeros(0), log_table=np.zeros((W, K, 0))", DataError, "n_latent >= 1"),
])
def test_block_pass_refuses_arrays_the_kernel_would_read_or_write_past(kwargs, error, match):
    """block_pass is public (the module's __all__) and its kernel runs without bounds checks: a map to class 10⁶
    wrote past the class posteriors' end (a segmentation fault), a short table, prior or given rows were read
    past theirs (garbage posteriors), an unknown mode ran as another.  Each is now an error before the kernel."""
    from crowdagg.kernels.latent import GIVEN, VOTE, block_pass

    data = crowd(np.random.default_rng(0), 20, 4, 3)
    part = LocalEngine(data).parts[0]
    env = {"np": np, "W": 4, "K": 3, "N": 20, "GIVEN": GIVEN, "VOTE": VOTE}
    with pytest.raises(error, match=match):
        block_pass(part, 0, keep=True, **eval(f"dict({kwargs})", env))
    got = block_pass(part, 0, 6, log_prior=np.zeros(6), log_table=np.zeros((4, 3, 6)),
                     latent_class=np.array([0, 0, 1, 1, 2, 2]), keep=True)
    np.testing.assert_allclose(got.classes.sum(axis=1), 1.0)
