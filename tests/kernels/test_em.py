"""The EM block function (crowdagg.kernels.em.em_block) against a slow numpy twin, over many small blocks, and
bit-identical over any partitioning of its blocks."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.engine import Part, combine, join, reduce_range
from crowdagg.engine.tree import ranges
from crowdagg.kernels.em import EMParams, em_block

FLOOR = 1e-10


def twin(task_ptr, worker, label, n_workers, k, params: EMParams):
    """Plain loops, one task at a time: (counts [w, observed, true], class totals, log-likelihood, Σ f log f,
    posteriors)."""
    n = len(task_ptr) - 1
    counts, tot, post = np.zeros((n_workers, k, k)), np.zeros(k), np.zeros((n, k))
    ll = h = 0.0
    for t in range(n):
        ans = range(task_ptr[t], task_ptr[t + 1])
        g = -1 if params.clamp is None else int(params.clamp[t])
        if params.mode == "e-step":
            s = params.log_prior + sum((params.log_conf_ot[worker[e], label[e]] for e in ans), np.zeros(k))
            if g >= 0:
                ll += s[g]
            else:
                m = s.max()
                z = np.exp(s - m).sum()
                ll += m + np.log(z)
                q = np.exp(s - m) / z
        elif params.mode == "given":
            q = params.post[t].copy()
        else:
            votes = np.bincount(label[task_ptr[t]:task_ptr[t + 1]], minlength=k).astype(float)
            q = votes / votes.sum() if votes.sum() else votes
        if g >= 0:
            q = np.eye(k)[g]
        for e in ans:
            counts[worker[e], label[e]] += q
        tot += q
        post[t] = q
        f = np.maximum(q, FLOOR)
        h += float((f * np.log(f)).sum())
    return counts, tot, ll, h, post


def crowd(rng, n_tasks, n_workers, k):
    """Tasks of 0-6 answers (some none), K classes; as a CSR of answers sorted by task."""
    per = rng.integers(0, 7, n_tasks)
    task_ptr = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
    worker = rng.integers(0, n_workers, task_ptr[-1]).astype(np.int32)
    label = rng.integers(0, k, task_ptr[-1]).astype(np.int8)
    return task_ptr, worker, label


def cut(n_tasks, rng, n_blocks):
    """Uneven block boundaries over the tasks (some blocks of one task)."""
    inner = np.sort(rng.choice(np.arange(1, n_tasks), n_blocks - 1, replace=False))
    return np.concatenate([[0], inner, [n_tasks]]).astype(np.int64)


def parts_of(task_ptr, worker, label, bounds, n_workers, k, n_parts):
    """Parts over contiguous block ranges (copies of their answers, re-based offsets), with their ranges."""
    n = len(bounds) - 1
    out = []
    for lo, hi in ranges(n, n_parts):
        t0, t1 = int(bounds[lo]), int(bounds[hi])
        a0, a1 = int(task_ptr[t0]), int(task_ptr[t1])
        out.append((lo, hi, Part(lo, n, t0, bounds[lo:hi + 1] - t0, task_ptr[t0:t1 + 1] - a0,
                                 worker[a0:a1].copy(), label[a0:a1].copy(), n_workers, k)))
    return out


def run(parts, n, params, keep=True):
    nodes, outs = {}, [None] * n
    for lo, hi, part in parts:
        def block(b, lo=lo, part=part):
            sums, out = em_block(part, b - lo, params, keep)
            outs[b] = out
            return sums
        nodes.update(reduce_range(lo, hi, n, block))
    return combine(nodes, n), join(outs)


def all_params(rng, n_tasks, n_workers, k, clamped):
    log_prior = np.log(rng.dirichlet(np.ones(k)))
    log_conf = np.log(rng.dirichlet(np.ones(k), size=(n_workers, k)).transpose(0, 2, 1).copy())
    clamp = np.where(rng.random(n_tasks) < 0.15, rng.integers(0, k, n_tasks), -1) if clamped else None
    given = rng.dirichlet(np.ones(k), size=n_tasks)
    return {"e-step": EMParams(log_prior, log_conf, clamp=clamp, entropy_floor=FLOOR),
            "given": EMParams(post=given, clamp=clamp, entropy_floor=FLOOR),
            "vote": EMParams(clamp=clamp, entropy_floor=FLOOR)}


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("clamped", [False, True])
def test_every_mode_matches_the_twin_and_any_partitioning_gives_the_same_bits(rng, k, clamped):
    n_tasks, n_workers = 400, 17
    task_ptr, worker, label = crowd(rng, n_tasks, n_workers, k)
    bounds = cut(n_tasks, rng, 23)
    for mode, params in all_params(rng, n_tasks, n_workers, k, clamped).items():
        counts, tot, ll, h, post = twin(task_ptr, worker, label, n_workers, k, params)
        results = []
        for n_parts in (1, 2, 7, 23):
            (c, t, l_, h_), p = run(parts_of(task_ptr, worker, label, bounds, n_workers, k, n_parts), 23, params)
            results.append((c, t, l_, h_, p))
        c, t, l_, h_, p = results[0]
        np.testing.assert_allclose(c, counts, rtol=1e-12, atol=1e-12, err_msg=mode)
        np.testing.assert_allclose(t, tot, rtol=1e-12, err_msg=mode)
        np.testing.assert_allclose(p, post, rtol=1e-12, atol=1e-15, err_msg=mode)
        assert l_ == pytest.approx(ll, rel=1e-12, abs=1e-12) and h_ == pytest.approx(h, rel=1e-12)
        if mode == "e-step" and clamped:  # a clamped task's evidence counts at its gold class
            assert ll != 0.0
        if mode != "e-step":
            assert l_ == 0.0
        if mode == "vote":  # the vote shares are whole counts over their exact sum: the same bits as numpy's
            np.testing.assert_array_equal(p, post)
        for other in results[1:]:  # every partitioning: the same bits
            for a, b in zip(results[0], other):
                assert np.array_equal(a, b), mode


def test_one_block_is_the_plain_sequential_sum(rng):
    """One block (every golden input): the block's own arrays, no reduction -- what the old kernel gave."""
    task_ptr, worker, label = crowd(rng, 300, 9, 2)
    params = all_params(rng, 300, 9, 2, True)["e-step"]
    part = Part(0, 1, 0, np.array([0, 300]), task_ptr, worker, label, 9, 2)
    (counts, tot, ll, _), post = em_block(part, 0, params, True)
    (counts2, tot2, ll2, _), none = em_block(part, 0, params, False)
    assert none is None and post.shape == (300, 2)
    assert np.array_equal(counts, counts2) and np.array_equal(tot, tot2) and ll == ll2
    assert counts is not counts2  # fresh arrays: the tree adds into them


