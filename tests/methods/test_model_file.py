"""Saved worker models: exact round trip, the warm-start rule (saved counts as pseudo-counts), strict reading."""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg import aggregate, load_annotations
from crowdagg.cli import app
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import CrowdaggWarning, DataError, ResourceError, UsageError
from crowdagg.kernels.em import EMParams, em_block
from crowdagg.methods.api import get_method
from crowdagg.methods.base import Aggregator, full_m_step, make_result
from crowdagg.methods.blocks import soft_majority_vote
from crowdagg.methods.glad.glad import Glad, GladForm
from crowdagg.methods.model_file import (
    VERSION,
    Field,
    SavedForm,
    WarmStart,
    coerce,
    form_of,
    from_document,
    from_json,
    saving_methods,
    task_hashes,
    to_json,
)
from crowdagg.methods.registry import METHODS, Method

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    """benchmarks/bench_warm_start.py: the split, the old rule and the comparison the README's table comes from."""
    spec = importlib.util.spec_from_file_location("bench_warm_start", ROOT / "benchmarks" / "bench_warm_start.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bluebird() -> AnnotationSet:
    return load_annotations("example:bluebird")


@pytest.fixture(scope="module")
def batches(bluebird):
    """Bluebird's tasks sorted as strings, in two halves."""
    return _bench().halves(bluebird)


def quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        return aggregate(*args, **kwargs)


# ----------------------------------------------------------------------------- the file
@pytest.mark.parametrize("method", ["ds", "onecoin"])
def test_round_trip_is_exact_and_the_file_records_the_counts(bluebird, method):
    fit = quiet_fit(bluebird, method, tol=1e-10)
    doc = json.loads(to_json(fit))
    assert doc["version"] == VERSION == 2 and doc["method"] == method and doc["smoothing"] == fit.counts["smoothing"]
    model = from_json(to_json(fit))
    assert model["workers"] == bluebird.workers.tolist() and model["classes"] == list(bluebird.classes)
    np.testing.assert_array_equal(model["prior"], fit.prior)
    np.testing.assert_array_equal(model["class_counts"], fit.counts["class_counts"])
    if method == "ds":
        np.testing.assert_array_equal(model["confusion"], fit.confusion)
        np.testing.assert_array_equal(model["counts"], fit.counts["counts"])
        # Every answer is counted once: a worker's counts add up to its answers.
        np.testing.assert_allclose(model["counts"].sum(axis=(1, 2)), bluebird.answers_per_worker, rtol=1e-12)
    else:
        np.testing.assert_array_equal(model["accuracy"], fit.worker_params["accuracy"])
        np.testing.assert_allclose(model["answers"], bluebird.answers_per_worker, rtol=1e-12)
        assert (model["correct"] <= model["answers"]).all() and model["correct"].sum() > 0.5 * bluebird.n_answers
    np.testing.assert_allclose(model["class_counts"].sum(), bluebird.n_tasks, rtol=1e-12)
    np.testing.assert_array_equal(model["task_hashes"], task_hashes(bluebird.task_names))
    assert doc["n_tasks"] == bluebird.n_tasks == len(base64.b64decode(doc["task_hashes"])) // 8


def test_the_counts_are_the_statistics_the_saved_parameters_come_from(bluebird):
    """prior and confusion are the M-step of the saved counts: the file has one reading."""
    fit = quiet_fit(bluebird, "ds", max_iter=3, tol=0)  # far from converged: the two E-steps differ
    prior, conf_ot = full_m_step(fit.counts["counts"].transpose(0, 2, 1), fit.counts["class_counts"], 0.0)
    np.testing.assert_array_equal(prior, fit.prior)
    np.testing.assert_array_equal(conf_ot.transpose(0, 2, 1), fit.confusion)


# ----------------------------------------------------------------------------- the warm-start rule
def test_a_warm_start_adds_the_saved_counts_in_every_m_step_from_the_new_batchs_vote(batches):
    """One iteration by hand: soft MV of batch 2, its expected counts plus batch 1's, M-step, E-step, twice."""
    one, two = batches
    model = from_json(to_json(quiet_fit(one, "ds")))
    warm = quiet_fit(two, "ds", init_workers=model, max_iter=1, tol=0)
    row = {w: i for i, w in enumerate(model["workers"])}
    pseudo = np.zeros((two.n_workers, 2, 2))
    for j, w in enumerate(two.worker_names):
        pseudo[j] = model["counts"][row[w]].T  # (bluebird: every worker labels every task)
    engine = LocalEngine(two)
    (counts, tot, _), _ = engine.map_reduce(em_block, EMParams(post=soft_majority_vote(two)))
    for _ in range(2):  # the start, then max_iter=1 iteration
        prior, conf_ot = full_m_step(counts + pseudo, tot + model["class_counts"], 0.0)
        (counts, tot, _), outs = engine.map_reduce(em_block, EMParams(np.log(prior), np.log(conf_ot)), keep=True)
    np.testing.assert_allclose(warm.posteriors, engine.gather(outs), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(warm.prior, prior, rtol=1e-12)
    cold = quiet_fit(two, "ds", max_iter=1, tol=0)
    assert np.abs(warm.posteriors - cold.posteriors).max() > 1e-3  # the model was used


@pytest.mark.parametrize("method", ["ds", "onecoin"])
def test_a_model_without_evidence_changes_nothing(batches, method):
    """Zero counts add nothing: the warm fit is the cold fit, bit for bit."""
    one, two = batches
    doc = json.loads(to_json(quiet_fit(one, method)))
    k, n = len(doc["classes"]), len(doc["workers"])
    doc["class_counts"], doc["prior"] = [0.0] * k, [1.0 / k] * k
    if method == "ds":
        doc["counts"], doc["confusion"] = np.zeros((n, k, k)).tolist(), np.full((n, k, k), 1.0 / k).tolist()
    else:
        doc["smoothing"] = 1.0
        doc["correct"], doc["answers"], doc["accuracy"] = [0.0] * n, [0.0] * n, [1.0 / k] * n
    cold, warm = quiet_fit(two, method), quiet_fit(two, method, init_workers=doc)
    np.testing.assert_array_equal(warm.posteriors, cold.posteriors)


def test_workers_absent_from_the_model_get_no_pseudo_counts(bluebird):
    doc = json.loads(to_json(quiet_fit(bluebird, "ds")))
    keep = 10  # the model knows the first 10 workers only
    for key in ("workers", "counts", "confusion"):
        doc[key] = doc[key][:keep]
    model = from_document(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)  # (the same tasks)
        warm = WarmStart(model, bluebird, "ds")
    assert warm.known.sum() == keep and not warm.counts_ot[~warm.known].any()
    for j in np.flatnonzero(warm.known):
        np.testing.assert_array_equal(warm.counts_ot[j], model["counts"][model["workers"].index(bluebird.workers[j])].T)
    np.testing.assert_array_equal(warm.class_counts, model["class_counts"])


def test_batch_one_then_batch_two_saves_the_evidence_of_both(bluebird):
    """The warm fit's model: batch 1's counts plus batch 2's, every worker of both, every task hash of both."""
    classes = np.asarray(bluebird.classes, dtype=object)

    def part(rows):
        return AnnotationSet.from_names(bluebird.task_names[bluebird.task[rows]],
                                        bluebird.worker_names[bluebird.worker[rows]], classes[bluebird.label[rows]])

    first = bluebird.task < bluebird.n_tasks // 2  # per answer
    one = part(first & (bluebird.worker < 30))  # workers 30.. answer in batch 2 only
    two = part(~first)
    # Batch 2 without one of batch 1's workers: that worker must be carried over.
    gone = one.worker_names[0]
    drop = two.worker_names[two.worker] != gone
    two = AnnotationSet.from_names(two.task_names[two.task[drop]], two.worker_names[two.worker[drop]],
                                   np.asarray(two.classes, dtype=object)[two.label[drop]])
    m1 = from_json(to_json(quiet_fit(one, "ds")))
    fit2 = quiet_fit(two, "ds", init_workers=m1)
    m2 = from_json(to_json(fit2))
    assert set(m2["workers"]) == set(m1["workers"]) | set(two.worker_names)
    assert m2["workers"][-1] == gone  # carried over, after the data's workers
    np.testing.assert_array_equal(m2["counts"][-1], m1["counts"][0])
    np.testing.assert_allclose(m2["class_counts"].sum(), one.n_tasks + two.n_tasks, rtol=1e-12)
    total = {w: m2["counts"][i].sum() for i, w in enumerate(m2["workers"])}
    for w in two.worker_names:  # each worker's counts: its answers in both batches
        n1 = m1["counts"][m1["workers"].index(w)].sum() if w in m1["workers"] else 0.0
        n2 = two.answers_per_worker[two.workers.index(w)]
        np.testing.assert_allclose(total[w], n1 + n2, rtol=1e-12)
    np.testing.assert_array_equal(m2["task_hashes"], np.union1d(m1["task_hashes"], task_hashes(two.task_names)))
    assert len(m2["task_hashes"]) == bluebird.n_tasks


def test_a_warm_start_on_tasks_the_model_has_seen_warns_with_their_number(bluebird, batches):
    one, two = batches
    model = from_json(to_json(quiet_fit(one, "ds")))
    with pytest.warns(CrowdaggWarning, match=r"54 of the 108 tasks were already in the fit that saved"):
        aggregate(bluebird, "ds", init_workers=model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CrowdaggWarning)
        aggregate(two, "ds", init_workers=model)  # new tasks: no word


@pytest.mark.parametrize(("saved", "fitted"), [("onecoin", "ds"), ("ds", "onecoin")])
def test_a_model_of_one_method_starts_the_other(batches, saved, fitted):
    one, two = batches
    model = from_json(to_json(quiet_fit(one, saved)))
    warm = WarmStart(model, two, fitted)
    assert warm.known.all()
    if saved == "onecoin":  # correct answers on the diagonal, every answer somewhere
        np.testing.assert_allclose(np.trace(warm.counts_ot, axis1=1, axis2=2), model["correct"], rtol=1e-12)
        np.testing.assert_allclose(warm.counts_ot.sum(axis=(1, 2)), model["answers"], rtol=1e-12)
        share = model["class_counts"] / model["class_counts"].sum()  # true classes as the model's class counts
        np.testing.assert_allclose(warm.counts_ot.sum(axis=1), model["answers"][:, None] * share, rtol=1e-12)
    else:
        np.testing.assert_allclose(np.trace(warm.counts_ot, axis1=1, axis2=2),
                                   np.trace(model["counts"], axis1=1, axis2=2), rtol=1e-12)
        np.testing.assert_allclose(warm.counts_ot.sum(axis=(1, 2)), model["counts"].sum(axis=(1, 2)), rtol=1e-12)
    fit = quiet_fit(two, fitted, init_workers=model)
    assert fit.method == fitted and len(from_json(to_json(fit))["workers"]) == len(model["workers"])


def test_a_class_of_the_model_the_data_lacks_is_left_out_with_a_warning(bluebird):
    doc = json.loads(to_json(quiet_fit(bluebird, "onecoin")))
    doc["classes"].append("2")
    doc["class_counts"].append(0.0)
    prior = np.maximum(np.array(doc["class_counts"]) + doc["smoothing"], 1e-10)
    doc["prior"] = (prior / prior.sum()).tolist()
    corr, ans = np.array(doc["correct"]), np.array(doc["answers"])
    doc["accuracy"] = np.clip((corr + doc["smoothing"] / 3) / (ans + doc["smoothing"]), 1e-10, 1 - 1e-10).tolist()
    with pytest.warns(CrowdaggWarning, match=r"class\(es\) '2' are not among the data's classes"):
        WarmStart(from_document(doc), bluebird, "onecoin")
    doc["classes"] = ["0", "x", "2"]
    with pytest.raises(DataError, match="the worker model has no class '1'"):
        WarmStart(from_document(doc), bluebird, "onecoin")


@pytest.mark.parametrize(("name", "agree", "accuracy"), [("web", 0.93, 0.82), ("music", 0.90, 0.65)])
def test_warm_start_on_a_split_real_dataset_approaches_the_joint_fit(datasets_dir, name, agree, accuracy):
    """Tasks sorted as strings, two halves: ds on batch 2 warm from batch 1's model vs the joint fit.

    Measured (benchmarks/bench_warm_start.py): web warm .941 agreement, .834 accuracy (cold .909, .863; the
    old hard start .867, .787; joint .848); music .929, .680 (cold .789, .600; old .320, .197; joint .689).
    The old rule (the saved probabilities as a hard start) fails both bars.
    """
    r = _bench().compare(name, "ds", datasets_dir)
    assert r["warm agrees with joint"] >= agree and r["warm accuracy"] >= accuracy
    assert r["warm agrees with joint"] > r["cold agrees with joint"]
    assert r["old warm agrees with joint"] < agree and r["old warm accuracy"] < accuracy


def test_the_library_takes_a_model_in_any_form(batches, tmp_path):
    one, two = batches
    fit = quiet_fit(one, "ds")
    text = to_json(fit)
    (tmp_path / "m.json").write_bytes(text)
    want = aggregate(two, "ds", init_workers=from_json(text)).posteriors
    for given in (str(tmp_path / "m.json"), tmp_path / "m.json", text, text.decode(), json.loads(text), fit):
        np.testing.assert_array_equal(aggregate(two, "ds", init_workers=given).posteriors, want)
    with pytest.raises(UsageError, match="init_workers must be a saved worker model"):
        aggregate(two, "ds", init_workers=3.5)


def test_cli_save_and_init_workers(tmp_path):
    runner = CliRunner()
    m = tmp_path / "m.json"
    r = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "--save-workers", str(m)])
    assert r.exit_code == 0 and json.loads(m.read_text())["version"] == 2
    assert from_json(m.read_bytes())["counts"].sum() == pytest.approx(4212)  # bluebird's answers
    r2 = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "--init-workers", str(m)])
    assert r2.exit_code == 0 and r2.stdout.count("\n") == 109
    assert f"Warning: 108 of the 108 tasks were already in the fit that saved {m}" in r2.stderr
    r4 = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "-o", str(m), "--save-workers", str(m)])
    assert r4.exit_code == 2 and "same file" in r4.stderr


