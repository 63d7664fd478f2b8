"""Find the skill bundle (SKILL.md, references/, recipes/) in a checkout or an installed wheel.

In a checkout the bundle sits at the top of the repository, beside the ``cgkit`` package. An
installed wheel carries the same files under ``cgkit/_bundle`` (see ``pyproject.toml``).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLE_PARTS = ("SKILL.md", "references", "recipes")


def bundle_root() -> Path:
    """The folder that holds SKILL.md, references/ and recipes/."""
    for candidate in (_PACKAGE_DIR / "_bundle", _PACKAGE_DIR.parent):
        if (candidate / "recipes").is_dir():
            return candidate
    raise FileNotFoundError(
        f"cgkit's bundle (SKILL.md, references/, recipes/) is missing next to {_PACKAGE_DIR}; "
        "reinstall cgkit"
    )


def recipes_dir() -> Path:
    return bundle_root() / "recipes"


def references_dir() -> Path:
    return bundle_root() / "references"


def skill_file() -> Path:
    return bundle_root() / "SKILL.md"


def reference(relative: str) -> str:
    """``references/...`` (with its ``#anchor``) as an absolute path into the installed bundle: a pip
    user has no checkout, so the relative path would name nothing on their disk."""
    try:
        return str(bundle_root() / relative)
    except FileNotFoundError:
        return relative
