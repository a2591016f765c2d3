"""STAND-IN for the saved model file (the slice that owns this module replaces it whole).

Only the API ``crowdagg train --save`` and ``crowdagg predict`` call:
:func:`to_bytes` (a :class:`~crowdagg.learning.model.TrainedModel` as
safetensors bytes, its metadata a JSON header) and :func:`load` (the
reverse; nothing executed).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..core import memory
from ..errors import DataError
from .model import TrainedModel

FORMAT = "crowdagg-trained-model"


def to_bytes(model: TrainedModel) -> bytes:
    """The model as safetensors bytes (weights, confusions) with its metadata as a JSON header."""
    from safetensors.numpy import save

    tensors = {f"net.{k}": np.ascontiguousarray(v) for k, v in model.weights.items()}
    if model.confusion is not None:
        tensors["confusion"] = np.ascontiguousarray(model.confusion)
    header = {"format": FORMAT, "version": model.version, "method": model.method, "classes": list(model.classes),
              "spec": model.spec.to_json(), "best_epoch": model.best_epoch, "class_dtype": model.class_dtype,
              "workers": None if model.workers is None else [str(w) for w in model.workers]}
    return bytes(save(tensors, metadata={"crowdagg": json.dumps(header)}))


def load(path: str, max_memory: memory.MaxMemory = None) -> TrainedModel:
    """A model written by :func:`to_bytes`; a file that is not one is refused (:class:`DataError`)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load as load_tensors

    from .networks import NetSpec

    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    memory.check(2.0 * os.path.getsize(path), f"model {path}", max_memory)
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        header_len = int.from_bytes(raw[:8], "little")
        meta = json.loads(raw[8:8 + header_len]).get("__metadata__", {})
        header: dict[str, Any] = json.loads(meta["crowdagg"])
        if header.get("format") != FORMAT:
            raise ValueError("not a crowdagg model")
        tensors = load_tensors(raw)
        spec = NetSpec.from_json(header["spec"])
    except (ValueError, KeyError, TypeError, SafetensorError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a crowdagg model file ({exc}); a model file is what crowdagg train --save "
                        "writes") from None
    weights = {k[4:]: v for k, v in tensors.items() if k.startswith("net.")}
    workers = header.get("workers")
    return TrainedModel(method=header["method"], classes=tuple(header["classes"]), spec=spec, weights=weights,
                        workers=None if workers is None else np.array(workers, dtype=object),
                        confusion=tensors.get("confusion"), best_epoch=int(header.get("best_epoch", 0)),
                        class_dtype=header.get("class_dtype"), version=str(header.get("version", "")))