def test_cli_inputs_are_never_overwritten_and_stdin_is_read_once(tmp_path):
    runner = CliRunner()
    truth = tmp_path / "truth.csv"
    truth.write_text("task,label\n11573,1\n")
    r = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "--truth", str(truth),
                            "--save-workers", str(truth)])
    assert r.exit_code == 2 and "is also an input (--truth" in r.stderr
    assert truth.read_text() == "task,label\n11573,1\n"
    r2 = runner.invoke(app, ["aggregate", "-", "-m", "ds", "--init-workers", "-"], input="x")
    assert r2.exit_code == 2 and "standard input" in r2.stderr


def test_a_worker_name_that_is_not_text_is_an_error_naming_the_file(bluebird):
    doc = json.loads(to_json(quiet_fit(bluebird, "onecoin")))
    doc["workers"][0] = "\ud800"  # valid JSON (an escaped lone surrogate), not valid text
    with pytest.raises(DataError, match=r"model\.json: workers\[0\] '\\ud800' is not valid text"):
        from_json(json.dumps(doc), "model.json")


# ----------------------------------------------------------------------------- other methods
@pytest.mark.parametrize("method", ["mv", "wmv", "wawa"])
def test_methods_without_counts_refuse_a_warm_start(bluebird, method, tmp_path):
    model = to_json(quiet_fit(bluebird, "ds"))
    with pytest.raises(UsageError, match=rf"method '{method}' cannot start from a saved worker model "
                                         r"\(init_workers\).*methods that do: ds, onecoin"):
        aggregate(bluebird, method, init_workers=model)
    (tmp_path / "m.json").write_bytes(model)
    r = CliRunner().invoke(app, ["aggregate", "example:bluebird", "-m", method, "--init-workers",
                                 str(tmp_path / "m.json")])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"Error: --init-workers does not apply to method {method!r} "
                                "(it learns no reusable worker model)")
    with pytest.raises(UsageError, match="learns no reusable worker model"):
        to_json(aggregate(bluebird, method))


