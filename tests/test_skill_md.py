"""SKILL.md follows the Agent Skills format and says what an assistant needs, with exact commands."""

from __future__ import annotations

import re

import pytest
from docs_util import SKILL, frontmatter

ALLOWED_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}


@pytest.fixture(scope="module")
def parsed():
    return frontmatter(SKILL)


def test_frontmatter_keys_are_allowed(parsed):
    fields, _ = parsed
    assert set(fields) <= ALLOWED_KEYS, set(fields) - ALLOWED_KEYS
    assert {"name", "description"} <= set(fields)


def test_frontmatter_is_yaml_when_pyyaml_is_available(parsed):
    yaml = pytest.importorskip("yaml")
    text = SKILL.read_text()
    data = yaml.safe_load(re.match(r"---\n(.*?)\n---\n", text, re.DOTALL).group(1))
    fields, _ = parsed
    assert data["name"] == fields["name"]
    assert data["description"] == fields["description"]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in data.get("metadata", {}).items())


def test_name(parsed):
    fields, _ = parsed
    name = fields["name"]
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) and len(name) <= 64
    # The bundle is installed as DEST/<name>/ and the name must equal that folder.
    from cgkit.skill import SKILL_NAME, skill_name

    assert name == SKILL_NAME == skill_name(SKILL)


def test_description(parsed):
    fields, _ = parsed
    description = fields["description"]
    assert 0 < len(description) <= 1024
    assert "<" not in description and ">" not in description
    assert "Use when" in description  # says when to use it, not only what it does
    for tool in ("cgkit scaffold", "cgkit check", "cgkit smoke", "cgkit explain"):
        assert tool in description


def test_optional_fields(parsed):
    fields, _ = parsed
    if "compatibility" in fields:
        assert 0 < len(fields["compatibility"]) <= 500
    if "metadata" in fields:
        assert isinstance(fields["metadata"], dict)


def test_body_under_500_lines(parsed):
    _, body = parsed
    assert len(body.splitlines()) < 500


@pytest.mark.parametrize(
    "section",
    [
        "When to use this skill, and when not",
        "Requirements",
        "Choose the API",
        "Workflows",
        "Make code capturable: three principles",
        "Checklist",
        "When something fails: cgkit explain",
        "Look deeper",
    ],
)
def test_has_section(parsed, section):
    _, body = parsed
    assert re.search(rf"^#+ {re.escape(section)}", body, re.MULTILINE), section


def test_every_tool_is_shown_as_a_command(parsed):
    _, body = parsed
    for command in ("cgkit scaffold --workflow", "cgkit check ", "cgkit smoke ", "cgkit explain "):
        assert command in body, command


def test_every_workflow_has_a_scaffold_command(parsed):
    from cgkit import recipes

    _, body = parsed
    for name in recipes.WORKFLOWS:
        assert f"cgkit scaffold --workflow {name}" in body, name


def test_stale_names_only_appear_as_corrections(parsed):
    """The seed's stale names may appear only next to their replacement."""
    _, body = parsed
    # One chunk per paragraph, list item or table row.
    for chunk in re.split(r"\n\s*\n|\n(?=\s*[-*|] )|\n(?=\d+\. )", body):
        if "--enable-cuda-graph" in chunk or "fp8_enabled" in chunk or "--cuda-graph-scope" in chunk:
            assert "->" in chunk or "deprecated" in chunk or "replaces" in chunk, chunk
    assert "cuda-graph-num-warmup-steps" not in body
    assert "NCCL_ASYNC_ERROR_HANDLING" not in body.replace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "")


# ---------------------------------------------------------------------------- decision first

FIRST_SCREEN = 60  # lines of SKILL.md, frontmatter included, that an assistant reads first


def _first_screen() -> str:
    return "\n".join(SKILL.read_text().splitlines()[:FIRST_SCREEN])


def test_first_screen_says_what_to_run_in_order():
    """profile -> trace/check -> scaffold -> smoke -> explain, as commands, within the first screen."""
    screen = _first_screen().split("\n---\n", 1)[1]  # the body's part of it, after the frontmatter
    steps = [
        "cgkit smoke --workflow profile",
        "cgkit trace ",
        "cgkit check ",
        "cgkit scaffold --workflow",
        "cgkit smoke graphed.py",
        "cgkit explain ",
    ]
    positions = [screen.find(step) for step in steps]
    assert all(p >= 0 for p in positions), dict(zip(steps, positions, strict=True))
    assert positions == sorted(positions), dict(zip(steps, positions, strict=True))


def test_first_screen_chooses_the_api():
    from cgkit import recipes

    screen = _first_screen()
    assert re.search(r"^## Choose the API", screen, re.MULTILINE)
    table = [line for line in screen.splitlines() if line.startswith("| ")]
    for name in recipes.WORKFLOWS:
        assert any(f"`{name}`" in row for row in table), f"workflow {name} has no row in the first screen's table"
    for api in ("torch.compile", "make_graphed_callables", "torch.cuda.graph", "--cuda-graph-impl"):
        assert any(api in row for row in table), api


def test_first_screen_has_no_benchmark_table():
    """Numbers in one line with a link; the table itself lives in the references."""
    screen = _first_screen()
    assert "| workload |" not in screen and "eager |" not in screen
    assert "references/api-pytorch.md#measured-on-one-h200" in screen


def test_checklist_is_principles_plus_a_pointer_to_the_rules():
    _, body = frontmatter(SKILL)
    section = body.split("### Checklist", 1)[1].split("\n## ", 1)[0]
    assert "references/rules.md" in section
    assert section.count("\n| ") < 5, "the rule table belongs in references/rules.md"


def test_install_names_what_exists():
    """No `cgkit` package is published on PyPI: never tell anyone to `pip install cgkit`."""
    from docs_util import REFERENCES

    for path in (SKILL, SKILL.parent / "README.md", *sorted(REFERENCES.glob("*.md"))):
        text = path.read_text() if path.exists() else ""
        assert not re.search(r"pip install cgkit\b(?![-\w])", text), path.name
    fields, _ = frontmatter(SKILL)
    assert "not on PyPI" in fields["compatibility"] and "pip install -e ." in fields["compatibility"]


def test_nccl_requirement_says_graph_before_ddp():
    _, body = frontmatter(SKILL)
    row = next(line for line in body.splitlines() if line.startswith("| NCCL"))
    assert "2.9.6" in row and "make_graphed_callables" in row and "before wrapping" in row


def test_current_seed_error_is_not_presented_as_live():
    """torch 2.10 removed the current_seed check (pytorch/pytorch#162505)."""
    _, body = frontmatter(SKILL)
    for line in body.splitlines():
        if "CUDAGeneratorImpl::current_seed" in line:
            assert "2.10" in line, line
