"""``crowdagg.train`` (crowdagg.learning.api): features and answers in any form -> a TrainedModel."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import crowdagg
from crowdagg.errors import DataError, UsageError

QUICK = {"epochs": 6, "hidden": 16, "batch_size": 32, "seed": 1, "lr": 1e-2}


@pytest.fixture(scope="module")
def frame(separable):
    data, x, truth, _ = separable
    answers = pd.DataFrame({"task": data.task_names[data.task], "worker": data.worker_names[data.worker],
                            "label": np.asarray(data.classes)[data.label]})
    return answers, x, truth, data


def test_train_takes_a_dataframe_and_features_named_by_tasks_and_returns_a_model(frame):
    answers, x, truth, data = frame
    model = crowdagg.train(x, answers, "crowdlayer", tasks=data.task_names, **QUICK)
    assert repr(model).startswith("TrainedModel(method='crowdlayer', network=mlp (hidden 16) on 8 features, classes=3")
    assert "weights" not in repr(model) and len(repr(model)) < 200
    assert model.predict_proba(x).shape == (data.n_tasks, 3)
    assert (model.predict(x) == np.asarray(data.classes)[truth]).mean() > 0.9
    labels = model.result.labels_series()
    assert len(labels) == data.n_tasks and "model" not in model.result.model_params  # no reference cycle


def test_rows_are_matched_by_a_task_index_and_feature_only_tasks_are_predicted(frame):
    answers, x, truth, data = frame
    table = pd.DataFrame(x, index=pd.Index(data.task_names, name="task"), columns=[f"f{i}" for i in range(8)])
    extra = pd.DataFrame(np.zeros((1, 8), dtype=np.float32), index=pd.Index(["new"], name="task"),
                         columns=table.columns)
    model = crowdagg.train(pd.concat([table.iloc[::-1], extra]), answers, "crowdlayer", **QUICK)
    assert model.feature_names == tuple(table.columns)
    labels = model.result.labels_series()
    assert "new" in labels.index and len(labels) == data.n_tasks + 1
    np.testing.assert_array_equal(model.predict(table), model.predict(table.to_numpy()))


def test_the_network_is_a_kind_or_a_module(frame):
    answers, x, _, data = frame
    linear = crowdagg.train(x, answers, "crowdlayer", network="linear", tasks=data.task_names, **QUICK)
    assert linear.spec.kind == "linear"
    net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    model = crowdagg.train(x, answers, "geocrowdnet-f", network=net, tasks=data.task_names, **QUICK)
    assert model.spec.kind == "module" and "Sequential (a torch module)" in repr(model)
    assert model.predict_proba(x[:4]).shape == (4, 3)
    with pytest.raises(UsageError, match="cannot be saved to a model file"):
        from crowdagg.learning.model_file import to_bytes

        to_bytes(model)
    with pytest.raises(UsageError, match="network or model, not both"):
        crowdagg.train(x, answers, "crowdlayer", network="mlp", model="linear", tasks=data.task_names)
    with pytest.raises(UsageError, match="network must be linear, mlp, cnn or a torch.nn.Module, got int"):
        crowdagg.train(x, answers, "crowdlayer", network=3, tasks=data.task_names)


def test_bad_calls_are_refused_with_the_libraries_errors(frame):
    answers, x, _, data = frame
    with pytest.raises(UsageError, match="'ds' is an aggregation method"):
        crowdagg.train(x, answers, "ds")
    with pytest.raises(UsageError, match="does not take -p|does not take lam"):
        crowdagg.train(x, answers, "crowdlayer", lam=1.0)
    with pytest.raises(UsageError, match="tasks names 3 rows for 400 rows of features"):
        crowdagg.train(x, answers, "crowdlayer", tasks=["a", "b", "c"])
    with pytest.raises(DataError, match="have no row in features"):
        crowdagg.train(x[:10], answers, "crowdlayer", tasks=data.task_names[:10])


ONE = {"epochs": 1, "hidden": 4, "batch_size": 64, "seed": 1}


def test_tasks_must_be_ids_one_per_row_in_order(frame):
    """A set (no order) trained each row on another task's answers; an int raised TypeError; None was the task
    'None'; a 2-D array's rows were text; a blank id or one with spaces matched no answer."""
    answers, x, _, data = frame
    names = list(data.task_names)
    for tasks, words in ((set(names), "got set"), (5, "got int"), ("abc", "got str"),
                         (np.array([names, names]).T, "got rows of array")):
        with pytest.raises(UsageError, match=f"tasks must be a sequence of task ids.*{words}"):
            crowdagg.train(x, answers, "crowdlayer", tasks=tasks, **ONE)
    with pytest.raises(DataError, match=r"tasks given: row 2 has no task id \(None\)"):
        crowdagg.train(x, answers, "crowdlayer", tasks=names[:2] + [None] + names[3:], **ONE)
    with pytest.raises(DataError, match="tasks given: row 0 has a blank task id"):
        crowdagg.train(x, answers, "crowdlayer", tasks=[" "] + names[1:], **ONE)
    with pytest.raises(DataError, match=r"tasks given: task 't0' appears twice \(rows 0 and 1\)"):
        crowdagg.train(x, answers, "crowdlayer", tasks=["t0", "t0"] + names[2:], **ONE)
    padded = crowdagg.train(x, answers, "crowdlayer", tasks=[f" {t} " for t in names], **ONE)
    plain = crowdagg.train(x, answers, "crowdlayer", tasks=names, **ONE)
    np.testing.assert_array_equal(padded.weights["1.weight"], plain.weights["1.weight"])  # stripped as the answers