# ----------------------------------------------------------------------------- reading strictly
def _good(method: str) -> dict:
    """A small valid model document: 3 workers, 2 classes."""
    fit = quiet_fit(load_annotations("example:bluebird"), method)
    doc = json.loads(to_json(fit))
    n = 3
    doc["workers"] = doc["workers"][:n]
    for key in ("counts", "confusion", "correct", "answers", "accuracy"):
        if key in doc:
            doc[key] = doc[key][:n]
    return doc


_KINDS = {  # a bad value where a number belongs, and how the error shows it
    "string": ("0.5", '"0.5" (a string)'),
    "boolean": (True, "true (a boolean)"),
    "null": (None, "null"),
    "list": ([0.5], "a list"),
    "object": ({"p": 0.5}, "an object"),
}
_NUMERIC = {"ds": {"smoothing": (), "class_counts": (1,), "prior": (1,), "counts": (2, 0, 1), "confusion": (2, 1, 0)},
            "onecoin": {"smoothing": (), "class_counts": (0,), "prior": (0,), "correct": (1,), "answers": (2,),
                        "accuracy": (1,)}}


def _set(doc: dict, key: str, index: tuple, value) -> dict:
    doc = copy.deepcopy(doc)
    if not index:
        doc[key] = value
        return doc
    target = doc[key]
    for i in index[:-1]:
        target = target[i]
    target[index[-1]] = value
    return doc


def _cases():
    for method, fields in _NUMERIC.items():
        for key, index in fields.items():
            path = key + "".join(f"[{i}]" for i in index)
            for kind, (value, shown) in _KINDS.items():
                yield pytest.param(method, key, index, value, f"{path} is {shown}, not a number",
                                   id=f"{method}-{key}-{kind}")
            for literal in ("NaN", "Infinity", "-Infinity"):
                yield pytest.param(method, key, index, literal, f"{path} is {literal} (which JSON does not allow), "
                                   "not a number", id=f"{method}-{key}-{literal}")
            yield pytest.param(method, key, index, "1e400", f"{path} is too large to be a number",
                               id=f"{method}-{key}-1e400")
            yield pytest.param(method, key, index, int("9" * 400), f"{path} is too large to be a number",
                               id=f"{method}-{key}-bigint")
            if key != "smoothing":  # counts below 0, probabilities outside [0, 1]
                want = "not a probability" if key in ("prior", "confusion", "accuracy") else "not a count (>= 0)"
                yield pytest.param(method, key, index, -0.25, f"{path} is -0.25, {want}", id=f"{method}-{key}-negative")
            else:
                yield pytest.param(method, key, index, -0.25, '"smoothing" is -0.25', id=f"{method}-{key}-negative")


