"""The saved model file: a round trip gives the same predictions, and every bad file is one clear DataError.

The bad files are made from a valid one by editing its bytes, its header's
JSON or its tensors (re-signed with the file's checksum where the point is
a check behind the checksum), so each test fails if its check is missing.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import pickle
import re
import struct
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from crowdagg.errors import DataError, ResourceError, UsageError  # noqa: E402
from crowdagg.learning import model_file as mf  # noqa: E402
from crowdagg.learning import networks  # noqa: E402
from crowdagg.learning.model import TrainedModel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trained() -> tuple[TrainedModel, np.ndarray, bytes]:
    """A CrowdLayer model trained 2 epochs on a small simulated crowd; its features; its file."""
    from crowdagg.methods.registry import get_trainer
    from crowdagg.simulate import simulate
    from crowdagg.simulate.features import gaussian_features

    crowd = simulate(n_tasks=150, n_workers=8, n_classes=3, per_task=3, seed=3)
    x = gaussian_features(crowd.truth, 3, dim=6, separation=3.0, seed=3)
    result = get_trainer("crowdlayer").load()(epochs=2, hidden=8).fit(crowd.to_annotations(), x)
    model = result.model_params["model"]
    return model, x, mf.to_bytes(model)


# ----------------------------------------------------------------------------- building files by hand
def parts(blob: bytes) -> tuple[dict[str, str], dict[str, Any], dict[str, tuple[str, np.ndarray]]]:
    """(metadata, the model's header fields, tensors name -> (dtype, array)) of a valid file."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__")
    data = blob[8 + n:]
    tensors = {}
    for name, e in header.items():
        lo, hi = e["data_offsets"]
        dtype = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8"}[e["dtype"]]
        tensors[name] = (e["dtype"], np.frombuffer(data[lo:hi], dtype=dtype).reshape(e["shape"]))
    return meta, json.loads(meta["header"]), tensors


def build(meta: dict[str, str], fields: Any, tensors: dict[str, tuple[str, np.ndarray]], *, sign: bool = True,
          header_text: str | None = None, reverse: bool = False) -> bytes:
    """A file from its parts (signed with the file's checksum unless ``sign`` is False), no checks."""
    meta = dict(meta)
    if header_text is None:
        header_text = json.dumps(fields, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    meta["header"] = header_text
    table, chunks, offset = {}, {}, 0
    for name in sorted(tensors, reverse=reverse):
        dtype, array = tensors[name]
        raw = np.ascontiguousarray(array).tobytes()
        table[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks[name] = raw
        offset += len(raw)
    if sign:
        meta["sha256"] = mf._checksum(meta["version"], header_text,
                                      [(name, table[name]["dtype"], tuple(table[name]["shape"]), chunks[name])
                                       for name in sorted(tensors)])
    head = json.dumps({"__metadata__": meta, **table}).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(chunks.values())


def edited(blob: bytes, edit: Any) -> bytes:
    """The file with ``edit(fields, tensors)`` applied (in place) and signed again."""
    meta, fields, tensors = parts(blob)
    tensors = {k: (d, a.copy()) for k, (d, a) in tensors.items()}
    edit(fields, tensors)
    return build(meta, fields, tensors)


def refused(blob: bytes, match: str) -> DataError:
    with pytest.raises(DataError, match=match) as info:
        mf.from_bytes(blob, "bad.model")
    assert str(info.value).startswith("bad.model: ")
    assert "\n" not in str(info.value)
    return info.value


# ----------------------------------------------------------------------------- round trip
def test_round_trip_gives_identical_model_and_predictions(trained):
    model, x, blob = trained
    back = mf.from_bytes(blob)
    assert back.method == model.method == "crowdlayer"
    assert back.classes == model.classes and back.spec == model.spec
    assert back.best_epoch == model.best_epoch and back.class_dtype == model.class_dtype
    assert back.version == model.version
    assert set(back.weights) == set(model.weights)
    for key, value in model.weights.items():
        assert back.weights[key].dtype == np.float32 and np.array_equal(back.weights[key], value)
        assert back.weights[key].flags.writeable  # copied out of the file, not a view of it
    assert np.array_equal(back.workers, model.workers)
    assert back.confusion.dtype == np.float64 and np.array_equal(back.confusion, model.confusion)
    assert np.array_equal(back.predict_proba(x), model.predict_proba(x))
    assert mf.to_bytes(back) == blob  # the same model gives the same bytes


def test_save_and_load_a_path_atomically(trained, tmp_path):
    model, x, blob = trained
    path = tmp_path / "model.safetensors"
    mf.save(model, path)
    assert path.read_bytes() == blob
    assert np.array_equal(mf.load(path).predict_proba(x), model.predict_proba(x))
    assert np.array_equal(mf.load(str(path)).confusion, model.confusion)
    gz = tmp_path / "model.safetensors.gz"
    gz.write_bytes(gzip.compress(blob))  # a compressed model is still read ...
    assert np.array_equal(mf.load(gz).predict_proba(x), model.predict_proba(x))
    mf.save(model, path)  # replaces the file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "model.safetensors.gz"]


@pytest.mark.parametrize("name, message", [
    ("model.csv", "the model file {}: a trained model is a safetensors file, not .csv; name it .safetensors or .pt"),
    ("model.json", "the model file {}: a trained model is a safetensors file, not .json; name it .safetensors or .pt"),
    ("model.safetensors.gz", "the model file {}: a trained model is not compressed (any safetensors reader opens "
     "it); name it .safetensors or .pt"),
    ("model.gz", "the model file {}: a trained model is not compressed"),
])
def test_save_follows_the_rule_of_every_outputs_name(trained, tmp_path, name, message):
    """... but written under one name only, the rule of ``crowdagg train --save`` (a .csv name held safetensors)."""
    with pytest.raises(UsageError) as info:
        mf.save(trained[0], tmp_path / name)
    assert str(info.value).startswith(message.format(tmp_path / name))
    assert list(tmp_path.iterdir()) == []
    mf.save(trained[0], tmp_path / "MODEL.PT")  # the documented name, in any case
    assert mf.load(tmp_path / "MODEL.PT").classes == trained[0].classes


def test_the_library_entry_loads_a_model(trained, tmp_path):
    import crowdagg

    model, x, _ = trained
    mf.save(model, tmp_path / "m.pt")
    assert np.array_equal(crowdagg.load_model(tmp_path / "m.pt").predict_proba(x), model.predict_proba(x))


@pytest.mark.parametrize("kind,shape", [("linear", (5,)), ("cnn", (2, 8, 8))])
def test_round_trip_of_every_network_kind(kind, shape):
    spec = networks.NetSpec(kind, shape, 4, hidden=8)
    torch.manual_seed(0)
    net = networks.build(spec)
    model = TrainedModel.from_network(method="crowdlayer", classes=["a", "b", "c", "d"], spec=spec, net=net)
    back = mf.from_bytes(mf.to_bytes(model))
    assert back.spec == spec and back.workers is None and back.confusion is None
    x = np.random.default_rng(0).normal(size=(7, *shape)).astype(np.float32)
    assert np.array_equal(back.predict_proba(x), model.predict_proba(x))


def test_loading_draws_nothing_from_torchs_generator(trained):
    state = torch.random.get_rng_state()
    mf.from_bytes(trained[2])
    assert torch.equal(state, torch.random.get_rng_state())


def test_the_file_is_standard_safetensors_both_ways(trained):
    st = pytest.importorskip("safetensors.numpy")
    model, x, blob = trained
    read = st.load(blob)  # the safetensors package reads our file ...
    assert np.array_equal(read["confusion"], model.confusion)
    for key, value in model.weights.items():
        assert np.array_equal(read["net." + key], value)
    meta, _, tensors = parts(blob)
    theirs = st.save({name: array for name, (_, array) in tensors.items()}, metadata=meta)
    assert np.array_equal(mf.from_bytes(theirs).predict_proba(x), model.predict_proba(x))  # ... and we read its
    meta, fields, tensors = parts(blob)
    reordered = build(meta, fields, tensors, reverse=True)  # the data in another order: the offsets say where
    assert reordered != blob and st.load(reordered).keys() == read.keys()
    assert np.array_equal(mf.from_bytes(reordered).predict_proba(x), model.predict_proba(x))


# ----------------------------------------------------------------------------- not a model file
def test_a_foreign_safetensors_file_is_refused(trained):
    st = pytest.importorskip("safetensors.numpy")
    refused(st.save({"weight": np.zeros((2, 2), np.float32)}), "no metadata, not a crowdagg model file")
    refused(st.save({"weight": np.zeros(2, np.float32)}, metadata={"format": "pt"}),
            'format "pt", not a crowdagg model file')
    meta, fields, tensors = parts(trained[2])
    refused(build({**meta, "format": "crowdagg-workers"}, fields, tensors), "not a crowdagg model file")


@pytest.mark.parametrize("version,match", [
    ("2", "version 2, written by a newer crowdagg; this one reads version 1: upgrade crowdagg"),
    ("0", "is not a version number"),
    ("1.0", "is not a version number"),
    ("x", "is not a version number"),
])
def test_another_version_is_refused(trained, version, match):
    meta, fields, tensors = parts(trained[2])
    refused(build({**meta, "version": version}, fields, tensors), match)


def test_truncated_files_are_refused(trained):
    blob = trained[2]
    refused(blob[:5], "too short to hold the 8-byte header length")
    refused(blob[:60], "beyond the end of the 60-byte file; truncated")
    refused(blob[:-1], "the file is truncated: tensor")
    refused(b"", "0 bytes")
    for n in range(0, len(blob), 7):  # every cut is refused
        with pytest.raises(DataError):
            mf.from_bytes(blob[:n])


def test_bytes_after_the_last_tensor_are_refused(trained):
    refused(trained[2] + b"\0" * 8, "8 bytes after the last tensor")


def test_a_huge_declared_header_length_is_refused_without_allocating_it(monkeypatch):
    tracemalloc.start()
    try:
        for n in (2**63, 2**64 - 1, 10**12):
            refused(struct.pack("<Q", n) + b"{}      ", f"a header of {n:,} bytes, beyond the end")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    monkeypatch.setattr(mf, "MAX_HEADER_BYTES", 64)
    refused(struct.pack("<Q", 128) + b" " * 128, "a header of 128 bytes, more than the 64")


def test_a_header_that_is_not_json_is_refused(trained):
    blob = trained[2]
    (n,) = struct.unpack("<Q", blob[:8])
    refused(blob[:8] + b"x" * n + blob[8 + n:], "the header is not JSON")
    refused(blob[:8] + b"\xff" * n + blob[8 + n:], "the header is not UTF-8 text")
    refused(blob[:8] + b"[" + b" " * (n - 2) + b"]" + blob[8 + n:], "its header is not a JSON object")
    refused(struct.pack("<Q", 20000) + b"[" * 20000, "not JSON")  # nested past the recursion limit


def test_repeated_keys_and_nan_are_refused(trained):
    meta, fields, tensors = parts(trained[2])
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    refused(build(meta, None, tensors, header_text='{"method":"x",' + text[1:]), 'key "method" twice')
    refused(build(meta, None, tensors, header_text=re.sub(r'"best_epoch":[0-9]+', '"best_epoch":NaN', text)),
            "holds NaN, which JSON does not allow")
    blob = build(meta, fields, tensors)
    (n,) = struct.unpack("<Q", blob[:8])
    head = blob[8:8 + n].replace(b'{"__metadata__"', b'{"confusion":{},"__metadata__"', 1)
    refused(struct.pack("<Q", len(head)) + head + blob[8 + n:], 'key "confusion" twice')


def test_a_modified_file_fails_its_checksum(trained):
    blob = bytearray(trained[2])
    blob[-3] ^= 0x01  # one bit of the last weight
    refused(bytes(blob), "the file was modified after it was saved")
    meta, fields, tensors = parts(trained[2])
    fields["classes"] = ["0", "2", "1"]  # a valid header, not the one that was saved
    refused(build(meta, fields, tensors, sign=False), "the file was modified after it was saved")
    refused(build({**meta, "sha256": "0" * 63}, fields, tensors, sign=False), "not a SHA-256")


def _set(path: str, value: Any) -> Any:
    def edit(fields, tensors):
        obj, *keys = path.split(".")
        target = fields if not keys else fields[obj]
        key = keys[0] if keys else obj
        if value is KeyError:
            del target[key]
        else:
            target[key] = value
    return edit


@pytest.mark.parametrize("path,value,match", [
    ("method", KeyError, 'lacks "method"'),
    ("network", KeyError, 'lacks "network"'),
    ("extra", 1, 'unknown field "extra" in the model\'s header'),
    ("method", 3, '"method" is 3, not a non-empty string'),
    ("method", "", '"method" is "" \\(a string\\), not a non-empty string'),
    ("crowdagg_version", None, '"crowdagg_version" is null'),
    ("classes", "abc", '"classes" is "abc" \\(a string\\), not a list of names'),
    ("classes", [0, 1, 2], '"classes\\[0\\]" is 0'),
    ("classes", ["a", "b", "a"], '"classes" lists "a" twice'),
    ("classes", ["a", "\ud800", "c"], '"classes\\[1\\]" is not valid text'),
    ("classes", [], '"classes" is empty'),
    ("classes", ["a", "b"], '"network.n_classes" is 3 but "classes" lists 2'),
    ("class_dtype", 5, '"class_dtype" is 5'),
    ("best_epoch", -1, '"best_epoch" is -1, not an integer'),
    ("best_epoch", True, '"best_epoch" is true \\(a boolean\\)'),
    ("best_epoch", 1.5, '"best_epoch" is 1.5'),
    ("n_features", 7, '"n_features" is 7 but "network.input_shape" \\[6\\] makes 6'),
    ("workers", "w0", '"workers" is "w0" \\(a string\\), not a list of names'),
    ("workers", ["w"] * 8, '"workers" lists "w" twice'),
    ("network.kind", "rnn", '"network.kind" is "rnn" \\(a string\\), not one of linear, mlp, cnn'),
    ("network.kind", "cnn", '"network.input_shape" is not \\[channels, height, width\\]'),
    ("network.input_shape", [0], '"network.input_shape" is not \\[features\\]'),
    ("network.input_shape", 6, '"network.input_shape" is not \\[features\\]'),
    ("network.hidden", "8", '"network.hidden" is "8" \\(a string\\)'),
    ("network.hidden", 0, '"network.hidden" is 0'),
    ("network.hidden", 65537, '"network.hidden" is 65537, not an integer from 1 to 65,536'),
    ("network.n_classes", 2**24 + 1, '"network.n_classes" is 16777217, not an integer from 1 to 16,777,216'),
    ("network.n_classes", 2.0, '"network.n_classes" is 2.0'),
    ("network.dropout", 1.0, '"network.dropout" is 1.0, not a probability'),
    ("network.dropout", "0.5", '"network.dropout" is "0.5"'),
    ("network.dropout", KeyError, '"network" lacks "dropout"'),
    ("network.depth", 2, 'unknown field "depth" in "network"'),
])
def test_missing_extra_and_mistyped_fields_are_refused(trained, path, value, match):
    refused(edited(trained[2], _set(path, value)), match)


def test_a_header_that_is_not_an_object_is_refused(trained):
    meta, _, tensors = parts(trained[2])
    refused(build(meta, [1, 2], tensors), "the model's header is a list, not an object")


def test_tensors_must_be_the_networks(trained):
    blob = trained[2]

    def drop(fields, tensors):
        del tensors["net.4.bias"]

    def extra(fields, tensors):
        tensors["net.9.weight"] = ("F32", np.zeros(3, np.float32))

    def reshape(fields, tensors):
        tensors["net.1.weight"] = ("F32", tensors["net.1.weight"][1].reshape(6, 8).copy())

    def wider(fields, tensors):
        fields["network"]["hidden"] = 16

    def deeper(fields, tensors):  # a spec that would be huge if it were built for real
        fields["network"]["hidden"] = 65536
        fields["network"]["input_shape"] = [2**31]
        fields["n_features"] = 2**31

    refused(edited(blob, drop), "the mlp network's tensor 'net.4.bias' is missing")
    refused(edited(blob, extra), 'unknown tensor "net.9.weight"')
    refused(edited(blob, reshape), r"tensor 'net.1.weight' has shape \[6, 8\]; the mlp network .* has \[8, 6\]")
    refused(edited(blob, wider), r"tensor 'net.1.weight' has shape \[8, 6\]; the mlp network .* has \[16, 6\]")
    refused(edited(blob, deeper), r"has shape \[6\]; the mlp network .* has \[2147483648\]")

    def largest(kind: str, shape: list[int]) -> Any:  # every dimension at its bound, on each kind of network
        def edit(fields, tensors):
            fields["network"].update(kind=kind, input_shape=shape, hidden=65536)
            fields["n_features"] = math.prod(shape)
        return edit

    for kind, shape in (("linear", [2**31]), ("mlp", [2**31]), ("cnn", [2**31, 2**31, 2**31])):
        refused(edited(blob, largest(kind, shape)), "has shape|unknown tensor|is missing|n_features")


@pytest.mark.parametrize("dtype", ["F16", "F64", "I64"])
def test_weights_of_another_dtype_are_refused(trained, dtype):
    def edit(fields, tensors):
        array = tensors["net.1.weight"][1]
        tensors["net.1.weight"] = (dtype, array.astype({"F16": "<f2", "F64": "<f8", "I64": "<i8"}[dtype]))

    refused(edited(trained[2], edit), f"tensor \"net.1.weight\" is \"{dtype}\"; a network's weights are F32")


def test_a_float32_confusion_is_refused(trained):
    def edit(fields, tensors):
        tensors["confusion"] = ("F32", tensors["confusion"][1].astype("<f4"))

    refused(edited(trained[2], edit), "tensor \"confusion\" is \"F32\"; the annotators' confusions are F64")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused(trained, value):
    def edit(fields, tensors):
        tensors["net.4.weight"][1][1, 2] = value

    refused(edited(trained[2], edit), r"tensor 'net.4.weight' holds (nan|inf|-inf) at \[1, 2\]")


def test_a_zero_input_scale_is_refused(trained):
    def edit(fields, tensors):
        tensors["net.0.scale"][1][0] = 0.0

    refused(edited(trained[2], edit), "'net.0.scale' .* holds a value <= 0")


def test_confusions_must_match_workers_and_classes(trained):
    blob = trained[2]

    def fewer_workers(fields, tensors):
        fields["workers"] = fields["workers"][:-1]

    def no_workers(fields, tensors):
        del fields["workers"]

    def not_a_distribution(fields, tensors):
        tensors["confusion"][1][2, 1] *= 0.5

    def negative(fields, tensors):
        tensors["confusion"][1][0, 0, 0] = -0.1

    def nan(fields, tensors):
        tensors["confusion"][1][0, 0, 0] = np.nan

    refused(edited(blob, fewer_workers), r"tensor 'confusion' has shape \[8, 3, 3\], not \[workers, classes, "
                                         r"classes\] = \[7, 3, 3\]")
    refused(edited(blob, no_workers), "tensor 'confusion' without \"workers\"")
    refused(edited(blob, not_a_distribution), "the confusion row of worker 'w2', true class '1' does not sum to 1")
    refused(edited(blob, negative), r"confusion\[0, 0, 0\] is -0.1, not a probability")
    refused(edited(blob, nan), "tensor 'confusion' holds nan")


def test_a_model_without_confusions_loads(trained):
    def edit(fields, tensors):
        del tensors["confusion"]
        del fields["workers"]

    back = mf.from_bytes(edited(trained[2], edit))
    assert back.confusion is None and back.workers is None
    assert np.array_equal(back.predict_proba(trained[1]), trained[0].predict_proba(trained[1]))


def test_bad_tensor_entries_are_refused(trained):
    meta, fields, tensors = parts(trained[2])
    blob = build(meta, fields, tensors)
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])

    def with_entry(name: str, entry: Any) -> bytes:
        head = json.dumps({**header, name: entry}).encode()
        return struct.pack("<Q", len(head)) + head + blob[8 + n:]

    good = header["net.4.bias"]
    refused(with_entry("net.4.bias", [1]), "tensor \"net.4.bias\"'s entry is not")
    refused(with_entry("net.4.bias", {**good, "extra": 1}), "tensor \"net.4.bias\"'s entry is not")
    refused(with_entry("net.4.bias", {**good, "shape": [-3]}), "shape is not a list of sizes")
    refused(with_entry("net.4.bias", {**good, "shape": [True]}), "shape is not a list of sizes")
    refused(with_entry("net.4.bias", {**good, "shape": [1] * 9}), "shape is not a list of sizes")
    refused(with_entry("net.4.bias", {**good, "shape": [4]}), r"has shape \[4\] \(16 bytes\) but data_offsets")
    lo, hi = good["data_offsets"]
    refused(with_entry("net.4.bias", {**good, "data_offsets": [hi, lo]}), "are not \\[begin, end\\] byte offsets")
    refused(with_entry("net.4.bias", {**good, "data_offsets": [lo]}), "are not \\[begin, end\\] byte offsets")
    refused(with_entry("net.4.bias", {**good, "data_offsets": [lo + 4, hi + 4]}), "leaves a gap of 4 bytes")
    refused(with_entry("net.4.bias", {**good, "data_offsets": [lo - 4, hi - 4]}), "overlaps the tensor before it")
    other = header["net.4.weight"]
    refused(with_entry("net.4.weight", {**other, "data_offsets": good["data_offsets"], "shape": good["shape"]}),
            "overlaps|gap")
    refused(with_entry("__metadata__", {**header["__metadata__"], "format": 3}), "not a map of strings")
    refused(with_entry("__metadata__", {**header["__metadata__"], "note": "x"}), 'unknown metadata field "note"')
    meta_less = {k: v for k, v in header["__metadata__"].items() if k != "sha256"}
    refused(with_entry("__metadata__", meta_less), 'metadata lacks "sha256"')


# ----------------------------------------------------------------------------- code never runs
class _Payload:
    """A pickle that writes ``marker`` when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_a_pickle_is_refused_and_its_payload_never_runs(tmp_path):
    live = tmp_path / "live"
    pickle.loads(pickle.dumps(_Payload(live)))
    assert live.exists()  # the payload is real: unpickling it runs it
    marker = tmp_path / "marker"
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        payload = pickle.dumps(_Payload(marker), protocol=protocol)
        with pytest.raises(DataError, match="not a crowdagg model file"):
            mf.from_bytes(payload, "evil.pt")
        (tmp_path / "evil.pt").write_bytes(payload)
        with pytest.raises(DataError, match="evil.pt"):
            mf.load(tmp_path / "evil.pt")
        with pytest.raises(DataError):
            mf.from_bytes(gzip.compress(payload))
    refused(pickle.dumps(_Payload(marker), protocol=4), "a pickle, not a crowdagg model file: refused, because "
                                                        "loading a pickle can execute code")
    assert not marker.exists()


def test_a_torch_save_file_is_refused_and_its_payload_never_runs(tmp_path):
    marker = tmp_path / "marker"
    buf = io.BytesIO()
    torch.save({"weights": torch.zeros(3), "evil": _Payload(marker)}, buf)
    refused(buf.getvalue(), "a zip archive \\(what torch.save writes: a pickle inside\\)")
    buf = io.BytesIO()
    torch.save({"evil": _Payload(marker)}, buf, _use_new_zipfile_serialization=False)
    refused(buf.getvalue(), "a pickle, not a crowdagg model file")
    assert not marker.exists()


def test_the_loader_never_unpickles():
    """No module that runs code from data is imported, nor torch.load, eval or exec called, in the loader."""
    import ast

    tree = ast.parse(Path(mf.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names} | {(node.module or "").split(".")[0] for node in ast.walk(tree)
                                             if isinstance(node, ast.ImportFrom)}
    assert not imported & {"pickle", "_pickle", "dill", "joblib", "marshal", "shelve", "cloudpickle", "safetensors"}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"eval", "exec", "compile", "__import__"}
    loads = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
             and node.attr in ("load", "loads", "Unpickler") and ast.unparse(node.value) != "json"]
    assert loads == []


# ----------------------------------------------------------------------------- fuzz
def test_random_damage_gives_only_data_errors(trained):
    blob = trained[2]
    (n,) = struct.unpack("<Q", blob[:8])
    rng = np.random.default_rng(20261127)
    outcomes = {"refused": 0, "loaded": 0}
    for trial in range(400):
        damaged = bytearray(blob)
        how = trial % 4
        if how == 0:  # flip bits anywhere
            for at in rng.integers(0, len(damaged), size=rng.integers(1, 4)):
                damaged[at] ^= 1 << int(rng.integers(0, 8))
        elif how == 1:  # flip bits in the header (its JSON)
            for at in rng.integers(0, 8 + n, size=rng.integers(1, 4)):
                damaged[at] ^= 1 << int(rng.integers(0, 8))
        elif how == 2:  # cut
            damaged = damaged[: int(rng.integers(0, len(damaged)))]
        else:  # a random byte in the header replaced by one of JSON's structure
            damaged[int(rng.integers(8, 8 + n))] = b'{}[],:"0 '[int(rng.integers(0, 9))]
        try:
            mf.from_bytes(bytes(damaged), "damaged")
        except DataError as exc:
            assert str(exc).startswith("damaged: ") and "\n" not in str(exc)
            outcomes["refused"] += 1
        else:
            outcomes["loaded"] += 1  # a change JSON cannot see (a space padding byte, "1" -> "1 ")
    assert outcomes["refused"] >= 380, outcomes


def test_random_field_values_give_only_data_errors(trained):
    values = [None, True, -1, 0, 1.5, 2**70, "", "x", [], [1], ["a", "a"], ["a", "b", "c"], {}, {"a": 1}]
    fields = parts(trained[2])[1]
    paths = list(fields) + [f"network.{k}" for k in fields["network"]]
    for path in paths:
        for value in values:
            try:
                mf.from_bytes(edited(trained[2], _set(path, value)), "f")
            except DataError:
                pass


# ----------------------------------------------------------------------------- files and memory
def test_load_refuses_what_it_cannot_read(tmp_path, trained):
    with pytest.raises(DataError, match="nothing-here: no such file"):
        mf.load(tmp_path / "nothing-here")
    with pytest.raises(DataError, match="is a directory, not a model file"):
        mf.load(tmp_path)
    with pytest.raises(UsageError, match="path is empty"):
        mf.load("")
    with pytest.raises(UsageError, match="must be a string or path"):
        mf.load(3)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="must be bytes"):
        mf.from_bytes("text")  # type: ignore[arg-type]
    path = tmp_path / "m.st"
    path.write_bytes(trained[2])
    with pytest.raises(ResourceError, match="loading the .* model .*m.st"):
        mf.load(path, max_memory=1000)
    with pytest.raises(ResourceError):
        mf.from_bytes(gzip.compress(trained[2]), max_memory=1000)
    with pytest.raises(DataError, match="corrupt or truncated gzip data"):
        mf.from_bytes(gzip.compress(trained[2])[:-20])
    with pytest.raises(DataError, match="data after the end of the gzip stream"):
        mf.from_bytes(gzip.compress(trained[2]) + b"junk")


def test_save_refuses_a_model_a_file_cannot_hold(trained, tmp_path):
    model = trained[0]
    bad = TrainedModel(method=model.method, classes=model.classes, spec=model.spec,
                       weights={**model.weights, "1.bias": np.full(8, np.nan, np.float32)})
    with pytest.raises(DataError, match=r"the model: tensor 'net.1.bias' holds nan"):
        mf.save(bad, tmp_path / "bad.safetensors")
    assert not list(tmp_path.iterdir())  # nothing written
    wrong = TrainedModel(method=model.method, classes=("a", "b"), spec=model.spec, weights=model.weights)
    with pytest.raises(DataError, match='"network.n_classes" is 3 but "classes" lists 2'):
        mf.to_bytes(wrong)
    odd = TrainedModel(method=model.method, classes=("a", "\ud800", "c"), spec=model.spec, weights=model.weights)
    with pytest.raises(DataError, match="the model cannot be saved: its header is not JSON text"):
        mf.to_bytes(odd)
    with pytest.raises(UsageError, match="holds a TrainedModel"):
        mf.to_bytes({"weights": {}})  # type: ignore[arg-type]


def test_reading_a_model_without_torch_names_the_extra(trained, tmp_path):
    path = tmp_path / "m.st"
    path.write_bytes(trained[2])
    code = textwrap.dedent(f"""
        import sys
        sys.modules['torch'] = None
        from crowdagg.errors import UsageError
        from crowdagg.learning import model_file
        try:
            model_file.load({str(path)!r})
        except UsageError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "pip install 'crowdagg[train]'" in out.stdout


def test_predictions_that_overflow_are_refused_never_nan():
    spec = networks.NetSpec("linear", (4,), 3)
    torch.manual_seed(0)
    model = TrainedModel.from_network(method="crowdlayer", classes="abc", spec=spec, net=networks.build(spec))
    x = np.ones((3, 4), np.float32)
    assert np.isfinite(model.predict_proba(x)).all()
    x[1] = 3e38
    x[2] = -3e38
    model.weights["0.scale"][:] = 1e-30  # finite, positive: a file may hold it
    back = mf.from_bytes(mf.to_bytes(model))
    with pytest.raises(DataError, match="the model's output overflows on row 1 \\(2 rows\\)"):
        back.predict_proba(x)


def test_load_reads_a_fifo_and_standard_input(trained, tmp_path, monkeypatch):
    import os
    import threading

    model, x, blob = trained
    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as fh:
            fh.write(blob)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert np.array_equal(mf.load(fifo).predict_proba(x), model.predict_proba(x))
    finally:
        writer.join(timeout=60)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(blob)))
    assert np.array_equal(mf.load("-").predict_proba(x), model.predict_proba(x))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(blob)))
    with pytest.raises(ResourceError, match="of model <stdin>"):
        mf.load("-", max_memory=100)


