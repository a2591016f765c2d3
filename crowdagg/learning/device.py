"""Where a trainer runs: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``, checked against this machine."""

from __future__ import annotations

import torch

from ..errors import UsageError, param

__all__ = ["resolve_device"]


def resolve_device(name: str | torch.device) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda``/``cuda:N`` without CUDA is a clear error; a
    ``torch.device`` is checked as its name (``predict(x, device=torch.device("cpu"))`` was refused)."""
    if isinstance(name, torch.device):
        name = str(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind, colon, number = str(name).partition(":")
    if not (name == "cpu" or (kind == "cuda" and (not colon or number.isdigit()))):  # mps, meta, cuda:x ...
        raise UsageError(f"{param('device')} must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got {name!r}")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UsageError(f"{param('device')}={name}: CUDA is not available here (torch {torch.__version__}); "
                             "use --device cpu or auto")
        index = int(number or 0)
        if index >= torch.cuda.device_count():
            raise UsageError(f"{param('device')}={name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return torch.device(name)