@pytest.mark.parametrize(("method", "key", "index", "value", "message"), list(_cases()))
def test_every_numeric_field_refuses_every_kind_of_bad_value(method, key, index, value, message):
    doc = _good(method)
    if value in ("NaN", "Infinity", "-Infinity", "1e400"):  # what json.dumps would not write: put it in the text
        text = json.dumps(_set(doc, key, index, "@@")).replace('"@@"', value)
    else:
        text = json.dumps(_set(doc, key, index, value))
    with pytest.raises(DataError) as err:
        from_json(text, "crowd.json")
    assert str(err.value) == f"crowd.json: {message}" or str(err.value).startswith(f"crowd.json: {message}")


def _shape_cases():
    for method in ("ds", "onecoin"):
        per_worker = ("counts", "confusion") if method == "ds" else ("correct", "answers", "accuracy")
        for key in ("class_counts", "prior", *per_worker):
            yield pytest.param(method, key, lambda v: v[:-1], "entries, not", id=f"{method}-{key}-short")
            yield pytest.param(method, key, lambda v: 0.5, "is 0.5, not a list", id=f"{method}-{key}-scalar")
        if method == "ds":
            for key in per_worker:
                yield pytest.param(method, key, lambda v: [v[0], v[1], v[2][0]], rf"{key}\[2\]\[0\] is [-0-9.e]+, "
                                   "not a list", id=f"{method}-{key}-flat-row")
                yield pytest.param(method, key, lambda v: [v[0], v[1], [v[2][0]]], rf"{key}\[2\] has 1 entries, not "
                                   r"2 \(one per true class\)", id=f"{method}-{key}-missing-row")
                yield pytest.param(method, key, lambda v: [v[0], v[1], [v[2][0], v[2][1][:1]]],
                                   rf"{key}\[2\]\[1\] has 1 entries, not 2 \(one per observed class\)",
                                   id=f"{method}-{key}-short-row")


@pytest.mark.parametrize(("method", "key", "change", "message"), list(_shape_cases()))
def test_wrong_nesting_and_shapes_name_the_field(method, key, change, message):
    doc = _good(method)
    doc[key] = change(doc[key])
    with pytest.raises(DataError, match=rf"^crowd\.json: .*{message}"):
        from_json(json.dumps(doc), "crowd.json")


def _rescale(doc, key, factor):
    doc = copy.deepcopy(doc)
    doc[key] = (np.array(doc[key]) * factor).tolist()
    return doc


@pytest.mark.parametrize(
    ("method", "change", "message"),
    [
        ("ds", lambda d: {**d, "classes": ["0", "0"]}, r'"classes" lists "0" twice'),
        ("ds", lambda d: {**d, "workers": [d["workers"][0]] * 3}, r'"workers" lists "\w+" twice'),
        ("ds", lambda d: {**d, "classes": ["0", 1]}, r'classes\[1\] is 1, not a name \(a string\)'),
        ("ds", lambda d: {**d, "workers": [d["workers"][0], True, "x"]}, r"workers\[1\] is true \(a boolean\)"),
        ("ds", lambda d: {**d, "classes": ["0", " "]}, r"classes\[1\] is blank"),
        ("ds", lambda d: {**d, "classes": ["0", " 1"]}, r'classes\[1\] " 1" has surrounding whitespace'),
        ("ds", lambda d: {**d, "workers": "w1"}, r'"workers" is "w1" \(a string\), not a list of names'),
        ("ds", lambda d: {**d, "classes": []}, r'"classes" is empty'),
        ("ds", lambda d: {**d, "confusions": d["confusion"]}, r'unknown field "confusions" in a ds worker model'),
        ("ds", lambda d: {**d, "accuracy": [0.5] * 3}, r'unknown field "accuracy" in a ds worker model'),
        ("onecoin", lambda d: {**d, "counts": []}, r'unknown field "counts" in a onecoin worker model'),
        ("ds", lambda d: {k: v for k, v in d.items() if k != "counts"}, r'the ds worker model lacks "counts"'),
        ("onecoin", lambda d: {k: v for k, v in d.items() if k not in ("answers", "n_tasks")},
         r'the onecoin worker model lacks "n_tasks", "answers"'),
        ("ds", lambda d: {**d, "method": "mv"}, r'"method" is "mv"; a worker model is one of ds, onecoin'),
        ("ds", lambda d: {**d, "method": None}, r'"method" is null; a worker model is one of ds, onecoin'),
        ("ds", lambda d: {**d, "version": 1}, r"a version 1 worker model holds probabilities only.*save it"),
        ("ds", lambda d: {**d, "version": True}, r"worker model version true \(a boolean\); this crowdagg reads "
                                                 r"version 2"),
        ("ds", lambda d: {**d, "version": "2"}, r'version "2" \(a string\)'),
        ("ds", lambda d: {**d, "format": "x"}, "not a crowdagg worker model"),
        ("ds", lambda d: _rescale(d, "prior", 0.5), r"prior sums to 0\.5, not 1 \(within 1e-06\)"),
        ("ds", lambda d: _set(d, "confusion", (1, 0), [0.7, 0.7]), r"confusion\[1\]\[0\] sums to 1\.4, not 1"),
        ("ds", lambda d: _set(d, "confusion", (1, 0), [1.0, 0.0]) if d["confusion"][1][0][0] < 0.9 else
         _set(d, "confusion", (1, 0), [0.5, 0.5]), r'confusion\[1\]\[0\]\[0\] is .* but "counts" give .* save the '
                                                   "model again rather than editing it"),
        ("ds", lambda d: _set(d, "class_counts", (0,), d["class_counts"][0] + 10), r'prior\[0\] is .* but '
                                                                                   '"class_counts" give'),
        ("onecoin", lambda d: _set(d, "accuracy", (2,), 0.5), r'accuracy\[2\] is 0\.5 but "correct" and "answers" '
                                                              "give"),
        ("onecoin", lambda d: _set(d, "correct", (0,), d["answers"][0] + 5), r"correct\[0\] is .*, more than "
                                                                              r"answers\[0\]"),
        ("ds", lambda d: {**d, "n_tasks": -1}, r'"n_tasks" is -1, not a count of tasks'),
        ("ds", lambda d: {**d, "n_tasks": 2.0}, r'"n_tasks" is 2\.0, not a count of tasks'),
        ("ds", lambda d: {**d, "task_hashes": "!!"}, r'"task_hashes" is not base64 text'),
        ("ds", lambda d: {**d, "task_hashes": 5}, r'"task_hashes" is 5, not base64 text'),
        ("ds", lambda d: {**d, "n_tasks": d["n_tasks"] + 1}, r'"task_hashes" holds 108 hashes, not n_tasks = 109'),
        ("ds", lambda d: {**d, "task_hashes": base64.b64encode(
            np.frombuffer(base64.b64decode(d["task_hashes"]), "<u8")[::-1].tobytes()).decode()},
         r'"task_hashes" are not sorted and distinct'),
    ],
)
def test_every_other_ambiguity_is_an_error_naming_the_file_and_the_field(method, change, message):
    with pytest.raises(DataError, match=rf"^crowd\.json: .*{message}"):
        from_json(json.dumps(change(_good(method))), "crowd.json")


