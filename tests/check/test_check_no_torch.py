"""The checker must never import torch (it runs in lint-only CI, and it must start fast)."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_check_does_not_import_torch(tmp_path):
    target = tmp_path / "t.py"
    target.write_text("import torch\nwith torch.cuda.graph(g):\n    y = x.item()\n", encoding="utf-8")
    code = textwrap.dedent(
        f"""
        import sys
        import cgkit.check
        from cgkit.check.formats import render
        from click.testing import CliRunner
        from cgkit.cli import main
        result = CliRunner().invoke(main, ["check", {str(target)!r}, "--format", "sarif"])
        assert result.exit_code == 1, result.output
        bad = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        print("TORCH_MODULES", bad)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "TORCH_MODULES []" in out.stdout, out.stdout + out.stderr
