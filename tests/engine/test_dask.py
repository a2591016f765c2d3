"""The Dask engine on a real LocalCluster: the same partitions, sums and bytes as the local engine, whatever the
partitioning; a worker killed mid-fit, an empty partition, a malformed file.

One cluster of two worker processes serves the whole module (started once: a few seconds).
"""

from __future__ import annotations

import os
import signal
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from crowdagg.data.annotations import AnnotationSet  # noqa: E402
from crowdagg.data.remote import RemoteAnswers, is_remote  # noqa: E402
from crowdagg.engine import LocalEngine, Part  # noqa: E402
from crowdagg.errors import DataError, UsageError  # noqa: E402
from crowdagg.io.read import load_annotations  # noqa: E402
from crowdagg.methods.api import aggregate  # noqa: E402
from crowdagg.methods.registry import METHODS, get_method  # noqa: E402

pytestmark = [pytest.mark.dask, pytest.mark.xdist_group("dask")]  # one cluster per run under --dist loadgroup

#: The methods that declare the Dask engine.
DASK_METHODS = [name for name, m in METHODS.items() if "dask" in m.engines]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


# --------------------------------------------------------------------------- data
def _sim_frame(n_answers: int = 1_000_000, n_tasks: int = 100_000, n_workers: int = 300, k: int = 3, seed: int = 7):
    """A crowd whose rows are shuffled, so a task's answers (and a worker's first answer) spread over the files;
    names not in code order, so first appearance decides every code."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_tasks)
    task = rng.integers(0, n_tasks, n_answers)
    worker = rng.integers(0, n_workers, n_answers)
    skill = rng.uniform(0.4, 0.95, n_workers)
    right = rng.random(n_answers) < skill[worker]
    label = np.where(right, truth[task], (truth[task] + rng.integers(1, k, n_answers)) % k)

    def names(prefix: str, codes: np.ndarray) -> pd.Series:
        text = pc.binary_join_element_wise(prefix, pc.cast(pa.array(codes), pa.string()), "")
        return pd.Series(pd.arrays.ArrowExtensionArray(text)).astype(object)

    return pd.DataFrame({
        "task": names("t", rng.permutation(n_tasks)[task]),
        "worker": names("w", rng.permutation(n_workers)[worker]),
        "label": np.array(["cat", "dog", "owl"])[label],
    })


def _write(frame, directory: Path, n_files: int, fmt: str = "parquet") -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), n_files)):
        path = directory / f"part-{i:03d}.{fmt}"
        chunk = frame.iloc[rows]
        if fmt == "parquet":
            chunk.to_parquet(path, index=False)
        else:
            chunk.to_csv(path, index=False, sep="\t" if fmt == "tsv" else ",")
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def sim_files(tmp_path_factory) -> list[str]:
    """The simulated 1M-answer crowd in 20 Parquet files."""
    return _write(_sim_frame(), tmp_path_factory.mktemp("sim"), 20)


@pytest.fixture(scope="module")
def sim_local(sim_files) -> AnnotationSet:
    return load_annotations(sim_files)


@pytest.fixture(scope="module")
def small_files(tmp_path_factory) -> list[str]:
    """A 200k-answer crowd in 4 Parquet files: 3 blocks."""
    return _write(_sim_frame(200_000, 20_000, 50), tmp_path_factory.mktemp("small"), 4)


@pytest.fixture(scope="module")
def sim_fit(sim_local):
    """The local engine's capped fit of each method on the simulated crowd (made once each)."""
    fits: dict[str, object] = {}

    def fit(method: str):
        if method not in fits:
            fits[method] = get_method(method)(**_short(method)).fit(sim_local)
        return fits[method]

    return fit


@pytest.fixture(scope="module")
def sim_read(client, sim_files):
    """The simulated crowd read on the cluster into n partitions: ``sim_read(n) -> (data, engine)``, read once each."""
    from crowdagg.io.dask_read import read_distributed

    reads: dict[int, tuple] = {}

    def read(n_parts: int):
        if n_parts not in reads:
            reads[n_parts] = read_distributed(sim_files, client, partitions=n_parts)
        return reads[n_parts]

    yield read
    for _, engine in reads.values():
        engine.close()


# --------------------------------------------------------------------------- block functions of these tests
def _cell_sums(part: Part, b: int, params, keep: bool):
    """Dense per-(worker, class) weighted sums, a float count; per task, its answer count (kept)."""
    lo, hi = part.answers_of(b)
    sums = np.bincount(part.cell[lo:hi], weights=params[part.label[lo:hi]],
                       minlength=part.n_workers * part.n_classes)
    start, stop = part.tasks_of(b)
    kept = (np.diff(part.task_ptr[start:stop + 1]), part.first_task + np.arange(start, stop)) if keep else None
    return (sums, float(hi - lo)), kept


def _assert_same_partitions(data: AnnotationSet, local: AnnotationSet, engine, client) -> None:
    """The client's view and the partitions hold what the local reader holds, in its order."""
    assert is_remote(data)
    assert data.tasks.equals(local.tasks) and data.workers.equals(local.workers)
    assert data.classes == local.classes and data.class_dtype == local.class_dtype
    assert np.array_equal(data.task_ptr, local.task_ptr)
    assert np.array_equal(data.answers_per_worker, local.answers_per_worker)
    assert np.array_equal(data.answers_per_class, local.answers_per_class)
    assert data.n_duplicates == local.n_duplicates and data.n_answers == local.n_answers
    parts = client.gather(engine.parts)
    assert sum(p.n_blocks for p in parts) == engine.n_blocks == LocalEngine(local).n_blocks
    assert np.array_equal(np.concatenate([p.worker for p in parts]), local.worker)
    assert np.array_equal(np.concatenate([p.label for p in parts]), local.label)
    grid = LocalEngine(local).part.bounds
    first = 0
    for p in parts:  # contiguous, in block order, cut at the local grid's block boundaries
        assert p.first_block == first and p.n_blocks_total == len(grid) - 1
        assert np.array_equal(p.bounds + p.first_task, grid[first:first + p.n_blocks + 1])
        first += p.n_blocks
    assert np.array_equal(np.concatenate([np.diff(p.task_ptr) for p in parts]), local.answers_per_task)
    names = np.concatenate([p.task_names.to_numpy() for p in parts])
    assert np.array_equal(names, local.task_names)


def _fresh_row(values: np.ndarray, b: int) -> np.ndarray:
    return values[b].copy()


def test_nodes_merged_pairwise_on_workers_give_combines_bits():
    """merge_nodes (the workers' pairwise adds) over any aligned partitioning and any pairing: tree.combine's root,
    to the bit (values of wildly different sizes, so any other order of additions shows)."""
    from crowdagg.engine import tree
    from crowdagg.engine.dask import merge_nodes

    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 13, 64, 100):
        values = rng.standard_normal((n, 3)) * 10.0 ** rng.integers(-8, 16, (n, 1))
        leaf = partial(_fresh_row, values)  # the tree adds into its left operand: each leaf a fresh row
        want = tree.combine(tree.reduce_range(0, n, n, leaf), n)
        for _ in range(5):
            cuts = np.unique(np.r_[0, np.sort(rng.integers(0, n + 1, rng.integers(0, 6))), n])
            partials = [tree.reduce_range(int(a), int(b), n, leaf) for a, b in zip(cuts[:-1], cuts[1:])]
            while len(partials) > 1:
                partials = [merge_nodes(n, *partials[i:i + 2]) for i in range(0, len(partials), 2)]
            merged = merge_nodes(n, *partials)
            assert list(merged) == [(tree.depth(n), 0)]
            assert np.array_equal(tree.combine(merged, n), want)


