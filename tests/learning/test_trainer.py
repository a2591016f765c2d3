"""The trainer base (crowdagg.learning.trainer): the loop, the held-out split, selection, devices, the checks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from crowdagg.errors import CrowdaggWarning, DataError, UsageError
from crowdagg.learning import trainer as base
from crowdagg.methods.registry import get_trainer

SMALL = {"hidden": 16, "epochs": 12, "batch_size": 32, "lr": 1e-2}


def crowdlayer(**params):
    return get_trainer("crowdlayer").load()(**{**SMALL, **params})


@pytest.fixture(scope="module")
def fitted(separable):
    data, x, truth, _ = separable
    return crowdlayer(seed=7).fit(data, x)


def test_a_separable_problem_is_learnt_from_noisy_answers(separable, fitted):
    data, x, truth, _ = separable
    assert (fitted.labels == truth).mean() > 0.95
    proba = fitted.model_params["model"].predict_proba(x)
    assert (proba.argmax(1) == truth).mean() > 0.95
    assert fitted.posteriors.shape == (data.n_tasks, 3) and np.allclose(fitted.posteriors.sum(1), 1)


def test_epochs_are_the_loops_iterations_and_the_objective_is_the_held_out_nll(fitted):
    assert fitted.n_iter == 12 and len(fitted.objective) == 12
    assert fitted.objective_name == "held-out answer NLL"
    best = fitted.model_params["best_epoch"]
    assert fitted.objective[best - 1] == fitted.objective.min()  # the kept epoch is the best held-out one


def test_the_same_seed_gives_the_same_model_and_another_seed_another(separable, fitted):
    data, x, _, _ = separable
    again = crowdlayer(seed=7).fit(data, x)
    assert np.array_equal(again.posteriors, fitted.posteriors) and np.array_equal(again.objective, fitted.objective)
    weights = fitted.model_params["model"].weights
    assert all(np.array_equal(again.model_params["model"].weights[k], w) for k, w in weights.items())
    other = crowdlayer(seed=8).fit(data, x)
    assert not np.array_equal(other.posteriors, fitted.posteriors)


def test_the_fit_leaves_the_callers_torch_generator_alone(separable):
    data, x, _, _ = separable
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    crowdlayer(epochs=1).fit(data, x)
    assert torch.equal(torch.rand(3), expected)


def test_patience_stops_early_and_keeps_the_best_epoch(separable):
    data, x, _, _ = separable
    result = crowdlayer(epochs=200, patience=2, lr=5e-2).fit(data, x)
    assert result.converged and result.n_iter < 200
    assert result.n_iter - result.model_params["best_epoch"] == 2


def test_without_held_out_answers_the_last_epoch_is_kept(separable):
    data, x, _, _ = separable
    result = crowdlayer(val_fraction=0.0, epochs=3).fit(data, x)
    assert result.model_params["best_epoch"] == 3 and len(result.objective) == 3


def test_the_held_out_split_is_seeded_and_of_the_asked_size(separable):
    data, _, _, _ = separable
    keep = base.split(data, 0.25, seed=1)
    assert (~keep).sum() == round(0.25 * data.n_answers)
    assert np.array_equal(keep, base.split(data, 0.25, seed=1)) and not np.array_equal(keep, base.split(data, 0.25, 2))


def test_batch_answers_gathers_each_tasks_answers_through_the_csr():
    task = np.array([0, 0, 1, 3, 3, 3])
    answers = base.Answers.of(task, np.arange(6), np.zeros(6, dtype=int), 4, torch.device("cpu"))
    index, row = base.batch_answers(answers, torch.tensor([3, 0, 2]))
    assert index.tolist() == [3, 4, 5, 0, 1] and row.tolist() == [0, 0, 0, 1, 1]


def test_confusions_are_rows_on_the_simplex_in_the_worker_true_observed_layout(separable, fitted):
    data, _, _, crowd = separable
    confusion = fitted.confusion
    assert confusion.shape == (data.n_workers, 3, 3) and np.allclose(confusion.sum(axis=2), 1)
    # the workers are .6-.9 accurate: the diagonal dominates every learnt matrix
    assert (np.diagonal(confusion, axis1=1, axis2=2) > 0.45).mean() > 0.9


@pytest.mark.parametrize(("features", "words"), [
    (np.zeros((5, 8)), "features have 5 rows for 400 tasks"),
    (np.zeros(400), "numeric array of shape (n_tasks, d)"),
    (np.array([["a"] * 8] * 400), "numeric array"),
])
def test_features_of_the_wrong_shape_or_kind_are_refused(separable, features, words):
    data, _, _, _ = separable
    with pytest.raises(DataError) as info:
        crowdlayer().fit(data, features)
    assert words in str(info.value)


def test_a_nan_feature_is_refused_naming_its_task(separable):
    data, x, _, _ = separable
    bad = x.copy()
    bad[17, 2] = np.nan
    with pytest.raises(DataError, match=f"row 17 \\(task '{data.task_names[17]}'\\) holds NaN or inf"):
        crowdlayer().fit(data, bad)


def test_no_features_and_bad_parameters_are_usage_errors(separable):
    data, x, _, _ = separable
    with pytest.raises(UsageError, match="needs the features"):
        crowdlayer().fit(data)
    with pytest.raises(UsageError, match="model"):
        crowdlayer(model="cnn").fit(data, x)  # vectors, not images
    with pytest.raises(UsageError, match="val_fraction"):
        crowdlayer(val_fraction=0.95).fit(data, x)


def test_cuda_asked_without_cuda_is_a_clear_error(separable, monkeypatch):
    data, x, _, _ = separable
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError, match="CUDA is not available"):
        crowdlayer(device="cuda").fit(data, x)
    assert base.resolve_device("auto").type == "cpu"


def test_images_train_through_the_cnn():
    from crowdagg.simulate import simulate

    crowd = simulate(n_tasks=120, n_workers=6, n_classes=2, per_task=3, seed=5)
    data = crowd.to_annotations()
    truth = crowd.truth[[int(t[1:]) for t in data.task_names]]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 1, 8, 8)).astype(np.float32)
    x[truth == 1, :, 2:6, 2:6] += 3.0  # class 1 has a bright square
    result = crowdlayer(model="cnn", hidden=8, epochs=15, lr=1e-2, batch_size=16).fit(data, x)
    assert (result.model_params["classifier_proba"].argmax(1) == truth).mean() > 0.9


# --------------------------------------------------------------------------- hostile inputs (regressions)
def test_features_in_any_array_like_train_to_the_same_model(separable):
    """A torch tensor that requires grad raised torch's RuntimeError; a DataFrame's read-only array made torch warn."""
    import warnings

    import pandas as pd

    data, x, _, _ = separable
    expected = crowdlayer(epochs=1).fit(data, x).posteriors
    grad = torch.as_tensor(x).requires_grad_()
    for features in (grad, pd.DataFrame(x), x.tolist(), x.astype(np.float64)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = crowdlayer(epochs=1).fit(data, features).posteriors
        assert np.array_equal(got, expected), type(features)


@pytest.mark.parametrize(("features", "error", "words"), [
    ([[1.0, 2.0], [3.0]], DataError, "numeric array of shape (n_tasks, d) or (n_tasks, C, H, W): setting an array"),
    (np.zeros((400, 0)), DataError, "rows of no features (shape (400, 0))"),
    (np.full((400, 8), 1e300), DataError, "row 0, feature 0 is 1e+300, beyond float32's range"),
    (np.where(np.arange(400)[:, None] % 4 == 0, 3e38, -3e38).repeat(8, 1).astype(np.float32), DataError,
     "values up to 3e+38 overflow float32 once centred"),
])
def test_hostile_features_are_clear_errors(separable, features, error, words):
    """A ragged list raised numpy's ValueError; rows of no features trained a constant classifier; 1e300 was called
    NaN or inf; ±3e38 (finite float32) trained into NaN reported as a divergence ("try a smaller lr")."""
    data, _, _, _ = separable
    with pytest.raises(error) as info:
        crowdlayer(epochs=1).fit(data, features)
    assert words in str(info.value)


def test_features_at_float32s_limit_of_one_sign_train(separable):
    """3e38 on every row: the float32 mean overflowed to inf (the standardisation now falls back to float64)."""
    data, x, _, _ = separable
    big = np.where(x > 0, 3e38, 1e38).astype(np.float32)
    result = crowdlayer(epochs=1).fit(data, big)
    assert np.isfinite(result.posteriors).all()


def test_answers_that_are_not_an_annotation_set_are_a_usage_error(separable):
    """``CrowdLayer().fit(DataFrame of answers, features with NaN)`` raised AttributeError: 'DataFrame' object has
    no attribute 'task_names'."""
    import pandas as pd

    data, x, _, _ = separable
    answers = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["x", "y", "x"], "label": ["0", "1", "1"]})
    features = pd.DataFrame({"f0": [1.0, np.nan], "f1": [0.0, 1.0]})
    for given in (answers, answers.to_dict("records"), "answers.csv", None):
        with pytest.raises(UsageError) as info:
            crowdlayer().fit(given, features)
        assert str(info.value) == ("crowdlayer.fit(data, features): data must be an AnnotationSet "
                                   "(crowdagg.load_annotations reads a DataFrame, records or a file into one), got "
                                   f"{type(given).__name__}")
    from crowdagg import load_annotations

    with pytest.raises(DataError, match=r"row 1 \(task 'b'\) holds NaN or inf"):  # what the advice leads to
        crowdlayer().fit(load_annotations(answers), features)


def test_a_network_too_large_for_max_memory_is_refused_up_front_with_its_size(separable, monkeypatch):
    """A cnn of ``hidden=65536`` (torch asked its allocator for 9.6 GB for one layer) was an "unexpected failure"
    under ``--max-memory 1G``: the network's weights, their gradients and Adam's moments, and a batch's
    activations are counted with the data before anything is allocated."""
    from crowdagg.errors import ResourceError
    from crowdagg.learning import networks

    data, _, _, _ = separable
    images = np.random.default_rng(0).normal(size=(data.n_tasks, 1, 8, 8)).astype(np.float32)
    built, real = [], networks.build
    monkeypatch.setattr(networks, "build", lambda spec: built.append(spec) or real(spec))
    with pytest.raises(ResourceError) as info:
        crowdlayer(model="cnn", hidden=65536).fit(data, images, max_memory="1G")
    assert len(built) == 1  # counted on the meta device (networks.n_weights), never built to train
    a, b = 65536 // 4, 65536 // 2
    weights = 2 + (9 * a + a) + (9 * a * a + a) + (9 * a * b + b) + (9 * b * b + b) + (b * 3 + 3)
    assert networks.n_weights(networks.NetSpec("cnn", (1, 8, 8), 3, 65536)) == weights
    message = str(info.value)
    assert message.startswith("this needs ~") and "more than the limit of 1.00 GB (max_memory=1.00 GB)" in message
    assert f"a cnn network of {weights:,} weights (hidden=65536) trained on batches of 32 tasks" in message
    assert "use fewer tasks, or a smaller hidden or batch_size" in message


@pytest.mark.parametrize("kind, shape", [("linear", (8,)), ("mlp", (8,)), ("cnn", (2, 8, 8))])
def test_the_networks_count_of_weights_is_its_state_dicts(kind, shape):
    from crowdagg.learning import networks

    spec = networks.NetSpec(kind, shape, 3, hidden=16)
    assert networks.n_weights(spec) == sum(t.numel() for t in networks.build(spec).state_dict().values())
    need, weights = networks.memory_needed(spec, 32, 100)
    assert need == networks.FIT_BYTES_PER_WEIGHT * weights + 4.0 * 100 * networks.activations_per_row(spec)


def test_a_dataframe_indexed_by_task_is_matched_to_the_tasks_by_its_index(separable):
    """``fit(data, pd.read_csv(...).set_index("task"))`` took the rows by position: a table sorted otherwise than
    the answers trained each task on another task's features without a word."""
    import pandas as pd

    data, x, _, _ = separable
    expected = crowdlayer(epochs=1).fit(data, x).posteriors
    by_task = pd.DataFrame(x, index=pd.Index(data.task_names, name="task"), columns=[f"f{j}" for j in range(8)])
    shuffled = by_task.sample(frac=1.0, random_state=0)
    assert not shuffled.index.equals(by_task.index)
    np.testing.assert_array_equal(crowdlayer(epochs=1).fit(data, shuffled).posteriors, expected)
    unnamed_text = shuffled.rename_axis(None)  # an index of text names tasks too
    np.testing.assert_array_equal(crowdlayer(epochs=1).fit(data, unnamed_text).posteriors, expected)
    # row numbers left by filtering or sorting (an unnamed integer index) are not tasks: the rows go in order
    renumbered = by_task.set_axis(np.arange(data.n_tasks) * 2)
    np.testing.assert_array_equal(crowdlayer(epochs=1).fit(data, renumbered).posteriors, expected)
    with pytest.raises(DataError, match=r"^features: the DataFrame's index \(its rows' tasks\) has no row for 1 of "
                                        rf"the 400 tasks: '{data.task_names[0]}'; index it by task, or reset_index"):
        crowdlayer(epochs=1).fit(data, by_task.rename(index={data.task_names[0]: "elsewhere"}))
    with pytest.raises(DataError, match=rf"names task '{data.task_names[1]}' twice"):
        crowdlayer(epochs=1).fit(data, by_task.rename(index={data.task_names[0]: data.task_names[1]}))


