"""Two calls of the same step, operator by operator: where they part is what a graph would freeze.

A CUDA graph replays the operators of the call it captured, with the Python numbers and shapes of
that call, reading the tensors at that call's addresses. Eager code that runs other operators on a
later call (a Python branch), passes other numbers (a Python scalar), or reads a tensor at another
address (a name rebound to a new tensor) would replay wrong: the first such difference is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cgkit.trace.frames import Location, Site
from cgkit.trace.recorder import OpRecord, op_name, same_value


@dataclass
class Divergence:
    code: str  # CG703 other operators or shapes, CG404 another Python value, CG405/CG406 another address
    what: str
    detail: str
    later: Location  # where the later call did something else
    earlier: Location | None  # where the earlier call was at that point
    operation: str


def _location(record: OpRecord | None) -> Location | None:
    if record is None:
        return None
    user = Site(*record.site) if record.site else None
    library = None
    if record.caller and (not record.site or record.caller != record.site[:2]):
        library = Site(record.caller[0], record.caller[1], "")
    return Location(user, library)


def _difference(a, b, path=()):
    """(path, a, b) of the first difference between two signatures, or None."""
    if isinstance(a, tuple) and isinstance(b, tuple) and not _is_tensor(a) and not _is_tensor(b):
        if len(a) != len(b):
            return path, a, b
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _difference(x, y, (*path, index))
            if found:
                return found
        return None
    return None if same_value(a, b) else (path, a, b)


def _is_tensor(sig) -> bool:
    return len(sig) == 2 and isinstance(sig[1], torch.dtype) and isinstance(sig[0], tuple)


def _describe(value) -> str:
    if isinstance(value, tuple) and _is_tensor(value):
        return f"a {str(value[1]).replace('torch.', '')} tensor of shape {list(value[0])}"
    return repr(value)


def first_divergence(earlier: list[OpRecord], later: list[OpRecord], names: tuple[str, str],
                     addresses: bool = False, made_earlier: frozenset = frozenset()) -> Divergence | None:
    """The first operator where ``later`` differs from ``earlier``; None when they agree.

    ``names`` label the two calls ("call 2", "call 3"). With ``addresses``, tensors read from outside
    the call must be the same tensors (a graph reads them at the captured addresses); a tensor the
    earlier call made itself and the later one reads is that call's own output fed back (CG406).
    """
    first, second = names
    for a, b in zip(earlier, later, strict=False):
        if a.op is not b.op:
            return Divergence("CG703", "the step", f" ran {op_name(b.op)} on {second} where {first} ran "
                              f"{op_name(a.op)}", _location(b), _location(a), op_name(b.op))
        found = _difference(a.signature, b.signature)
        if found:
            path, x, y = found
            shape = isinstance(x, tuple) and _is_tensor(x) or isinstance(y, tuple) and _is_tensor(y)
            argument = _argument(path, b.signature)
            if shape:
                return Divergence("CG703", op_name(b.op), f" got {_describe(y)} as {argument} on {second}, "
                                  f"{_describe(x)} on {first}", _location(b), _location(a), op_name(b.op))
            return Divergence("CG404", f"{argument} of {op_name(b.op)}",
                              f" ({_describe(x)} on {first}, {_describe(y)} on {second})",
                              _location(b), _location(a), op_name(b.op))
        if addresses and a.inputs != b.inputs:
            moved = dict(a.inputs)
            for position, pointer in b.inputs:
                if moved.get(position, pointer) != pointer:
                    own = pointer in made_earlier
                    return Divergence("CG406" if own else "CG405",
                                      f"{_argument((0, position), b.signature)} of {op_name(b.op)}",
                                      "", _location(b), _location(a), op_name(b.op))
    if len(earlier) != len(later):
        longer, shorter = (later, first) if len(later) > len(earlier) else (earlier, second)
        extra = longer[min(len(earlier), len(later))]
        label = second if longer is later else first
        count = abs(len(later) - len(earlier))
        return Divergence("CG703", "the step", f" ran {count} more operator{'s' * (count > 1)} on {label} "
                          f"than on {shorter}, from {op_name(extra.op)} on", _location(extra), None,
                          op_name(extra.op))
    return None


def _argument(path: tuple, signature: tuple) -> str:
    """A signature path ((0: positional | 1: keyword), index, ...) in words."""
    if len(path) >= 2 and path[0] == 0:
        return f"argument {path[1] + 1}"
    if len(path) >= 2 and path[0] == 1:
        return f"argument `{signature[1][path[1]][0]}`"
    if len(path) >= 2 and path[0] == 2:
        return "the value of a CPU scalar tensor"
    return "an argument"
