"""``[tool.cgkit]`` in pyproject.toml, found by walking up from the checked paths.

    [tool.cgkit]
    select = ["CG1", "CG2"]          # codes or prefixes; default: all
    ignore = ["CG401"]
    per-file-ignores = { "tests/*" = ["CG4"] }
    regions = ["train_step", "Model.forward"]   # functions you intend to capture
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass, field

from cgkit.errors import CgkitError


@dataclass
class Config:
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    regions: list[str] = field(default_factory=list)
    root: str | None = None  # directory of the pyproject.toml it came from

    def ignored_for(self, path: str) -> list[str]:
        if not self.per_file_ignores:
            return []
        rel = path
        if self.root:
            try:
                rel = os.path.relpath(os.path.abspath(path), self.root)
            except ValueError:
                rel = path
        rel = rel.replace(os.sep, "/")
        out: list[str] = []
        for pattern, codes in self.per_file_ignores.items():
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(rel), pattern):
                out.extend(codes)
        return out


def find_pyproject(paths: list[str]) -> str | None:
    for start in paths or ["."]:
        directory = os.path.abspath(start)
        if not os.path.isdir(directory):
            directory = os.path.dirname(directory)
        while True:
            candidate = os.path.join(directory, "pyproject.toml")
            if os.path.isfile(candidate):
                return candidate
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
    return None


def load_config(paths: list[str], explicit: str | None = None) -> Config:
    path = explicit or find_pyproject(paths)
    if path is None:
        return Config()
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CgkitError(f"cannot read {path}: {exc}") from None
    table = data.get("tool", {}).get("cgkit")
    if table is None:
        return Config()
    if not isinstance(table, dict):
        raise CgkitError(f"{path}: [tool.cgkit] must be a table")
    known = {"select", "ignore", "extend-select", "per-file-ignores", "regions"}
    unknown = set(table) - known
    if unknown:
        raise CgkitError(f"{path}: unknown [tool.cgkit] keys: {', '.join(sorted(unknown))}")
    cfg = Config(root=os.path.dirname(path))
    if "select" in table:
        cfg.select = _codes(table["select"], path, "select")
    if "extend-select" in table:
        cfg.select = (cfg.select or []) + _codes(table["extend-select"], path, "extend-select")
    cfg.ignore = _codes(table.get("ignore", []), path, "ignore")
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise CgkitError(f"{path}: per-file-ignores must be a table of pattern = [codes]")
    cfg.per_file_ignores = {str(k): _codes(v, path, f"per-file-ignores.{k}") for k, v in pfi.items()}
    regions = table.get("regions", [])
    if not isinstance(regions, list) or not all(isinstance(r, str) for r in regions):
        raise CgkitError(f"{path}: regions must be a list of function names")
    cfg.regions = regions
    return cfg


def _codes(value, path: str, key: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CgkitError(f"{path}: {key} must be a list of rule codes")
    return value