# --------------------------------------------------------------------------- the services (issue 30)
@pytest.mark.parametrize("n,size,policy,expected", [
    (10, 4, base.BatchPolicy(), [(0, 4), (4, 8), (8, 10)]),
    (9, 4, base.BatchPolicy(min_batch=2), [(0, 4), (4, 9)]),  # a last batch of 1 joins the one before
    (10, 4, base.BatchPolicy(min_batch=2), [(0, 4), (4, 8), (8, 10)]),
    (10, 4, base.BatchPolicy(drop_last=True), [(0, 4), (4, 8)]),
    (3, 4, base.BatchPolicy(drop_last=True), [(0, 3)]),  # a single batch is always kept
    (10, 4, base.BatchPolicy(full_batch=True), [(0, 10)]),
    (0, 4, base.BatchPolicy(), []),
])
def test_the_batch_policy_cuts_an_epoch(n, size, policy, expected):
    assert policy.bounds(n, size) == expected


def test_the_batch_policy_refuses_batches_below_its_minimum_before_training():
    policy = base.BatchPolicy(min_batch=2)
    with pytest.raises(UsageError, match="batch_size must be at least 2 for maxmig"):
        policy.check("maxmig", 100, 1)
    with pytest.raises(DataError, match="at least 2 tasks with training answers"):
        policy.check("maxmig", 1, 64)
    policy.check("maxmig", 2, 2)
    base.BatchPolicy(min_batch=2, full_batch=True).check("deepbp", 5, 1)  # batch_size unused in full batch


