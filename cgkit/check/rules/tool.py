"""CG9xx: findings about the checked files themselves (they could not be analysed).

The engine reports these while reading files; no matcher runs for them."""

from __future__ import annotations

from cgkit.check.model import Rule
from cgkit.check.rules._base import Family, code

RULES = Family()

RULES.record(
    Rule(
        code="CG901",
        name="syntax-error",
        trace=None,
        trace_blind="a finding about the file (it does not parse), not an operation",
        category="api-misuse",
        message="cannot parse: {what}",
        fix="Fix the syntax error (the file is checked with the running interpreter's grammar).",
        compile="error",
        what="Reports a file that the running Python cannot parse; nothing in it was checked.",
        why="The checker reads code with Python's own parser. A file that does not parse cannot be "
        "analysed, so its hazards, and regions that call into it, go unchecked. The rest of the "
        "files are still checked.",
        example=code("""
            import torch

            def step(x)
                return x * 2
        """),
        use_instead=code("""
            import torch

            def step(x):
                return x * 2
        """),
        gpu_skip="a finding about the file, not a capture hazard",
    )
)

RULES.record(
    Rule(
        code="CG902",
        name="unreadable-file",
        trace=None,
        trace_blind="a finding about the file (it cannot be read), not an operation",
        category="api-misuse",
        message="cannot read: {what}",
        fix="Save the file as UTF-8 (or declare its encoding in a coding comment); a notebook must be valid JSON.",
        compile="error",
        what="Reports a file that cannot be read or decoded (bad encoding, a broken notebook, no permission to "
        "read it). A path that does not exist, or a file named that is not Python, is a usage error (exit "
        "status 2), not a finding.",
        why="A file that cannot be read cannot be checked; reporting it keeps a clean result from "
        "hiding files that were never analysed. The rest of the files are still checked.",
        example=code("""
            # saved as Latin-1 with no coding comment: byte 0xE9 is not UTF-8
            print("café")
        """),
        use_instead=code("""
            # -*- coding: latin-1 -*-
            print("café")
        """),
        gpu_skip="a finding about the file, not a capture hazard",
    )
)