# --------------------------------------------------------------------------- ingest and map_reduce
@pytest.mark.parametrize("n_parts", [1, 2, 7])
def test_parquet_files_give_the_local_readers_partitions_and_bit_identical_sums(client, sim_read, sim_local, n_parts):
    data, engine = sim_read(n_parts)
    assert engine.n_blocks > 7  # the grid has many blocks: 7 partitions of them all hold some
    assert len(engine.parts) == n_parts
    _assert_same_partitions(data, sim_local, engine, client)
    weights = np.array([0.1, 1e-9, 3.7])
    local = LocalEngine(sim_local)
    (want, n_want), outs_want = local.map_reduce(_cell_sums, weights, keep=True)
    (got, n_got), outs_got = engine.map_reduce(_cell_sums, weights, keep=True)
    assert np.array_equal(got, want) and n_got == n_want == sim_local.n_answers
    counts, rows = engine.gather(outs_got)
    assert np.array_equal(counts, local.gather(outs_want)[0]) and np.array_equal(counts, sim_local.answers_per_task)
    assert np.array_equal(rows, np.arange(sim_local.n_tasks))
    (again, _), none = engine.map_reduce(_cell_sums, weights)  # no kept outputs: none travel
    assert none is None and np.array_equal(again, want)


#: Partitions of the small crowd's 3 blocks of which three hold none (and no task).
EMPTY_PARTS = [0, 0, 1, 1, 3, 3]


def test_an_empty_partition_works(client, small_files):
    """Partitions that hold no block (and no task) give empty sums and outputs; the total is unchanged."""
    from crowdagg.io.dask_read import read_distributed

    files = small_files
    local = load_annotations(files)
    n = LocalEngine(local).n_blocks
    assert n == 3
    data, engine = read_distributed(files, client, partitions=EMPTY_PARTS)
    try:
        parts = client.gather(engine.parts)
        assert [p.n_tasks == 0 for p in parts] == [True, False, True, False, True]
        _assert_same_partitions(data, local, engine, client)
        weights = np.array([1.0, 2.0, 0.5])
        (want, _), _ = LocalEngine(local).map_reduce(_cell_sums, weights)
        (got, _), outs = engine.map_reduce(_cell_sums, weights, keep=True)
        assert np.array_equal(got, want)
        assert np.array_equal(engine.gather(outs)[0], local.answers_per_task)
    finally:
        engine.close()


@pytest.mark.parametrize("method", DASK_METHODS)
def test_every_method_gives_the_local_bytes_with_empty_partitions(client, small_files, method):
    """Each method on partitions of which some hold no block: the local engine's bytes (one test per method, so
    that xdist spreads them)."""
    from crowdagg.io.dask_read import read_distributed

    local = load_annotations(small_files)
    data, engine = read_distributed(small_files, client, partitions=EMPTY_PARTS)
    try:
        _assert_same_fit(method, (data, engine), get_method(method)(**_short(method)).fit(local), **_short(method))
    finally:
        engine.close()


def test_a_malformed_file_is_an_error_naming_it(client, tmp_path):
    from crowdagg.io.dask_read import read_distributed

    files = _write(_sim_frame(3000, 500, 20), tmp_path, 3, "csv")
    with open(files[1], "a") as fh:
        fh.write('t1,w1,cat,"extra\n')  # an unclosed quote: the reader's own error, naming file and line
    with pytest.raises(DataError) as local:
        load_annotations(files)
    with pytest.raises(DataError) as remote:
        read_distributed(files, client)
    assert str(remote.value) == str(local.value) and files[1] in str(remote.value)


def test_relative_paths_are_read_where_the_client_runs_whatever_the_workers_directory(client, tmp_path, monkeypatch):
    """An existing cluster's workers run in their own directory: a relative path (a glob) given to the client
    names the client's file, and errors name it as the user wrote it, as the local reader does."""
    from crowdagg.io.dask_read import read_distributed

    _write(_sim_frame(3000, 500, 20), tmp_path / "batches", 3, "csv")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    before = client.run(os.getcwd)
    client.run(os.chdir, str(elsewhere))
    try:
        data, engine = read_distributed("batches/*.csv", client, partitions=2)
        try:
            local = load_annotations(["batches/*.csv"])
            assert data.tasks.equals(local.tasks) and np.array_equal(data.task_ptr, local.task_ptr)
        finally:
            engine.close()
        with open("batches/part-001.csv", "a") as fh:
            fh.write('t1,w1,cat,"extra\n')
        with pytest.raises(DataError) as want:
            load_annotations(["batches/*.csv"])
        with pytest.raises(DataError) as got:
            read_distributed("batches/*.csv", client)
        assert str(got.value) == str(want.value) and str(got.value).startswith("batches/part-001.csv")
    finally:
        for address, cwd in before.items():
            client.run(os.chdir, cwd, workers=[address])


def test_the_client_view_refuses_to_read_the_answers(client, sim_files):
    from crowdagg.io.dask_read import read_distributed

    data, engine = read_distributed(sim_files[:2], client, partitions=1)
    engine.close()
    assert not is_remote(load_annotations(sim_files[:1]))
    assert isinstance(data.label, RemoteAnswers) and data.n_answers == len(data.label) > 0
    with pytest.raises(UsageError, match="held by the Dask workers"):
        np.bincount(data.label)
    with pytest.raises(UsageError, match="held by the Dask workers"):
        data.worker[:3]
    with pytest.raises(UsageError, match="held by the Dask workers"):
        data.task.astype(np.int64)
    import pickle

    assert pickle.loads(pickle.dumps(data.label)).shape == data.label.shape  # the placeholder travels


def test_formats_and_options_the_dask_engine_does_not_read_are_refused(client, tmp_path):
    from crowdagg.io.dask_read import read_distributed

    path = tmp_path / "a.jsonl"
    path.write_text('{"task": "t", "worker": "w", "label": "x"}\n')
    with pytest.raises(UsageError, match="reads csv, tsv, parquet"):
        read_distributed([str(path)], client)
    with pytest.raises(UsageError, match="standard input"):
        read_distributed(["-"], client)
    csv = _write(_sim_frame(100, 10, 5), tmp_path / "c", 1, "csv")
    with pytest.raises(UsageError, match="duplicates"):
        read_distributed(csv, client, duplicates="first")
    with pytest.raises(UsageError, match="block boundaries"):
        read_distributed(csv, client, partitions=[0, 2])


# --------------------------------------------------------------------------- methods
def test_a_method_without_the_dask_engine_is_refused_before_any_work(client, tmp_path):
    local_only = [name for name, m in METHODS.items() if "dask" not in m.engines]
    assert "glad" in local_only
    with pytest.raises(UsageError, match="runs on the local engine only, not on dask"):
        aggregate(str(tmp_path / "missing.csv"), "glad", engine="dask", client=client)


def _render(result) -> bytes:
    """Everything the CLI writes from a result: the labels with posteriors, the worker table."""
    from crowdagg.io.render import render_table

    out = render_table(result.table(proba=True, arrow=True), "csv")
    return out + render_table(result.workers_table(arrow=True), "csv")


def _assert_same_fit(method: str, read, want, **params) -> None:
    """The method fitted on the Dask engine (``read``: the data and engine of read_distributed) gives ``want``,
    the local engine's result: the same arrays and bytes."""
    data, engine = read
    got = get_method(method)(**params).fit(data, engine=engine)
    assert np.array_equal(got.posteriors, want.posteriors), method
    assert np.array_equal(got.labels, want.labels) and got.n_iter == want.n_iter
    assert np.array_equal(got.objective, want.objective)
    assert _render(got) == _render(want), method


def _short(method: str) -> dict:
    """The method's declared quick settings (the same on both engines): the comparison needs iterations, not
    convergence."""
    return dict(METHODS[method].quick_params)


@pytest.mark.parametrize(("method", "n_parts"), [("ds", 1), ("ds", 2)] + [(m, 7) for m in DASK_METHODS])
def test_methods_give_the_local_engines_bytes_on_the_simulated_crowd(sim_read, sim_fit, method, n_parts):
    if method not in DASK_METHODS:
        pytest.skip(f"{method} does not run on the Dask engine yet")
    _assert_same_fit(method, sim_read(n_parts), sim_fit(method), **_short(method))