def test_one_estimator_fits_twice_as_two_fresh_ones(separable):
    data, x, _, _ = separable
    one = crowdlayer(seed=3, epochs=2)
    first, second = one.fit(data, x), one.fit(data, x)
    fresh = crowdlayer(seed=3, epochs=2).fit(data, x)
    for r in (first, second):
        assert np.array_equal(r.posteriors, fresh.posteriors)
    assert not [k for k in vars(one) if k not in one.params()]  # nothing but the parameters on the estimator


def test_the_answers_row_order_does_not_change_the_fit(separable):
    from crowdagg.data.annotations import AnnotationSet

    data, x, _, _ = separable
    rng = np.random.default_rng(0)
    rows = rng.permutation(data.n_answers)
    names = (data.task_names[data.task], data.worker_names[data.worker], np.asarray(data.classes)[data.label])
    shuffled = AnnotationSet.from_names(*(a[rows] for a in names), classes=data.classes)
    position = {t: i for i, t in enumerate(data.task_names)}
    x_shuffled = x[[position[t] for t in shuffled.task_names]]
    a = crowdlayer(seed=1, epochs=2).fit(data, x)
    b = crowdlayer(seed=1, epochs=2).fit(shuffled, x_shuffled)
    assert not np.array_equal(shuffled.task_names, data.task_names)  # the premise: other codes
    by_name = {t: i for i, t in enumerate(b.labels_series().index)}
    order = [by_name[t] for t in a.labels_series().index]
    assert np.array_equal(a.posteriors, b.posteriors[order])
    assert np.array_equal(a.model_params["model"].predict_proba(x), b.model_params["model"].predict_proba(x))


