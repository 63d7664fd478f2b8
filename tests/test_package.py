"""Packaging: the wheel carries the skill bundle, and an installed cgkit finds it; no torch on import."""

import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True)
    if done.returncode != 0 and "No module named build" in done.stderr:
        pytest.skip("the `build` package is not installed")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return next(out.glob("cgkit-*.whl"))


def test_wheel_carries_skill_references_and_recipes(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "cgkit/_bundle/SKILL.md" in names
    assert "cgkit/_bundle/recipes/manual.py.j2" in names
    assert "cgkit/_bundle/recipes/_shared/harness.py.j2" in names
    assert any(n.startswith("cgkit/_bundle/references/") and n.endswith(".md") for n in names)
    assert any(n.endswith("entry_points.txt") for n in names)


def test_installed_wheel_renders_from_its_own_bundle(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import cgkit.bundle as b, cgkit.recipes as r; "
            "print(b.bundle_root()); r.render(r.ScaffoldOptions(workflow='manual'))")
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target / "cgkit" / "_bundle")


def test_an_installed_wheel_points_at_its_own_references(wheel, tmp_path):
    """`cgkit explain`'s reference and a finding's url name files of the installed bundle, by absolute
    path (a pip user has no checkout where `references/...` would be)."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from cgkit import explain; from cgkit.check import RULES; "
            "print(explain.diagnose('operation not permitted when stream is capturing')[0].reference); "
            "print(RULES['CG101'].url)")
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    bundle = target / "cgkit" / "_bundle" / "references"
    for line, name in zip(done.stdout.split(), ("troubleshooting.md", "rules.md"), strict=True):
        path, _, anchor = line.partition("#")
        assert path == str(bundle / name) and (bundle / name).is_file() and anchor


def test_scaffold_and_check_do_not_import_torch():
    code = ("import sys; from click.testing import CliRunner; from cgkit.cli import main; "
            "r = CliRunner().invoke(main, ['scaffold', '-w', 'manual']); assert r.exit_code == 0, r.output; "
            "import cgkit.smoke, cgkit.recipes; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
