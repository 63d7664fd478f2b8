"""Real models' inputs and outputs through every recipe, on the CPU (issue 13).

The recipes are rendered for models whose outputs are dicts, nested tuples and lists, dataclasses,
namedtuples and mapping objects, and whose inputs are keyword arguments, token ids, boolean masks and
non-tensor values (tests/models/structures.py). Each rendering must compile and pass ruff; then the
rendered module is imported on the CPU and its tree helpers run on the real models' outputs: leaf
paths, rebuilding, leaf-by-leaf comparison, fresh inputs, the stand-in loss and the callables adapter.
The GPU half (capture, replay, speed) is tests/gpu/test_structures_gpu.py.
"""

import importlib.util
import re
from pathlib import Path

import pytest
from conftest import MODELS, run_ruff

from cgkit import recipes
from cgkit.errors import CgkitError
from cgkit.report import RecipeReport, render_report_md, required_fields, schema

torch = pytest.importorskip("torch")

STRUCTURES = MODELS / "structures.py"
CASES = {  # name: (model factory, inputs factory)
    "dict-nested": ("build_dict", "inputs_dict"),
    "kwargs-dataclass": ("build_dataclass", "inputs_kwargs"),
    "args-kwargs-mapping": ("build_mapping", "inputs_args_kwargs"),
}
WORKFLOWS = ("manual", "callables", "compile", "profile")


def options(workflow, mode, case, **more):
    model, inputs = CASES[case]
    return recipes.options(workflow, mode=mode, model=f"{STRUCTURES}:{model}", inputs=f"{STRUCTURES}:{inputs}",
                           **more)


def every_structure_case():
    for workflow in WORKFLOWS:
        for mode in recipes.MODES:
            for case in CASES:
                yield options(workflow, mode, case)
            yield options(workflow, mode, "kwargs-dataclass", dtype="bf16")


@pytest.mark.parametrize("opts", list(every_structure_case()),
                         ids=lambda o: recipes.scaffold_command(o).replace(str(STRUCTURES), "S"))
def test_renders_compiles_and_passes_ruff(opts, tmp_path):
    out = tmp_path / "recipe.py"
    recipes.write(opts, out)
    text = out.read_text()
    compile(text, str(out), "exec")
    result = run_ruff(out)
    assert result.returncode == 0, result.stdout + result.stderr