def test_module_groups_have_their_own_learning_rates(separable):
    data, x, _, _ = separable
    seen = {}
    real = base.Trainer._param_groups

    def spy(self, ctx):
        groups = real(self, ctx)
        seen["lr"] = [g.get("lr", ctx.params["lr"]) for g in groups]
        seen["wd"] = [g["weight_decay"] for g in groups]
        return groups

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base.Trainer, "_param_groups", spy)
        get_trainer("tracereg").load()(**{**SMALL, "epochs": 1, "lr": 1e-3, "confusion_lr_scale": 7.0}).fit(data, x)
    assert seen["lr"] == [1e-3, pytest.approx(7e-3)] and seen["wd"] == [1e-4, 0.0]


def test_a_trainable_module_outside_a_declared_group_is_the_methods_error(separable):
    data, x, _, _ = separable
    cls = get_trainer("crowdlayer").load()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cls, "_build", lambda self, ctx: {"stray": torch.nn.Linear(2, 2)})
        with pytest.raises(TypeError, match="'stray' has trainable parameters but no declared module group"):
            crowdlayer(epochs=1).fit(data, x)


def test_a_given_module_is_trained_as_the_network_and_left_unchanged(separable):
    data, x, truth, _ = separable
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    result = crowdlayer(seed=2, epochs=6).fit(data, x, network=net)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    model = result.model_params["model"]
    assert model.spec.kind == "module" and (model.predict(x) == np.asarray(data.classes)[truth]).mean() > 0.9
    with pytest.raises(UsageError, match=r"to \(B, 3\) logits, one per class; on 2 rows it gives \(2, 5\)"):
        crowdlayer(epochs=1).fit(data, x, network=torch.nn.Linear(8, 5))
    with pytest.raises(UsageError, match="the network given fails on a batch of features of shape"):
        crowdlayer(epochs=1).fit(data, x, network=torch.nn.Linear(7, 3))