def test_sums_leave_the_entropy_out_unless_asked(rng):
    task_ptr, worker, label = crowd(rng, 50, 4, 3)
    part = Part(0, 1, 0, np.array([0, 50]), task_ptr, worker, label, 4, 3)
    sums, out = em_block(part, 0, EMParams(), False)
    assert len(sums) == 3 and out is None
    assert sums[2] == 0.0


# --------------------------------------------------------------------------- bad input: errors, never a crash
EM_CASES = {
    "worker": ("Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 9], np.int32), "
               "np.array([0, 1], np.int8), 2, 2)", "EMParams()", "worker code 9 at position 1 is out of range for 2"),
    "label": ("Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], np.int32), "
              "np.array([0, 7], np.int8), 2, 2)", "EMParams()", "label code 7 at position 1 is out of range for 2"),
    "ptr": ("Part(0, 1, 0, np.array([0, 1]), np.array([0, 7]), np.array([0, 1], np.int32), "
            "np.array([0, 1], np.int8), 2, 2)", "EMParams()", "task_ptr must run from 0 to 2"),
    "bounds": ("Part(0, 1, 0, np.array([0, 5]), np.array([0, 2]), np.array([0, 1], np.int32), "
               "np.array([0, 1], np.int8), 2, 2)", "EMParams()", "bounds must run from 0 to 1"),
    "clamp class": (None, "EMParams(np.zeros(2), np.zeros((2, 2, 2)), clamp=np.array([5]))",
                    "clamp holds 5 for task 0, not a class (-1 .. 1)"),
    "clamp negative": (None, "EMParams(clamp=np.array([-3]))", "clamp holds -3 for task 0"),
    "clamp uint64": (None, "EMParams(clamp=np.array([2**64 - 1], np.uint64))", "clamp holds a class outside -1"),
    "clamp float": (None, "EMParams(clamp=np.array([1.7]))", "clamp codes must be integers"),
    "clamp short": (None, "EMParams(clamp=np.array([], np.int64))", "clamp holds 0 tasks, the data has 1"),
    "conf shape": (None, "EMParams(np.zeros(2), np.zeros((1, 2, 2)))", "log_conf_ot has shape (1, 2, 2)"),
    "conf classes": (None, "EMParams(np.zeros(3), np.zeros((2, 2, 2)))", "not (n_workers, 3, 3)"),
    "conf text": (None, "EMParams(np.zeros(2), np.full((2, 2, 2), 'a', object))", "log_conf_ot must hold numbers"),
    "post rows": (None, "EMParams(post=np.ones((0, 2)))", "post has shape (0, 2)"),
    "post classes": (None, "EMParams(post=np.ones((1, 5)))", "post has shape (1, 5)"),
    "both": (None, "EMParams(np.zeros(2), np.zeros((2, 2, 2)), post=np.ones((1, 2)))", "not both"),
    "prior alone": (None, "EMParams(np.zeros(2))", "log_prior without log_conf_ot"),
    "floor": (None, "EMParams(entropy_floor='x')", "entropy_floor must be a number"),
    "not params": (None, "{'post': 1}", "em_block takes EMParams"),
    "block": (None, "EMParams()", "block 3 is not one of the partition's 1 blocks"),
    # NaN parameters gave NaN posteriors and counts, silently
    "prior nan": (None, "EMParams(np.array([np.nan, 0.0]), np.zeros((2, 2, 2)))", "log_prior[0] is nan"),
    "conf inf": (None, "EMParams(np.zeros(2), np.full((2, 2, 2), np.inf))", "log_conf_ot[0, 0, 0] is inf"),
    "post nan": (None, "EMParams(post=np.full((1, 2), np.nan))", "post[0, 0] is nan"),
    "post negative": (None, "EMParams(post=np.array([[-0.5, 1.5]]))", "post[0, 0] is -0.5"),
    "block float": (None, "EMParams()", "a block index must be an integer, got 0.5"),
    # a negative first task sliced the global posteriors' rows from the end: the kernel read past the slice
    "first task": ("Part(0, 1, -1, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], np.int32), "
                   "np.array([0, 1], np.int8), 2, 2)", "EMParams(post=np.full((1, 2), 0.5))",
                   "first_task must be an integer >= 0, got -1"),
    "beyond grid": ("Part(3, 2, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], np.int32), "
                    "np.array([0, 1], np.int8), 2, 2)", "EMParams()", "lie beyond the grid's 2 blocks"),
    "big-endian": ("Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], '>i4'), "
                   "np.array([0, 1], np.int8), 2, 2)", "EMParams()", "native byte order"),
}
BLOCKS = {"block": 3, "block float": 0.5}
GOOD_PART = "Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], np.int32), np.array([0, 1], np.int8), 2, 2)"