def test_a_header_whose_length_begins_like_a_pickle_saves_and_loads(trained):
    """A header of 640, 896, 1,152 or 1,408 bytes starts the file with 80 02..80 05, a pickle's opening: such a
    model was refused as a pickle when saved (1 header length in 32); the header's brace after the length tells."""
    import dataclasses

    model, x, _ = trained
    seen = set()
    for extra in range(0, 900, 4):  # the workers' names grow the header 8 bytes at a time (its padding)
        workers = np.array([f"w{i}" + "x" * (extra if i == 0 else 0) for i in range(len(model.workers))],
                           dtype=object)
        blob = mf.to_bytes(dataclasses.replace(model, workers=workers))
        if blob[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"):
            seen.add(blob[:2])
            back = mf.from_bytes(blob)
            assert list(back.workers) == list(workers)
            assert np.array_equal(back.predict_proba(x), model.predict_proba(x))
    assert len(seen) >= 2


# ----------------------------------------------------------------------------- feature names
def test_feature_names_are_kept_and_a_file_without_them_reads_by_position(trained):
    model, x, blob = trained
    assert model.feature_names is None and "feature_names" not in parts(blob)[1]  # trained on an array
    names = tuple(f"f{j}" for j in range(x.shape[1]))
    named = TrainedModel(**{**vars(model), "feature_names": names})
    back = mf.from_bytes(mf.to_bytes(named))
    assert back.feature_names == names
    assert parts(mf.to_bytes(named))[1]["feature_names"] == list(names)
    assert mf.from_bytes(blob).feature_names is None  # a file of before: by position


@pytest.mark.parametrize("value, match", [
    (["a"], '"feature_names" lists 1 names for the 6 features of "network.input_shape"'),
    (["a", "a", "b", "c", "d", "e"], '"feature_names" lists "a" twice'),
    ("abcdef", '"feature_names" is .*, not a list of names'),
    ([1, 2, 3, 4, 5, 6], r'"feature_names\[0\]" is .*, not a string'),
])
def test_bad_feature_names_are_refused(trained, value, match):
    meta, fields, tensors = parts(trained[2])
    assert fields["network"]["input_shape"] == [6]
    refused(build(meta, {**fields, "feature_names": value}, tensors), match)
