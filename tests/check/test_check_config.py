import pytest
from check_util import make_writer

from cgkit.check import check_paths
from cgkit.check.config import load_config
from cgkit.errors import CgkitError

SRC = """import torch
x = torch.randn(8, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    a = x.sum().item()
    b = x.cpu()
"""


@pytest.fixture
def write(tmp_path):
    return make_writer(tmp_path)


def _codes(result):
    return [f.code for f in result.findings]


def test_pyproject_found_by_walking_up(write):
    root = write({
        "pyproject.toml": '[tool.cgkit]\nignore = ["CG102"]\n',
        "src/deep/train.py": SRC,
    })
    result = check_paths([str(root / "src" / "deep" / "train.py")])
    assert _codes(result) == ["CG101"]


def test_select_and_cli_override(write):
    root = write({"pyproject.toml": '[tool.cgkit]\nselect = ["CG102"]\n', "t.py": SRC})
    assert _codes(check_paths([str(root / "t.py")])) == ["CG102"]
    assert _codes(check_paths([str(root / "t.py")], select=["CG1"])) == ["CG101", "CG102"]
    assert _codes(check_paths([str(root / "t.py")], select=["CG1"], ignore=["CG101"])) == ["CG102"]


def test_per_file_ignores(write):
    root = write({
        "pyproject.toml": '[tool.cgkit]\nper-file-ignores = { "tests/*" = ["CG1"] }\n',
        "tests/t.py": SRC,
        "t.py": SRC,
    })
    result = check_paths([str(root)])
    paths = {(f.path.replace("\\", "/").split("/")[-2], f.code) for f in result.findings}
    assert all(folder != "tests" for folder, _ in paths)
    assert len(result.findings) == 2


def test_regions_from_config(write):
    root = write({
        "pyproject.toml": '[tool.cgkit]\nregions = ["step"]\n',
        "t.py": "import torch\n\ndef step(x):\n    return torch.ones(3).sum().item()\n",
    })
    result = check_paths([str(root / "t.py")])
    assert [(f.code, f.severity, f.region["kind"]) for f in result.findings] == [("CG101", "error", "declared")]


def test_bad_config_is_a_usage_error(write):
    root = write({"pyproject.toml": '[tool.cgkit]\nselect = ["NOPE1"]\n', "t.py": SRC})
    with pytest.raises(CgkitError):
        check_paths([str(root / "t.py")])
    root = write({"pyproject.toml": '[tool.cgkit]\nunknown-key = 1\n'})
    with pytest.raises(CgkitError):
        load_config([str(root)])
