"""Where an operation ran: the user's line, the library line, and the calls between them.

A Python frame belongs to the *user* unless its file lies in the standard library, in an installed
package (site-packages), inside torch, or inside cgkit itself. The tracer sees an operation from the
frame that called it; walking outwards from there, the first user frame is the line to fix, and the
frame the walk started from (when it is not the user's) is the library line where it happened.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

USER, LIBRARY, TOOL = "user", "library", "tool"

_CGKIT_ROOT = str(Path(__file__).resolve().parent.parent) + os.sep


def _package_roots() -> tuple[str, ...]:
    """Where installed packages and the standard library live, longest first (a path is shown
    relative to the longest that holds it: ``torch/nn/functional.py``)."""
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path) + os.sep)
    for entry in sys.path:
        if entry and os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            roots.add(os.path.realpath(entry) + os.sep)
    return tuple(sorted(roots, key=len, reverse=True))


def _library_roots() -> tuple[str, ...]:
    roots = set(_package_roots())
    try:
        import torch

        roots.add(os.path.realpath(os.path.dirname(torch.__file__)) + os.sep)
    except ImportError:  # frames are classified without torch too (tests)
        pass
    return tuple(sorted(roots))


_ROOTS: tuple[str, ...] | None = None
_PACKAGE_ROOTS: tuple[str, ...] | None = None
_KIND_BY_FILE: dict[str, str] = {}

# Frames that only hand a call on (module __call__, decorators, torch-function dispatch): left out of
# the chain shown to the user, so it reads as the calls they would follow in the source.
_PLUMBING = {
    ("module.py", "_call_impl"),
    ("module.py", "_wrapped_call_impl"),
    ("_contextlib.py", "decorate_context"),
    ("overrides.py", "handle_torch_function"),
    ("optimizer.py", "wrapper"),
    ("optimizer.py", "_use_grad"),
    ("graph.py", "_engine_run_backward"),
    ("_tensor.py", "wrapped"),
    ("_tensor.py", "_convert"),
    ("eval_frame.py", "_fn"),
    ("contextlib.py", "__enter__"),
    ("contextlib.py", "__exit__"),
    # How torch calls a Python mode's hook: machinery between the operator and its caller.
    ("_compile.py", "inner"),
    ("_python_dispatch.py", "__torch_dispatch__"),
}


def file_kind(filename: str) -> str:
    """``user``, ``library`` or ``tool`` (cgkit's own code) for a frame's file name."""
    kind = _KIND_BY_FILE.get(filename)
    if kind is None:
        kind = _KIND_BY_FILE[filename] = _classify(filename)
    return kind


def _classify(filename: str) -> str:
    global _ROOTS
    if filename.startswith("<"):
        return LIBRARY  # <frozen ...>, <string>: not a line a user can open
    path = os.path.realpath(filename)
    if path.startswith(_CGKIT_ROOT):
        return TOOL
    if _ROOTS is None:
        _ROOTS = _library_roots()
    return LIBRARY if path.startswith(_ROOTS) else USER


@dataclass(frozen=True)
class Site:
    """One line of code: a file, a line, the function it is in, and its column where known."""

    path: str
    line: int
    function: str
    col: int = 1

    @property
    def source(self) -> str:
        return linecache.getline(self.path, self.line).strip()

    @property
    def short_path(self) -> str:
        """A library path from its package down (``torch/nn/functional.py``); a user path relative
        to the working folder when it lies below it."""
        return short_path(self.path)

    def to_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "col": self.col, "function": self.function,
                "source": self.source}


def short_path(path: str) -> str:
    global _PACKAGE_ROOTS
    real = os.path.realpath(path)
    if file_kind(path) == LIBRARY:
        if _PACKAGE_ROOTS is None:
            _PACKAGE_ROOTS = _package_roots()
        for root in _PACKAGE_ROOTS:
            if real.startswith(root):
                return real[len(root):]
        return path
    try:
        rel = os.path.relpath(real)
    except ValueError:
        return real
    return real if rel.startswith("..") else rel


@dataclass(frozen=True)
class Location:
    """Where an operation happened, as the user needs it to act."""

    user: Site | None  # the innermost line of the user's own code (None: the step is all library code)
    library: Site | None  # where the operation ran, when that is library code
    chain: tuple[Site, ...] = ()  # the library calls from the user's line down to ``library``

    @property
    def key(self) -> tuple:
        return (_site_key(self.user), _site_key(self.library))


def _site_key(site: Site | None):
    return None if site is None else (site.path, site.line)


def site_of(frame) -> Site:
    return Site(frame.f_code.co_filename, frame.f_lineno, _qualname(frame.f_code), _column(frame))


def _qualname(code) -> str:
    return getattr(code, "co_qualname", code.co_name)


def _column(frame) -> int:
    """1-based column of the instruction the frame is at (Python 3.11+ keeps positions)."""
    try:
        positions = frame.f_code.co_positions()
        for index, position in enumerate(positions):
            if index == frame.f_lasti // 2:
                col = position[2]
                return col + 1 if col is not None else 1
    except (AttributeError, ValueError):
        pass
    return 1


def locate(frame) -> Location:
    """The user line, library line and chain for an operation called from ``frame``."""
    library = None
    chain: list[Site] = []
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename in HOOK_FILES:  # the tracer's own hooks, between a Python API and its operators
            frame = frame.f_back
            continue
        kind = file_kind(filename)
        if kind == USER:
            return Location(site_of(frame), library, tuple(reversed(chain)))
        if kind == TOOL:
            break
        if not _is_plumbing(frame.f_code):
            site = site_of(frame)
            if library is None:
                library = site
            else:
                chain.append(site)
        frame = frame.f_back
    return Location(None, library, tuple(reversed(chain)))


def user_site(frame) -> tuple[str, int, str] | None:
    """Just (file, line, function) of the innermost user frame: cheap enough to take for every operation."""
    while frame is not None:
        code = frame.f_code
        kind = _KIND_BY_FILE.get(code.co_filename) or file_kind(code.co_filename)
        if kind == USER:
            return code.co_filename, frame.f_lineno, _qualname(code)
        if kind == TOOL and code.co_filename not in HOOK_FILES:
            return None
        frame = frame.f_back
    return None


def _is_plumbing(code) -> bool:
    return (os.path.basename(code.co_filename), code.co_name) in _PLUMBING


# The tracer's own hook files: frames of these are never the caller of an operation.
HOOK_FILES: set[str] = set()


def caller():
    """The frame that called the operation being hooked: the first frame outside the hooks."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename in HOOK_FILES or _is_plumbing(frame.f_code)):
        frame = frame.f_back
    return frame
