"""Qualified names: ``import torch.cuda as tc`` then ``tc.graph`` is ``torch.cuda.graph``.

A module's import table maps each local name to the qualified name it stands for; a rule then
matches on qualified names, so every alias and import form looks the same to it.
"""

from __future__ import annotations

import ast

# Public spellings of names that torch re-exports from private modules (the left side is what a
# file inside the package, or a deep import, resolves to).
_CANONICAL_PREFIXES = (
    ("torch.cuda.graphs.", "torch.cuda."),
    ("torch.amp.autocast_mode.", "torch.amp."),
    ("torch.cuda.amp.autocast_mode.", "torch.cuda.amp."),
    ("torch.amp.grad_scaler.", "torch.amp."),
    ("torch.cuda.amp.grad_scaler.", "torch.cuda.amp."),
    ("torch.nn.modules.module.", "torch.nn."),
    ("torch.nn.parallel.distributed.", "torch.nn.parallel."),
    ("torch.cuda.streams.", "torch.cuda."),
    ("torch._C.Generator", "torch.Generator"),
    ("transformer_engine.pytorch.graph.", "transformer_engine.pytorch."),
    ("torch.compiler.compile", "torch.compile"),
)
_CANONICAL_EXACT = {
    "torch.amp.autocast": "torch.autocast",
    "torch.cuda.amp.autocast": "torch.autocast",
    "torch.cuda.amp.GradScaler": "torch.amp.GradScaler",
    "torch.cuda.graphs.CUDAGraph": "torch.cuda.CUDAGraph",
}


def canonical(qual: str) -> str:
    for old, new in _CANONICAL_PREFIXES:
        if qual.startswith(old):
            qual = new + qual[len(old) :]
            break
    return _CANONICAL_EXACT.get(qual, qual)


def module_imports(stmts, modname: str, is_package: bool, table: dict[str, str]) -> None:
    """Add the imports among ``stmts`` (one block, not nested bodies) to ``table``."""
    for stmt in stmts:
        add_import(stmt, modname, is_package, table)


def add_import(stmt: ast.stmt, modname: str, is_package: bool, table: dict[str, str]) -> None:
    if type(stmt) is ast.Import:
        for alias in stmt.names:
            if alias.asname:
                table[alias.asname] = alias.name
            else:
                top = alias.name.partition(".")[0]
                table[top] = top
    elif type(stmt) is ast.ImportFrom:
        base = resolve_from(stmt.module, stmt.level, modname, is_package)
        if base is None:
            return
        for alias in stmt.names:
            if alias.name == "*":
                continue
            table[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name


def resolve_from(module: str | None, level: int, modname: str, is_package: bool) -> str | None:
    """The absolute module of ``from <level dots><module> import ...`` inside ``modname``."""
    if not level:
        return module or ""
    parts = modname.split(".") if modname else []
    if not is_package:
        parts = parts[:-1]
    drop = level - 1
    if drop > len(parts):
        return None
    if drop:
        parts = parts[:-drop]
    if module:
        parts.append(module)
    return ".".join(parts)


def dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; None for anything that is not a plain dotted name."""
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    parts.reverse()
    return parts


def dotted_text(node) -> str | None:
    """``self.graphs`` for a plain dotted name; None for anything else."""
    parts = dotted(node)
    return ".".join(parts) if parts else None


def bound_values(body: list[ast.stmt], name: str) -> list[ast.expr]:
    """What the plain assignments ``name = value`` among ``body``'s statements bind, in order (annotated
    ones, ``name: Final[dict] = value``, are read as assignments when a file is parsed)."""
    return [stmt.value for stmt in body
            if type(stmt) is ast.Assign and any(type(t) is ast.Name and t.id == name for t in stmt.targets)]
