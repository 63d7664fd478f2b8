"""Helpers shared by the checker tests (imported as a plain module: tests/ is not a package)."""

from __future__ import annotations

import os
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def render_findings(findings, base: str) -> str:
    """One line per finding: ``path:line:col CODE severity | chain``, paths relative to ``base``."""
    lines = []
    for f in findings:
        path = os.path.relpath(os.path.abspath(f.path), base).replace(os.sep, "/")
        chain = f.chain_text()
        lines.append(f"{path}:{f.line}:{f.col} {f.code} {f.severity}" + (f" | {chain}" if chain else ""))
    return "\n".join(lines) + ("\n" if lines else "")


def make_writer(root: Path):
    """write({"a.py": "...", "pkg/b.py": b"..."}) creates the files under ``root`` and returns it."""

    def _write(files: dict[str, str | bytes]) -> Path:
        for name, content in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        return root

    return _write