def test_a_frames_index_and_tasks_are_one_statement_of_the_rows_tasks(frame):
    """tasks silently won over a DataFrame index naming other tasks; a MultiIndex said every task was missing
    ("no row in features features")."""
    answers, x, _, data = frame
    table = pd.DataFrame(x, index=pd.Index(data.task_names, name="task"))
    with pytest.raises(UsageError, match=r"tasks names row 0 't\d+' but the features' DataFrame index names it"):
        crowdagg.train(table, answers, "crowdlayer", tasks=data.task_names[::-1], **ONE)
    same = crowdagg.train(table, answers, "crowdlayer", tasks=data.task_names, **ONE)
    np.testing.assert_array_equal(same.weights["1.weight"],
                                  crowdagg.train(table, answers, "crowdlayer", **ONE).weights["1.weight"])
    two = pd.DataFrame(x, index=pd.MultiIndex.from_arrays([data.task_names, data.task_names]))
    with pytest.raises(DataError, match="the DataFrame's index has 2 levels; index the rows by task"):
        crowdagg.train(two, answers, "crowdlayer", **ONE)
    with pytest.raises(DataError, match=r"have no row in features given: 't0'$"):
        crowdagg.train(x[1:], answers, "crowdlayer", tasks=data.task_names[1:], **ONE)


class _Raises(torch.nn.Module):
    """Linear on two rows (the up-front probe), raising on a training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 3)

    def forward(self, x):
        if x.shape[0] != 2:
            raise ValueError("boom")
        return self.layer(x)


class _FirstTwo(torch.nn.Module):
    """Right on two rows, two rows of logits for any batch."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.layer(x)[:2]


class _Integer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.layer(x).long()


class _Uncopyable(torch.nn.Linear):
    def __init__(self) -> None:
        super().__init__(8, 3)
        self.stream = (i for i in range(3))  # a generator: copy.deepcopy cannot copy it


def test_a_module_network_is_refused_in_plain_words(frame):
    """Each of these reached torch's or Python's own error (RuntimeError at backward or at a batch, ValueError from
    the module or from Adam, NotImplementedError, TypeError) or trained silently (integer logits; model= ignored)."""
    answers, x, _, data = frame
    quick = {"epochs": 1, "batch_size": 64, "seed": 1, "tasks": data.task_names}
    frozen = torch.nn.Linear(8, 3).requires_grad_(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script: deprecated, still made
        scripted = torch.jit.script(torch.nn.Linear(8, 3))
    cases = [
        (torch.nn.Linear(8, 3).double(), "has float64 parameters; the features are float32"),
        (torch.nn.Linear(8, 3, device="meta"), "tensors on the 'meta' device, which have no values"),
        (_Uncopyable(), r"cannot be copied for training \(copy.deepcopy\): TypeError"),
        (scripted, "not leaf tensors"),
        (_Raises(), r"fails on a batch of features of shape \(\d+, 8\): ValueError: boom"),
        (_FirstTwo(), r"on \d+ rows it gives \(2, 3\) of float32"),
        (_Integer(), r"on 2 rows it gives \(2, 3\) of int64, not floating point"),
    ]
    for net, words in cases:
        for method in ("crowdlayer", "raykar"):
            with pytest.raises(UsageError, match=words):
                crowdagg.train(x, answers, method, network=net, **quick)
    for method in ("raykar", "mv-then-train"):  # a frozen module and no modules of the method's own
        with pytest.raises(UsageError, match=f"nothing to train: the network has no trainable parameters .* and "
                                             f"{method} has none of its own"):
            crowdagg.train(x, answers, method, network=frozen, **quick)
    fixed = crowdagg.train(x, answers, "crowdlayer", network=frozen, **quick)  # its confusions are trained
    assert np.array_equal(fixed.module.weight.detach().numpy(), frozen.weight.detach().numpy())
    with pytest.raises(UsageError, match="give network or model, not both"):
        crowdagg.train(x, answers, "crowdlayer", network=torch.nn.Linear(8, 3), model="linear", **quick)


def test_a_module_models_predict_checks_its_module_too(frame):
    answers, x, _, data = frame
    net = torch.nn.Linear(8, 3)
    model = crowdagg.train(x, answers, "crowdlayer", network=net, tasks=data.task_names, **ONE | {"hidden": 128})
    model.module = _Raises()
    with pytest.raises(UsageError, match=r"fails on a batch of features of shape \(5, 8\): ValueError: boom"):
        model.predict(x[:5])


def test_a_callback_or_answers_of_the_wrong_kind_are_usage_errors(frame):
    """callback=5 raised Python's TypeError after the first epoch's work (and so in aggregate); the answers'
    message named aggregate."""
    answers, x, _, data = frame
    with pytest.raises(UsageError, match="callback must be callable as callback.iteration, objective., got int"):
        crowdagg.train(x, answers, "crowdlayer", tasks=data.task_names, callback=5, **ONE)
    with pytest.raises(UsageError, match="callback must be callable"):
        crowdagg.aggregate(data, "ds", callback=5)
    with pytest.raises(UsageError, match="^train's answers are an AnnotationSet, a pandas DataFrame.* got int$"):
        crowdagg.train(x, 5, "crowdlayer", **ONE)