def test_real_datasets_give_the_local_readers_partitions_and_bytes(client, datasets_dir, tmp_path):
    """Every real dataset, its rows split over 3 CSV or TSV files (tasks and workers recur across them), read into 2
    partitions (one holds the single block, one none): the local reader's partitions; ds (capped at 5
    iterations: the comparison needs iterations, not convergence) and another method in turn, the local
    engine's bytes."""
    import pandas as pd

    from crowdagg.io.dask_read import read_distributed

    names = sorted(p.name for p in datasets_dir.iterdir() if (p / "labels.csv").is_file())
    assert len(names) >= 10
    for i, name in enumerate(names):
        frame = pd.read_csv(datasets_dir / name / "labels.csv", dtype=str, keep_default_na=False)
        files = _write(frame, tmp_path / name, 3, ("csv", "tsv")[i % 2])
        try:
            local = load_annotations(files)
        except DataError as refused:  # numeric answers: refused too (counting one file's values, not all)
            assert "is numeric with" in str(refused)
            with pytest.raises(DataError, match="column 'label' is numeric with .* pass classes"):
                read_distributed(files, client)
            continue
        data, engine = read_distributed(files, client, partitions=2)
        try:
            _assert_same_partitions(data, local, engine, client)
            for method in dict.fromkeys(["ds", DASK_METHODS[i % len(DASK_METHODS)]] if DASK_METHODS else []):
                params = _short(method)
                _assert_same_fit(method, (data, engine), get_method(method)(**params).fit(local), **params)
        finally:
            engine.close()


def test_the_fits_services_go_through_the_dask_engine(client, small_files):
    """Gold, the starts (hard vote, another method's result) and a saved worker model: the local engine's bytes;
    restarts (n_init > 1) are refused before any work."""
    from crowdagg.io.dask_read import read_distributed
    from crowdagg.methods.model_file import from_json, to_json

    if not {"ds", "mv", "onecoin"} <= set(DASK_METHODS):
        pytest.skip("ds, mv and onecoin do not all run on the Dask engine yet")
    local = load_annotations(small_files[1:])
    gold = {name: local.classes[i % 3] for i, name in enumerate(local.task_names[:500].tolist())}
    model = from_json(to_json(get_method("ds")(max_iter=5).fit(load_annotations(small_files[:1]))), "m.json", None)
    read = read_distributed(small_files[1:], client, partitions=[0, 1, 2])
    try:
        for method, params in (("ds", {"gold": gold}), ("ds", {"init": "hard-vote"}), ("ds", {"init": "mv"}),
                               ("ds", {"init_workers": model}), ("onecoin", {"init": "ds", "gold": gold})):
            params = {**params, "max_iter": 5}
            want = get_method(method)(**params).fit(local)
            _assert_same_fit(method, read, want, **params)
            if "init_workers" in params:
                assert to_json(get_method(method)(**params).fit(read[0], engine=read[1])) == to_json(want)
    finally:
        read[1].close()
    with pytest.raises(UsageError, match="n_init 3 is not supported with the Dask engine"):
        aggregate(small_files, "ds", engine="dask", client=client, n_init=3)
    # ebcc declares its own n_init: splits keyed on task names, drawn in the blocks -- the local engine's bytes
    if "ebcc" in DASK_METHODS:
        local_fit = aggregate(load_annotations(small_files), "ebcc", n_init=2, max_iter=3, subtypes=2)
        dask_fit = aggregate(small_files, "ebcc", engine="dask", client=client, n_init=2, max_iter=3, subtypes=2)
        assert np.array_equal(local_fit.posteriors, dask_fit.posteriors)


# --------------------------------------------------------------------------- the CLI
def _cli(*args: str):
    from typer.testing import CliRunner

    from crowdagg.cli import app

    return CliRunner().invoke(app, ["aggregate", *args])


def test_cli_engine_dask_writes_the_local_engines_bytes(client, small_files, tmp_path):
    """``--engine dask --scheduler ADDRESS`` on a glob of Parquet files: stdout and --workers byte for byte."""
    if "ds" not in DASK_METHODS:
        pytest.skip("ds does not run on the Dask engine yet")
    pattern = str(Path(small_files[0]).parent / "*.parquet")
    local = _cli(pattern, "-m", "ds", "--proba", "--workers", str(tmp_path / "w_local.csv"))
    remote = _cli(pattern, "-m", "ds", "--proba", "--workers", str(tmp_path / "w_dask.csv"), "--engine", "dask",
                  "--scheduler", client.scheduler.address)
    assert local.exit_code == 0 and remote.exit_code == 0, remote.stderr
    assert remote.stdout == local.stdout and len(local.stdout) > 100_000
    assert (tmp_path / "w_dask.csv").read_bytes() == (tmp_path / "w_local.csv").read_bytes()