def test_the_kept_epoch_line_says_which_epoch_and_why_training_stopped(separable):
    from crowdagg.cli.train import kept_epoch_line

    data, x, _, _ = separable
    result = crowdlayer(seed=7, epochs=30, patience=2, lr=0.05).fit(data, x)
    checked = crowdlayer(epochs=30, patience=2).check_params()
    line = kept_epoch_line(result, checked, "held-out answer NLL")
    best = result.model_params["best_epoch"]
    assert line.startswith(f"train: kept epoch {best} of {result.n_iter} (held-out answer NLL ")
    assert result.n_iter == best + 2 < 30  # the premise: patience stopped this run (lr 0.05 overfits early)
    assert line.endswith("; stopped after 2 epochs without a better one (--patience 2)")
    score = float(line.split("NLL ")[1].split(")")[0])
    assert score == pytest.approx(result.objective[best - 1], abs=5e-5)  # the kept epoch's held-out score


def test_the_kept_epoch_line_says_when_too_few_answers_left_nothing_held_out():
    """--val-fraction 0.1 of one answer holds none out: the line called the training loss the held-out NLL."""
    from crowdagg.cli.train import kept_epoch_line
    from crowdagg.data.annotations import AnnotationSet

    data = AnnotationSet.from_codes(np.array([0]), np.array([0]), np.array([1]), n_tasks=2, n_workers=1,
                                    n_classes=2, task_names=["a", "b"])
    x = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    with pytest.warns(CrowdaggWarning):
        result = crowdlayer(epochs=3, hidden=4).fit(data, x)
    assert result.model_params["n_held_out"] == 0
    line = kept_epoch_line(result, crowdlayer(epochs=3).check_params(), "held-out answer NLL")
    assert line == "train: kept the last epoch, 3 (nothing held out: --val-fraction 0.1 of 1 answer is none)"
    one = dataclasses.replace(result, n_iter=1, model_params={**result.model_params, "n_held_out": 1,
                                                               "best_epoch": 1})
    assert kept_epoch_line(one, crowdlayer(epochs=1).check_params(), "NLL").endswith("; ran its 1 epoch")
    stopped = dataclasses.replace(one, n_iter=4)
    assert "stopped after 3 epochs" in kept_epoch_line(stopped, crowdlayer(epochs=9).check_params(), "NLL")
    stopped = dataclasses.replace(one, n_iter=2)
    assert "stopped after 1 epoch without" in kept_epoch_line(stopped, crowdlayer(epochs=9).check_params(), "NLL")


