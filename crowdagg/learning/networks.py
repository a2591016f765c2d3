"""The classifiers f_θ a trainer fits: ``linear``, ``mlp`` and ``cnn``, described by a :class:`NetSpec`.

A network is rebuilt from its :class:`NetSpec` alone (a saved model holds
the spec as JSON and the weights as tensors: nothing else is needed, and
nothing is executed, to load one).  Every network starts with a fixed
standardisation of its input (the training features' mean and standard
deviation, kept as buffers and saved with the weights), so that features on
any scale train with the same learning rate.

* ``linear`` -- softmax regression: ``x -> W x + b`` (K logits).
* ``mlp`` -- ``x -> Linear(d, h) -> ReLU -> Dropout(p) -> Linear(h, K)``:
  the "FCNN-dropout" head that CrowdLayer (Rodrigues & Pereira 2018) and
  GeoCrowdNet (Ibrahim et al. 2023) train on LabelMe's VGG16 features
  (h = 128, p = 0.5).
* ``cnn`` -- for images (N×C×H×W): four 3×3 convolutions of (h/4, h/4,
  h/2, h/2) channels with ReLU, 2×2 max-pooling after the first two,
  global average pooling and a linear layer: the MNIST network of Tanno et
  al. 2019 (App. A: {32, 32, 64, 64} kernels, i.e. h = 128).

Shapes: input (B, d) for linear/mlp, (B, C, H, W) for cnn; output (B, K)
logits (the trainers take their softmax).
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from ..errors import UsageError, param

KINDS = ("linear", "mlp", "cnn")
#: The kind of a network given as a ``torch.nn.Module`` (``crowdagg.train(..., network=module)``): trained and
#: predicted with, never built from a spec nor saved to a model file (its code is not data).
MODULE = "module"


@dataclass(frozen=True)
class NetSpec:
    """What a network is: kind, input shape (``(d,)`` or ``(C, H, W)``), classes, hidden width, dropout."""

    kind: str
    input_shape: tuple[int, ...]
    n_classes: int
    hidden: int = 128
    dropout: float = 0.5

    def __post_init__(self) -> None:
        if self.kind == MODULE:
            return
        if self.kind not in KINDS:
            raise UsageError(f"{param('model')} must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind == "cnn" and len(self.input_shape) != 3:
            raise UsageError(f"{param('model')}=cnn needs images (features of shape N×C×H×W), got rows of shape "
                             f"{tuple(self.input_shape)}; use linear or mlp for feature vectors")
        if self.kind != "cnn" and len(self.input_shape) != 1:
            raise UsageError(f"{param('model')}={self.kind} needs feature vectors (N×d), got rows of shape "
                             f"{tuple(self.input_shape)}; use cnn for images")

    @property
    def n_inputs(self) -> int:
        return math.prod(self.input_shape)

    def to_json(self) -> dict:
        out = asdict(self)
        out["input_shape"] = list(self.input_shape)
        return out

    @classmethod
    def from_json(cls, obj: dict) -> NetSpec:
        """A spec from a saved model's header (the caller checks the types; a bad kind is a UsageError)."""
        if obj["kind"] not in KINDS:
            raise UsageError(f"the network kind must be one of {', '.join(KINDS)}, got {obj['kind']!r}")
        return cls(kind=obj["kind"], input_shape=tuple(int(v) for v in obj["input_shape"]),
                   n_classes=int(obj["n_classes"]), hidden=int(obj["hidden"]), dropout=float(obj["dropout"]))


