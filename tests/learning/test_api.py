"""``crowdagg.train`` (crowdagg.learning.api): features and answers in any form -> a TrainedModel."""

from __future__ import annotations

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