def test_cli_refuses_what_dask_does_not_run_before_any_work_and_writes_nothing_on_a_bad_file(client, tmp_path):
    if "ds" not in DASK_METHODS:
        pytest.skip("ds does not run on the Dask engine yet")
    files = _write(_sim_frame(3000, 500, 20), tmp_path, 3, "csv")
    out = tmp_path / "out.csv"
    glad = _cli(files[0], "-m", "glad", "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "-o", str(out))
    assert glad.exit_code == 2 and "runs on the local engine only" in glad.stderr and glad.stdout == ""
    for args, what in (
        (["--duplicates", "first"], "--duplicates keep"),
        (["--input-format", "json"], "reads csv, tsv, parquet"),
        (["--scheduler", "tcp://x:1"], "--scheduler applies to --engine dask only"),
    ):
        engine = [] if args[0] == "--scheduler" else ["--engine", "dask"]
        refused = _cli(files[0], "-m", "ds", *engine, *args)
        assert refused.exit_code == 2 and what in refused.stderr, refused.stderr
    with open(files[2], "a") as fh:
        fh.write('t1,w1,cat,"extra\n')
    bad = _cli(*files, "-m", "ds", "--engine", "dask", "--scheduler", client.scheduler.address, "-o", str(out))
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: ") and files[2] in bad.stderr
    assert "Traceback" not in bad.stderr and not out.exists()


# --------------------------------------------------------------------------- the co-occurrence kernel
def test_the_co_occurrence_kernel_through_dask_equals_the_local_engine(client, small_files):
    """The sparse accumulators (pair sets, sparse sums) reduce to the local engine's bits on any partitioning
    (the small crowd's 3 blocks: 1 partition, 3, and 3 with an empty one)."""
    from crowdagg.io.dask_read import read_distributed

    cooc = pytest.importorskip("crowdagg.kernels.cooc")
    local = load_annotations(small_files)
    weights = np.linspace(0.5, 2.0, local.n_tasks)
    want = cooc.co_occurrence(LocalEngine(local), weights)
    assert want.n_pairs > 1000
    for partitions in (1, 3, [0, 1, 1, 3]):
        _, engine = read_distributed(small_files, client, partitions=partitions)
        try:
            got = cooc.co_occurrence(engine, weights)
        finally:
            engine.close()
        for name in ("pairs", "joint", "n_tasks", "weight"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), (name, partitions)


# --------------------------------------------------------------------------- passes by worker
@pytest.fixture(scope="module")
def heavy_files(tmp_path_factory) -> list[str]:
    """300k answers in 3 Parquet files, 60% of them by one worker (who spans several worker-ordered blocks)."""
    frame = _sim_frame(300_000, 30_000, 200, k=2, seed=11)
    rng = np.random.default_rng(12)
    frame.loc[rng.random(len(frame)) < 0.6, "worker"] = "heavy"
    return _write(frame, tmp_path_factory.mktemp("heavy"), 3)


def _worker_sums(part, b: int, params, keep: bool):
    """By worker: per worker its answer count and a float sum whose bits follow the order of the additions (weights
    of wildly different sizes); kept: per answer its row, task and the running sum of its worker in the block."""
    rows, worker, label, task = part.answers(b)
    value = params[label] * (1.0 + task * 1e-3)
    sums = (np.bincount(worker, minlength=part.n_workers), np.bincount(worker, weights=value,
                                                                       minlength=part.n_workers))
    if not keep:
        return sums, None
    running = np.empty(len(value))
    for w in np.unique(worker):  # a few workers a block: a test's loop, not a kernel
        at = np.flatnonzero(worker == w)
        running[at] = np.cumsum(value[at])
    return sums, (rows, task, running)


def _leave_one_out(part, b: int, params, keep: bool):
    """By worker: each answer's worker total without it (``params``: the weights and the totals), and their sum."""
    weights, totals = params
    rows, worker, label, task = part.answers(b)
    out = totals[worker] - weights[label] * (1.0 + task * 1e-3)
    return np.array([out.sum()]), (out if keep else None)


def test_passes_by_worker_give_the_local_engines_blocks_and_bits(client, heavy_files):
    """map_reduce(by="worker"): the worker-ordered partitions (a shuffle of the task-ordered ones, built on first
    use) hold the local engine's worker-ordered blocks, and the sums and kept outputs are its bits -- 1, 2 and 7
    partitions (some empty), task partitions with empty ones, a heavy worker over several blocks."""
    from crowdagg.io.dask_read import read_distributed

    local = load_annotations(heavy_files)
    engine_l = LocalEngine(local)
    wp = engine_l.worker_part
    heavy = local.workers.index("heavy")
    spans = [b for b in range(wp.n_blocks) if wp.workers_of(b)[0] <= heavy < wp.workers_of(b)[1]]
    assert wp.n_blocks == 4 and len(spans) >= 2
    weights = np.array([0.1, 1e9])
    (count_want, sum_want), kept_want = engine_l.map_reduce(_worker_sums, weights, keep=True, by="worker")
    kept_want = engine_l.gather(kept_want)
    loo_want, loo_kept = engine_l.map_reduce(_leave_one_out, (weights, sum_want), keep=True, by="worker")
    loo_kept = engine_l.gather(loo_kept)
    assert np.array_equal(count_want, local.answers_per_worker)
    assert np.allclose(sum_want, np.bincount(local.worker, weights=weights[local.label] * (1 + local.task * 1e-3)))
    for partitions in (1, 2, 7, [0, 0, 1, 4, 4]):
        data, engine = read_distributed(heavy_files, client, partitions=partitions)
        try:
            assert engine.n_blocks == 4
            (count, sums), kept = engine.map_reduce(_worker_sums, weights, keep=True, by="worker")
            parts = client.gather(engine.worker_parts)
            assert engine.n_worker_blocks == wp.n_blocks and len(parts) == len(engine.parts)
            at = 0
            for p in parts:  # contiguous, cut at the local worker grid's boundaries, the same answers in order
                assert p.first_answer == wp.bounds[p.first_block] == at
                assert np.array_equal(p.bounds + at, wp.bounds[p.first_block:p.first_block + p.n_blocks + 1])
                at += p.n_answers
            assert at == local.n_answers
            assert np.array_equal(np.concatenate([p.order for p in parts]), local.worker_order)
            for i, name in enumerate(("worker", "label", "task")):
                got_codes = np.concatenate([p.answers(b)[1 + i] for p in parts for b in range(p.n_blocks)])
                assert np.array_equal(got_codes, getattr(local, name)[local.worker_order]), name
            assert np.array_equal(count, count_want) and np.array_equal(sums, sum_want), partitions
            for got, want in zip(engine.gather(kept), kept_want):
                assert np.array_equal(got, want), partitions
            loo, kept = engine.map_reduce(_leave_one_out, (weights, sums), keep=True, by="worker")  # the partitions reused
            assert np.array_equal(loo, loo_want) and np.array_equal(engine.gather(kept), loo_kept)
            (again, _), none = engine.map_reduce(_cell_sums, weights)  # passes by task still run
            assert none is None and np.array_equal(again, LocalEngine(local).map_reduce(_cell_sums, weights)[0][0])
        finally:
            engine.close()
    with pytest.raises(UsageError, match="by 'task' or 'worker', not 'answer'"):
        engine.map_reduce(_worker_sums, weights, by="answer")


# --------------------------------------------------------------------------- faults (last: it kills a worker)
def test_a_worker_killed_mid_fit_does_not_change_the_result(client, small_files):
    """At iteration 3 (the progress callback, not a timer) a worker process holding partitions is killed: Dask
    rebuilds them from their files (lineage) and the fit goes on to the same bits."""
    from crowdagg.io.dask_read import read_distributed

    if "ds" not in DASK_METHODS:
        pytest.skip("ds does not run on the Dask engine yet")
    want = get_method("ds")(max_iter=6, tol=0).fit(load_annotations(small_files))
    data, engine = read_distributed(small_files, client, partitions=3)
    try:
        holders = {addr for addrs in client.who_has(engine.parts).values() for addr in addrs}
        nannies = {n.worker_address: n for n in client.cluster.workers.values()}
        victim = nannies[sorted(holders)[0]]
        killed = []

        def kill_at_three(iteration: int, objective: float) -> None:
            if iteration == 3 and not killed:
                killed.append(victim.process.pid)
                os.kill(victim.process.pid, signal.SIGKILL)

        got = get_method("ds")(max_iter=6, tol=0).fit(data, engine=engine, callback=kill_at_three)
    finally:
        engine.close()
    assert killed and len(want.objective) == 6
    assert np.array_equal(got.posteriors, want.posteriors) and np.array_equal(got.objective, want.objective)
    assert _render(got) == _render(want)


def test_a_worker_killed_between_passes_by_worker_does_not_change_the_result(client, heavy_files):
    """The worker-ordered partitions, once built, lose a worker process (killed between two passes, no timer): Dask
    rebuilds them (and the task-ordered ones they came from) by lineage, and the pass gives the same bits."""
    from crowdagg.io.dask_read import read_distributed

    local = LocalEngine(load_annotations(heavy_files))
    weights = np.array([0.1, 1e9])
    (_, want), _ = local.map_reduce(_worker_sums, weights, by="worker")
    _, engine = read_distributed(heavy_files, client, partitions=3)
    try:
        (_, first), _ = engine.map_reduce(_worker_sums, weights, by="worker")
        holders = {addr for addrs in client.who_has(engine.worker_parts).values() for addr in addrs}
        nannies = {n.worker_address: n for n in client.cluster.workers.values()}
        os.kill(nannies[sorted(holders)[0]].process.pid, signal.SIGKILL)
        (_, again), _ = engine.map_reduce(_worker_sums, weights, by="worker")
    finally:
        engine.close()
    assert np.array_equal(first, want) and np.array_equal(again, want)


# --------------------------------------------------------------------------- hostile probes
def test_cli_a_scheduler_address_where_another_server_answers_is_a_usage_error(tmp_path):
    """A server that is not a Dask scheduler (its reply read as a message length of exbibytes) and a tls://
    address without a TLS context: exit 2 and the address named, not 'out of memory' or 'unexpected failure'."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def reply() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    threading.Thread(target=reply, daemon=True).start()
    files = _write(_sim_frame(300, 50, 5), tmp_path, 1, "csv")
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        for scheduler in (address, "tls://127.0.0.1:1"):
            got = _cli(files[0], "-m", "mv", "--engine", "dask", "--scheduler", scheduler)
            assert got.exit_code == 2, got.stderr
            assert got.stderr.startswith("Error: ") and repr(scheduler) in got.stderr
            assert "out of memory" not in got.stderr and "unexpected failure" not in got.stderr
    finally:
        server.close()


def test_a_closed_client_or_something_else_is_a_usage_error(client, tmp_path):
    files = _write(_sim_frame(300, 50, 5), tmp_path, 1, "csv")
    # A client of a cluster of its own: closing a second client of the shared scheduler could leave the module's
    # client waiting forever on its next call (seen once in CI, in the test after this one).
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as own:
        closed = distributed.Client(own)
        closed.close()
    for given, what in ((closed, "client is closed, not running"), (client.scheduler.address, "got str"),
                        (object(), "got object")):
        with pytest.raises(UsageError, match=what):
            aggregate(files, "mv", engine="dask", client=given)
    # An engine whose client was closed since: the one-line error at once, no wait (a closed client's futures
    # never finish).
    from crowdagg.engine.dask import DaskEngine
    from crowdagg.errors import ResourceError

    for call in (lambda e: e.map_reduce(_cell_sums, np.ones(3)), lambda e: e.gather([])):
        with pytest.raises(ResourceError, match=r"^lost the Dask scheduler at .* the client is closed$"):
            call(DaskEngine(closed, [], 1))
    DaskEngine(closed, [], 1).close()  # nothing to release: no error


def test_partitions_that_are_not_a_count_or_whole_boundaries_are_refused_before_reading(client, tmp_path):
    """Refused before any file is read (the file given does not exist), worded, not a ValueError or TypeError from
    NumPy; boundaries that are not whole numbers are not truncated."""
    from crowdagg.io.dask_read import read_distributed

    missing = str(tmp_path / "missing.csv")
    for partitions in ("x", "3", 2.5, True, [0, 1.5, 1], ["0", "1"], 0, -1):
        with pytest.raises(UsageError, match="partitions") as refused:
            read_distributed([missing], client, partitions=partitions)
        assert "no such file" not in str(refused.value)
    files = _write(_sim_frame(300, 50, 5), tmp_path, 1, "csv")
    with pytest.raises(UsageError, match=r"to the grid's 1 blocks, got \[0, 2\]$"):
        read_distributed(files, client, partitions=[0, 2])


def test_the_client_views_derived_answer_arrays_refuse_too(client, small_files):
    """worker_order, worker_position and cell are per answer: refused in words (they reached a numba kernel with a
    placeholder: a TypingError); worker_ptr is per worker: the local reader's."""
    from crowdagg.io.dask_read import read_distributed

    data, engine = read_distributed(small_files[:1], client, partitions=1)
    engine.close()
    for name in ("worker_order", "worker_position", "cell"):
        with pytest.raises(UsageError, match="held by the Dask workers"):
            np.asarray(getattr(data, name))
    assert np.array_equal(data.worker_ptr, load_annotations(small_files[:1]).worker_ptr)


@pytest.mark.quick  # the module's one test without a cluster: it checks none is started
def test_cli_what_dask_does_not_read_is_refused_before_a_cluster_starts(monkeypatch, tmp_path):
    """Standard input and a JSON file: exit 2 before a LocalCluster is started (which took seconds)."""
    import crowdagg.engine.dask as dask_engine

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(dask_engine, "connect", no_cluster)
    path = tmp_path / "a.json"
    path.write_text('[{"task": "t", "worker": "w", "label": "x"}]')
    for args, what in ((["-"], "not standard input"), ([str(path)], "reads csv, tsv, parquet")):
        got = _cli(*args, "-m", "mv", "--engine", "dask")
        assert got.exit_code == 2 and what in got.stderr, got.stderr


def test_cli_a_failing_file_on_the_local_cluster_says_one_line(tmp_path):
    """Without --scheduler (the run's own LocalCluster, one worker process): a missing file is one 'Error:' line on
    stderr; the worker's 'Compute Failed' log with its traceback stays out of it."""
    import subprocess
    import sys

    missing = str(tmp_path / "missing.csv")
    done = subprocess.run([sys.executable, "-m", "crowdagg._entry", "aggregate", missing, "-m", "mv", "--engine",
                           "dask", "--threads", "1"], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"Error: {missing}: no such file\n"


def test_relative_paths_are_the_clients_not_the_workers(client, tmp_path, monkeypatch):
    """A relative path is read from the client's working directory (the workers' is another: the file was not found
    there, or another file of that name was read); errors still name the file as given."""
    from crowdagg.io.dask_read import read_distributed

    _write(_sim_frame(3000, 500, 20), tmp_path, 2, "csv")
    monkeypatch.chdir(tmp_path)
    rel = ["part-000.csv", "part-001.csv"]
    data, engine = read_distributed(rel, client, partitions=1)
    try:
        _assert_same_partitions(data, load_annotations(rel), engine, client)
    finally:
        engine.close()
    with open(rel[1], "a") as fh:
        fh.write('t1,w1,"unclosed\n')
    with pytest.raises(DataError) as local:
        load_annotations(rel)
    with pytest.raises(DataError) as remote:
        read_distributed(rel, client)
    assert str(remote.value) == str(local.value) and str(remote.value).startswith("part-001.csv line ")


def _sigint_handler() -> object:
    return signal.getsignal(signal.SIGINT)


def test_the_runs_own_cluster_leaves_ctrl_c_to_the_client():
    """connect()'s worker processes ignore SIGINT: Ctrl-C (sent to the whole process group) stops the run through the
    client, and the workers no longer print KeyboardInterrupt tracebacks of their own."""
    from crowdagg.engine.dask import connect

    with connect(n_workers=1) as own:
        assert list(own.run(_sigint_handler).values()) == [signal.SIG_IGN]


def test_cli_a_scheduler_address_nobody_listens_on_is_refused_after_a_short_timeout(tmp_path, monkeypatch):
    """Nothing listening (the connection refused, retried until the timeout): exit 2 after CONNECT_TIMEOUT, 10 s
    (it was 30; the test waits 1)."""
    import crowdagg.engine.dask as dask_engine

    assert dask_engine.CONNECT_TIMEOUT == 10
    monkeypatch.setattr(dask_engine, "CONNECT_TIMEOUT", 1)
    files = _write(_sim_frame(300, 50, 5), tmp_path, 1, "csv")
    got = _cli(files[0], "-m", "mv", "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1")
    assert got.exit_code == 2 and got.stdout == ""
    assert got.stderr.startswith("Error: cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'")
    assert "after 1 s" in got.stderr and "Traceback" not in got.stderr


def test_the_clients_own_logs_are_off_while_connected_so_a_lost_scheduler_is_said_once(client):
    """A client that loses its scheduler logs ``distributed.client - ERROR - Failed to reconnect to scheduler`` and
    the CancelledError tracebacks of its close on stderr, before the run's own ``Error: lost the Dask scheduler``
    line (seen with ``dask scheduler`` killed under ``aggregate --scheduler``): connect() keeps distributed's loggers
    at CRITICAL while it holds the client, and gives them back their levels after."""
    import logging

    from crowdagg.engine.dask import connect

    class Kept(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.said: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.said.append(record.getMessage())

    names = ("distributed", "distributed.client", "distributed.comm.tcp")  # the last: no level of its own
    before = {name: logging.getLogger(name).level for name in names}
    kept = Kept()
    logging.getLogger("distributed").addHandler(kept)  # distributed.* propagate to it, as to distributed's own
    try:
        with connect(client.scheduler.address) as own:
            assert own.scheduler.address == client.scheduler.address
            for name in names[1:]:
                logging.getLogger(name).error("Failed to reconnect to scheduler after 10.00 seconds, closing client")
        assert kept.said == []
        assert {name: logging.getLogger(name).level for name in names} == before
        logging.getLogger("distributed.client").error("after")  # the handler hears what is not silenced
        assert kept.said == ["after"]
    finally:
        logging.getLogger("distributed").removeHandler(kept)


def test_a_local_cluster_of_more_processes_than_cores_is_refused_before_it_starts() -> None:
    from crowdagg.core import threads
    from crowdagg.engine.dask import connect

    with pytest.raises(UsageError, match="one worker process per core"):
        with connect(None, threads.all_cores() + 1):
            pass


# --------------------------------------------------------------------------- outputs written on the workers
def _local_output(result, fmt: str, proba: bool):
    """The local writer's single file for ``result`` (Parquet: its table), as tests/io/test_parts.py joins parts."""
    import io

    import pyarrow.parquet as pq

    from crowdagg.io.render import render_table

    data = render_table(result.table(proba=proba, arrow=True), fmt)
    return pq.read_table(io.BytesIO(data)) if fmt == "parquet" else data


@pytest.mark.parametrize("n_parts", [1, 2, 7])
def test_parts_written_on_the_workers_join_to_the_local_engines_file(sim_read, sim_fit, tmp_path, n_parts):
    """mv on the simulated crowd read into 1, 2 and 7 partitions: one part per partition, and the parts joined
    (CSV/TSV: one header) are the local engine's file in every format, with and without --proba."""
    from crowdagg.io.parts import write_directory
    from tests.io.test_parts import join_parts, same

    data, engine = sim_read(n_parts)
    got = get_method("mv")().fit(data, engine=engine)
    want = sim_fit("mv")
    for fmt, proba in (("csv", True), ("tsv", False), ("jsonl", True), ("parquet", True), ("csv", False)):
        out = tmp_path / f"{fmt}-{proba}"
        write_directory(got, str(out), fmt=fmt, proba=proba, engine=engine)
        assert len(os.listdir(out)) == n_parts + 1  # the parts and _SUCCESS
        assert same(join_parts(out, fmt), _local_output(want, fmt, proba)), (fmt, proba)


def test_an_empty_partitions_part_is_there_and_empty(client, small_files, tmp_path):
    """Block boundaries [0, 0, 1, 3, 3]: partitions 0 and 3 hold no task; their parts hold a header (CSV), no
    row (Parquet), and the joined parts are still the local file."""
    import pyarrow.parquet as pq

    from crowdagg.io.dask_read import read_distributed
    from crowdagg.io.parts import write_directory
    from tests.io.test_parts import join_parts, same

    want = get_method("mv")().fit(load_annotations(small_files))
    data, engine = read_distributed(small_files, client, partitions=[0, 0, 1, 3, 3])
    try:
        got = get_method("mv")().fit(data, engine=engine)
        for fmt in ("csv", "parquet", "jsonl"):
            out = tmp_path / fmt
            write_directory(got, str(out), fmt=fmt, proba=True, engine=engine)
            assert same(join_parts(out, fmt), _local_output(want, fmt, True)), fmt
        header = (tmp_path / "csv" / "part-00001.csv").read_bytes().split(b"\n", 1)[0] + b"\n"
        assert header.startswith(b"task,label,confidence,n_answers,p_")
        assert (tmp_path / "csv" / "part-00000.csv").read_bytes() == header
        assert (tmp_path / "csv" / "part-00003.csv").read_bytes() == header
        assert (tmp_path / "jsonl" / "part-00003.jsonl").read_bytes() == b""
        empty = pq.read_table(tmp_path / "parquet" / "part-00000.parquet")
        assert empty.num_rows == 0 and empty.schema == pq.read_table(tmp_path / "parquet" / "part-00001.parquet").schema
    finally:
        engine.close()


def test_a_part_failing_on_a_worker_leaves_no_directory_and_says_the_local_writers_error(client, tmp_path):
    """A task name with a tab, first seen in the last rows (the last partition): TSV cannot hold it.  Partitions 0
    and 1 have written their parts when partition 2's fails; the error is the local writer's, and neither the
    directory nor its temporary sibling is left."""
    from crowdagg.io.dask_read import read_distributed
    from crowdagg.io.parts import write_directory

    frame = _sim_frame(200_000, 20_000, 50)
    frame.loc[len(frame) - 1, "task"] = "bad\ttask"
    files = _write(frame, tmp_path / "in", 2)
    local = get_method("mv")().fit(load_annotations(files))
    with pytest.raises(DataError, match="cannot write TSV") as said:
        write_directory(local, str(tmp_path / "local"), fmt="tsv")
    data, engine = read_distributed(files, client, partitions=3)
    try:
        got = get_method("mv")().fit(data, engine=engine)
        with pytest.raises(DataError) as failed:
            write_directory(got, str(tmp_path / "out"), fmt="tsv", engine=engine)
        assert str(failed.value) == str(said.value) and "'bad\\ttask'" in str(failed.value)
        assert sorted(os.listdir(tmp_path)) == ["in"]
        from crowdagg.io.dask_write import fill_on_workers

        with pytest.raises(DataError, match="is not there on Dask worker tcp://.*shared filesystem"):
            fill_on_workers(engine, got, str(tmp_path / "not-made"), "csv", False)
    finally:
        engine.close()


def test_cli_output_directory_on_dask_is_the_local_engines_file(client, small_files, tmp_path):
    """``-o out/ --engine dask``: one CSV part per partition (the cluster's 2), joined the local ``-o`` file's
    bytes; --workers stays one file on the client."""
    from tests.io.test_parts import join_parts

    pattern = str(Path(small_files[0]).parent / "*.parquet")
    local = _cli(pattern, "-m", "ds", "--max-iter", "5", "--proba", "-o", str(tmp_path / "one.csv"),
                 "--workers", str(tmp_path / "w_local.csv"))
    remote = _cli(pattern, "-m", "ds", "--max-iter", "5", "--proba", "-o", f"{tmp_path / 'out'}/",
                  "--workers", str(tmp_path / "w_dask.csv"), "--engine", "dask", "--scheduler",
                  client.scheduler.address)
    assert local.exit_code == 0 and remote.exit_code == 0, remote.stderr
    assert remote.stdout == ""
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS", "part-00000.csv", "part-00001.csv"]
    assert join_parts(tmp_path / "out", "csv") == (tmp_path / "one.csv").read_bytes()
    assert (tmp_path / "w_dask.csv").read_bytes() == (tmp_path / "w_local.csv").read_bytes()
    files = _write(_sim_frame(3000, 500, 20), tmp_path / "bad", 3, "csv")
    with open(files[1], "a") as fh:
        fh.write('t1,w1,cat,"extra\n')
    bad = _cli(*files, "-m", "ds", "--engine", "dask", "--scheduler", client.scheduler.address,
               "-o", f"{tmp_path / 'out'}/")
    assert bad.exit_code == 1 and files[1] in bad.stderr and "Traceback" not in bad.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS", "part-00000.csv", "part-00001.csv"]  # as it was
    assert join_parts(tmp_path / "out", "csv") == (tmp_path / "one.csv").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "one.csv", "out", "w_dask.csv", "w_local.csv"]


def test_an_interrupt_while_the_workers_write_leaves_nothing(client, small_files, tmp_path, monkeypatch):
    """Ctrl-C while the client waits for the parts: the writes already running end first (their waited-for
    futures), then the temporary directory goes; nothing is left beside the output."""
    import crowdagg.engine.dask as dask_engine
    import crowdagg.io.dask_write as dask_write
    from crowdagg.io.dask_read import read_distributed
    from crowdagg.io.parts import write_directory

    real_gather, real_settle_for = dask_engine.gather, dask_write.settle_for
    waits, ended = [], []

    def interrupted(client, futures, what, errors="raise"):
        if errors == "skip" and not waits:  # the wait for every write's outcome
            waits.append(None)
            raise KeyboardInterrupt
        return real_gather(client, futures, what, errors=errors)

    def last_look(client, futures, seconds):
        waits.append(seconds)
        real_settle_for(client, futures, seconds)
        ended.append(all(f.done() for f in futures))

    data, engine = read_distributed(small_files, client, partitions=3)
    try:
        got = get_method("mv")().fit(data, engine=engine)
        monkeypatch.setattr(dask_engine, "gather", interrupted)
        monkeypatch.setattr(dask_write, "settle_for", last_look)
        with pytest.raises(KeyboardInterrupt):
            write_directory(got, str(tmp_path / "out"), engine=engine)
    finally:
        monkeypatch.undo()
        engine.close()
    assert ended == [True]  # the writes running ended before the directory went
    assert waits == [None, 10] and os.listdir(tmp_path) == []


def test_cli_labels_written_by_the_workers_are_not_sized_as_rendered_on_the_client(client, small_files, tmp_path):
    """--max-memory: the labels rendered here (``-o FILE``) need their text's size and are refused before the fit;
    written by the workers (``-o DIR/``), a partition each, they are not counted on the client."""
    pattern = str(Path(small_files[0]).parent / "*.parquet")
    common = ["-m", "mv", "--proba", "--max-memory", "12M", "--engine", "dask", "--scheduler", client.scheduler.address]
    here = _cli(pattern, *common, "-o", str(tmp_path / "one.csv"))
    assert here.exit_code == 1 and "output rows × 3 classes" in here.stderr and not (tmp_path / "one.csv").exists()
    there = _cli(pattern, *common, "-o", f"{tmp_path / 'out'}/")
    assert there.exit_code == 0, there.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS", "part-00000.csv", "part-00001.csv"]

# --------------------------------------------------------------------------- a lost scheduler
#: Seconds within which a lost scheduler must have ended a run whose silence allowance is 2 s: well under the
#: default SCHEDULER_SILENCE (60 s), so a run that waited for the default fails, yet loose enough for a loaded
#: machine (the error text pins the cause: "has not answered for 2 s" or "the connection was lost").
LOSS_SEEN_WITHIN = 45

def _sleep_and_say(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "done"


def test_a_wait_longer_than_the_silence_allowed_ends_with_its_result(client, monkeypatch):
    """SCHEDULER_SILENCE bounds the scheduler's silence, not the work: a 2 s task waited for with 0.5 s of silence
    allowed gives its result (the probes are answered meanwhile)."""
    import crowdagg.engine.dask as dask_engine

    monkeypatch.setattr(dask_engine, "SCHEDULER_SILENCE", 0.5)
    future = client.submit(_sleep_and_say, 2.0, pure=False)
    assert dask_engine.gather(client, [future], "sleeping") == ["done"]


def test_a_scheduler_lost_mid_fit_ends_the_run_with_one_line_not_a_hang(tmp_path):
    """The scheduler of a cluster of its own (a process: not the module's) is killed (SIGKILL: the connection drops)
    or frozen (SIGSTOP: the connection stays, nothing answers) at iteration 3 through the progress callback: the
    library raises ResourceError naming the address, the CLI says one line, exits 1 and writes nothing -- within
    SCHEDULER_SILENCE (2 s in the script) and a margin, not the subprocess's timeout (a hang)."""
    import json
    import subprocess
    import sys

    import crowdagg.engine.dask as dask_engine

    assert dask_engine.SCHEDULER_SILENCE == 60.0  # the documented default; the script waits 2 s
    root = Path(__file__).resolve().parents[2]
    script = Path(__file__).with_name("scheduler_loss.py")
    env = {**os.environ, "PYTHONPATH": str(root)}
    runs = {}
    for sig, via in (("SIGKILL", "cli"), ("SIGSTOP", "api")):  # side by side: ~10 s each, mostly the cluster's start
        (tmp_path / sig).mkdir()
        runs[sig] = subprocess.Popen([sys.executable, str(script), str(tmp_path / sig), sig, via], cwd=root, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)  # a group: a hung run goes with its scheduler
    reports = {}
    for sig, proc in runs.items():
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"the run hung after {sig} (killed after 120 s)")
        assert proc.returncode == 0, err
        reports[sig] = json.loads(out.strip().splitlines()[-1])
    cli = reports["SIGKILL"]
    assert cli["exit_code"] == 1 and cli["stdout"] == "" and not cli["written"]
    # the client sees its connection drop, or (the kill caught a request on its way) the scheduler's silence
    assert cli["stderr"] in (f"Error: lost the Dask scheduler at {cli['address']} while running em_block on the "
                             f"partitions: {why}\n" for why in ("the connection was lost", "it has not answered for 2 s"))
    assert cli["after_signal_s"] < LOSS_SEEN_WITHIN
    api = reports["SIGSTOP"]
    assert api["raised"] == ["ResourceError", f"lost the Dask scheduler at {api['address']} while running em_block "
                             "on the partitions: it has not answered for 2 s"]
    assert 2 <= api["after_signal_s"] < LOSS_SEEN_WITHIN



@pytest.mark.parametrize("stage", ["write", "read"])
def test_a_scheduler_lost_while_the_workers_write_the_parts_ends_the_run(tmp_path, stage):
    """-o DIR/ on Dask: the scheduler killed or frozen just as the workers are to write the parts.  The writer's
    waits (the partitions' task ranges, who holds them, the rows scattered, the writes) go through the engine's
    settle too: one line naming the address and the stage, exit 1, no directory and no hidden temporary directory
    left -- not an "unexpected failure" (SIGKILL) or a wait without an end (SIGSTOP).  ``read``: the same as the
    worker sums up the first file it read (the signal sent from the worker's copy of the hook: no time comes back;
    the run's end within the subprocess's timeout is the check)."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    script = Path(__file__).with_name("scheduler_loss.py")
    env = {**os.environ, "PYTHONPATH": str(root)}
    runs = {}
    for sig in ("SIGKILL", "SIGSTOP"):
        (tmp_path / sig).mkdir()
        runs[sig] = subprocess.Popen([sys.executable, str(script), str(tmp_path / sig), sig, "cli", stage],
                                     cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
    ended = {}
    for sig, proc in runs.items():  # both ended (or killed with their schedulers) before anything is judged
        try:
            ended[sig] = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    for sig, proc in runs.items():
        if sig not in ended:
            pytest.fail(f"the run hung after {sig} while the parts were written (killed after 120 s)")
        out, err = ended[sig]
        assert proc.returncode == 0, err
        got = json.loads(out.strip().splitlines()[-1])
        # SIGKILL: the connection drops, or (the kill caught a request on its way) the scheduler is silent
        whys = ("the connection was lost", "it has not answered for 2 s")[sig == "SIGSTOP":]
        assert got["exit_code"] == 1 and got["stdout"] == "", got
        doing = {"write": "writing the parts", "read": "reading the files"}[stage]
        assert got["stderr"] in (f"Error: lost the Dask scheduler at {got['address']} while {doing}: {why}\n"
                                 for why in whys), got["stderr"]
        assert not got["written"] and got["left"] == []
        assert got["after_signal_s"] < LOSS_SEEN_WITHIN if stage == "write" else got["after_signal_s"] is None


_BLOCK_STARTED, _BLOCK_RELEASED = threading.Event(), threading.Event()


def _held(part, b: int, params, keep: bool):
    """A block that says it started and waits to be let go (a worker thread of this process)."""
    _BLOCK_STARTED.set()
    _BLOCK_RELEASED.wait(60)
    return (np.zeros(1),), None


def test_a_client_closed_by_another_thread_mid_pass_names_the_scheduler(tmp_path):
    """Another thread closes the client while a pass waits (the block known running: an event, not a timer): the
    wait ends at once with the engine's error, naming the scheduler's address (a closed client forgets its own)."""
    from crowdagg.errors import ResourceError
    from crowdagg.io.dask_read import read_distributed

    files = _write(_sim_frame(300, 50, 5), tmp_path, 1, "csv")
    _BLOCK_STARTED.clear()
    _BLOCK_RELEASED.clear()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as own:
        own_client = distributed.Client(own)
        address = own_client.scheduler.address
        _, engine = read_distributed(files, own_client, partitions=1)

        def close_when_running() -> None:
            if _BLOCK_STARTED.wait(60):
                own_client.close()

        closer = threading.Thread(target=close_when_running)
        closer.start()
        try:
            with pytest.raises(ResourceError) as caught:
                engine.map_reduce(_held, None, by="worker")
        finally:
            _BLOCK_RELEASED.set()
            closer.join()
            own_client.close()
    said = str(caught.value)
    assert said in (f"lost the Dask scheduler at {address} while running _held on the partitions: the client is {s}"
                    for s in ("closing", "closed")), said


def test_cli_a_scheduler_that_accepts_and_never_answers_is_a_usage_error_not_a_hang(tmp_path, monkeypatch):
    """A frozen scheduler (SIGSTOP before the run: the kernel still accepts the connection, nothing answers) --
    here a socket that accepts and says nothing: distributed.Client's own timeout never ended that handshake; the
    connection is given 2 x CONNECT_TIMEOUT, then exit 2 naming the address, nothing written."""
    import socket
    import time

    import crowdagg.engine.dask as dask_engine

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held = []

    def hold() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=hold, daemon=True).start()
    monkeypatch.setattr(dask_engine, "CONNECT_TIMEOUT", 1)
    files = _write(_sim_frame(300, 50, 5), tmp_path, 1, "csv")
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    out = tmp_path / "out.csv"
    began = time.monotonic()
    ran: list = []
    try:  # in a daemon thread: were the bug back, a failed test, not a hung suite
        runner = threading.Thread(target=lambda: ran.append(_cli(files[0], "-m", "mv", "--engine", "dask",
                                                                  "--scheduler", address, "-o", str(out))),
                                  daemon=True)
        runner.start()
        runner.join(60)
        assert ran, "the run still waited on the silent scheduler after 60 s"
        got = ran[0]
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert got.exit_code == 2 and got.stdout == "" and not out.exists()
    assert got.stderr == (f"Error: cannot reach the Dask scheduler at {address!r}: it accepted the connection but "
                          "did not answer in 2 s\n")
    assert time.monotonic() - began < 30


def test_a_directory_written_with_another_datas_engine_is_refused(client, small_files, tmp_path):
    """write_directory(result, ..., engine=e) slices the result's rows by e's partitions: an engine holding other
    data (here: a result of another data set) would write other tasks' names beside these labels."""
    from crowdagg.errors import UsageError
    from crowdagg.io.dask_read import read_distributed
    from crowdagg.io.parts import write_directory

    other = get_method("mv")().fit(load_annotations("example:bluebird"))
    data, engine = read_distributed(small_files, client, partitions=2)
    try:
        with pytest.raises(UsageError, match="its partitions hold .* tasks, not the 108 of the result"):
            write_directory(other, tmp_path / "out", engine=engine)
        assert os.listdir(tmp_path) == []
    finally:
        engine.close()


# --------------------------------------------------------------------------- the scheduler's probe (issue 29)
def _one_reply_server(reply: bytes):
    """A TCP server on 127.0.0.1 that sends ``reply`` to each connection and closes it; (address, close)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{server.getsockname()[1]}", server.close


@pytest.mark.parametrize(("reply", "why"), [
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
     r"its first 8 bytes announce a 3,543,824,036,068,086,856-byte message, not Dask's handshake"),
    (b"", r"it closed the connection without a word"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00" + b"x" * 16, r"its first message is not Dask's handshake"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00" + b"x" * 3, r"it closed the connection without Dask's handshake"),
])
def test_a_peer_that_is_not_a_scheduler_is_refused_before_its_answer_is_read(reply, why):
    """distributed.Client read an HTTP server's first 8 bytes as a message length and asked numpy for 3.07 EiB
    (MemoryError) before its error: the probe reads at most HANDSHAKE_MAX bytes and names what it saw."""
    import time

    from crowdagg.engine.dask import NotAScheduler, probe_scheduler

    address, close = _one_reply_server(reply)
    began = time.monotonic()
    try:
        with pytest.raises(NotAScheduler, match=f"^{why}$"):
            probe_scheduler(address, 2)
    finally:
        close()
    assert time.monotonic() - began < 10


def test_a_real_scheduler_passes_the_probe_and_garbage_is_one_error_line(client, tmp_path):
    from crowdagg.engine.dask import probe_scheduler

    probe_scheduler(client.scheduler.address, 5)  # (a tcp:// scheduler: its handshake read and let through)
    address, close = _one_reply_server(b"SSH-2.0-OpenSSH_9.6\r\n")
    files = _write(_sim_frame(300, 50, 5), tmp_path, 1, "csv")
    try:
        got = _cli(files[0], "-m", "mv", "--engine", "dask", "--scheduler", address)
    finally:
        close()
    assert got.exit_code == 2 and got.stdout == ""
    assert got.stderr == (f"Error: no Dask scheduler answered at {address!r} (its first 8 bytes announce a "
                          "3,256,153,323,631,825,747-byte message, not Dask's handshake): give the address a Dask "
                          "scheduler prints (tcp://host:8786)\n")


def test_the_readers_warnings_name_the_cli_options_on_either_engine(client, tmp_path):
    """The workers' warnings reached the client as text already worded for the library ('set blank_labels to
    error', "set rejected to 'keep'") where the local engine's CLI says --blank-labels, --rejected: the workers
    send the templates, and the CLI words them as it words every message."""
    from tests.io.test_platforms import MTURK_RADIO_ROWS, _mturk_radio_csv

    blank = tmp_path / "blank.csv"
    blank.write_text("task,worker,label\nt1,w1,a\nt2,w1,\nt1,w2,a\nt2,w2,b\n")
    batch = tmp_path / "Batch_5012345_batch_results.csv"
    batch.write_text(_mturk_radio_csv(MTURK_RADIO_ROWS), newline="")
    for path, flag in ((blank, "--blank-labels to error"), (batch, "--rejected to 'keep'")):
        local = _cli(str(path), "-m", "mv")
        remote = _cli(str(path), "-m", "mv", "--engine", "dask", "--scheduler", client.scheduler.address)
        assert local.exit_code == remote.exit_code == 0, remote.stderr
        said = [ln for ln in remote.stderr.splitlines() if ln.startswith("Warning:") and flag in ln]
        assert said and all(ln in local.stderr.splitlines() for ln in said), (local.stderr, remote.stderr)
        assert "set blank_labels" not in remote.stderr and "set rejected" not in remote.stderr
    with pytest.warns(Warning, match="set blank_labels to error"):  # the library keeps its keywords
        aggregate([str(blank)], "mv", engine="dask", client=client)


def test_a_server_past_the_probe_failing_the_client_is_one_error_line(tmp_path):
    """A peer that sends Dask's handshake (so the probe lets it through) and then a huge length to the client's
    request: the error was followed at exit by distributed's 'Closing dangling stream' warning on stderr (the
    error's context held the failed client's comm until after the logs were loud again)."""
    import asyncio
    import pickle
    import struct
    import subprocess
    import sys

    from distributed.comm.utils import to_frames

    frames = asyncio.run(to_frames({"compression": None, "python": (3, 12, 0),
                                    "pickle-protocol": pickle.HIGHEST_PROTOCOL}))
    body = [bytes(f) for f in frames]
    payload = struct.pack(f"<{len(body) + 1}Q", len(body), *map(len, body)) + b"".join(body)
    address, close = _one_reply_server(struct.pack("<Q", len(payload)) + payload + struct.pack("<Q", 1 << 62))
    answers = tmp_path / "answers.csv"
    answers.write_text("task,worker,label\na,w1,x\na,w2,y\nb,w1,x\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    try:
        got = subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", str(answers), "--engine", "dask",
                              "--scheduler", address], capture_output=True, text=True, env=env, timeout=120)
    finally:
        close()
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr.startswith(f"Error: no Dask scheduler answered at {address!r} (")
    assert got.stderr.count("\n") == 1, got.stderr


@pytest.mark.parametrize(("address", "why"), [
    ("tcp://127.0.0.1:0", r"port 0 is not a TCP port \(1 to 65535\)"),
    ("tcp://127.0.0.1:99999", r"port 99999 is not a TCP port \(1 to 65535\)"),
    ("inproc://x", r"an inproc:// address names a scheduler inside another process"),
    ("inproc://127.0.0.1/1/1", r"an inproc:// address names a scheduler inside another process"),
])
def test_a_scheduler_address_no_connection_can_reach_is_refused_at_once(address, why):
    """Ports 0 and 99999 were retried as a refused connection for the whole timeout (10 s); an inproc:// address
    of no scheduler here failed in the client with 'not enough values to unpack (expected 3, got 1)'."""
    from crowdagg.engine.dask import probe_scheduler

    with pytest.raises(ValueError, match=f"^{why}"):  # (before any retry: those end in OSError)
        probe_scheduler(address, 30)
