"""Which operations a CUDA graph cannot hold, decided from torch's own operator metadata.

ATen operators carry tags: ``data_dependent_output`` (the result is a host value read from device
data: a sync), ``dynamic_output_shape`` (the output's size depends on the data) and
``nondeterministic_seeded`` (random numbers). Those tags decide here, not a hand-kept list of ops.
The two refinements below are where a tag is broader than the hazard: indexing with integer
tensors is a gather of static size (only a boolean mask makes the size data-dependent), and
``repeat_interleave`` with ``output_size`` knows its size in advance.

The Python API the user called (``.item()``, ``bool(t)``, ``torch.equal``) picks the rule code, so
a finding speaks of what the user wrote; the ATen operator underneath decides whether it is a hazard.
"""

from __future__ import annotations

import torch

SYNC, DYNAMIC, RNG = "sync", "dynamic", "rng"

_TAGS = (
    (torch.Tag.data_dependent_output, SYNC),
    (torch.Tag.dynamic_output_shape, DYNAMIC),
    (torch.Tag.nondeterministic_seeded, RNG),
)

# Code of a dynamic-shape operator: the specific rules where cgkit check has one.
_DYNAMIC_CODES = {"aten::index": "CG203", "aten::repeat_interleave": "CG205"}
DYNAMIC_CODE = "CG202"

_KIND_CACHE: dict = {}

# Where torch's tags say less than the operator does: it returns a Python bool computed from the
# data (a host read) without the data_dependent_output tag (torch 2.11 and 2.13).
_UNTAGGED_READS = frozenset({"aten::_nested_tensor_from_mask_left_aligned"})

# C++ operators whose CPU kernel reads values the CUDA kernel does not (their CPU-only argument checks):
# in emulation, a host read under such an API is reported only when the CUDA kernel reads too.
# one_hot (aten/src/ATen/native/Onehot.cpp): on CUDA it reads `max()` only without num_classes.
CUDA_READS_ONLY_IF = {
    "torch.nn.functional.one_hot": lambda args, kwargs: kwargs.get("num_classes", args[1] if len(args) > 1 else -1) == -1,
}

# Functions that return some outputs on the CPU whatever the device of their inputs (by position),
# by ATen name and by the Python name they are called with: the emulation cannot tell from the
# devices (their C++ makes those outputs with the options of a CPU input), so it is told here.
HOST_OUTPUTS = {"aten::_pack_padded_sequence": (1,), "aten::_pad_packed_sequence": (1,),
                "_pack_padded_sequence": (1,), "_pad_packed_sequence": (1,)}


def kind_of(op) -> str | None:
    """``sync``, ``dynamic``, ``rng`` or None for an ATen OpOverload (cached per overload)."""
    try:
        return _KIND_CACHE[op]
    except KeyError:
        pass
    tags = getattr(op, "tags", ())
    kind = next((k for tag, k in _TAGS if tag in tags), None)
    if kind is None and op._schema.name in _UNTAGGED_READS:
        kind = SYNC
    _KIND_CACHE[op] = kind
    return kind


def is_dynamic_shape(op, args, kwargs) -> bool:
    """A ``dynamic_output_shape`` operator whose output size really depends on the data here."""
    name = op._schema.name
    if name == "aten::index":
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())
    if name == "aten::repeat_interleave":
        return kwargs.get("output_size") is None
    return True


def dynamic_code(op) -> str:
    return _DYNAMIC_CODES.get(op._schema.name, DYNAMIC_CODE)


# ATen operators that read indices from a tensor argument (a host index tensor is copied to the
# device inside them: a pageable host-to-device copy).
INDEXING = frozenset({"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_",
                      "aten::index_select", "aten::gather", "aten::scatter", "aten::take", "aten::index_add",
                      "aten::index_copy", "aten::index_fill"})
# Tensors made from Python data (torch.tensor, as_tensor, from_numpy, list indices).
FROM_PYTHON_DATA = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy", "aten::lift"})
PIN_MEMORY = frozenset({"aten::_pin_memory", "aten::pin_memory"})
COPIES = frozenset({"aten::_to_copy", "aten::copy_", "aten::copy", "aten::_copy_from"})


# -- Python APIs -----------------------------------------------------------------------------------
# What the user called, for the code and the wording of a host sync found underneath it.
T = torch.Tensor
SYNC_APIS: dict = {
    T.item: ("CG101", ".item()"),
    T.__bool__: ("CG201", "bool"),  # CG103 when the line is not a condition: see sync_code()
    T.__int__: ("CG103", "int"),
    T.__float__: ("CG103", "float"),
    T.__index__: ("CG103", "operator.index"),
    T.__complex__: ("CG103", "complex"),
    T.__format__: ("CG106", "an f-string or `format()`"),
    T.__repr__: ("CG106", "`print()` or `repr()` of a tensor"),
    T.__str__: ("CG106", "`print()` or `str()` of a tensor"),
    T.__getitem__: ("CG204", "start:stop"),
    T.equal: ("CG107", "Tensor.equal"),
    T.allclose: ("CG107", "Tensor.allclose"),
    torch.equal: ("CG107", "torch.equal"),
    torch.allclose: ("CG107", "torch.allclose"),
    torch.is_nonzero: ("CG201", "torch.is_nonzero"),
}
# Device-to-host reads: a finding when the tensor is on the device.
TO_HOST_APIS: dict = {
    T.cpu: ".cpu()",
    T.numpy: ".numpy()",
    T.tolist: ".tolist()",
    T.__array__: "numpy.asarray",
}
# Printing a tensor reads it whole: no ATen operator shows it, so the API itself is the finding.
PRINT_APIS = frozenset({T.__repr__, T.__str__, T.__format__})
# Moves between devices, decided from their device argument.
MOVE_APIS = frozenset({T.to, T.cuda, T.cpu, T.pin_memory})
# Tensors from Python data: host tensors unless made directly on the device (a host-to-device copy).
DATA_APIS = frozenset(f for f in (torch.tensor, torch.as_tensor, getattr(torch, "asarray", None)) if f)

# APIs that copy between host and device outside the dispatcher (torch makes the tensor, then shows
# it to the modes): the tracer reports them itself, with torch's sync detector off while they run.
REPORTED_BY_API = frozenset(TO_HOST_APIS) | PRINT_APIS | MOVE_APIS | DATA_APIS | {T.__getitem__, T.__setitem__}

_CONDITION_STARTS = ("if ", "elif ", "while ", "assert ", "return ", "and ", "or ", "not ")


def sync_code(api, line_text: str) -> tuple[str, str]:
    """Rule code and wording for a host sync under the Python API ``api`` (None: no known API)."""
    if api is None:
        return "CG103", "a read"
    code, what = SYNC_APIS[api]
    if api is T.__bool__:
        text = line_text.lstrip()
        is_condition = text.startswith(_CONDITION_STARTS) or " if " in text or " and " in text or " or " in text
        return ("CG201", "a tensor's value deciding a Python branch") if is_condition else ("CG103", what)
    return code, what


def is_default_generator(gen) -> bool:
    if gen is torch.default_generator:
        return True
    if gen.device.type == "cuda" and torch.cuda.is_available():
        return any(gen is g for g in torch.cuda.default_generators)
    return False


def api_name(func) -> str:
    """``torch.tensor``, ``Tensor.to``: a Python API as the user writes it."""
    owner = "Tensor" if getattr(func, "__objclass__", None) is not None or func in TO_HOST_APIS else "torch"
    return f"{owner}.{getattr(func, '__name__', str(func))}"