def load_recipe(tmp_path, opts):
    """The rendered recipe as a module (its main() is not run: that needs a GPU)."""
    out = tmp_path / f"{opts.workflow}_{opts.mode}.py"
    recipes.write(opts, out, force=True)
    spec = importlib.util.spec_from_file_location(out.stem, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def callables_training(tmp_path_factory):
    return load_recipe(tmp_path_factory.mktemp("r"), options("callables", "training", "args-kwargs-mapping"))


def test_every_factory_shape_becomes_args_and_kwargs(callables_training):
    r = callables_training
    x = torch.ones(2)
    assert r.as_batch((x,)) == ((x,), {})
    assert r.as_batch(x) == ((x,), {})
    assert r.as_batch({"b": 1, "a": x}) == ((), {"a": x, "b": 1})  # kwargs sorted: batches line up by name
    assert r.as_batch(((x,), {"mask": 2})) == ((x,), {"mask": 2})
    assert [p for p, _ in r.batch_leaves(r.as_batch(((x,), {"mask": x, "t": 0.5})))] == \
        ["args[0]", "kwargs['mask']", "kwargs['t']"]


@pytest.mark.parametrize("case", list(CASES))
def test_outputs_are_walked_and_rebuilt_leaf_by_leaf(case, callables_training):
    r = callables_training
    module = r.load_from_file(str(STRUCTURES), CASES[case][0])()
    batch = r.as_batch(r.load_from_file(str(STRUCTURES), CASES[case][1])())
    output = r.forward(module, batch)
    leaves = r.leaves(output)
    assert len(leaves) >= 3 and all(path.startswith("output") for path, _ in leaves)
    doubled = r.map_tensors(lambda t: t * 2, output)
    assert type(doubled) is type(output)
    largest, problems = r.compare(doubled, output)
    assert largest > 0 and problems and all("max |diff|" in p for p in problems)
    assert r.compare(r.map_tensors(lambda t: t.clone(), output), output) == (0.0, [])


def test_paths_read_like_python(callables_training):
    r = callables_training
    dict_output = r.load_from_file(str(STRUCTURES), "build_dict")()(torch.randn(2, 64))
    assert [p for p, _ in r.leaves(dict_output)] == [
        "output['logits']", "output['aux'][0]", "output['aux'][1][0]", "output['aux'][1][1]", "output['depth']"]
    encoder = r.load_from_file(str(STRUCTURES), "build_dataclass")()
    batch = r.as_batch(r.load_from_file(str(STRUCTURES), "inputs_kwargs")())
    assert [p for p, _ in r.leaves(r.forward(encoder, batch))] == [
        "output.logits", "output.hidden.first", "output.hidden.last", "output.tokens_seen"]


def test_a_non_tensor_output_that_differs_is_a_frozen_value_with_its_path(callables_training):
    r = callables_training
    eager = {"y": torch.ones(2), "calls": 7}
    graphed = {"y": torch.ones(2), "calls": 4}
    _, problems = r.compare(graphed, eager)
    assert problems == ["output['calls'] is 4 in the graph and 7 in eager: a value frozen at capture"]
    _, problems = r.compare({"y": torch.ones(3)}, {"y": torch.ones(2)})
    assert problems == ["output['y']: shape (3,) vs eager's (2,)"]


def test_mapping_outputs_keep_their_type_and_fields(callables_training):
    r = callables_training
    lm = r.load_from_file(str(STRUCTURES), "build_mapping")()
    output = r.forward(lm, r.as_batch(r.load_from_file(str(STRUCTURES), "inputs_args_kwargs")()))
    copied = r.map_tensors(lambda t: t + 1, output)
    assert type(copied).__name__ == "MappingOutput"
    assert copied.logits is copied["logits"] and not torch.equal(copied.logits, output.logits)
    assert len(copied.hidden_states) == len(output.hidden_states) == 5


def test_fresh_inputs_keep_dtype_range_and_mask_counts(callables_training):
    r = callables_training
    batch = r.as_batch(r.load_from_file(str(STRUCTURES), "inputs_args_kwargs")())
    fresh = r.fresh_like(batch)
    (ids,), kwargs = fresh
    assert ids.dtype == torch.int64 and 0 <= int(ids.min()) and int(ids.max()) < 100
    assert kwargs["mask"].dtype == torch.bool
    assert torch.equal(kwargs["mask"].sum(-1), batch[1]["mask"].sum(-1))  # every row keeps its count
    assert kwargs["temperature"] == 0.5 and kwargs["output_hidden_states"] is True


def test_a_changed_non_tensor_argument_is_an_error_not_a_silent_replay(callables_training):
    r = callables_training
    captured = r.as_batch(((torch.ones(2),), {"mask": torch.ones(2), "temperature": 0.5}))
    with pytest.raises(ValueError, match=r"kwargs\['temperature'\] is 0.7, but the graph was captured with 0.5"):
        r.batch_tensors(captured, r.batch_of((torch.ones(2),), {"mask": torch.ones(2), "temperature": 0.7}))
    with pytest.raises(ValueError, match="not those the graph was captured with"):
        r.batch_tensors(captured, r.batch_of((torch.ones(2),), {"temperature": 0.5}))
    same = r.batch_tensors(captured, r.batch_of((torch.zeros(2),), {"temperature": 0.5, "mask": torch.ones(2)}))
    assert len(same) == 2  # keyword order does not matter


def test_stand_in_loss_covers_every_floating_output_and_refuses_none(callables_training):
    r = callables_training
    output = {"a": torch.full((2,), 2.0), "b": (torch.full((3,), 1.0), torch.tensor([1, 2])), "n": 3}
    assert float(r.loss_fn(output)) == pytest.approx(4.0 + 1.0)
    with pytest.raises(r.UsageError, match="no floating-point tensor"):
        r.loss_fn({"ids": torch.tensor([1, 2])})


@pytest.mark.parametrize("case", list(CASES))
def test_the_callables_adapter_round_trips_any_structure(case, callables_training):
    """FlatCall hands make_graphed_callables flat tensors; GraphedModel rebuilds what the model
    returns. Run eagerly here (the graphing itself needs a GPU), the round trip must be exact."""
    r = callables_training
    module = r.load_from_file(str(STRUCTURES), CASES[case][0])()
    batch = r.as_batch(r.load_from_file(str(STRUCTURES), CASES[case][1])())
    flat = r.FlatCall(module, batch)
    rebuilt = r.call(r.GraphedModel(flat), batch)
    assert all(isinstance(t, torch.Tensor) for t in flat(*r.tensors_of(batch)))
    assert type(rebuilt) is type(r.forward(module, batch))
    assert r.compare(rebuilt, r.forward(module, batch)) == (0.0, [])


# --- options --------------------------------------------------------------------------------------


def test_dtype_casts_parameters_and_inputs_and_widens_the_tolerance():
    text = recipes.render(options("manual", "inference", "kwargs-dataclass", dtype="bf16"))
    assert "DTYPE = torch.bfloat16" in text and "build_model().cuda().to(DTYPE)" in text
    assert 't.to("cuda", DTYPE) if t.is_floating_point() else t.cuda()' in text
    assert "RTOL, ATOL = 2e-2, 2e-2  # bf16 arithmetic" in text


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"amp": "bf16", "dtype": "bf16"}, "choose one"),
    ({"mode": "training", "dtype": "fp16"}, "--dtype fp16 is for inference here"),
    ({"dtype": "fp32"}, "--dtype 'fp32': choose one of"),
])
def test_dtype_usage_errors(kwargs, message):
    with pytest.raises(CgkitError, match=re.escape(message)):
        recipes.plan(recipes.options("manual", **kwargs))


