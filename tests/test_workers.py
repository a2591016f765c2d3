"""Saved worker models: exact round trip, warm start, known workers on a new batch, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg import aggregate, load_annotations
from crowdagg.aggregators.base import full_m_step
from crowdagg.aggregators.ds import EMState, starting_posteriors
from crowdagg.cli import app
from crowdagg.data import AnnotationSet
from crowdagg.errors import DataError, UsageError
from crowdagg.workers import from_json, initial_parameters, to_json


@pytest.fixture(scope="module")
def bluebird() -> AnnotationSet:
    return load_annotations("example:bluebird")


@pytest.mark.parametrize("method", ["ds", "onecoin"])
def test_round_trip_is_exact_and_a_warm_start_reproduces_the_fit(bluebird, method):
    fit = aggregate(bluebird, method, tol=1e-10)
    model = from_json(to_json(fit))
    assert model["workers"] == bluebird.workers.tolist() and model["classes"] == list(bluebird.classes)
    np.testing.assert_array_equal(model["prior"], fit.prior)
    if method == "ds":
        np.testing.assert_array_equal(model["confusion"], fit.confusion)
    else:
        np.testing.assert_array_equal(model["accuracy"], fit.worker_params["accuracy"])
    warm = aggregate(bluebird, method, tol=1e-10, init_workers=model)
    assert warm.n_iter <= 2 < fit.n_iter
    np.testing.assert_allclose(warm.posteriors, fit.posteriors, atol=1e-5)
    np.testing.assert_array_equal(warm.labels, fit.labels)


def test_workers_absent_from_the_model_start_as_the_default(bluebird):
    fit = aggregate(bluebird, "ds")
    model = from_json(to_json(fit))
    keep = 10  # the model knows the first 10 workers only
    model["workers"] = model["workers"][:keep]
    model["confusion"] = model["confusion"][:keep]
    prior, conf_ot, known = initial_parameters(model, bluebird)
    assert known.sum() == keep
    clamp = np.full(bluebird.n_tasks, -1, dtype=np.int64)
    default = EMState(bluebird, starting_posteriors(bluebird, 0, None), clamp, full_m_step, 0.0)
    warm = EMState(bluebird, starting_posteriors(bluebird, 0, None), clamp, full_m_step, 0.0,
                   (prior, conf_ot, known))
    np.testing.assert_array_equal(warm.conf_ot[~known], default.conf_ot[~known])
    np.testing.assert_allclose(warm.conf_ot[known], np.maximum(fit.confusion[:keep].transpose(0, 2, 1), 1e-10))


def test_a_new_batch_labelled_with_known_workers(bluebird):
    half = bluebird.n_tasks // 2
    first = bluebird.task < half
    old = AnnotationSet.from_names(bluebird.task_names[bluebird.task[first]], bluebird.worker_names[bluebird.worker[first]],
                                   np.asarray(bluebird.classes, dtype=object)[bluebird.label[first]])
    new = AnnotationSet.from_names(bluebird.task_names[bluebird.task[~first]],
                                   bluebird.worker_names[bluebird.worker[~first]],
                                   np.asarray(bluebird.classes, dtype=object)[bluebird.label[~first]])
    old_fit = aggregate(old, "ds")
    model = from_json(to_json(old_fit))
    prior, conf_ot, known = initial_parameters(model, new)
    shared = [w in set(old.worker_names.tolist()) for w in new.worker_names.tolist()]
    np.testing.assert_array_equal(known, shared)
    assert known.any()  # (bluebird: every worker labels every task, so all are known)
    row = {w: i for i, w in enumerate(old.worker_names.tolist())}
    for j in np.flatnonzero(known):  # a known worker starts from what the old batch taught
        np.testing.assert_allclose(conf_ot[j], old_fit.confusion[row[new.worker_names[j]]].T, rtol=1e-14)
    np.testing.assert_allclose(prior, old_fit.prior, rtol=1e-14)  # (renormalised: last-bit differences)
    warm = aggregate(new, "ds", init_workers=model, max_iter=1, tol=0)
    cold = aggregate(new, "ds", max_iter=1, tol=0)
    assert np.abs(warm.posteriors - cold.posteriors).max() > 1e-3  # the model was used


def test_model_errors_are_clear(bluebird):
    fit = aggregate(bluebird, "ds")
    doc = json.loads(to_json(fit))
    with pytest.raises(DataError, match="not a crowdagg worker model"):
        from_json(b"task,label\n")
    with pytest.raises(DataError, match="version 9"):
        from_json(json.dumps({**doc, "version": 9}))
    with pytest.raises(DataError, match="do not match"):
        from_json(json.dumps({**doc, "prior": [1.0]}))
    with pytest.raises(DataError, match="no class '1'"):
        initial_parameters(from_json(json.dumps({**doc, "classes": ["0", "x"]})), bluebird)
    with pytest.raises(UsageError, match="learns no reusable worker model"):
        to_json(aggregate(bluebird, "mv"))


def test_cli_save_and_init_workers(tmp_path):
    runner = CliRunner()
    m = tmp_path / "m.json"
    r = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "--save-workers", str(m)])
    assert r.exit_code == 0 and json.loads(m.read_text())["format"] == "crowdagg-workers"
    r2 = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "--init-workers", str(m)])
    assert r2.exit_code == 0
    assert [ln.split(",")[1] for ln in r2.stdout.splitlines()] == [ln.split(",")[1] for ln in r.stdout.splitlines()]
    r3 = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "mv", "--init-workers", str(m)])
    assert r3.exit_code == 2 and "does not apply to method 'mv'" in r3.stderr
    r4 = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "ds", "-o", str(m), "--save-workers", str(m)])
    assert r4.exit_code == 2 and "same file" in r4.stderr


def test_the_library_takes_a_model_in_any_form(bluebird, tmp_path):
    fit = aggregate(bluebird, "ds", tol=1e-10)
    text = to_json(fit)
    (tmp_path / "m.json").write_bytes(text)
    want = aggregate(bluebird, "ds", tol=1e-10, init_workers=from_json(text)).posteriors
    for given in (str(tmp_path / "m.json"), tmp_path / "m.json", text, text.decode(), json.loads(text), fit):
        np.testing.assert_array_equal(aggregate(bluebird, "ds", tol=1e-10, init_workers=given).posteriors, want)
    with pytest.raises(UsageError, match="init_workers must be a saved worker model"):
        aggregate(bluebird, "ds", init_workers=3.5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": True}, "version True"),
        ({"prior": [0.0, 0.0]}, "do not sum to 1"),
        ({"prior": [0.9, 0.9]}, "do not sum to 1"),
        ({"prior": [0.5, int("9" * 400)]}, "not numeric"),
        ({"workers": ["a", "a"], "confusion": [[[1.0, 0.0], [0.0, 1.0]]] * 2}, "'a' appears twice"),
    ],
)
def test_bad_model_files_are_refused(bluebird, change, message):
    doc = json.loads(to_json(aggregate(bluebird, "ds")))
    with pytest.raises(DataError, match=message):
        from_json(json.dumps({**doc, **change}))


def test_a_prior_of_zero_on_the_datas_classes_is_refused(bluebird):
    doc = json.loads(to_json(aggregate(bluebird, "ds")))
    doc["classes"], doc["prior"] = ["0", "1", "2"], [0.0, 0.0, 1.0]
    doc["confusion"] = [[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]] * len(doc["workers"])
    with pytest.raises(DataError, match="prior of 0"):
        initial_parameters(from_json(json.dumps(doc), "m.json"), bluebird)


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
    doc = json.loads(to_json(aggregate(bluebird, "onecoin")))
    doc["workers"][0] = "\ud800"  # valid JSON (an escaped lone surrogate), not valid text
    with pytest.raises(DataError, match=r"model\.json: the worker name '\\ud800'"):
        from_json(json.dumps(doc), "model.json")
