"""The Transformer Engine and Megatron-Core workflows (te, mcore-layer, mcore-full), checked on a CPU.

- Every option combination renders, compiles and passes ruff (the `--emit flags` output passes `bash -n`).
- TE: every keyword the generated scripts pass to TE (make_graphed_callables, autocast,
  fp8_autocast, the FP8 recipe classes, TransformerLayer) is checked against TE 2.20.2's own
  source, read with `ast` straight from the wheel in ../shared/wheels.
- Megatron-Core: the generated TransformerConfigs are constructed with megatron-core 0.19.2 (from
  its wheel, imported on the CPU with two stubs), and the generated Megatron-LM flags go through
  Megatron's own argument parser and validate_args.
"""

import ast
import contextlib
import importlib.util
import io
import itertools
import re
import shlex
import shutil
import subprocess
import sys
import types
import typing
import warnings
import zipfile

import pytest
from click.testing import CliRunner
from conftest import MODELS, ROOT, run_ruff

from cgkit import recipes
from cgkit.cli import main
from cgkit.errors import CgkitError

WHEELS = ROOT.parent / "shared" / "wheels"
GPT = f"{MODELS / 'tiny_gpt.py'}"


def combinations():
    for fp8, microbatches, optimizer in itertools.product(recipes.FP8_CHOICES, (None, 3), (None, "sgd")):
        yield recipes.options("te", fp8=fp8, microbatches=microbatches, optimizer=optimizer)
    yield recipes.options("te", model=f"{GPT}:build", inputs=f"{GPT}:example_batch", layers="model.blocks")
    yield recipes.options("te", model=f"{GPT}:build", inputs=f"{GPT}:example_batch", layers="model.blocks",
                          fp8="delayed", loss=f"{GPT}:next_token_loss")
    for impl, microbatches in itertools.product((None, *recipes.MCORE_IMPLS), (None, 2)):
        yield recipes.options("mcore-layer", impl=impl, microbatches=microbatches)
    for microbatches in (None, 4):
        yield recipes.options("mcore-full", microbatches=microbatches)


def flag_outputs():
    for impl in recipes.MCORE_IMPLS:
        yield recipes.options("mcore-layer", impl=impl, emit="flags")
    yield recipes.options("mcore-full", emit="flags")


def _id(opts):
    return recipes.scaffold_command(opts).replace(str(MODELS), "M").replace("cgkit scaffold --workflow ", "")


COMBINATIONS = list(combinations())
FLAG_OUTPUTS = list(flag_outputs())