def test_bad_parts_and_parameters_are_errors_never_a_crash():
    from tests.crashes import refusals

    calls = {name: f"em_block({part or GOOD_PART}, {BLOCKS.get(name, 0)!r}, {params}, True)"
             for name, (part, params, _) in EM_CASES.items()}
    found = refusals("from crowdagg.engine import Part\nfrom crowdagg.kernels.em import EMParams, em_block", calls)
    for name, (_, _, message) in EM_CASES.items():
        assert message in found[name], (name, found[name])


def test_a_part_changed_after_its_check_is_checked_again():
    """The check is cached per partition: reassigning its sizes or arrays must not keep the old verdict (with
    n_workers lowered to 1 the kernel wrote worker 1's counts past a (1, K, K) table)."""
    from crowdagg.errors import DataError

    part = eval(GOOD_PART)
    em_block(part, 0, EMParams(), True)
    part.n_workers = 1
    with pytest.raises(DataError, match="worker code 1 at position 1 is out of range for 1"):
        em_block(part, 0, EMParams(np.zeros(2), np.zeros((1, 2, 2))), True)
    part.n_workers, part.label = 2, np.array([0, 4], np.int8)
    with pytest.raises(DataError, match="label code 4"):
        em_block(part, 0, EMParams(), True)


def test_the_block_function_and_its_parameters_travel_by_pickle(rng):
    """A distributed engine ships em_block by reference and EMParams by value: the same bits after the trip."""
    import pickle

    task_ptr, worker, label = crowd(rng, 120, 6, 3)
    part = Part(0, 1, 0, np.array([0, 120]), task_ptr, worker, label, 6, 3)
    params = all_params(rng, 120, 6, 3, True)["e-step"]
    fn, shipped = pickle.loads(pickle.dumps((em_block, params)))
    assert fn is em_block and shipped.mode == "e-step"
    (c1, t1, l1, h1), p1 = em_block(part, 0, params, True)
    (c2, t2, l2, h2), p2 = fn(pickle.loads(pickle.dumps(part)), 0, shipped, True)
    assert np.array_equal(c1, c2) and np.array_equal(t1, t2) and l1 == l2 and h1 == h2 and np.array_equal(p1, p2)


