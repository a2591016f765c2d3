"""The saved model: a safetensors file of the network's weights and a JSON header, loaded without executing code.

What ``crowdagg train --save`` writes and ``crowdagg predict --model``
reads.  The file is a standard `safetensors
<https://huggingface.co/docs/safetensors>`_ file (any safetensors reader
opens it)::

    8 bytes        N, the header's length (unsigned little-endian)
    N bytes        the header: JSON, space-padded to a multiple of 8 bytes
                   {"__metadata__": {"format": "crowdagg-model", "version": "1",
                                     "header": "<the model's JSON>", "sha256": "<hex>"},
                    "net.1.weight": {"dtype": "F32", "shape": [8, 64], "data_offsets": [0, 2048]}, ...}
    the rest       the tensors' bytes, little-endian, C order, contiguous, in name order

**Tensors**: ``net.<key>`` (float32, ``F32``) for each entry of the
network's ``state_dict`` (its weights and the input standardisation's
buffers), and ``confusion`` (n_workers, K, K) ``[worker, true, observed]``
in float64 (``F64``) when the model has the annotators' confusions: float64
because that is what the trainer estimated and what ``--workers`` shows,
so a saved model gives back the very same numbers.

**The model's JSON** (``header``, one string of the metadata: safetensors
metadata maps strings to strings) holds ``method``, ``classes`` (list of
str: column k of the predictions is ``classes[k]``), ``class_dtype``,
``network`` (:meth:`~crowdagg.learning.networks.NetSpec.to_json`: kind,
input_shape, n_classes, hidden, dropout), ``n_features``,
``crowdagg_version``, ``best_epoch`` and, when the model knows them,
``workers`` (the annotators' names, one per row of ``confusion``) and
``feature_names`` (the training features' column names, one per input of
a linear or mlp network, by which prediction matches columns; a file
without them, as every file before them, is read by position).

**The checksum** ``sha256`` is a SHA-256 over the format, the version, the
header's text and every tensor (name, dtype, shape and bytes, in name
order).  It lives beside the header in the metadata (a checksum cannot
cover itself) and makes any change after saving -- a weight, a class name,
the network's shape -- a clear refusal ("the file was modified after it
was saved") instead of a model that predicts something else.  It is an
integrity check, not a signature: whoever can write the file can write a
valid checksum, which is why every field is checked as well.

**Loading executes no code and trusts nothing.**  The file is parsed here
(numpy and the standard library; no pickle anywhere, no ``torch.load``),
with the format's rules checked strictly, in this order: not a pickle or
``torch.save`` archive (refused by name: loading one can execute code);
the header's length within the file and under :data:`MAX_HEADER_BYTES`,
before anything is allocated for it; strict JSON (no repeated key, no
NaN); ``format`` (a safetensors file of anything else is foreign) and
``version`` (a newer one asks for a newer crowdagg); each tensor's entry
(``F32``/``F64`` only, a shape of non-negative integers, offsets that tile
the data exactly: no gap, no overlap, nothing after the last, nothing
beyond the end of a truncated file); the checksum; every field of the
model's JSON (present, of its type, nothing unknown); the tensors against
the network the spec describes (names and shapes, as
:func:`crowdagg.learning.networks.build` makes it on torch's ``meta``
device, which allocates nothing however large the spec claims to be);
finite values, a positive input scale, confusion rows that are
distributions.  Each refusal is one :class:`~crowdagg.errors.DataError`
naming the file and what is wrong; no input makes loading raise anything
else.

Why a reader of our own rather than the ``safetensors`` package: the format
is a length, a JSON object and raw bytes, and every check above (the
messages naming the field, the size checks against ``max_memory`` before
an allocation, duplicate keys, the tiling of the offsets) would have to be
made on top of the package's parse anyway; reading it here needs no
dependency beyond numpy, and the tests check both directions against the
``safetensors`` package (it reads our files, and we read a file it wrote
with our metadata).  Writing is ours too, so that the same model always
gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.checks import json_unique_keys
from ..errors import DataError, UsageError, os_reason
from ..methods.model_file import describe_json
from .model import TrainedModel

if TYPE_CHECKING:  # pragma: no cover
    from ..core.memory import MaxMemory

FORMAT = "crowdagg-model"
VERSION = 1
#: Largest header read (the safetensors reference reader's limit too); ours are a few KB plus the workers' names.
MAX_HEADER_BYTES = 100 * 2**20
#: Bytes loading a file takes per byte of it: the file, the arrays copied out of it, one chunk list while reading.
LOAD_BYTES_PER_BYTE = 3.0
#: The most classes a model file's network may have (2**24: every tensor's size stays countable).
MAX_CLASSES = 2**24
#: How far a confusion row's sum may be from 1.
TOLERANCE = 1e-6

#: The safetensors dtype of each tensor: the network's weights in float32, the confusions in float64.
_WEIGHT_DTYPE, _CONFUSION_DTYPE = "F32", "F64"
_NUMPY: dict[str, np.dtype[Any]] = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8")}
_NET = "net."
_CONFUSION = "confusion"
#: The model's JSON: its fields (``workers`` may be absent), and the network's.
_FIELDS = ("method", "classes", "class_dtype", "network", "n_features", "crowdagg_version", "best_epoch")
_OPTIONAL = ("workers", "feature_names")
_SPEC_FIELDS = ("kind", "input_shape", "n_classes", "hidden", "dropout")
_ENTRY = ("dtype", "shape", "data_offsets")
_METADATA = ("format", "version", "header", "sha256")
_CHUNK = 1 << 20
_PICKLE_PROTOCOLS = tuple(bytes([0x80, p]) for p in range(2, 6))
_ZIP = b"PK\x03\x04"
_GZIP = b"\x1f\x8b"
_VERSION_TEXT = re.compile(r"[1-9][0-9]{0,8}\Z")


# ----------------------------------------------------------------------------- writing
def to_bytes(model: TrainedModel) -> bytes:
    """The whole model file for ``model``, rendered in memory (the CLI writes all of its outputs or none).

    The same model gives the same bytes.  What is written is read back
    (:func:`from_bytes`) before it is returned, so a model that loading
    would refuse -- weights that do not fit its network, NaN, classes
    named twice -- is refused here, with the same message, and never
    written.

    Raises
    ------
    DataError
        The model is not one a file can hold (the message says why).
    """
    if not isinstance(model, TrainedModel):
        raise UsageError(f"a model file holds a TrainedModel, got {type(model).__name__}")
    spec = model.spec
    if getattr(spec, "kind", None) == "module":
        raise UsageError("a model trained with a network given as a torch.nn.Module cannot be saved to a model file "
                         "(its code is not data, and loading one runs no code): save model.module's state_dict with "
                         "torch.save, and rebuild the module yourself")
    to_json = getattr(spec, "to_json", None)
    if not callable(to_json):
        raise DataError(f"the model's spec is {type(spec).__name__}, not a NetSpec")
    header: dict[str, Any] = {
        "method": model.method,
        "classes": list(model.classes),
        "class_dtype": model.class_dtype,
        "network": to_json(),
        "n_features": _plain(getattr(spec, "n_inputs", None)),
        "crowdagg_version": model.version,
        "best_epoch": _plain(model.best_epoch),
    }
    if model.workers is not None:
        header["workers"] = [_plain(w) for w in np.asarray(model.workers, dtype=object).tolist()]
    if model.feature_names is not None:
        header["feature_names"] = [_plain(n) for n in model.feature_names]
    try:
        text = json.dumps(header, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:  # (a UnicodeEncodeError is a ValueError: a lone surrogate in a name)
        raise DataError(f"the model cannot be saved: its header is not JSON text ({exc})") from None
    tensors: dict[str, tuple[str, np.ndarray]] = {}
    for key, value in model.weights.items():
        tensors[_NET + str(key)] = (_WEIGHT_DTYPE, _array(value, _WEIGHT_DTYPE, _NET + str(key)))
    if model.confusion is not None:
        tensors[_CONFUSION] = (_CONFUSION_DTYPE, _array(model.confusion, _CONFUSION_DTYPE, _CONFUSION))
    table: dict[str, Any] = {}
    offset = 0
    for name in sorted(tensors):
        dtype, array = tensors[name]
        table[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    digest = _checksum(str(VERSION), text, [(name, tensors[name][0], tensors[name][1].shape,
                                             tensors[name][1].data.cast("B")) for name in sorted(tensors)])
    metadata = {"format": FORMAT, "version": str(VERSION), "header": text, "sha256": digest}
    head = json.dumps({"__metadata__": metadata, **table}, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)  # the data start 8-byte aligned, as safetensors writes them
    blob = b"".join([struct.pack("<Q", len(head)), head, *(tensors[name][1].tobytes() for name in sorted(tensors))])
    from_bytes(blob, "the model")  # one reading: what would be refused is never written
    return blob


def save(model: TrainedModel, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``path`` atomically (a temporary file beside it, then a rename).

    The name follows the rule of every output's name
    (:func:`crowdagg.io.read.output_format`, as ``crowdagg train --save``):
    ``.safetensors`` or ``.pt`` (or none: a device, a pipe), uncompressed.

    Raises :class:`~crowdagg.errors.UsageError` for another name or a
    terminal (the file is binary) and :class:`~crowdagg.errors.DataError`
    when it cannot be written.
    """
    from ..io import output
    from ..io.read import TRAINED_MODEL_FORMATS, output_format

    name = _path_text(path)
    output_format(None, name, "the model file", TRAINED_MODEL_FORMATS)  # before the model is rendered
    blob = to_bytes(model)
    target = output.resolve(name)
    if target.is_terminal():
        raise UsageError(f"a model file is binary and {target.where} is a terminal; send it to a file instead")
    output.commit([(target, blob)])


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON writes (``np.int64(3)`` -> 3, ``np.str_`` -> str)."""
    return value.item() if isinstance(value, np.generic) else value


def _array(value: Any, dtype: str, name: str) -> np.ndarray:
    try:
        array = np.asarray(value)
        if array.dtype.kind not in "fiub":
            raise TypeError(f"of dtype {array.dtype}")
        return np.ascontiguousarray(array, dtype=_NUMPY[dtype])
    except (TypeError, ValueError) as exc:
        raise DataError(f"the model cannot be saved: tensor {name!r} is not an array of numbers ({exc})") from None


def _checksum(version: str, header: str, tensors: list[tuple[str, str, tuple[int, ...], Any]]) -> str:
    """SHA-256 (hex) of the format, version, header text and each tensor's name, dtype, shape and bytes.

    ``tensors`` in name order; each part is length-prefixed, so no two
    different files hash the same bytes.
    """
    h = hashlib.sha256()

    def part(data: bytes | memoryview) -> None:
        h.update(struct.pack("<Q", len(data)))
        h.update(data)

    for text in (FORMAT, version, header):
        part(text.encode("utf-8", "surrogatepass"))
    for name, dtype, shape, data in tensors:
        part(json.dumps([name, dtype, [int(n) for n in shape]], ensure_ascii=True).encode("ascii"))
        part(data)
    return h.hexdigest()


# ----------------------------------------------------------------------------- reading
def load(path: str | os.PathLike[str], max_memory: MaxMemory = None) -> TrainedModel:
    """The model saved at ``path`` (``-``: standard input), checked (see the module docstring).

    The file's size is checked against ``max_memory`` (default: 80% of the
    memory available) before it is read; a FIFO or stream is checked as it
    comes.

    Raises
    ------
    DataError
        The file cannot be read, or is not a valid crowdagg model file
        (one line naming the file and what is wrong).
    ResourceError
        Loading it would need more than ``max_memory``.
    """
    import stat
    import sys

    from ..core import memory

    name = _path_text(path)
    if name == "-":
        blob = _read_stream(sys.stdin.buffer, "<stdin>", max_memory)
        return from_bytes(blob, "<stdin>", max_memory)
    try:
        st = os.stat(name)
        if stat.S_ISDIR(st.st_mode):
            raise DataError(f"{name}: is a directory, not a model file")
        if stat.S_ISREG(st.st_mode):
            memory.check(LOAD_BYTES_PER_BYTE * st.st_size, f"loading the {memory.human(st.st_size)} model {name}",
                         max_memory, advice="check that this is a model saved by crowdagg train --save")
        with open(name, "rb") as fh:
            blob = _read_stream(fh, name, max_memory)
    except FileNotFoundError:
        raise DataError(f"{name}: no such file") from None
    except OSError as exc:
        raise DataError(f"{name}: cannot read ({os_reason(exc)})") from None
    return from_bytes(blob, name, max_memory)


def _path_text(path: Any) -> str:
    try:
        name = os.fspath(path)
    except TypeError:
        raise UsageError(f"a model file's path must be a string or path, got {type(path).__name__}") from None
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if name == "":
        raise UsageError("a model file's path is empty")
    return name


def _read_stream(fh: Any, display: str, max_memory: MaxMemory) -> bytes:
    """All of ``fh``, refused as soon as it grows past what ``max_memory`` allows."""
    from ..core import memory

    limit = memory.limit_bytes(max_memory)[0] / LOAD_BYTES_PER_BYTE
    chunks: list[bytes] = []
    total = 0
    while True:
        block = fh.read(_CHUNK)
        if not block:
            break
        total += len(block)
        if total > limit:
            memory.check(LOAD_BYTES_PER_BYTE * total, f"loading more than {memory.human(total)} of model {display}",
                         max_memory, advice="check that this is a model saved by crowdagg train --save")
        chunks.append(block)
    return b"".join(chunks)


def from_bytes(blob: bytes, source: str = "<bytes>", max_memory: MaxMemory = None) -> TrainedModel:
    """The model in ``blob`` (a whole model file's bytes, gzip-compressed or not), checked.

    ``source`` names the file in messages.  Nothing in ``blob`` is
    executed; see the module docstring for every check, in order.

    Raises
    ------
    DataError
        ``blob`` is not a valid crowdagg model file.
    ResourceError
        Reading it would need more than ``max_memory``.
    UsageError
        torch is not installed (the network's shapes come from it).
    """
    if isinstance(blob, (bytearray, memoryview)):
        blob = bytes(blob)
    if not isinstance(blob, bytes):
        raise UsageError(f"a model file's bytes must be bytes, got {type(blob).__name__}")
    if blob[:2] == _GZIP:
        blob = _gunzip(blob, source, max_memory)
    header, data = _split(blob, source, max_memory)
    metadata, table = _framing(header, len(data), source)
    tensors = {name: (dtype, shape, data[lo:hi]) for name, (dtype, shape, lo, hi) in table.items()}
    digest = _checksum(metadata["version"], metadata["header"],
                       [(name, *tensors[name]) for name in sorted(tensors)])
    if digest != metadata["sha256"]:
        raise DataError(f"{source}: the checksum does not match: the file was modified after it was saved "
                        "(or damaged); train and save the model again")
    fields = _parse_json(metadata["header"], source, "the model's header")
    return _model(fields, tensors, source)


def _gunzip(blob: bytes, source: str, max_memory: MaxMemory) -> bytes:
    """One gzip member, refused as soon as its output grows past what ``max_memory`` allows."""
    from ..core import memory

    limit = memory.limit_bytes(max_memory)[0] / LOAD_BYTES_PER_BYTE
    d = zlib.decompressobj(wbits=31)
    out: list[bytes] = []
    total = 0
    pending = blob
    try:
        while True:
            block = d.decompress(pending, _CHUNK)
            total += len(block)
            if total > limit:
                memory.check(LOAD_BYTES_PER_BYTE * total, f"decompressing more than {memory.human(total)} of "
                             f"model {source}", max_memory)
            out.append(block)
            pending = d.unconsumed_tail
            if d.eof or (not block and not pending):
                break
    except zlib.error:
        raise DataError(f"{source}: corrupt or truncated gzip data") from None
    if not d.eof:
        raise DataError(f"{source}: corrupt or truncated gzip data")
    if d.unused_data:
        raise DataError(f"{source}: data after the end of the gzip stream")
    return b"".join(out)


def _not_model(source: str, why: str) -> DataError:
    return DataError(f"{source}: not a crowdagg model file ({why}); a model file is what crowdagg train --save "
                     "writes")


def _split(blob: bytes, source: str, max_memory: MaxMemory) -> tuple[dict[str, Any], memoryview]:
    """(The safetensors header, parsed; a view of the data after it), the length checked before any allocation."""
    from ..core import memory

    # A model file's first 8 bytes are its header's length, which can begin like a pickle (a header of 640 bytes
    # is 80 02 00 ..., pickle protocol 2's opening): the header's opening brace after them tells one from the other.
    if (blob[:2] in _PICKLE_PROTOCOLS or blob[:4] == _ZIP) and blob[8:9] != b"{":
        what = "a pickle" if blob[:1] == b"\x80" else "a zip archive (what torch.save writes: a pickle inside)"
        raise DataError(f"{source}: {what}, not a crowdagg model file: refused, because loading a pickle can "
                        "execute code; a model file is what crowdagg train --save writes")
    if len(blob) < 8:
        raise _not_model(source, f"{len(blob)} bytes: too short to hold the 8-byte header length; truncated?")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise _not_model(source, f"its first 8 bytes give a header of {n:,} bytes, beyond the end of the "
                         f"{len(blob):,}-byte file; truncated?")
    if n > MAX_HEADER_BYTES:
        raise _not_model(source, f"a header of {n:,} bytes, more than the {MAX_HEADER_BYTES:,} a model file's can be")
    raw = blob[8:8 + n]
    memory.check(memory.json_parse_bytes(raw) + float(len(blob)), f"reading the model {source}", max_memory)
    header = _parse_json(raw, source, "the header")
    if not isinstance(header, dict):
        raise _not_model(source, "its header is not a JSON object")
    return header, memoryview(blob)[8 + n:]


def _parse_json(raw: bytes | str, source: str, what: str) -> Any:
    """Strict JSON: valid UTF-8 (bytes), no repeated key in an object, no NaN or Infinity; else a DataError."""

    def constant(text: str) -> Any:
        raise DataError(f"{source}: {what} holds {text}, which JSON does not allow")

    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise _not_model(source, f"{what} is not UTF-8 text") from None
    unique_keys = json_unique_keys(lambda key: f"{source}: {what} has the key {key} twice in one object "
                                   "(which one counts?)")
    try:
        return json.loads(text, object_pairs_hook=unique_keys, parse_constant=constant)
    except DataError:
        raise
    except (ValueError, RecursionError) as exc:
        raise _not_model(source, f"{what} is not JSON: {exc}") from None


def _framing(header: dict[str, Any], n_data: int, source: str
             ) -> tuple[dict[str, str], dict[str, tuple[str, tuple[int, ...], int, int]]]:
    """The metadata (format and version checked) and each tensor's (dtype, shape, begin, end), offsets tiling."""
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict) or not all(type(v) is str for v in metadata.values()):
        why = "no metadata" if metadata is None else "metadata that is not a map of strings"
        raise DataError(f"{source}: a file with {why}, not a crowdagg model file (a safetensors file saved by "
                        f"something else?); a model file is what crowdagg train --save writes")
    if metadata.get("format") != FORMAT:
        shown = "none" if "format" not in metadata else json.dumps(metadata["format"], ensure_ascii=False)[:60]
        raise DataError(f"{source}: a safetensors file of format {shown}, not a crowdagg model file (format "
                        f"\"{FORMAT}\"); a model file is what crowdagg train --save writes")
    version = metadata.get("version")
    if not isinstance(version, str) or not _VERSION_TEXT.match(version):
        raise DataError(f"{source}: model file version {json.dumps(version)[:40]} is not a version number")
    if int(version) > VERSION:
        raise DataError(f"{source}: a model file of version {version}, written by a newer crowdagg; this one reads "
                        f"version {VERSION}: upgrade crowdagg to load it")
    if int(version) != VERSION:
        raise DataError(f"{source}: model file version {version}; this crowdagg reads version {VERSION}")
    missing = [k for k in _METADATA if k not in metadata]
    if missing:
        raise DataError(f"{source}: the model file's metadata lacks " + ", ".join(map(json.dumps, missing)))
    unknown = [k for k in metadata if k not in _METADATA]
    if unknown:
        raise DataError(f"{source}: unknown metadata field {json.dumps(unknown[0], ensure_ascii=False)[:60]} in a "
                        f"model file (it has: {', '.join(_METADATA)})")
    if not re.fullmatch(r"[0-9a-f]{64}", metadata["sha256"]):
        raise DataError(f"{source}: the metadata's \"sha256\" is not a SHA-256 in hex")
    table: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shown = json.dumps(name, ensure_ascii=False)[:80]
        if not isinstance(entry, dict) or sorted(entry) != sorted(_ENTRY):
            raise DataError(f"{source}: tensor {shown}'s entry is not {{dtype, shape, data_offsets}}")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        want = _CONFUSION_DTYPE if name == _CONFUSION else _WEIGHT_DTYPE
        if dtype != want:
            what = "the annotators' confusions are" if name == _CONFUSION else "a network's weights are"
            raise DataError(f"{source}: tensor {shown} is {json.dumps(dtype)[:20]}; {what} {want} in a model file")
        if (not isinstance(shape, list) or len(shape) > 8
                or not all(type(s) is int and s >= 0 for s in shape)):
            raise DataError(f"{source}: tensor {shown}'s shape is not a list of sizes (integers >= 0)")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
            raise DataError(f"{source}: tensor {shown}'s data_offsets are not [begin, end] byte offsets")
        size = math.prod(shape) * _NUMPY[dtype].itemsize
        if offsets[1] - offsets[0] != size:
            raise DataError(f"{source}: tensor {shown} has shape {shape} ({size:,} bytes) but data_offsets "
                            f"{offsets} ({offsets[1] - offsets[0]:,} bytes)")
        table[name] = (dtype, tuple(shape), offsets[0], offsets[1])
    end = 0
    for name, (_, _, lo, hi) in sorted(table.items(), key=lambda item: (item[1][2], item[1][3])):
        if lo != end:
            what = "overlaps the tensor before it" if lo < end else f"leaves a gap of {lo - end:,} bytes before it"
            raise DataError(f"{source}: tensor {json.dumps(name, ensure_ascii=False)[:80]}'s data {what}")
        if hi > n_data:
            raise DataError(f"{source}: the file is truncated: tensor {json.dumps(name, ensure_ascii=False)[:80]} "
                            f"ends {hi:,} bytes into the data, which hold {n_data:,}")
        end = hi
    if end != n_data:
        raise DataError(f"{source}: {n_data - end:,} bytes after the last tensor's data (not a file this crowdagg "
                        "wrote, or two files joined)")
    return metadata, table


# ----------------------------------------------------------------------------- the model's fields
def _fields_of(obj: Any, fields: tuple[str, ...], optional: tuple[str, ...], source: str, what: str) -> dict:
    if not isinstance(obj, dict):
        raise DataError(f"{source}: {what} is {describe_json(obj)}, not an object")
    missing = [k for k in fields if k not in obj]
    if missing:
        raise DataError(f"{source}: {what} lacks " + ", ".join(map(json.dumps, missing)))
    unknown = [k for k in obj if k not in fields and k not in optional]
    if unknown:
        raise DataError(f"{source}: unknown field {json.dumps(unknown[0], ensure_ascii=False)[:60]} in {what} "
                        f"(it has: {', '.join(fields + optional)})")
    return obj


def _text(value: Any, key: str, source: str, *, empty: bool = False) -> str:
    if type(value) is not str or (not empty and not value):
        raise DataError(f"{source}: \"{key}\" is {describe_json(value)}, not {'a' if empty else 'a non-empty'} string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, from a \ud800 escape
        raise DataError(f"{source}: \"{key}\" is not valid text") from None
    return value


def _integer(value: Any, key: str, source: str, low: int = 0, high: int = 2**62) -> int:
    if type(value) is not int or not low <= value <= high:
        raise DataError(f"{source}: \"{key}\" is {describe_json(value)}, not an integer from {low:,} to {high:,}")
    return value


def _names(value: Any, key: str, source: str) -> list[str]:
    if not isinstance(value, list):
        raise DataError(f"{source}: \"{key}\" is {describe_json(value)}, not a list of names")
    for i, name in enumerate(value):
        _text(name, f"{key}[{i}]", source, empty=True)
    if len(set(value)) != len(value):
        seen: set[str] = set()
        dup = next(v for v in value if v in seen or seen.add(v))  # type: ignore[func-returns-value]
        raise DataError(f"{source}: \"{key}\" lists {json.dumps(dup, ensure_ascii=False)[:60]} twice")
    return value


def _spec(obj: Any, source: str) -> Any:
    """The :class:`~crowdagg.learning.networks.NetSpec` of the header's ``network``, every field checked first."""
    from . import networks

    net = _fields_of(obj, _SPEC_FIELDS, (), source, "\"network\"")
    kind = net["kind"]
    if kind not in networks.KINDS:
        raise DataError(f"{source}: \"network.kind\" is {describe_json(kind)}, not one of {', '.join(networks.KINDS)}")
    shape = net["input_shape"]
    dims = 3 if kind == "cnn" else 1
    if (not isinstance(shape, list) or len(shape) != dims
            or not all(type(s) is int and 1 <= s <= 2**31 for s in shape)):
        what = "[channels, height, width]" if kind == "cnn" else "[features]"
        raise DataError(f"{source}: \"network.input_shape\" is not {what} (positive integers) for a {kind} network")
    if kind == "cnn" and min(shape[1:]) < 4:
        raise DataError(f"{source}: \"network.input_shape\" {shape}: a cnn pools twice by 2, its images are at "
                        "least 4×4 pixels")
    n_classes = _integer(net["n_classes"], "network.n_classes", source, 1, MAX_CLASSES)
    hidden = _integer(net["hidden"], "network.hidden", source, 1, _max_hidden())
    dropout = net["dropout"]
    if type(dropout) not in (int, float) or not 0.0 <= dropout < 1.0:
        raise DataError(f"{source}: \"network.dropout\" is {describe_json(dropout)}, not a probability from 0 to 1 "
                        "(1 excluded)")
    return networks.NetSpec(kind=kind, input_shape=tuple(shape), n_classes=n_classes, hidden=hidden,
                            dropout=float(dropout))


def _max_hidden() -> int:
    """The largest hidden width a trainer takes (the ``hidden`` parameter's range)."""
    from .methods import TRAIN_PARAMS

    return int(next(p for p in TRAIN_PARAMS if p.name == "hidden").high)


def _expected_shapes(spec: Any, source: str) -> dict[str, tuple[int, ...]]:
    """The network's ``state_dict`` shapes, built on torch's ``meta`` device: nothing allocated, no RNG drawn.

    The spec's bounds keep every tensor's size within what torch can count;
    a network it still cannot describe is refused, not a torch error.
    """
    import torch

    from . import networks

    try:
        with torch.device("meta"):
            net = networks.build(spec)
    except (RuntimeError, ValueError, OverflowError) as exc:
        raise DataError(f"{source}: \"network\" describes a network torch cannot build ({exc})") from None
    return {key: tuple(value.shape) for key, value in net.state_dict().items()}


def _model(fields: Any, tensors: Mapping[str, tuple[str, tuple[int, ...], memoryview]], source: str) -> TrainedModel:
    """The checked :class:`TrainedModel` of the header's fields and the tensors (dtype, shape, bytes)."""
    try:
        import torch  # noqa: F401 - the network's shapes (and predict) need it
    except ImportError:
        raise UsageError("reading a model needs torch, the optional extra 'train': "
                         "pip install 'crowdagg[train]'") from None
    head = _fields_of(fields, _FIELDS, _OPTIONAL, source, "the model's header")
    method = _text(head["method"], "method", source)
    version = _text(head["crowdagg_version"], "crowdagg_version", source)
    classes = _names(head["classes"], "classes", source)
    if not classes:
        raise DataError(f"{source}: \"classes\" is empty")
    class_dtype = head["class_dtype"]
    if class_dtype is not None:
        class_dtype = _text(class_dtype, "class_dtype", source)
    best_epoch = _integer(head["best_epoch"], "best_epoch", source)
    workers = _names(head["workers"], "workers", source) if "workers" in head else None
    spec = _spec(head["network"], source)
    if spec.n_classes != len(classes):
        raise DataError(f"{source}: \"network.n_classes\" is {spec.n_classes} but \"classes\" lists {len(classes)}")
    n_features = _integer(head["n_features"], "n_features", source, 1, 2**62)
    if n_features != spec.n_inputs:
        raise DataError(f"{source}: \"n_features\" is {n_features:,} but \"network.input_shape\" "
                        f"{list(spec.input_shape)} makes {spec.n_inputs:,}")

    feature_names = None
    if "feature_names" in head:
        feature_names = _names(head["feature_names"], "feature_names", source)
        if spec.kind == "cnn":
            raise DataError(f"{source}: \"feature_names\" for a cnn network (images have no column names)")
        if len(feature_names) != spec.n_inputs:
            raise DataError(f"{source}: \"feature_names\" lists {len(feature_names):,} names for the "
                            f"{spec.n_inputs:,} features of \"network.input_shape\"")

    expected = {_NET + key: shape for key, shape in _expected_shapes(spec, source).items()}
    given = {name for name in tensors if name != _CONFUSION}
    missing = [name for name in expected if name not in given]
    if missing:
        raise DataError(f"{source}: the {spec.kind} network's tensor {missing[0]!r} is missing")
    unknown = sorted(given - set(expected))
    if unknown:
        raise DataError(f"{source}: unknown tensor {json.dumps(unknown[0], ensure_ascii=False)[:80]} (a {spec.kind} "
                        f"network has {', '.join(expected)}" + (", and confusion)" if workers is not None else ")"))
    for name, shape in expected.items():
        if tensors[name][1] != shape:
            raise DataError(f"{source}: tensor {name!r} has shape {list(tensors[name][1])}; the {spec.kind} network of "
                            f"\"network\" has {list(shape)} there")
    weights = {name[len(_NET):]: _values(name, tensors[name], source) for name in expected}
    scale = weights.get("0.scale")
    if scale is not None and not (scale > 0).all():
        raise DataError(f"{source}: tensor 'net.0.scale' (the input standardisation's scale) holds a value <= 0")

    confusion = None
    if _CONFUSION in tensors:
        if workers is None:
            raise DataError(f"{source}: tensor 'confusion' without \"workers\" (whose confusions are they?)")
        k = len(classes)
        if tensors[_CONFUSION][1] != (len(workers), k, k):
            raise DataError(f"{source}: tensor 'confusion' has shape {list(tensors[_CONFUSION][1])}, not [workers, "
                            f"classes, classes] = {[len(workers), k, k]}")
        confusion = _values(_CONFUSION, tensors[_CONFUSION], source)
        flat = confusion.reshape(-1)
        bad = np.flatnonzero((flat < 0) | (flat > 1))
        if bad.size:
            at = np.unravel_index(int(bad[0]), confusion.shape)
            raise DataError(f"{source}: confusion{list(map(int, at))} is {float(flat[bad[0]])!r}, not a probability")
        off = np.flatnonzero(np.abs(confusion.sum(axis=2).reshape(-1) - 1.0) > TOLERANCE)
        if off.size:
            w, t = np.unravel_index(int(off[0]), confusion.shape[:2])
            raise DataError(f"{source}: the confusion row of worker {workers[int(w)]!r}, true class "
                            f"{classes[int(t)]!r} does not sum to 1")
    return TrainedModel(
        method=method, classes=tuple(classes), spec=spec, weights=weights,
        workers=None if workers is None else np.asarray(workers, dtype=object), confusion=confusion,
        best_epoch=best_epoch, class_dtype=class_dtype, version=version,
        feature_names=None if feature_names is None else tuple(feature_names),
    )


def _values(name: str, tensor: tuple[str, tuple[int, ...], memoryview], source: str) -> np.ndarray:
    """The tensor's values, copied out of the file into a native array; every one finite."""
    dtype, shape, data = tensor
    values = np.frombuffer(data, dtype=_NUMPY[dtype]).reshape(shape).astype(_NUMPY[dtype].newbyteorder("="))
    bad = np.flatnonzero(~np.isfinite(values.reshape(-1)))
    if bad.size:
        at = list(map(int, np.unravel_index(int(bad[0]), shape)))
        raise DataError(f"{source}: tensor {name!r} holds {values.reshape(-1)[bad[0]]} at {at}")
    return values


def load_model(path: str | os.PathLike[str], max_memory: MaxMemory = None) -> TrainedModel:
    """:func:`load`, as ``crowdagg.load_model``."""
    return load(path, max_memory)


__all__ = ["FORMAT", "VERSION", "MAX_HEADER_BYTES", "to_bytes", "from_bytes", "save", "load", "load_model"]