def test_split_canonical_and_batch_bounds_refuse_in_the_librarys_words(separable):
    """split(data, nan, 1) raised numpy's ValueError, split(data, 0.1, -1) and a float seed numpy's own, a
    DataFrame as data AttributeError; BatchPolicy.bounds(10, 0) range()'s ValueError, (10, -1) an IndexError."""
    import pandas as pd

    data = separable[0]
    for fraction in (float("nan"), -0.5, 2):
        with pytest.raises(UsageError, match="fraction must be a finite number in"):
            base.split(data, fraction, 1)
    for seed in (-1, 1.5, "a"):
        with pytest.raises(UsageError, match="seed must be an integer"):
            base.split(data, 0.1, seed)
    frame = pd.DataFrame({"task": ["a"], "worker": ["w"], "label": ["x"]})
    for call in (lambda: base.split(frame, 0.1, 1), lambda: base.canonical(frame)):
        with pytest.raises(UsageError, match=r"\(data.*\): data must be an AnnotationSet .*got DataFrame"):
            call()
    for size in (0, -1):
        with pytest.raises(UsageError, match="batch_size must be an integer >= 1"):
            base.BatchPolicy().bounds(10, size)
    assert base.split(data, 0.1, 1).sum() == data.n_answers - round(0.1 * data.n_answers)


@pytest.mark.parametrize("method", ["crowdlayer", "mv-then-train"])  # an answer model, and the implied confusion
def test_answer_model_by_chunks_gives_the_same_bytes(separable, monkeypatch, method):
    """The held-out objective and the confusions gather a K × K matrix per row by chunks
    (ANSWER_PROBA_CELLS): one row or one worker at a time gives what one gather gave."""
    from crowdagg.learning import trainer as trainer_module
    from crowdagg.methods.registry import get_trainer

    data, x, _, _ = separable
    fit = dict(model="linear", epochs=3, seed=0, device="cpu")
    whole = get_trainer(method).load()(**fit).fit(data, x)
    monkeypatch.setattr(trainer_module, "ANSWER_PROBA_CELLS", 5)  # K = 3: 1 row, 1 worker a chunk
    chunked = get_trainer(method).load()(**fit).fit(data, x)
    np.testing.assert_array_equal(chunked.objective, whole.objective)
    np.testing.assert_array_equal(chunked.worker_params["confusion"], whole.worker_params["confusion"])
    np.testing.assert_array_equal(chunked.posteriors, whole.posteriors)


def test_task_params_come_back_in_the_callers_order_of_tasks(separable):
    """The ``_task_params`` hook's arrays are in the canonical (sorted-name) order the fit trains in; the result
    holds them in the caller's: each task's own value under its name, whatever order the rows came in."""
    data, x, _, _ = separable
    assert not np.array_equal(np.sort(data.task_names), data.task_names)  # the premise: caller != canonical order
    cls = get_trainer("crowdlayer").load()
    with pytest.MonkeyPatch.context() as mp:
        # each task's value: the number in its name, read from the canonical data the hook sees
        mp.setattr(cls, "_task_params", lambda self, ctx: {
            "number": np.array([float(t[1:]) for t in ctx.data.task_names])})
        result = crowdlayer(epochs=1).fit(data, x)
    assert np.array_equal(result.task_params["number"], [float(t[1:]) for t in data.task_names])
    assert crowdlayer(epochs=1).fit(data, x).task_params == {}  # none by default
