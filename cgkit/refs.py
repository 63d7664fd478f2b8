"""References to user code: ``path/to/file.py:name`` or ``package.module:name``.

A reference is checked when a recipe is rendered, without importing anything (importing the
user's module would import torch): the file or module must exist, parse, and define the name at
its top level.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from cgkit.errors import CgkitError


@dataclass(frozen=True)
class Ref:
    """A checked reference to a top-level name in a Python file or module."""

    text: str
    name: str
    path: Path  # the source file that defines `name`
    module: str | None = None  # dotted module name, for ``package.module:name`` references
    # For a module found in the current folder (not installed, not on PYTHONPATH): that folder.
    # A script elsewhere cannot import it unless it puts this folder on sys.path itself.
    local_root: Path | None = None


def parse_ref(text: str, role: str, search_path: list[str] | None = None) -> Ref:
    """Check ``text`` and return the reference; ``role`` names the option in error messages."""
    target, sep, name = text.rpartition(":")
    if not sep or not target or not name:
        raise CgkitError(f"{role} {text!r}: expected path/to/file.py:name or package.module:name")
    if not name.isidentifier():
        raise CgkitError(f"{role} {text!r}: {name!r} is not a Python name")
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise CgkitError(f"{role} {text!r}: file not found: {path}")
        ref = Ref(text=text, name=name, path=path)
    else:
        if not all(part.isidentifier() for part in target.split(".")):
            raise CgkitError(
                f"{role} {text!r}: {target!r} is neither a .py file nor a module name; a REF is "
                "path/to/file.py:name or package.module:name, with one ':' before the name"
            )
        found = _find_module_file(target, search_path if search_path is not None else ["", *sys.path])
        if found is None:
            raise CgkitError(
                f"{role} {text!r}: module {target!r} not found (is its folder on PYTHONPATH, "
                "or the package installed?)"
            )
        path, root = found
        local = root == Path(os.getcwd()).resolve() and not _on_import_path(root)
        ref = Ref(text=text, name=name, path=path, module=target, local_root=root if local else None)
    _require_top_level_name(ref, role)
    return ref


def _find_module_file(module: str, search_path: list[str]) -> tuple[Path, Path] | None:
    """(source file, search-path folder) of a module, found without importing it or its parents."""
    parts = module.split(".")
    for entry in search_path:
        base = Path(entry or os.getcwd())
        for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate.resolve(), base.resolve()
    return None


def _on_import_path(folder: Path) -> bool:
    """Whether a script run from anywhere would find modules in ``folder`` (PYTHONPATH, site-packages)."""
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    entries += [p for p in sys.path[1:] if p and "site-packages" in p]
    return any(Path(p).resolve() == folder for p in entries)


def _require_top_level_name(ref: Ref, role: str) -> None:
    try:
        source = ref.path.read_bytes()
        tree = ast.parse(source, filename=str(ref.path))
    except SyntaxError as exc:
        raise CgkitError(f"{role} {ref.text!r}: syntax error in {ref.path}, line {exc.lineno}: {exc.msg}") from None
    except (OSError, ValueError) as exc:
        raise CgkitError(f"{role} {ref.text!r}: cannot read {ref.path}: {exc}") from None
    names = _top_level_names(tree)
    if ref.name not in names:
        shown = ", ".join(sorted(n for n in names if not n.startswith("_"))[:12]) or "none"
        raise CgkitError(f"{role} {ref.text!r}: {ref.path.name} defines no top-level {ref.name!r} (it has: {shown})")


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names