def test_the_e_step_is_the_latent_kernels_with_the_identity_map(rng):
    """em_block is an adapter of crowdagg.kernels.latent (one per-task loop): its E-step with gold and the entropy
    floor is latent_block's with K states, no map, the class prior as the one shared row and the same clamp --
    counts, totals, log-likelihood, Σ f log f and posteriors to the bit."""
    from crowdagg.kernels.latent import LatentParams, latent_block

    for k in (2, 3, 5):
        task_ptr, worker, label = crowd(rng, 300, 9, k)
        part = Part(0, 1, 0, np.array([0, 300]), task_ptr, worker, label, 9, k)
        em = all_params(rng, 300, 9, k, True)["e-step"]
        (counts, tot, ll, h), post = em_block(part, 0, em, True)
        latent = LatentParams(em.log_conf_ot, em.log_prior, clamp=em.clamp, entropy_floor=FLOOR, counts="posterior")
        (ll2, counts2, tot2, h2), out = latent_block(part, 0, latent, True)
        assert np.array_equal(out["latent"], post) and ll2 == ll and h2 == h
        assert np.array_equal(counts2, counts) and np.array_equal(tot2, tot)


def test_a_free_task_every_class_is_ruled_out_for_is_an_error_not_nan():
    """-inf for every class of a task without gold (the latent kernel's check): a DataError naming the task, where
    the E-step once wrote a row of NaN into the posteriors and counts."""
    from crowdagg.errors import DataError

    part = eval(GOOD_PART)  # one task: worker 0 answered 0, worker 1 answered 1
    log_conf = np.zeros((2, 2, 2))
    log_conf[0, 0, 0] = log_conf[1, 1, 1] = -np.inf
    with pytest.raises(DataError, match="task 0: every latent state has probability 0"):
        em_block(part, 0, EMParams(np.zeros(2), log_conf), True)
    (_, _, ll), post = em_block(part, 0, EMParams(np.zeros(2), log_conf, clamp=np.array([1])), True)
    assert ll == -np.inf and np.array_equal(post, [[0.0, 1.0]])  # gold without evidence: its one-hot row
