"""What a rule is made of: its record, what it listens to, and the small function that decides.

A family module writes each rule as one unit, record first, matcher right under it::

    RULES = Family()

    @RULES.rule(Rule(code="CG101", name="tensor-item", ...), Calls(methods=("item",)))
    def tensor_item(call, f):
        if not call.node.args and type(call.recv) is not tuple:
            yield found(call.node, call.stmt)

The matcher yields :class:`~cgkit.check.model.Found`; the dispatcher (``cgkit.check.rules``) calls it
only for what its trigger names, and attaches the rule's code. Triggers:

* :class:`Calls`: call sites, by method name, by qualified name, or all of them;
* :class:`Each`: the items of one list of a function's facts (``subscripts``, ``fstrings``...);
* :class:`Body`: once per function, with its facts;
* :class:`Region`: once per capture region, with the code around it.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from dataclasses import dataclass

from cgkit.check.model import Found, Rule, found
from cgkit.check.names import dotted

__all__ = ["Body", "Calls", "Each", "Family", "Found", "Region", "code", "found", "is_false", "is_true", "receiver",
           "text_of"]


@dataclass(frozen=True)
class Calls:
    """Call sites a matcher is called with (``matcher(call, facts)``).

    ``methods``: ``x.m(...)`` whose receiver is no module path (``call.qual`` is None); ``any_methods``: a
    method name whatever the receiver; ``quals``: qualified names (``torch.equal``); ``qualified``: every
    call with a qualified name (the matcher decides); ``every``: every call.
    """

    methods: tuple[str, ...] = ()
    any_methods: tuple[str, ...] = ()
    quals: tuple[str, ...] = ()
    qualified: bool = False
    every: bool = False


@dataclass(frozen=True)
class Each:
    """The items of one list of :class:`~cgkit.check.facts.Facts` (``matcher(item, facts)``)."""

    facts: str


@dataclass(frozen=True)
class Body:
    """Once per function (``matcher(facts)``): for what needs the whole function at once."""


@dataclass(frozen=True)
class Region:
    """Once per capture region (``matcher(region, ctx)``): what happens around the capture."""


class Family(list):
    """The rules of one family module, in order; ``rule`` registers a record with its matcher, ``also``
    adds another matcher to a rule already registered (the same hazard seen in another kind of code)."""

    def rule(self, record: Rule, on, yields_to: tuple[str, ...] = ()):
        def register(matcher):
            self.append(dataclasses.replace(record, matchers=((on, matcher),), yields_to=yields_to))
            return matcher

        return register

    def also(self, code_: str, on):
        def register(matcher):
            index = next(i for i, rule in enumerate(self) if rule.code == code_)
            self[index] = dataclasses.replace(self[index], matchers=(*self[index].matchers, (on, matcher)))
            return matcher

        return register

    def record(self, record: Rule) -> None:
        """A rule no matcher reports (a file problem, a run-time observation)."""
        self.append(record)


def code(text: str) -> str:
    """Dedent an example program and drop the leading newline."""
    return textwrap.dedent(text).lstrip("\n")


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

