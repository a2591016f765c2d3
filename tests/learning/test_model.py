"""The trained model (crowdagg.learning.model.TrainedModel): predict_proba's inputs and devices."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from crowdagg.errors import DataError, UsageError  # noqa: E402
from crowdagg.methods.registry import get_trainer  # noqa: E402


@pytest.fixture(scope="module")
def model_and_x(separable):
    data, x, _, _ = separable
    result = get_trainer("crowdlayer").load()(epochs=2, hidden=8).fit(data, x)
    return result.model_params["model"], x


@pytest.mark.quick  # the module's model: two epochs of an 8-unit network
def test_predict_proba_takes_auto_and_any_array_like(model_and_x):
    """device="auto" (what the trainers take) reached torch.device and raised its RuntimeError."""
    model, x = model_and_x
    expected = model.predict_proba(x)
    assert np.array_equal(model.predict_proba(x, device="auto"), expected)
    assert np.array_equal(model.predict_proba(x.tolist()), expected)
    assert model.predict_proba(np.zeros((0, x.shape[1]))).shape == (0, len(model.classes))


@pytest.mark.parametrize(("features", "kwargs", "error", "words"), [
    (np.array([["a"] * 8]), {}, DataError, "numeric array"),
    (np.zeros((2, 8), dtype=complex), {}, DataError, "numeric array"),
    (np.full((2, 8), 1e300), {}, DataError, "beyond float32's range"),
    (np.zeros((2, 8)), {"batch_rows": 0}, UsageError, "batch_rows must be a whole number >= 1"),
    (np.zeros((2, 8)), {"device": "cuda:7"}, UsageError, "device=cuda:7"),
    (np.zeros((2, 8)), {"device": "mps"}, UsageError, "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto"),
    (np.zeros((2, 8)), {"device": "meta"}, UsageError, "got 'meta'"),
])
def test_predict_proba_refuses_in_plain_words(model_and_x, features, kwargs, error, words):
    """Strings raised numpy's ValueError, complex was silently cast to its real part, batch_rows=0 raised range()'s
    ValueError, cuda without CUDA torch's AssertionError, mps torch's RuntimeError, meta a NotImplementedError."""
    model, _ = model_and_x
    if kwargs.get("device") == "cuda:7":
        import torch

        if torch.cuda.is_available() and torch.cuda.device_count() > 7:
            pytest.skip("this machine has a cuda:7")
    with pytest.raises(error) as info:
        model.predict_proba(features, **kwargs)
    assert words in str(info.value)


def test_predict_proba_takes_torch_tensors_numpy_cannot_hold_as_such(model_and_x):
    """A bfloat16 tensor raised .numpy()'s TypeError; it is read as float32 (exact).  A sparse one is a DataError
    naming its layout, and a torch.Size (a tuple of torch's, no tensor) is refused in words."""
    import torch

    model, x = model_and_x
    assert np.array_equal(model.predict_proba(torch.tensor(x, dtype=torch.bfloat16)),
                          model.predict_proba(torch.tensor(x, dtype=torch.bfloat16).float().numpy()))
    assert np.array_equal(model.predict_proba(torch.tensor(x)), model.predict_proba(x))
    with pytest.raises(DataError, match=r"a torch tensor \(torch.float32, torch.sparse_coo\) numpy cannot hold"):
        model.predict_proba(torch.tensor(x).to_sparse())
    with pytest.raises(DataError, match=r"these features have rows of shape \(\)"):
        model.predict_proba(torch.Size([2, 8]))


def test_predict_proba_and_fit_take_an_array_of_negative_strides(separable, model_and_x):
    """A reversed float32 array (``x[::-1]``, ``np.flip``) was passed through as it was and torch.as_tensor raised
    its ValueError (negative strides are not supported) in predict_proba and in every trainer's fit."""
    data, _, _, _ = separable
    model, x = model_and_x
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    assert np.array_equal(model.predict_proba(x32[::-1]), model.predict_proba(x32)[::-1])
    result = get_trainer("crowdlayer").load()(epochs=1, hidden=8).fit(data, np.flip(x32[::-1], axis=0))
    assert result.labels.shape == (data.n_tasks,)


def test_a_tensor_on_the_meta_device_is_a_data_error(separable, model_and_x):
    """A "meta" tensor (shapes, no values) reached .cpu() and raised torch's NotImplementedError ("Cannot copy out
    of meta tensor") from predict_proba and from a trainer's fit."""
    import torch

    data, _, _, _ = separable
    model, x = model_and_x
    with pytest.raises(DataError, match="a torch tensor on the 'meta' device holds no values"):
        model.predict_proba(torch.empty(x.shape, device="meta"))
    with pytest.raises(DataError, match="a torch tensor on the 'meta' device holds no values"):
        get_trainer("crowdlayer").load()(epochs=1, hidden=8).fit(data, torch.empty(x.shape, device="meta"))


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_a_list_of_tensors_is_read_as_its_tensors_are(separable, model_and_x):
    """A list of row tensors that require grad, or of bfloat16 ones, went through numpy's __array__ and raised
    torch's RuntimeError/TypeError (predict_proba's shape check before anything else); a nested tensor raised its
    RuntimeError there too.  Each row is read as a tensor is; what a tensor refuses, a list of them refuses."""
    import torch

    data, _, _, _ = separable
    model, x = model_and_x
    expected = model.predict_proba(x)
    grad = [torch.tensor(r, requires_grad=True) for r in x]
    assert np.array_equal(model.predict_proba(grad), expected)
    assert np.array_equal(model.predict_proba(tuple(torch.tensor(r) for r in x)), expected)
    bf16 = [torch.tensor(r).bfloat16() for r in x]
    assert np.array_equal(model.predict_proba(bf16), model.predict_proba(torch.stack(bf16)))
    get_trainer("crowdlayer").load()(epochs=1, hidden=8).fit(data, grad)
    with pytest.raises(DataError, match="'meta' device"):
        model.predict_proba([torch.empty(x.shape[1], device="meta") for _ in x])
    with pytest.raises(DataError, match="numpy cannot hold"):
        model.predict_proba(torch.nested.nested_tensor([torch.tensor(r) for r in x]))


@pytest.mark.parametrize(("device", "words"), [
    ("junk", "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 'junk'"),
    ("cuda:x", "got 'cuda:x'"),
    ("meta", "got 'meta'"),
])
def test_network_refuses_a_device_in_plain_words(model_and_x, device, words):
    """``model.network('junk')`` raised torch's RuntimeError."""
    with pytest.raises(UsageError) as info:
        model_and_x[0].network(device)
    assert words in str(info.value)


def test_network_on_cuda_without_cuda_is_a_usage_error(model_and_x, monkeypatch):
    """``model.network('cuda')`` raised torch's bare AssertionError on a machine without CUDA."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(UsageError, match="device=cuda.*: CUDA is not available here"):
            model_and_x[0].network(device)


def test_network_takes_the_names_and_devices_predict_proba_takes(model_and_x):
    import torch

    model, x = model_and_x
    for device in ("cpu", "auto", torch.device("cpu")):
        net = model.network(device)
        assert not net.training
        with torch.no_grad():
            p = torch.softmax(net(torch.as_tensor(x[:5], device=next(net.parameters()).device)), dim=1)
        np.testing.assert_allclose(p.double().cpu().numpy(), model.predict_proba(x[:5]), rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- features matched by name
@pytest.fixture(scope="module")
def named_model(separable):
    import pandas as pd

    data, x, _, _ = separable
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])])
    model = get_trainer("crowdlayer").load()(epochs=2, hidden=8).fit(data, frame).model_params["model"]
    return model, frame


def test_a_dataframes_columns_are_kept_and_matched_by_name(named_model):
    model, frame = named_model
    assert model.feature_names == tuple(frame.columns)
    expected = model.predict_proba(frame.to_numpy())
    reversed_frame = frame[frame.columns[::-1]]
    assert np.array_equal(model.predict_proba(reversed_frame), expected)  # by name
    assert not np.array_equal(model.predict_proba(reversed_frame.to_numpy()), expected)  # an array: by position


@pytest.mark.parametrize(("change", "words"), [
    (lambda f: f.drop(columns="f3"), "1 the model was trained on are missing: 'f3'"),
    (lambda f: f.assign(extra=1.0), "1 the model does not know: 'extra'"),
    (lambda f: f.rename(columns={"f0": "g0"}), "are missing: 'f0'; 1 the model does not know: 'g0'"),
])
def test_a_dataframe_with_missing_or_unknown_columns_is_refused_naming_them(named_model, change, words):
    model, frame = named_model
    with pytest.raises(DataError) as info:
        model.predict_proba(change(frame))
    assert str(info.value).startswith("features: the columns do not match the features the model was trained on "
                                      "by name (") and words in str(info.value)


def test_a_model_without_names_takes_any_dataframe_by_position(model_and_x):
    import pandas as pd

    model, x = model_and_x
    assert model.feature_names is None
    assert np.array_equal(model.predict_proba(pd.DataFrame(x, columns=list("hgfedcba"))), model.predict_proba(x))


@pytest.mark.parametrize(("names", "error", "words"), [
    (["a"] * 8, DataError, "feature_names: the column 'a' appears twice (columns 1 and 2)"),
    (["a", "b"], UsageError, "feature_names has 2 names for 8 features"),
    ("abcdefgh", UsageError, "feature_names must be a list of names, one per feature, got str"),
])
def test_feature_names_given_to_fit_are_checked(separable, names, error, words):
    data, x, _, _ = separable
    with pytest.raises(error) as info:
        get_trainer("crowdlayer").load()(epochs=1, hidden=4).fit(data, x, feature_names=names)
    assert str(info.value).startswith(words)


def test_predict_takes_a_numpy_integer_batch_and_names_a_single_row(model_and_x):
    """batch_rows=np.int64(4) was 'must be a whole number'; one row of shape (d,) was 'rows of shape ()'."""
    model, x = model_and_x
    np.testing.assert_allclose(model.predict_proba(x[:9], batch_rows=np.int64(4)), model.predict_proba(x[:9]), rtol=1e-6)
    with pytest.raises(UsageError, match="batch_rows must be a whole number"):
        model.predict_proba(x[:9], batch_rows=True)
    with pytest.raises(DataError, match=r"features of shape \(8,\) are one row.*x\[None\]"):
        model.predict(x[0])


def test_predict_takes_a_torch_device_as_network_does(model_and_x):
    """network(torch.device("cpu")) worked, predict(x, device=torch.device("cpu")) was refused as not a device."""
    import torch

    model, x = model_and_x
    assert model.predict_proba(x[:4], device=torch.device("cpu")).tobytes() == model.predict_proba(x[:4]).tobytes()
    with pytest.raises(UsageError, match="device must be cpu, cuda, cuda:N"):
        model.predict_proba(x[:4], device=torch.device("meta"))