@pytest.mark.parametrize("opts", COMBINATIONS, ids=_id)
def test_renders_compiles_and_passes_ruff(opts, tmp_path):
    out = tmp_path / "recipe.py"
    recipes.write(opts, out)
    text = out.read_text()
    compile(text, str(out), "exec")
    result = run_ruff(out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"# cgkit-recipe: workflow={opts.workflow} mode=training launcher=python" in text
    assert "\n\n\n\n" not in text


@pytest.mark.parametrize("opts", FLAG_OUTPUTS, ids=_id)
def test_emit_flags_is_a_shell_snippet(opts, tmp_path):
    out = tmp_path / "flags.sh"
    recipes.write(opts, out)
    if shutil.which("bash"):
        done = subprocess.run(["bash", "-n", str(out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert emitted_flags(out.read_text()) == list(recipes.plan(opts).mcore.flags)


def emitted_flags(text):
    """The lines of the CUDA_GRAPH_ARGS=( ... ) array in an `--emit flags` output."""
    body = re.search(r"^CUDA_GRAPH_ARGS=\(\n(.*?)^\)", text, re.MULTILINE | re.DOTALL).group(1)
    return [line.strip() for line in body.splitlines() if line.strip()]


def docstring_flags(text):
    """The flag lines listed in a generated mcore script's docstring."""
    doc = ast.get_docstring(ast.parse(text))
    return [line.strip() for line in doc.splitlines() if line.startswith("    --")]


@pytest.mark.parametrize("opts", FLAG_OUTPUTS, ids=_id)
def test_script_and_emitted_flags_agree(opts):
    script = recipes.render(recipes.options(opts.workflow, impl=opts.impl))
    assert docstring_flags(script) == emitted_flags(recipes.render(opts))


def test_checklist_te():
    text = recipes.render(recipes.options("te", fp8="delayed", microbatches=2))
    assert 'inspect.signature(te.make_graphed_callables).parameters' in text  # detected, not guessed
    assert '"enabled": "fp8_enabled"' in text and '"cache_quantized_params": "fp8_weight_caching"' in text
    assert "te.fp8_autocast(enabled=True, fp8_recipe=FP8_RECIPE)" in text  # TE < 2.9
    assert "te.autocast(enabled=True, recipe=FP8_RECIPE)" in text
    assert "_order=[1] * MICROBATCHES + [-1] * MICROBATCHES" in text
    assert "cache_quantized_params=True" in text and "is_first_microbatch=first" in text
    assert "requires_grad_(a.requires_grad)" in text  # sample args keep requires_grad
    plain = recipes.render(recipes.options("te"))
    assert "enabled=False" in plain and "recipe." not in plain and "quantized()" not in plain
    assert "where_graphs_pay" in plain  # the demo reports where graphs pay
    user = recipes.render(recipes.options("te", model=f"{GPT}:build", inputs=f"{GPT}:example_batch"))
    assert "where_graphs_pay" not in user and "tuple(model.layers)" in user


def test_checklist_mcore():
    local = recipes.render(recipes.options("mcore-layer"))
    assert "use_cudagraphable_rng=True" in local  # a graph-safe RNG tracker
    assert "Float16Module(config, gpt)" in local and "params_dtype=torch.bfloat16" in local
    assert "model.zero_grad_buffer()" in local and "get_forward_backward_func()" in local
    assert "init_distributed()" in local and "parallel_state.initialize_model_parallel()" in local
    # Both models start bit-identical: the CPU generator is seeded too (the position embedding is
    # initialized there), and the graphed model gets the eager model's initial weights.
    assert "torch.manual_seed(SEED)\n    model_parallel_cuda_manual_seed(" in local
    assert "initial_weights = weights_of(eager_model)" in local
    assert "graphed_model.load_state_dict(initial_weights)" in local
    te_impl = recipes.render(recipes.options("mcore-layer", impl="transformer_engine"))
    assert "TECudaGraphHelper(" in te_impl and "helper.create_cudagraphs()" in te_impl
    assert "te_rng_tracker=True" in te_impl and "init_num_microbatches_calculator(" in te_impl
    full = recipes.render(recipes.options("mcore-full"))
    assert "FullCudaGraphWrapper(\n        get_forward_backward_func(), cuda_graph_warmup_steps=" in full
    assert "stream = get_shared_capture_stream()" in full
    assert "--no-check-for-nan-in-loss-and-grad" in full


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workflow": "te", "fp8": "fp4"}, "--fp8 'fp4'"),
        ({"workflow": "te", "microbatches": "0"}, "positive integer"),
        ({"workflow": "te", "microbatches": 2, "model": f"{GPT}:build", "inputs": f"{GPT}:example_batch"},
         "leave it out with --model"),
        ({"workflow": "te", "amp": "bf16"}, "does not take --amp"),
        ({"workflow": "te", "mode": "inference"}, "has no 'inference' mode"),
        ({"workflow": "mcore-layer", "impl": "full_iteration"}, "--impl 'full_iteration'"),
        ({"workflow": "mcore-layer", "emit": "yaml"}, "--emit 'yaml'"),
        ({"workflow": "mcore-full", "impl": "local"}, "does not take --impl"),
        ({"workflow": "mcore-full", "fp8": "delayed"}, "does not take --fp8"),
        ({"workflow": "mcore-layer", "model": f"{GPT}:build", "inputs": f"{GPT}:example_batch"},
         "builds its own Megatron-Core GPT"),
        ({"workflow": "manual", "fp8": "delayed"}, "does not take --fp8"),
    ],
)
def test_bad_options_get_a_clear_error(kwargs, message):
    with pytest.raises(CgkitError) as info:
        recipes.render(recipes.options(**kwargs))
    assert message in str(info.value)


def test_cli_routes_the_new_options():
    runner = CliRunner()
    done = runner.invoke(main, ["scaffold", "--workflow", "te", "--fp8", "current", "--microbatches", "2"])
    assert done.exit_code == 0, done.output
    assert "recipe.Float8CurrentScaling(fp8_format=recipe.Format.HYBRID)" in done.output
    assert "cgkit scaffold --workflow te --fp8 current --microbatches 2" in done.output
    done = runner.invoke(main, ["scaffold", "--workflow", "mcore-layer", "--impl", "transformer_engine",
                                "--emit", "flags"])
    assert done.exit_code == 0, done.output
    assert "--cuda-graph-impl transformer_engine" in done.output and "def " not in done.output
    done = runner.invoke(main, ["scaffold", "--workflow", "te", "--emit", "flags"])
    assert done.exit_code != 0 and "does not take --emit" in done.output


# --- Transformer Engine: keywords against TE 2.20.2's source --------------------------------------


def _wheel(pattern):
    found = sorted(WHEELS.glob(pattern)) if WHEELS.is_dir() else []
    if not found:
        pytest.skip(f"no {pattern} in {WHEELS} (the research copy of /work/shared beside the repository)")
    return found[-1]


@pytest.fixture(scope="module")
def te_api():
    """Parameter names of TE's public callables, read with `ast` from the 2.20.2 wheel (no import)."""
    with zipfile.ZipFile(_wheel("transformer_engine-2.*-py3-none-any.whl")) as whl:
        def tree(path):
            return ast.parse(whl.read(f"transformer_engine/{path}").decode())

        graph, quantization = tree("pytorch/graph.py"), tree("pytorch/quantization.py")
        transformer, recipe_mod = tree("pytorch/transformer.py"), tree("common/recipe/__init__.py")
        exported = tree("pytorch/__init__.py")

    def params(fn):
        a = fn.args
        return {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs} - {"self"}

    def function(module, name):
        return next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name)

    def method(module, cls, name):
        klass = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls)
        return next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)

    classes = {n.name: n for n in recipe_mod.body if isinstance(n, ast.ClassDef)}
    fields = {name: {s.target.id for s in c.body if isinstance(s, ast.AnnAssign)}
              | {t.id for s in c.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
              for name, c in classes.items()}
    names = {alias.asname or alias.name for n in exported.body if isinstance(n, ast.ImportFrom) for alias in n.names}
    return {
        "te.make_graphed_callables": params(function(graph, "make_graphed_callables")),
        "te.autocast": params(method(quantization, "autocast", "__init__")),
        "te.fp8_autocast": params(function(quantization, "fp8_autocast")),
        "te.TransformerLayer": params(method(transformer, "TransformerLayer", "__init__")),
        "TransformerLayer.forward": params(method(transformer, "TransformerLayer", "forward")),
        "recipe": fields,
        "exported": names,
    }


def te_calls(text):
    """(callee, keywords) for every call into TE in a generated script, plus te_graph_kwargs' names."""
    calls = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            keywords = {k.arg for k in node.keywords if k.arg}
            if callee.startswith(("te.", "recipe.")) or callee in ("te_graph_kwargs", "layer"):
                calls.append((callee, keywords))
        if isinstance(node, ast.FunctionDef) and node.name == "te_graph_kwargs":
            old = next(n for n in ast.walk(node) if isinstance(n, ast.Dict))
            calls.append(("te_graph_kwargs (TE < 2.9 names)", {ast.literal_eval(v) for v in old.values}))
    return calls


def te_mismatches(text, api):
    """Keywords the script passes that TE 2.20.2 does not have: empty when they agree."""
    wrong = []
    for callee, keywords in te_calls(text):
        if callee.startswith("recipe."):
            allowed = api["recipe"].get(callee.split(".")[1])
            if allowed is None:
                wrong.append(f"{callee}: no such recipe class")
                continue
        elif callee.startswith("te_graph_kwargs") or callee == "te.make_graphed_callables":
            allowed = api["te.make_graphed_callables"]
        elif callee == "layer":
            allowed = api["TransformerLayer.forward"]
        else:
            if callee.split(".")[1] not in api["exported"]:
                wrong.append(f"{callee}: not exported by transformer_engine.pytorch")
            allowed = api.get(callee, set())
        wrong += [f"{callee}({k}=...)" for k in sorted(keywords - allowed)]
    for attr in re.findall(r"recipe\.Format\.(\w+)", text):
        if attr not in {"HYBRID", "E4M3"}:
            wrong.append(f"recipe.Format.{attr}")
    return wrong


TE_COMBINATIONS = [o for o in COMBINATIONS if o.workflow == "te"]


@pytest.mark.parametrize("opts", TE_COMBINATIONS, ids=_id)
def test_te_keywords_exist_in_te_2_20(opts, te_api):
    text = recipes.render(opts)
    assert te_calls(text), "found no TE calls to check"
    assert te_mismatches(text, te_api) == []


def test_te_keyword_check_catches_a_wrong_keyword(te_api):
    text = recipes.render(recipes.options("te", fp8="delayed", microbatches=2))
    assert te_mismatches(text, te_api) == []
    for good, bad in [("num_warmup_iters=", "num_warmup_iterations="), ("te.autocast(enabled=", "te.autocast(fp8_enabled="),
                      ("amax_history_len=", "history_len="), ('"fp8_recipe"', '"fp8_recipes"')]:
        assert good in text
        assert te_mismatches(text.replace(good, bad, 1), te_api), f"{bad} went unnoticed"
    # The names the fallback maps to are TE's old (pre-2.9) names, still in 2.20's signature.
    assert {"fp8_enabled", "fp8_recipe", "fp8_weight_caching"} <= te_api["te.make_graphed_callables"]


# --- Megatron-Core: TransformerConfig and Megatron-LM's argument parser -----------------------------


@pytest.fixture(scope="module")
def megatron(tmp_path_factory):
    """megatron-core 0.19.2 from its wheel, importable on a CPU with torch.

    Two stubs, as in the research notes: the triton-only kernels module of MoE's paged stash,
    and typing.override (Python 3.12) on older Pythons.
    """
    wheel = _wheel("megatron_core-0.19.*.whl")
    pytest.importorskip("torch", reason="megatron-core needs torch (a CPU build is enough)")
    for dep in ("numpy", "packaging", "yaml"):
        pytest.importorskip(dep, reason=f"megatron-core imports {dep}")
    if "megatron" in sys.modules and not str(getattr(sys.modules["megatron"], "__file__", "")).startswith(
            str(tmp_path_factory.getbasetemp())):
        pytest.skip("another megatron is already imported in this process")
    target = tmp_path_factory.mktemp("megatron_core")
    with zipfile.ZipFile(wheel) as whl:
        whl.extractall(target)
    sys.path.insert(0, str(target))
    if not hasattr(typing, "override"):
        typing.override = lambda fn: fn
    stub = types.ModuleType("megatron.core.transformer.moe.ops.paged_stash")
    stub.GLOBAL_BLOCK_SIZE = 1024
    stub.paged_stash_copy_kernel = stub.paged_stash_pop_kernel = None
    sys.modules[stub.__name__] = stub
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: F401
        from megatron.training import arguments
    return arguments


def load_script(text, tmp_path):
    path = tmp_path / "generated.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"cgkit_generated_{abs(hash(text))}", path)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec.loader.exec_module(module)  # imports every Megatron name the script uses
    return module


MCORE_COMBINATIONS = [o for o in COMBINATIONS if o.workflow.startswith("mcore")]


@pytest.mark.parametrize("opts", MCORE_COMBINATIONS, ids=_id)
def test_generated_transformer_configs_construct(opts, megatron, tmp_path):
    module = load_script(recipes.render(opts), tmp_path)
    impl = recipes.plan(opts).mcore.impl
    for cuda_graph_impl in ("none", impl):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            config = module.transformer_config(cuda_graph_impl)
        assert config.cuda_graph_impl == cuda_graph_impl
        assert config.cuda_graph_modules == [] and config.cuda_graph_warmup_steps == 3
        assert config.bf16 and config.hidden_dropout == 0.0
        deprecated = [str(w.message) for w in caught if "deprecated" in str(w.message).lower()]
        assert deprecated == [], deprecated
    assert config.use_te_rng_tracker == (impl == "transformer_engine")


def parse_megatron_flags(arguments, flags):
    """Megatron-LM's own parser and validate_args over `flags` plus a minimal model."""
    import argparse

    base = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128",
            "--max-position-embeddings", "128", "--micro-batch-size", "1", "--bf16"]
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    args = parser.parse_args(base + flags)
    args.rank, args.world_size = 0, 1
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return arguments.validate_args(args)


@pytest.mark.parametrize("opts", FLAG_OUTPUTS, ids=_id)
def test_flags_pass_megatrons_parser_and_validation(opts, megatron):
    lines = emitted_flags(recipes.render(opts))
    args = parse_megatron_flags(megatron, [word for line in lines for word in shlex.split(line)])
    mcore = recipes.plan(opts).mcore
    assert args.cuda_graph_impl == mcore.impl
    assert args.cuda_graph_warmup_steps == mcore.warmup_steps
    assert args.te_rng_tracker is True and args.cuda_graph_modules == []
    if mcore.impl == "full_iteration":
        assert args.check_for_nan_in_loss_and_grad is False


def test_megatron_validation_is_really_checked(megatron):
    """Without --no-check-for-nan-in-loss-and-grad, full_iteration is refused: the check has teeth."""
    with pytest.raises(AssertionError, match="no-check-for-nan-in-loss-and-grad"):
        parse_megatron_flags(megatron, ["--cuda-graph-impl", "full_iteration"])
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        parse_megatron_flags(megatron, ["--cuda-graph-num-warmup-steps", "3"])  # never existed