def test_an_unknown_option_is_an_error_not_a_silent_extra():
    with pytest.raises(CgkitError, match="unknown scaffold option"):
        recipes.options("manual", fp9="delayed")


def test_training_reports_name_the_loss():
    stand_in = recipes.render(recipes.options("manual", mode="training"))
    assert f"report[\"loss\"] = \"{recipes.STAND_IN_LOSS}\"" in stand_in
    own = recipes.render(options("manual", "training", "dict-nested", loss=f"{STRUCTURES}:build_dict"))
    assert f'report["loss"] = "--loss {STRUCTURES}:build_dict"' in own


def test_plan_is_typed_and_never_branches_on_a_workflow_name():
    decided = recipes.plan(recipes.options("manual", mode="training", ddp=True))
    assert isinstance(decided, recipes.Plan) and decided.warmup_iters == 11
    assert recipes.plan(recipes.options("callables", mode="training", ddp=True)).warmup_iters == 3
    source = Path(recipes.__file__).read_text()
    assert "wf.name ==" not in source and "wf.name in" not in source and "workflow ==" not in source


# --- one report schema ------------------------------------------------------------------------------


def keys_written(text: str) -> tuple[set[str], set[str]]:
    """(keys a rendered recipe writes anywhere, keys of the report it starts with in main())."""
    written = set(re.findall(r'report\["(\w+)"\]\s*=', text))
    for block in re.findall(r"report\.update\((.*?)\n    \)", text, re.S):
        written |= set(re.findall(r"(\w+)=", block))
    start = re.search(r"    report = \{\n(.*?)\n    \}", text, re.S)
    initial = set(re.findall(r'"(\w+)":', start.group(1))) if start else set()
    return written | initial, initial


def all_renderings():
    import test_recipes  # the option combinations of every workflow

    for opts in [*test_recipes.COMBINATIONS, *every_structure_case()]:
        yield recipes.render(opts)


def test_every_key_a_recipe_writes_is_defined_and_every_required_one_is_written():
    known, required = {f.name for f in schema()}, set(required_fields())
    renderings = list(all_renderings())
    assert len(renderings) > 60
    for text in renderings:
        written, initial = keys_written(text)
        assert written <= known, sorted(written - known)
        assert required <= initial, sorted(required - initial)


def test_the_schema_check_catches_an_undefined_key():
    text = recipes.render(recipes.options("manual"))
    written, _ = keys_written(text.replace('report["replays_checked"] =', 'report["replays_chekced"] ='))
    assert "replays_chekced" in written - {f.name for f in schema()}


def test_reports_are_read_with_their_kinds_checked():
    report = RecipeReport.from_json({"workflow": "manual", "captured": True, "speedup": 5, "extra_key": 1})
    assert report.speedup == 5 and report.unknown == {"extra_key": 1}
    with pytest.raises(ValueError, match="'speedup' should be number"):
        RecipeReport.from_json({"workflow": "manual", "speedup": "fast"})
    with pytest.raises(ValueError, match="'captured' should be bool"):
        RecipeReport.from_json({"workflow": "manual", "captured": 1})


def test_the_field_reference_is_generated_from_the_schema():
    from conftest import ROOT

    assert (ROOT / "references" / "report.md").read_text() == render_report_md()