def test_a_literal_json_does_not_allow_is_named_where_it_is():
    text = json.dumps(_good("ds")).replace('"version": 2', '"version": NaN')
    with pytest.raises(DataError, match=r"^crowd\.json: worker model version NaN \(which JSON does not allow\)"):
        from_json(text, "crowd.json")
    text = json.dumps(_set(_good("ds"), "classes", (1,), "@@")).replace('"@@"', "-Infinity")
    with pytest.raises(DataError, match=r"^crowd\.json: classes\[1\] is -Infinity \(which JSON does not allow\), "
                                        r"not a name"):
        from_json(text, "crowd.json")


def test_a_key_twice_in_one_object_and_non_json_are_refused():
    text = json.dumps(_good("ds"))
    with pytest.raises(DataError, match=r'^crowd\.json: the key "prior" appears twice in one object'):
        from_json(text.replace('"prior":', '"prior": [0.5, 0.5], "prior":'), "crowd.json")
    with pytest.raises(DataError, match=r"^crowd\.json: not a crowdagg worker model \(not JSON"):
        from_json(b"task,label\n", "crowd.json")


def test_a_class_listed_twice_no_longer_flips_labels(bluebird, tmp_path):
    """The issue's example: a model listing a class twice was accepted and flipped 58 of 108 labels."""
    doc = json.loads(to_json(quiet_fit(bluebird, "ds")))
    doc["classes"] = ["1", "1"]
    (tmp_path / "crowd.json").write_text(json.dumps(doc))
    r = CliRunner().invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "--init-workers",
                                 str(tmp_path / "crowd.json")])
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.strip().endswith('crowd.json: "classes" lists "1" twice')
    assert r.stderr.startswith("Error: ") and len(r.stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- memory
def test_a_model_of_empty_lists_is_refused_before_parsing(tmp_path):
    """The issue's 30 MB model of [] lists (~1 GB parsed), at 1/100 of the size under a 4M limit."""
    text = ('{"format": "crowdagg-workers", "version": 2, "counts": [' + ",".join(["[]"] * 100_000) + "]}").encode()
    with pytest.raises(ResourceError, match=r"this needs ~\d.* \(parsing the 293 KB worker model crowd\.json\), more "
                                            r"than the limit of 4\.00 MB"):
        from_json(text, "crowd.json", max_memory="4M")
    (tmp_path / "crowd.json").write_bytes(text)
    r = CliRunner().invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "--init-workers",
                                 str(tmp_path / "crowd.json"), "--max-memory", "4M"])
    assert r.exit_code == 1 and r.stdout == "" and "Error: this needs ~" in r.stderr
    assert "parsing the 293 KB worker model" in r.stderr and "--max-memory" in r.stderr
    tracemalloc.start()
    with pytest.raises(DataError):  # under no limit it parses (and is then refused as a model)
        from_json(text, "crowd.json", max_memory="none")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    from crowdagg.core.memory import json_parse_bytes

    assert peak < json_parse_bytes(text) < 6 * peak  # an upper bound, and not a wild one


def test_a_one_coin_model_of_many_workers_expands_only_the_datas_workers():
    """The issue's 4 MB one-coin model (400k workers, 60 classes: ~11 GB as dense matrices), at 1/100 of the
    size: the fit expands the 3 workers of the data, not the 4,000 of the model."""
    k, n = 60, 4000
    classes = [f"c{i}" for i in range(k)]
    correct, answers = np.full(n, 8.0), np.full(n, 10.0)
    doc = {"format": "crowdagg-workers", "version": 2, "method": "onecoin", "smoothing": 1.0, "classes": classes,
           "workers": [f"w{i}" for i in range(n)], "class_counts": [10.0] * k, "prior": [1.0 / k] * k,
           "correct": correct.tolist(), "answers": answers.tolist(),
           "accuracy": ((correct + 1.0 / k) / (answers + 1.0)).tolist(), "n_tasks": 0, "task_hashes": ""}
    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(200), 3)
    data = AnnotationSet.from_names([f"t{t}" for t in task], [f"w{i}" for i in np.tile([0, 1, 2], 200)],
                                    [classes[c] for c in rng.integers(0, k, task.size)], classes=classes)
    tracemalloc.start()
    fit = aggregate(data, "onecoin", init_workers=doc, max_memory="40M")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40 * 2**20 < 8.0 * n * k * k  # the dense one-coin matrices of the model alone: 110 MB
    assert fit.n_iter > 0
    # Data with the model's 4,000 workers needs the dense tables: refused up front, with the size.
    many = AnnotationSet.from_names([f"t{i}" for i in range(n)], [f"w{i}" for i in range(n)],
                                    [classes[i % k] for i in range(n)], classes=classes)
    with pytest.raises(ResourceError, match=r"this needs ~[\d.]+ [MG]B \(4,000 workers × 60² classes"):
        aggregate(many, "onecoin", init_workers=doc, max_memory="40M")


