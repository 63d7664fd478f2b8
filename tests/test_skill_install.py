"""cgkit skill install / path: the bundle lands in DEST/cgkit and is never overwritten silently."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cgkit import skill
from cgkit.bundle import bundle_root
from cgkit.cli import main


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_install_copies_the_bundle(tmp_path):
    target = skill.install(tmp_path / "skills")
    assert target == tmp_path / "skills" / "cgkit"
    assert (target / "SKILL.md").read_text() == (bundle_root() / "SKILL.md").read_text()
    installed = _files(target)
    for name in ("references/troubleshooting.md", "references/api-pytorch.md", "recipes/manual.py.j2"):
        assert name in installed
    assert not any("__pycache__" in f for f in installed)
    # Nothing left behind in DEST besides the skill.
    assert [p.name for p in (tmp_path / "skills").iterdir()] == ["cgkit"]


def test_folder_name_equals_skill_name(tmp_path):
    target = skill.install(tmp_path)
    assert target.name == skill.skill_name(target / "SKILL.md") == "cgkit"


def test_refuses_to_overwrite_without_force(tmp_path):
    target = skill.install(tmp_path)
    (target / "SKILL.md").write_text("---\nname: cgkit\n---\nlocal edit\n")
    result = CliRunner().invoke(main, ["skill", "install", "--dest", str(tmp_path)])
    assert result.exit_code == 2 and "--force" in result.output
    assert "local edit" in (target / "SKILL.md").read_text()
    result = CliRunner().invoke(main, ["skill", "install", "--dest", str(tmp_path), "--force"])
    assert result.exit_code == 0, result.output
    assert "local edit" not in (target / "SKILL.md").read_text()


def test_force_never_deletes_an_unrelated_folder(tmp_path):
    other = tmp_path / "cgkit"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["skill", "install", "--dest", str(tmp_path), "--force"])
    assert result.exit_code == 2
    assert (other / "notes.txt").read_text() == "mine"


def test_default_dest_is_documented_and_under_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert skill.default_dest() == tmp_path / ".claude" / "skills"
    result = CliRunner().invoke(main, ["skill", "install"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ".claude" / "skills" / "cgkit" / "SKILL.md").is_file()
    assert "~/.claude/skills" in CliRunner().invoke(main, ["skill", "install", "--help"]).output


def test_path_prints_the_bundle():
    result = CliRunner().invoke(main, ["skill", "path"])
    assert result.exit_code == 0
    assert Path(result.output.strip()) == bundle_root()
    assert (Path(result.output.strip()) / "SKILL.md").is_file()
