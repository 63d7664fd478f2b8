"""Small helpers shared by the rule families."""

from __future__ import annotations

import ast
import textwrap

from cgkit.check.names import dotted


def code(text: str) -> str:
    """Dedent an example program and drop the leading newline."""
    return textwrap.dedent(text).lstrip("\n")


def h(code_: str, node, stmt=None, root_only: bool = False, **args):
    from cgkit.check.rules import Hazard

    return Hazard(code_, node, args, root_only, stmt)


def rh(code_: str, module, node, **args):
    from cgkit.check.rules import RegionHazard

    return RegionHazard(code_, module, node, args)


def is_false(node) -> bool:
    return type(node) is ast.Constant and node.value is False


def is_true(node) -> bool:
    return type(node) is ast.Constant and node.value is True


def text_of(node) -> str:
    parts = dotted(node)
    if parts is not None:
        return ".".join(parts)
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - unparse of odd nodes; only used for messages
        return "..."
    return text if len(text) <= 40 else text[:37] + "..."


def receiver(call_node):
    func = call_node.func
    return func.value if type(func) is ast.Attribute else None