# ----------------------------------------------------------------------------- each method owns its form
class AbilityForm(SavedForm):
    """A test-only saved form whose worker parameter is not a probability (as a GLAD ability): per worker the
    expected answers agreeing with the vote and the answers, and the log-odds ability they give."""

    method = "ability"
    fields = (Field("agree", "counts"), Field("answers", "counts"), Field("ability", "numbers", derived=True))

    def from_result(self, result):
        return {"agree": result.counts["agree"], "answers": result.counts["answers"],
                "ability": result.worker_params["ability"]}

    def parameters(self, stats, smoothing, k):
        return {"ability": np.log((stats["agree"] + 1.0) / (stats["answers"] - stats["agree"] + 1.0))}

    def prior(self, class_counts, smoothing):
        return np.full(class_counts.shape, 1.0 / class_counts.size)  # a uniform prior, as GLAD keeps

    def convert(self, model, order, rows):
        if model["method"] == "onecoin":  # declared below for one test: the one-coin counts are the same numbers
            return {"agree": model["correct"][rows], "answers": model["answers"][rows]}
        return {"agree": model["agree"][rows], "answers": model["answers"][rows]}

    def pseudo_counts(self, stats, known, k):
        pseudo = np.zeros((known.size, 2))
        pseudo[known] = np.stack([stats["agree"], stats["answers"]], axis=1)
        return pseudo

    def memory(self, n_workers, k, k_model):
        return 8.0 * 2 * n_workers


class AbilityVote(Aggregator):
    """A test-only method: the soft vote, each worker's ability the log-odds of its agreeing with it (the
    counts of a saved model added), a per-task parameter and a model parameter."""

    name = "ability"
    saved_form = AbilityForm()

    def _prepare(self, data, max_memory):
        self._model = None if self.init_workers is None else coerce(self.init_workers, max_memory)

    def _fit(self, data, checked, callback):
        post = soft_majority_vote(data)
        task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
        agree = np.bincount(data.worker, weights=post[task, data.label], minlength=data.n_workers)
        answers = data.answers_per_worker.astype(np.float64)
        warm = None
        if self._model is not None:
            warm = WarmStart(self._model, data, self.name)
            agree, answers = agree + warm.pseudo[:, 0], answers + warm.pseudo[:, 1]
        counts = {"agree": agree, "answers": answers, "class_counts": post.sum(axis=0), "smoothing": 0.0}
        ability = AbilityForm().parameters(counts, 0.0, data.n_classes)["ability"]
        prior = np.full(data.n_classes, 1.0 / data.n_classes)
        return make_result(self.name, data, post, post.argmax(axis=1), prior, worker_params={"ability": ability},
                           task_params={"ease": post.max(axis=1), "shares": post}, model_params={"temperature": 1.5},
                           counts=counts, init_model=None if warm is None else warm.model)


@pytest.fixture
def ability(monkeypatch):
    """``ability`` registered for the test (a saved worker model, no gold), ``onecoin`` as it is."""
    monkeypatch.setitem(METHODS, "ability", Method("ability", f"{__name__}:AbilityVote", "test", "test", "test",
                                                   init_workers=True))
    return AbilityVote


def test_the_envelope_names_no_method():
    """model_file.py is the envelope: no method's name or field in it, and importing it imports no method."""
    source = (ROOT / "crowdagg" / "methods" / "model_file.py").read_text()
    code = source[source.index('"""', source.index('"""') + 3):]  # past the module docstring (which shows a ds file)
    for word in ('"ds"', '"onecoin"', '"confusion"', '"accuracy"', '"correct"', "full_m_step",
                 "one_coin", "from .base", "from ..methods"):
        assert word not in code, word
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import sys, crowdagg.methods.model_file; "
                          "print(*sorted(m for m in sys.modules if m.startswith('crowdagg.methods.')))"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "crowdagg.methods.model_file" in out.split()
    assert not [m for m in out.split() if m.startswith(("crowdagg.methods.em", "crowdagg.methods.votes",
                                                        "crowdagg.methods.base", "crowdagg.methods.registry"))]


@pytest.mark.parametrize("method", ["ds", "onecoin"])
def test_each_method_declares_its_form_in_its_own_class(method):
    form = form_of(method)
    assert form is get_method(method).saved_form and form.method == method
    # Every method declared init_workers saves a model (the list grows with the families: not a closed list).
    assert saving_methods()[:2] == ["ds", "onecoin"] and form_of("mv") is None and form_of("nope") is None
    assert saving_methods() == [m.name for m in METHODS.values() if m.init_workers]
    want = {"ds": ("counts", "confusion"), "onecoin": ("correct", "answers", "accuracy")}[method]
    assert tuple(f.name for f in form.fields) == want
    assert form.converts == ({"ds": ("onecoin",), "onecoin": ("ds",)}[method])


def test_a_form_whose_parameter_is_not_a_probability_round_trips(bluebird, ability):
    fit = ability().fit(bluebird)
    assert fit.model_params == {"temperature": 1.5}
    text = to_json(fit)
    doc = json.loads(text)
    assert list(doc) == ["format", "version", "method", "smoothing", "classes", "workers", "class_counts", "prior",
                         "agree", "answers", "ability", "n_tasks", "task_hashes"]
    assert min(doc["ability"]) < 0 < max(doc["ability"])  # log-odds: not a probability, and accepted
    model = from_json(text, "a.json")
    np.testing.assert_array_equal(model["ability"], fit.worker_params["ability"])
    np.testing.assert_array_equal(model["agree"], fit.counts["agree"])
    # The envelope checks its fields by their declared kind, and the parameters against its M-step.
    with pytest.raises(DataError, match=r'^a\.json: ability\[1\] is "x" \(a string\), not a number'):
        from_json(json.dumps(_set(doc, "ability", (1,), "x")), "a.json")
    with pytest.raises(DataError, match=r"^a\.json: agree\[0\] is -1\.0, not a count"):
        from_json(json.dumps(_set(doc, "agree", (0,), -1.0)), "a.json")
    with pytest.raises(DataError, match=r'^a\.json: ability\[2\] is 9\.0 but "agree" and "answers" give'):
        from_json(json.dumps(_set(doc, "ability", (2,), 9.0)), "a.json")
    with pytest.raises(DataError, match=r'^a\.json: the ability worker model lacks "ability"'):
        from_json(json.dumps({k: v for k, v in doc.items() if k != "ability"}), "a.json")
    with pytest.raises(DataError, match=r'^a\.json: unknown field "counts" in a ability worker model'):
        from_json(json.dumps({**doc, "counts": []}), "a.json")
    with pytest.raises(DataError, match=r'prior\[0\] is 0\.25 but "class_counts" give 0\.5'):  # its own prior rule
        from_json(json.dumps({**doc, "prior": [0.25, 0.75]}), "a.json")