class Standardize(nn.Module):
    """``(x - mean) / scale``, fixed (buffers, saved with the weights): per feature, or per channel for images."""

    mean: torch.Tensor
    scale: torch.Tensor

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("scale", torch.ones(shape))

    def fit(self, x: torch.Tensor) -> None:
        """Set mean and scale from training inputs ``x`` (N, *shape) (image channels: over N, H, W)."""
        mean, std = _moments(x)
        if not (torch.isfinite(mean).all() and torch.isfinite(std).all()):  # float32 sums overflow near its limit
            mean, std = (m.float() for m in _moments(x.double()))
        if x.shape[0] < 2:
            std = torch.ones_like(mean)
        self.mean.copy_(mean.expand_as(self.mean))
        self.scale.copy_(torch.where(std > 1e-12, std, torch.ones_like(std)).expand_as(self.scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale


def _moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation per feature, or per channel of images (over N, H, W)."""
    if x.dim() == 4:
        return x.mean(dim=(0, 2, 3), keepdim=True), x.std(dim=(0, 2, 3), keepdim=True)
    return x.mean(dim=0), x.std(dim=0)


def check_network(network: Any) -> None:
    """A :class:`~crowdagg.errors.UsageError` unless ``network`` is None, a kind or a ``torch.nn.Module`` (what
    :func:`make` takes; a kind's name is checked against the features' shape by :class:`NetSpec`)."""
    if network is not None and not isinstance(network, (str, nn.Module)):
        raise UsageError(f"{param('network')} must be {', '.join(KINDS)} or a torch.nn.Module, got "
                         f"{type(network).__name__}")


def make(network: str | nn.Module, input_shape: tuple[int, ...], n_classes: int, params: Any,
         device: torch.device) -> tuple[nn.Module, NetSpec]:
    """The network factory: the classifier a fit trains, on ``device``, and its spec.

    ``network`` is a kind (``linear``, ``mlp``, ``cnn``: :func:`build` from
    the ``hidden`` and ``dropout`` in ``params``) or a ``torch.nn.Module``
    -- deep-copied, so the module given is left as it was and each fit
    starts from its weights -- whose output on a batch of rows of
    ``input_shape`` must be (batch, ``n_classes``) logits (checked on two
    rows of zeros: a clear error, not torch's, at the first batch).  A
    given module gets no input standardisation: it sees the features as
    they are.
    """
    if isinstance(network, nn.Module):
        net = _module_copy(network, device)
        spec = NetSpec(MODULE, tuple(input_shape), n_classes, 0, 0.0)
        was = net.training
        net.eval()
        with torch.no_grad():
            module_forward(net, torch.zeros((2, *input_shape), device=device), n_classes)
        net.train(was)
        return net, spec
    spec = NetSpec(network, tuple(input_shape), n_classes, params["hidden"], params["dropout"])
    check_image_size(spec)
    return build(spec).to(device), spec


def _module_copy(network: nn.Module, device: torch.device) -> nn.Module:
    """The module given as the network, copied onto ``device`` and checked trainable: a
    :class:`~crowdagg.errors.UsageError` for one with no values (the ``meta`` device), one
    ``copy.deepcopy`` cannot copy, parameters that are not float32 (the features are) or not
    leaves (a TorchScript module's: Adam cannot step them) -- where torch's own errors
    (NotImplementedError, TypeError, ValueError) came.  A frozen module is taken: a method with
    modules of its own trains them (:meth:`~crowdagg.learning.trainer.Trainer._param_groups`
    refuses a fit with nothing to train)."""
    tensors = [*network.parameters(), *network.buffers()]
    if any(t.is_meta for t in tensors):
        raise UsageError("the network given holds tensors on the 'meta' device, which have no values: "
                         "materialise it (module.to_empty(device=...) and initialise its weights)")
    odd = sorted({str(p.dtype).removeprefix("torch.") for p in network.parameters() if p.dtype != torch.float32})
    if odd:
        raise UsageError(f"the network given has {', '.join(odd)} parameters; the features are float32, and so "
                         "must its parameters be: convert it with module.float()")
    try:
        net = copy.deepcopy(network)
    except Exception as exc:  # noqa: BLE001 - the user's module: whatever its copy raises is a usage error here
        raise UsageError(f"the network given cannot be copied for training (copy.deepcopy): "
                         f"{type(exc).__name__}: {exc}") from None
    if not all(p.is_leaf for p in net.parameters()):  # a TorchScript module's copy: Adam raised ValueError
        raise UsageError("the network given cannot be trained as a copy (its copy's parameters are not leaf "
                         "tensors: a TorchScript module?): give the plain torch.nn.Module")
    try:
        return net.to(device)
    except Exception as exc:  # noqa: BLE001 - the user's module: whatever its move raises is a usage error here
        raise UsageError(f"the network given cannot be moved to {device}: {type(exc).__name__}: {exc}") from None


def module_forward(net: nn.Module, x: torch.Tensor, n_classes: int) -> torch.Tensor:
    """A given module's logits for the batch ``x``, checked: an exception it raises, or an output that is not
    (batch, ``n_classes``) floating-point logits, is a :class:`~crowdagg.errors.UsageError` naming the batch
    (its code is the caller's: torch's errors, or the trainer's, at a later line, said nothing of it)."""
    try:
        out = net(x)
    except Exception as exc:  # noqa: BLE001 - the user's module: whatever it raises is a usage error here
        raise UsageError(f"the network given fails on a batch of features of shape {tuple(x.shape)}: "
                         f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (x.shape[0], n_classes) \
            or not out.is_floating_point():
        got = type(out).__name__
        if isinstance(out, torch.Tensor):
            dtype = str(out.dtype).removeprefix("torch.")
            got = f"{tuple(out.shape)} of {dtype}" + ("" if out.is_floating_point() else ", not floating point")
        shape = ", ".join(map(str, x.shape[1:]))
        raise UsageError(f"the network given must map a batch of features (B, {shape}) to (B, {n_classes}) "
                         f"logits, one per class; on {x.shape[0]:,} rows it gives {got}")
    return out


def build(spec: NetSpec) -> nn.Module:
    """A fresh network for ``spec`` (initialised from torch's global generator: seed it first)."""
    if spec.kind == MODULE:
        raise UsageError("a network given as a torch.nn.Module is not rebuilt from its spec: keep the module")
    k, h = spec.n_classes, spec.hidden
    if spec.kind == "cnn":
        c = spec.input_shape[0]
        a, b = max(1, h // 4), max(1, h // 2)
        body = nn.Sequential(
            nn.Conv2d(c, a, 3, padding=1), nn.ReLU(), nn.Conv2d(a, a, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(a, b, 3, padding=1), nn.ReLU(), nn.Conv2d(b, b, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(b, k),
        )
        return nn.Sequential(Standardize((1, c, 1, 1)), body)
    d = spec.n_inputs
    if spec.kind == "linear":
        return nn.Sequential(Standardize((d,)), nn.Linear(d, k))
    return nn.Sequential(Standardize((d,)), nn.Linear(d, h), nn.ReLU(), nn.Dropout(spec.dropout), nn.Linear(h, k))


#: Bytes a fit holds per weight of the network: float32 weights, their gradients, Adam's two moments, the best
#: epoch's copy, the trained model's numpy copy and the model file rendered and read back (2).
FIT_BYTES_PER_WEIGHT = 4 * 8
#: Rows of the forward pass outside training (evaluation, prediction): :data:`crowdagg.learning.trainer.EVAL_ROWS`.
EVAL_ROWS = 8192


def n_weights(spec: NetSpec) -> int:
    """The numbers in the network's ``state_dict`` (weights and the standardisation's buffers), counted on torch's
    ``meta`` device: nothing is allocated, however large the spec, and no random number is drawn."""
    with torch.device("meta"):
        net = build(spec)
    return sum(t.numel() for t in net.state_dict().values())


def activations_per_row(spec: NetSpec) -> int:
    """The float32 values the forward pass holds per input row: every layer's output (a ReLU's and dropout's
    too), an upper bound for the cnn's (each pooling halves the side, rounded down)."""
    k, h = spec.n_classes, spec.hidden
    if spec.kind == "cnn":
        c, height, width = spec.input_shape
        a, b = max(1, h // 4), max(1, h // 2)
        pixels = height * width
        return 2 * c * pixels + 4 * a * pixels + a * pixels // 4 + 4 * b * pixels // 4 + b * pixels // 16 + 2 * b + k
    d = spec.n_inputs
    if spec.kind == "linear":
        return 2 * d + k
    return 2 * d + 4 * h + k


def memory_needed(spec: NetSpec, batch_rows: int, eval_rows: int = EVAL_ROWS) -> tuple[float, int]:
    """Bytes training the network of ``spec`` on batches of ``batch_rows`` rows takes, and its number of weights.

    :data:`FIT_BYTES_PER_WEIGHT` per weight, and the activations of a
    training batch (twice: their gradients) or of an evaluation chunk of
    ``eval_rows`` rows (no gradients), whichever is larger.  What
    :meth:`crowdagg.learning.trainer.Trainer.memory_needed` adds to the
    data's share, so that a ``hidden`` asking for gigabytes is refused up
    front with its size, not by torch's allocator.
    """
    weights = n_weights(spec)
    rows = max(2 * batch_rows, eval_rows)
    return float(FIT_BYTES_PER_WEIGHT) * weights + 4.0 * rows * activations_per_row(spec), weights


def standardizer(net: nn.Module) -> Standardize:
    """The input standardisation every network of :func:`build` starts with."""
    first = next(iter(net.children()))
    assert isinstance(first, Standardize)
    return first


def check_image_size(spec: NetSpec) -> None:
    """A cnn pools twice: images under 4×4 pixels are refused (a clear error, not torch's)."""
    if spec.kind == "cnn" and min(spec.input_shape[1:]) < 4:
        raise UsageError(f"{param('model')}=cnn pools twice by 2: images must be at least 4×4 pixels, got "
                         f"{spec.input_shape[1]}×{spec.input_shape[2]}")
