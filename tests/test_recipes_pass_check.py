"""cgkit's own recipes pass `cgkit check`, and the checker sees their captured regions.

The harness in every recipe reads values on the host (`float(loss)`, `int(t.min())`): outside the
captured region, so nothing may be reported. A `.item()` slipped into the captured forward must be.
"""

import pytest

from cgkit import recipes
from cgkit.check import check_paths

SPECS = [
    {"workflow": "manual"},
    {"workflow": "manual", "mode": "training", "optimizer": "sgd"},
    {"workflow": "manual", "mode": "training", "ddp": True},
    {"workflow": "manual", "buckets": "1,2,4"},
    {"workflow": "manual", "amp": "bf16"},
    {"workflow": "callables"},
    {"workflow": "callables", "layers": "model.layers", "amp": "bf16"},
    {"workflow": "callables", "mode": "inference"},
    {"workflow": "compile"},
    {"workflow": "compile", "mode": "training"},
    {"workflow": "profile"},
    {"workflow": "te", "fp8": "delayed"},
    {"workflow": "mcore-layer"},
    {"workflow": "mcore-full"},
]


def render_to(tmp_path, spec):
    out = tmp_path / f"{spec['workflow']}.py"
    recipes.write(recipes.ScaffoldOptions(**spec), out)
    return out


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: recipes.scaffold_command(recipes.ScaffoldOptions(**s)))
def test_generated_recipe_has_no_capture_hazard(spec, tmp_path):
    result = check_paths([str(render_to(tmp_path, spec))])
    assert [f"{f.line}: {f.code} {f.message}" for f in result.findings if f.severity != "info"] == []


def test_a_sync_added_to_the_captured_forward_is_found_with_its_chain(tmp_path):
    path = render_to(tmp_path, {"workflow": "manual"})
    text = path.read_text()
    assert "    return call(model, batch)\n" in text
    path.write_text(text.replace("    return call(model, batch)\n",
                                 "    batch[0][0].sum().item()\n    return call(model, batch)\n", 1))
    findings = [f for f in check_paths([str(path)]).findings if f.code == "CG101"]
    assert len(findings) == 1
    assert findings[0].severity == "error"
    assert findings[0].region["kind"] == "torch.cuda.graph"
    assert [step["name"] for step in findings[0].chain] == ["forward()"]