def test_a_warm_start_adds_the_forms_pseudo_counts_and_carries_unknown_workers(batches, ability):
    one, two = batches
    model = from_json(to_json(ability().fit(one)))
    warm = ability(init_workers=model).fit(two)
    cold = ability().fit(two)
    row = [model["workers"].index(w) for w in two.worker_names]
    np.testing.assert_allclose(warm.counts["agree"], cold.counts["agree"] + model["agree"][row], rtol=1e-12)
    np.testing.assert_allclose(warm.counts["answers"], cold.counts["answers"] + model["answers"][row], rtol=1e-12)
    # A worker of the model absent from the data is carried into the next model, its ability from its counts.
    doc = json.loads(to_json(ability().fit(one)))
    doc["workers"][0] = "only-in-batch-1"
    saved = from_json(to_json(ability(init_workers=doc).fit(two)))
    assert saved["workers"][-1] == "only-in-batch-1" and len(saved["workers"]) == two.n_workers + 1
    assert saved["agree"][-1] == doc["agree"][0] and saved["ability"][-1] == pytest.approx(doc["ability"][0], abs=0)


def test_another_methods_model_is_refused_unless_the_form_declares_its_conversion(batches, ability, monkeypatch):
    one, two = batches
    ds_model, onecoin_model = (from_json(to_json(quiet_fit(one, m)), f"{m}.json") for m in ("ds", "onecoin"))
    ability_model = from_json(to_json(ability().fit(one)), "ability.json")
    with pytest.raises(DataError, match=r"^ds\.json: a ds worker model cannot start ability \(it starts from a "
                                        r"worker model of ability\)$"):
        ability(init_workers=ds_model).fit(two)
    with pytest.raises(DataError, match=r"^ability\.json: a ability worker model cannot start ds \(it starts from a "
                                        r"worker model of ds, onecoin\)$"):
        quiet_fit(two, "ds", init_workers=ability_model)
    with pytest.raises(DataError, match=r"cannot start onecoin \(it starts from a worker model of onecoin, ds\)$"):
        quiet_fit(two, "onecoin", init_workers=ability_model)
    # Declared, the conversion applies: the one-coin counts enter as the ability's.
    monkeypatch.setattr(AbilityForm, "converts", ("onecoin",))
    warm, cold = ability(init_workers=onecoin_model).fit(two), ability().fit(two)
    row = [onecoin_model["workers"].index(w) for w in two.worker_names]
    np.testing.assert_allclose(warm.counts["agree"] - cold.counts["agree"], onecoin_model["correct"][row], rtol=1e-12)
    assert from_json(to_json(warm))["method"] == "ability"


def test_a_method_that_saves_nothing_is_refused_by_name(bluebird):
    with pytest.raises(UsageError, match=r"method 'wawa' learns no reusable worker model; save_workers works with "
                                         r"ds, onecoin"):
        to_json(aggregate(bluebird, "wawa"))
    doc = json.loads(to_json(quiet_fit(bluebird, "ds")))
    with pytest.raises(DataError, match=r'"method" is "wawa"; a worker model is one of ds, onecoin'):
        from_document({**doc, "method": "wawa"}, "m.json")


class SketchGlad(Glad):
    """glad whose _finish leaves ``init_model`` out, as the README's "Adding a method" sketch does."""

    name = "sketchglad"

    def _finish(self, data, run, checked):
        result = super()._finish(data, run, checked)
        result.init_model = None
        return result


def test_the_base_carries_a_warm_starts_model_into_the_next_save(bluebird, monkeypatch):
    """A saved model's workers absent from the new batch are carried into the next save by the base (the
    warm start is its service): a method whose _finish does not pass ``init_model`` loses none of them."""
    monkeypatch.setitem(METHODS, "sketchglad", Method("sketchglad", f"{__name__}:SketchGlad", "test", "test", "test",
                                                      METHODS["glad"].params, init_workers=True))
    monkeypatch.setattr(GladForm, "method", "sketchglad")
    tasks = bluebird.task_names[bluebird.task]
    workers, classes = bluebird.worker_names[bluebird.worker], np.asarray(bluebird.classes, dtype=object)
    first = bluebird.task < bluebird.n_tasks // 2
    gone = workers[0]
    one = AnnotationSet.from_names(tasks[first], workers[first], classes[bluebird.label[first]])
    rows = ~first & (workers != gone)
    two = AnnotationSet.from_names(tasks[rows], workers[rows], classes[bluebird.label[rows]])
    m1 = from_json(to_json(quiet_fit(one, "sketchglad")))
    m2 = from_json(to_json(quiet_fit(two, "sketchglad", init_workers=m1)))
    assert gone not in two.worker_names and m2["workers"][-1] == gone
    i = m1["workers"].index(gone)
    assert m2["alpha"][-1] == m1["alpha"][i] and m2["curvature"][-1] == m1["curvature"][i]


def test_a_saving_method_whose_result_lacks_counts_is_not_said_to_save_nothing(bluebird):
    """A method declaring a saved form whose result carries no counts is its author's slip (a _finish without
    ``counts=``): said as that, not as "learns no reusable worker model; ... works with <the same method>"."""
    fit = quiet_fit(bluebird, "ds")
    fit.counts = {}
    with pytest.raises(UsageError, match=r"^method 'ds' saves a worker model, but this result carries none \(its "
                                         r"_finish passes no counts= to make_result\)$"):
        to_json(fit)


class CurvatureForm(SavedForm):
    """As GLAD's will be: the model is an ability (any real number) and the curvature behind it (>= 0), nothing
    derived; a warm start adds (h α̂, h) per worker, the natural parameters of the prior N(α̂, 1/h)."""

    method = "curvature"
    fields = (Field("alpha", "numbers"), Field("curvature", "counts"))

    def from_result(self, result):
        return {"alpha": result.worker_params["alpha"], "curvature": result.counts["curvature"]}

    def parameters(self, stats, smoothing, k):
        return {}

    def prior(self, class_counts, smoothing):
        return np.full(class_counts.shape, 1.0 / class_counts.size)

    def convert(self, model, order, rows):
        return {"alpha": model["alpha"][rows], "curvature": model["curvature"][rows]}

    def pseudo_counts(self, stats, known, k):
        pseudo = np.zeros((known.size, 2))
        pseudo[known] = np.stack([stats["curvature"] * stats["alpha"], stats["curvature"]], axis=1)
        return pseudo


