"""Install the skill bundle into an AI assistant's skills folder (``cgkit skill install``).

The bundle is SKILL.md, references/ and recipes/ (see :mod:`cgkit.bundle`). An assistant finds a
skill as ``<skills folder>/<name>/SKILL.md``, where ``<name>`` must equal the ``name`` in SKILL.md's
frontmatter, so the bundle is installed as ``DEST/cgkit/``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from cgkit.bundle import BUNDLE_PARTS, bundle_root, skill_file
from cgkit.errors import CgkitError

SKILL_NAME = "cgkit"
# Claude Code reads personal skills from ~/.claude/skills/<name>/SKILL.md.
DEFAULT_DEST = "~/.claude/skills"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


def default_dest() -> Path:
    return Path(DEFAULT_DEST).expanduser()


def skill_name(skill_md: Path | None = None) -> str:
    """The ``name`` field of SKILL.md's frontmatter."""
    text = (skill_md or skill_file()).read_text()
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    if match:
        for line in match.group(1).splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "name":
                return value.strip().strip("\"'")
    raise CgkitError(f"{skill_md or skill_file()} has no `name:` in its frontmatter")


def install(dest: Path | None = None, force: bool = False) -> Path:
    """Copy the bundle to ``dest/<skill name>/`` and return that folder.

    Refuses to replace an existing folder unless ``force``; even then it only replaces a folder
    that holds a SKILL.md (an earlier install), never an unrelated directory.
    """
    root = bundle_root()
    name = skill_name(root / "SKILL.md")
    dest = (dest or default_dest()).expanduser()
    target = dest / name
    if target.exists() or target.is_symlink():
        if not force:
            raise CgkitError(f"{target} already exists; pass --force to replace it")
        if not target.is_dir() or target.is_symlink():
            raise CgkitError(f"{target} is not a folder; remove it yourself")
        if any(target.iterdir()) and not (target / "SKILL.md").is_file():
            raise CgkitError(f"{target} does not look like an installed skill (no SKILL.md); not replacing it")
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dest))
    try:
        for part in BUNDLE_PARTS:
            src = root / part
            if src.is_dir():
                shutil.copytree(src, staging / part, ignore=_IGNORE)
            else:
                shutil.copy2(src, staging / part)
        staging.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