class Curvature(AbilityVote):
    """Each worker's alpha the precision-weighted mean of its log-odds agreement and a saved model's alpha."""

    name = "curvature"
    saved_form = CurvatureForm()

    def _fit(self, data, checked, callback):
        fit = AbilityVote().fit(data)  # (registered by the ability fixture)
        h = fit.counts["answers"].copy()
        weighted = h * fit.worker_params["ability"]
        warm = None
        if self._model is not None:
            warm = WarmStart(self._model, data, self.name)
            weighted, h = weighted + warm.pseudo[:, 0], h + warm.pseudo[:, 1]
        alpha = weighted / h
        return make_result(self.name, data, fit.posteriors, fit.labels, fit.prior, worker_params={"alpha": alpha},
                           counts={"class_counts": fit.counts["class_counts"], "smoothing": 0.0, "curvature": h},
                           init_model=None if warm is None else warm.model)


def test_a_form_whose_model_is_not_counts_round_trips_and_accumulates(batches, ability, monkeypatch):
    monkeypatch.setitem(METHODS, "curvature", Method("curvature", f"{__name__}:Curvature", "test", "test", "test",
                                                     init_workers=True))
    one, two = batches
    first = Curvature().fit(one)
    model = from_json(to_json(first), "c.json")
    assert min(model["alpha"]) < 0 < max(model["alpha"])  # a statistic that is not a count: checked as a number
    np.testing.assert_array_equal(model["alpha"], first.worker_params["alpha"])
    warm, cold = Curvature(init_workers=model).fit(two), Curvature().fit(two)
    row = [model["workers"].index(w) for w in two.worker_names]
    h1, h2 = model["curvature"][row], cold.counts["curvature"]
    np.testing.assert_allclose(warm.worker_params["alpha"],
                               (h1 * model["alpha"][row] + h2 * cold.worker_params["alpha"]) / (h1 + h2), rtol=1e-12)
    doc = json.loads(to_json(first))
    with pytest.raises(DataError, match=r"^c\.json: curvature\[0\] is -1\.0, not a count"):
        from_json(json.dumps(_set(doc, "curvature", (0,), -1.0)), "c.json")
    with pytest.raises(DataError, match=r'^c\.json: the curvature worker model lacks "alpha"'):
        from_json(json.dumps({k: v for k, v in doc.items() if k != "alpha"}), "c.json")
    # Carried workers keep their statistics as saved (nothing to derive).
    doc["workers"][0] = "only-in-batch-1"
    saved = from_json(to_json(Curvature(init_workers=doc).fit(two)))
    assert saved["workers"][-1] == "only-in-batch-1" and saved["alpha"][-1] == doc["alpha"][0]
    # Neither it nor ds converts the other's model.
    with pytest.raises(DataError, match=r"a curvature worker model cannot start ds"):
        quiet_fit(two, "ds", init_workers=model)


# ----------------------------------------------------------------------------- hostile: numbers at the edge of a double
def _consistent(doc: dict) -> dict:
    """``doc`` with its derived fields and prior recomputed from its (edited) statistics."""
    form = form_of(doc["method"])
    stats = {name: np.array(doc[name]) for name in form.statistics}
    k, s = len(doc["classes"]), doc["smoothing"]
    with np.errstate(all="ignore"):
        doc |= {name: value.tolist() for name, value in form.parameters(stats, s, k).items()}
        prior = form.prior(np.array(doc["class_counts"]), s)
    if np.isfinite(prior).all():
        doc["prior"] = prior.tolist()
    return doc


@pytest.mark.parametrize(
    ("method", "edit", "message"),
    [
        # each count finite, each confusion row finite, but the worker's trace is inf: onecoin's conversion
        # made its accuracy nan (fitted as 1/K, silently) and --save-workers failed as "unexpected failure"
        ("ds", lambda d: _set(d, "counts", (0,), [[1e308, 0.0], [0.0, 1e308]]), r'"counts" add up'),
        ("ds", lambda d: _set(d, "class_counts", (), [1e308, 1e308]), r'"class_counts" add up'),
        ("onecoin", lambda d: _set(_set(d, "answers", (0,), 1.5e308), "correct", (0,), 1.5e308), r'"correct" add up'),
    ],
)
def test_counts_adding_up_beyond_a_double_are_refused_with_the_reason(method, edit, message):
    doc = _consistent(edit(_good(method)))
    if method == "onecoin":
        doc = _consistent(_set(_set(doc, "answers", (1,), 1.5e308), "correct", (1,), 1.5e308))
    with pytest.raises(DataError, match=rf"^crowd\.json: {message} to more than the largest number"):
        from_json(json.dumps(doc), "crowd.json")


def test_a_huge_but_summable_model_warm_starts_the_other_method_with_finite_parameters(bluebird):
    """Large counts that do add up are a (strong) model, not an error: the fit's parameters stay finite."""
    doc = _consistent(_set(json.loads(to_json(quiet_fit(bluebird, "ds"))), "counts", (0,), [[1e300, 0.0], [0.0, 1e300]]))
    fit = quiet_fit(bluebird, "onecoin", init_workers=from_json(json.dumps(doc), "crowd.json"))
    assert np.isfinite(fit.worker_params["accuracy"]).all() and fit.worker_params["accuracy"][0] > 1 - 1e-9
    again = from_json(to_json(fit), "again.json")
    assert again["correct"][0] > 1e299


@pytest.mark.parametrize("method", ["mv", "wmv", "wawa"])
def test_a_fitted_result_without_a_worker_model_is_refused_as_init_workers(bluebird, method):
    """``init_workers=<an mv result>`` said "save_workers works with ds, onecoin": a parameter the caller never
    gave.  The message names the one given, and what it takes."""
    with pytest.raises(UsageError) as err:
        aggregate(bluebird, "ds", init_workers=quiet_fit(bluebird, method))
    saving = saving_methods()  # ds, onecoin and any family added since
    either = saving[0] if len(saving) == 1 else f"{', '.join(saving[:-1])} or {saving[-1]}"
    assert str(err.value) == (f"init_workers must be a saved worker model; a fitted {method} result has none "
                              f"(a fitted {either} result has one)")
    assert either.startswith("ds, onecoin") or either == "ds or onecoin"
