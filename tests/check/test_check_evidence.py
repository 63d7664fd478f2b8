"""What counts as evidence that a value is a tensor, or a Python value that changes between replays."""

from __future__ import annotations

import textwrap

from cgkit.check import check_source


def _codes(source: str, **kwargs) -> list[tuple[int, str]]:
    result = check_source(textwrap.dedent(source).lstrip("\n"), **kwargs)
    assert not result.errors, result.errors
    return [(f.line, f.code) for f in result.findings if f.severity in ("error", "warning")]


def test_a_name_reused_for_a_number_after_a_tensor_is_read_as_the_number():
    assert _codes("""
        import torch
        x = torch.randn(8, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            n = x.sum()
            if n > 0:
                pass
            n = 3
            if n > 0:
                pass
    """) == [(6, "CG201")]


def test_optional_tensor_annotations_are_tensors_and_scalar_ones_are_not():
    source = """
        from typing import Optional, Union
        import torch

        def step(a: Optional[torch.Tensor], b: torch.Tensor | None, c: Union[torch.Tensor, None], d: "torch.Tensor",
                 flag: bool = False, fmt: str = "sbhd", n: Optional[int] = None):
            if a.sum() > 0 and b.sum() > 0 and c.sum() > 0 and d.sum() > 0:
                pass
            if flag and fmt == "thd" and n:
                pass
    """
    lines = [line for line, code in _codes(source, regions=["step"]) if code == "CG201"]
    assert lines == [6, 6, 6, 6]


def test_graphed_callables_seed_only_the_parameters_every_call_fills():
    assert _codes("""
        import torch

        class Block(torch.nn.Module):
            def forward(self, x, fmt="sbhd", mask=None):
                if fmt == "sbhd" and mask is None:
                    return x * 2
                if x.sum() > 0:
                    return x
                return -x

        x = torch.randn(4, 8, device="cuda", requires_grad=True)
        torch.cuda.make_graphed_callables(Block().cuda(), (x,))
    """) == [(7, "CG201")]


def test_the_error_path_is_not_captured_work():
    assert _codes("""
        import torch
        x = torch.randn(8, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            if x.dim() != 1:
                raise ValueError(f"bad input {x.sum().item()}")
            assert x.dim() == 1, f"got {x}"
            y = x.sum().item()
    """) == [(8, "CG101")]


def test_a_setting_changed_before_capture_is_not_reported_but_one_changed_after_is():
    source = """
        import torch
        x = torch.ones(4, device="cuda")
        scale = 2.0
        offset = 1.0
        offset = 0.5
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * scale + offset
        scale = 3.0
        g.replay()
    """
    assert _codes(source) == [(8, "CG404")]


def test_a_value_without_evidence_of_being_a_number_is_not_reported():
    assert _codes("""
        import torch
        x = torch.ones(4, device="cuda")
        weights = load()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * weights
        weights = load()
        g.replay()
    """) == []


def test_a_stack_pushed_and_popped_is_balanced():
    assert _codes("""
        import torch
        _stack = []

        def push(name):
            _stack.append(name)

        def pop():
            _stack.pop()

        x = torch.ones(4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            push("capture")
            y = x * 2
            pop()
    """) == []


def test_kept_outputs_of_a_compiled_function_are_found_in_a_loop_and_after_the_next_call():
    codes = _codes("""
        import torch

        f = torch.compile(lambda t: t * 2, mode="reduce-overhead")
        x = torch.ones(4, device="cuda")
        kept = []
        for i in range(3):
            y = f(x)
            kept.append(y)
            kept.append(y.clone())
        a = f(x)
        b = f(x)
        print(a)
    """)
    assert codes == [(8, "CG407"), (12, "CG407")]  # the read of ``a`` after the next call: where it raises


def test_a_compiled_forward_of_an_untyped_model_reaches_the_modules_this_file_defines():
    """``model.forward = torch.compile(model.forward, ...)`` with ``model`` a parameter (second held-out
    set, static_cache_forward_compiled.py): the file's module forwards are what it compiles."""
    assert _codes("""
        import torch

        class Decoder(torch.nn.Module):
            def forward(self, ids):
                print("decode")
                return ids

        def generate(model, ids):
            model.forward = torch.compile(model.forward, mode="reduce-overhead")
            return model(ids)
    """) == [(5, "CG401")]


def test_a_compiled_method_called_through_its_alias_takes_the_callers_tensors():
    """``self.td_fn = torch.compile(self._td_target, ...)`` called as ``self.td_fn(...)`` with tensors
    unpacked from ``(t.cuda(non_blocking=True) for t in batch)`` (dqn_agent_compiled.py)."""
    found = _codes("""
        import torch

        class Agent:
            def __init__(self, net):
                self.q_net = net
                self.td_fn = torch.compile(self._td_target, backend="cudagraphs")

            def _td_target(self, rewards, dones):
                if dones.any():
                    rewards = rewards * 2
                return rewards

            def learn(self, batch):
                rewards, dones = (t.cuda(non_blocking=True) for t in batch)
                return self.td_fn(rewards, dones)
    """)
    assert found == [(9, "CG201")]


def test_a_function_that_returns_a_torch_factory_call_returns_a_tensor():
    """``self.sigmas = karras_sigmas(n).cuda()`` is a tensor, so ``sigmas[i + 1] - s`` passed to a
    compiled step is no Python number (the false alarm of the second held-out set's first score)."""
    assert _codes("""
        import torch

        def schedule(n):
            return torch.cat([torch.linspace(1, 0, n), torch.zeros(1)])

        def dtype_of():
            return torch.get_autocast_gpu_dtype()

        step = torch.compile(lambda x, dt: x * dt, mode="reduce-overhead")

        def sample(x, n):
            sigmas = schedule(n).cuda()
            for i in range(n):
                x = step(x, sigmas[i + 1] - sigmas[i]).clone()  # cloned: not fed back (CG407)
            return x
    """) == []


def test_an_untyped_model_held_by_a_runner_reaches_the_modules_of_its_file_and_their_parts():
    # ``self.model`` comes in untyped; the capture calls it from a function defined in the method, which
    # reads the method's ``self``; the model's attention part is found by its one method of that name.
    source = """
        import torch

        class Backend:
            def __init__(self):
                self.max_len = torch.zeros((), dtype=torch.int32, device="cuda")

            def plan(self, bs):
                return int(self.max_len)

        class Model(torch.nn.Module):
            def __init__(self, attn):
                super().__init__()
                self.attn = attn

            def forward(self, x):
                self.attn.plan(x.shape[0])
                return x * 2

        class Runner:
            def __init__(self, model):
                self.model = model
                self.x = torch.zeros(4, device="cuda")

            def capture(self):
                def run_once():
                    return self.model(self.x)

                run_once()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = run_once()
                return g, out
    """
    assert _codes(source) == [(8, "CG103")]
    # A local of unknown type is not taken for the file's class: its method may be anything's.
    assert _codes(source.replace("self.attn.plan(x.shape[0])", "attn = make(); attn.plan(x.shape[0])")) == []


def test_a_method_called_on_each_callback_reaches_every_override_in_the_hierarchy():
    source = """
        import time
        import torch

        class Callback:
            def on_step_end(self, trainer, loss): ...

        class Clock(Callback):
            def on_step_end(self, trainer, loss):
                trainer.t = time.time()

        class Trainer:
            def __init__(self, callbacks):
                self.callbacks = callbacks
                self.x = torch.zeros(4, device="cuda")

            def step(self):
                loss = (self.x * 2).sum()
                for cb in self.callbacks:
                    cb.on_step_end(self, loss)
                return loss

            def capture(self):
                self.step()
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.out = self.step()
    """
    assert _codes(source) == [(9, "CG411")]
    # Each element of a held collection may be any class of the file that defines the method (duck-typed
    # callbacks with no common base) ...
    assert _codes(source.replace("class Clock(Callback):", "class Clock:")) == [(9, "CG411")]
    # ... but one object the runner holds is not taken for every unrelated class that shares a name.
    single = source.replace("class Clock(Callback):", "class Clock:").replace(
        "for cb in self.callbacks:\n                    cb.on_step_end(self, loss)",
        "self.callbacks.on_step_end(self, loss)")
    assert "self.callbacks.on_step_end" in single
    assert _codes(single) == []


def test_callbacks_fired_by_name_through_getattr_reach_each_named_method():
    source = """
        import time
        import torch

        class Timer:
            def on_batch(self, trainer, x):
                trainer.t0 = time.perf_counter()

            def on_loss(self, trainer, loss):
                pass

        class Logger:
            def on_loss(self, trainer, loss):
                trainer.history.append(loss.item())

            def on_epoch(self, trainer):
                print(trainer.history[-1].item())

        class Trainer:
            def __init__(self, callbacks):
                self.cbs = callbacks
                self.x = torch.zeros(4, device="cuda")
                self.history = []

            def _fire(self, hook, *args):
                for cb in self.cbs:
                    getattr(cb, hook)(self, *args)

            def step(self):
                self._fire("on_batch", self.x)
                loss = (self.x * 2).sum()
                self._fire("on_loss", loss)
                return loss

            def capture(self):
                self.step()
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.out = self.step()
                self._fire("on_epoch")
    """
    # ``on_epoch`` is fired too, but after the capture: only the hooks fired from the step are reached.
    assert _codes(source) == [(6, "CG411"), (13, "CG101")]
    # The same through a bound method fetched with a default: ``fn = getattr(cb, hook, None)``.
    fetched = source.replace("getattr(cb, hook)(self, *args)",
                             "fn = getattr(cb, hook, None)\n                    if fn is not None:\n"
                             "                        fn(self, *args)")
    assert _codes(fetched) == [(6, "CG411"), (13, "CG101")]


def test_param_groups_changed_in_the_loop_that_calls_the_replaying_method_are_found():
    source = """
        import torch

        class GraphedStep:
            def __init__(self, params):
                self.opt = torch.optim.AdamW(params, lr=1e-3, capturable=True)
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.opt.step()

            def __call__(self):
                self.g.replay()

        def train(params, steps):
            graphed = GraphedStep(params)
            for step in range(steps):
                for group in graphed.opt.param_groups:
                    group["lr"] = 1e-3 * (1 - step / steps)
                graphed()
    """
    assert (17, "CG404") in _codes(source)
    # Set once before the loop that replays: no change between replays.
    once = source.replace("""            for step in range(steps):
                for group in graphed.opt.param_groups:
                    group["lr"] = 1e-3 * (1 - step / steps)
                graphed()""", """            for group in graphed.opt.param_groups:
                group["lr"] = 1e-3
            for step in range(steps):
                graphed()""")
    assert not [c for c in _codes(once) if c[1] == "CG404"]


def test_outputs_kept_on_the_object_past_the_next_call_or_replay():
    compiled = """
        import torch

        class Actor:
            def __init__(self, net):
                self.act_fn = torch.compile(net, mode="reduce-overhead")
                self.recent = []

            def act(self, obs):
                a = self.act_fn(obs)
                self.recent.append(a)
                return a
    """
    assert _codes(compiled) == [(10, "CG407")]
    assert _codes(compiled.replace("self.recent.append(a)", "self.recent.append(a.clone())")) == []
    runner = """
        import torch

        class Runner:
            def __init__(self, model, sizes):
                self.graphs, self.outputs, self.seen = {}, {}, []
                self.x = torch.zeros(8, 4, device="cuda")
                for bs in sizes:
                    g, out = self.capture_one(model, bs)
                    self.graphs[bs], self.outputs[bs] = g, out

            def capture_one(self, model, bs):
                model(self.x[:bs])
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = model(self.x[:bs])
                return g, out

            def run(self, x):
                bs = x.shape[0]
                self.x[:bs].copy_(x)
                self.graphs[bs].replay()
                logits = self.outputs[bs][:bs]
                self.seen.append(logits)
                return logits
    """
    assert _codes(runner) == [(23, "CG407")]
    assert _codes(runner.replace("self.seen.append(logits)", "self.seen.append(logits.clone())")) == []


def test_a_runner_input_read_by_a_local_function_and_rebound_before_replay_is_found():
    source = """
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model
                self.loc = torch.zeros(8, dtype=torch.long, device="cuda")
                self.graphs = {}

            def capture(self):
                g, _ = self.capture_one(8)
                self.graphs[8] = g

            def capture_one(self, bs):
                def run_once():
                    return self.model(self.loc[:bs])

                run_once()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = run_once()
                return g, out

            def replay(self, loc):
                self.loc = loc
                self.graphs[8].replay()
    """
    assert _codes(source) == [(24, "CG405")]
    assert _codes(source.replace("self.loc = loc", "self.loc.copy_(loc)")) == []


def test_a_compiled_modules_tensor_replaced_between_calls_is_found_and_a_setup_before_them_is_not():
    source = """
        import torch

        class Adapter(torch.nn.Module):
            def __init__(self, weights):
                super().__init__()
                self.weights = weights
                self.w = torch.nn.Parameter(weights["a"], requires_grad=False)

            def use(self, name):
                self.w = torch.nn.Parameter(self.weights[name], requires_grad=False)

            def forward(self, x):
                return x @ self.w

        def serve(layer: Adapter, requests):
            fwd = torch.compile(layer, mode="reduce-overhead")
            for name, x in requests:
                layer.use(name)
                y = fwd(x).clone()
    """
    assert _codes(source) == [(10, "CG405")]
    once = source.replace("""            for name, x in requests:
                layer.use(name)""", """            layer.use("a")
            for name, x in requests:""")
    assert _codes(once) == []


def test_an_output_read_after_another_compiled_call_is_kept_in_inference_but_not_before_a_backward():
    # Measured on torch 2.11 (benchmarks/heldout3_disputes.py): without a backward, reading ``c`` after
    # ``g`` ran raises the overwritten-output error; in a training step, with the backward pending,
    # cudagraph trees keep the forward's outputs.
    inference = """
        import torch

        f = torch.compile(lambda x: x * 2, mode="reduce-overhead")
        g = torch.compile(lambda x: x * 3, mode="reduce-overhead")

        def run(x):
            c = f(x)
            d = g(x)
            return c.sum() + d.sum()
    """
    assert _codes(inference) == [(9, "CG407")]  # reported at the read, where the error is raised
    training = inference.replace("return c.sum() + d.sum()", "loss = c.sum() + d.sum()\n            loss.backward()")
    assert _codes(training) == []


def test_a_value_a_runner_method_takes_from_its_parameters_changes_between_replays():
    source = """
        import torch

        class Runner:
            def __init__(self):
                self.penalty = 1.0
                self.x = torch.zeros(4, device="cuda")
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.y = self.x ** self.penalty

            def generate(self, x, penalty=1.0):
                self.penalty = penalty
                self.x.copy_(x)
                for _ in range(8):
                    self.g.replay()
                return self.y.clone()
    """
    assert (9, "CG404") in _codes(source)
    # The same store of a constant is no change between two calls.
    assert not [c for c in _codes(source.replace("self.penalty = penalty", "self.penalty = 1.0")) if c[1] == "CG404"]


def test_a_compiled_method_of_an_untyped_model_and_a_value_set_on_that_model_per_call():
    source = """
        import torch

        class Decoder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.temperature = 1.0

            def decode_step(self, tok):
                return tok.float() / self.temperature

        class Translator:
            def __init__(self, model):
                self.model = model
                self.step = torch.compile(model.decode_step, mode="reduce-overhead")

            def translate(self, tok, temperature=1.0):
                self.model.temperature = temperature
                for _ in range(4):
                    tok = self.step(tok).argmax(-1, keepdim=True)
                return tok
    """
    assert (9, "CG404") in _codes(source)
    # ``torch.compile(opt.step)`` is not taken for a file class's ``step`` (a name library objects have).
    assert _codes(source.replace("decode_step", "step")) == []


def test_compile_options_spread_from_a_dict_and_a_model_held_in_an_attribute():
    source = """
        import time
        import torch

        OPTS = {"mode": "reduce-overhead", "fullgraph": False}
        EVAL = {"mode": "max-autotune-no-cudagraphs"}

        class Net(torch.nn.Module):
            def forward(self, x):
                t0 = time.time()
                return x * 2

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.fwd = torch.compile(self.model, **OPTS)
                self.losses = []

            def step(self, x):
                out = self.fwd(x)
                self.losses.append(out.detach())  # a view of the output: kept
                return out.sum()
    """
    assert _codes(source) == [(9, "CG411"), (20, "CG407")]
    assert _codes(source.replace("**OPTS", "**EVAL")) == []


def test_runner_inputs_passed_as_a_tuple_or_kept_in_a_dict_and_rebound_before_replay():
    source = """
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model
                self.a = torch.zeros(8, device="cuda")
                self.graphs, self.inputs = {}, {}

            def capture(self, n):
                args = (self.a,)
                x = torch.zeros(n, device="cuda")
                self.model(x, *args)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    self.out = self.model(x, *args)
                self.graphs[n], self.inputs[n] = g, x

            def run(self, a, x):
                n = x.shape[0]
                self.a = a
                self.inputs[n] = x
                self.graphs[n].replay()
                return self.out.clone()
    """
    assert _codes(source) == [(20, "CG405"), (21, "CG405")]
    fixed = source.replace("self.a = a", "self.a.copy_(a)").replace("self.inputs[n] = x", "self.inputs[n].copy_(x)")
    assert _codes(fixed) == []


def test_a_global_set_by_a_function_called_in_the_loop_that_runs_the_compiled_code():
    source = """
        import torch

        RATIO = 0.3

        @torch.compile(mode="reduce-overhead")
        def keep(x):
            return x[:, : int(x.shape[1] * RATIO)]

        def set_ratio(epoch):
            global RATIO
            RATIO = 0.3 + 0.1 * epoch

        def train(batches, epochs):
            for epoch in range(epochs):
                set_ratio(epoch)
                for x in batches:
                    keep(x).sum()
    """
    assert (7, "CG404") in _codes(source)
    # Set once, before the loop: one value for every call.
    once = source.replace("            for epoch in range(epochs):\n                set_ratio(epoch)\n",
                          "            set_ratio(1)\n            for epoch in range(epochs):\n")
    assert not [c for c in _codes(once) if c[1] == "CG404"]


def test_a_context_manager_that_yields_between_capture_begin_and_capture_end_captures_its_with_block():
    source = """
        import contextlib
        import torch

        @contextlib.contextmanager
        def graph_region(graph):
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                graph.capture_begin()
                try:
                    yield graph
                finally:
                    graph.capture_end()
            torch.cuda.current_stream().wait_stream(stream)

        def capture(x):
            (x * 2).sum().item()
            g = torch.cuda.CUDAGraph()
            with graph_region(g):
                y = (x * 2).sum().item()
            return g
    """
    assert _codes(source) == [(20, "CG101")]


def test_layers_of_unknown_type_graphed_from_a_list_reach_the_files_modules_and_their_loop_hooks():
    source = """
        import torch

        class Layer(torch.nn.Module):
            def forward(self, x):
                return x * x.sum().item()

        def stash(module, args):
            module.last = args[0]

        def build(layers, sample):
            for layer in layers:
                layer.register_forward_pre_hook(stash)
            return torch.cuda.make_graphed_callables(tuple(layers), sample)
    """
    assert _codes(source) == [(5, "CG101"), (12, "CG503"), (13, "CG503")]


def test_a_capture_of_an_untyped_model_held_by_the_runner_needs_a_warm_up():
    source = """
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                return x * 2

        class Runner:
            def __init__(self, model):
                self.model = model.eval().cuda()
                self.x = torch.zeros(4, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def build(self):
                with torch.cuda.graph(self.graph):
                    self.y = self.model(self.x)
    """
    assert _codes(source) == [(14, "CG508")]
    warmed = source.replace("            def build(self):\n", "            def build(self):\n                self.model(self.x)\n")
    assert _codes(warmed) == []


def test_callable_objects_held_by_the_runner_and_a_graph_bound_by_a_capture_helpers_with():
    source = """
        import contextlib
        import torch

        @contextlib.contextmanager
        def capture(pool):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                yield g

        class Stats:
            def __call__(self, keep):
                self.last = keep.float().mean().item()

        class Cache:
            def __init__(self, hooks):
                self.hooks = list(hooks)
                self.x = torch.zeros(8, device="cuda")
                self.limit = 4

            def step(self):
                y = self.x * 2
                for hook in self.hooks:
                    hook(y)

            def build(self):
                self.step()
                with capture(None) as g:
                    self.step()
                self.graph = g

            def run(self, x):
                self.x = x
                self.graph.replay()
    """
    codes = _codes(source)
    assert (12, "CG101") in codes  # Stats.__call__, run by ``hook(y)`` inside the capture
    assert (32, "CG405") in codes  # ``self.x`` rebound in the method that replays the graph bound by ``as g``


def test_a_compiled_model_cuda_call_and_a_compiled_lambda_reach_what_they_wrap():
    source = """
        import time
        import torch

        class Encoder(torch.nn.Module):
            def forward(self, x):
                self.t = time.perf_counter()
                return x * 2

        def score(h, idx):
            idx.clamp_(0, 3)
            return h[idx]

        def build(encoder):
            enc = torch.compile(encoder.cuda().eval(), mode="reduce-overhead")
            scorer = torch.compile(lambda h, i: score(h, i), mode="reduce-overhead")
            return enc, scorer
    """
    assert _codes(source) == [(6, "CG411"), (10, "CG510")]


def test_a_flag_a_runner_method_sets_before_replaying_and_layers_called_in_a_loop_over_self():
    source = """
        import torch

        class Quant(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.calibrating = False

            def forward(self, x):
                if self.calibrating:
                    x = x * 2
                return x

        class Tower:
            def __init__(self, layers):
                self.layers = torch.nn.ModuleList(layers)
                self.x = torch.zeros(4, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def _forward(self, x):
                for i, layer in enumerate(self.layers):
                    x = layer(x)
                return x

            def build(self):
                self._forward(self.x)
                with torch.cuda.graph(self.graph):
                    self.out = self._forward(self.x)

            def calibrate(self, batches):
                for layer in self.layers:
                    layer.calibrating = True
                for b in batches:
                    self.serve(b)

            def serve(self, b):
                self.x.copy_(b)
                self.graph.replay()
                return self.out.clone()
    """
    assert (9, "CG404") in _codes(source)


def test_an_objects_update_method_and_a_one_time_dtype_fix_up_are_not_host_state():
    source = """
        import torch

        class Cache(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("k", torch.zeros(8, device="cuda"))

            def forward(self, k):
                if self.k.dtype != k.dtype:
                    self.k = self.k.to(k.dtype)
                return self.k + k

        class Attention(torch.nn.Module):
            def __init__(self, store):
                super().__init__()
                self.store = store
                self.cache = Cache()

            def forward(self, x):
                self.store.update(x)
                return self.cache(x)

        def capture(attn, x):
            attn(x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = attn(x)
            return g, y
    """
    assert _codes(source) == []
    # A dict the class builds is a host container: its update is host state changed once, at capture.
    assert (20, "CG402") in _codes(source.replace("self.store = store", "self.store = {}"))


def test_a_counter_changed_before_each_call_of_a_function_a_decorator_captures():
    source = """
        import functools
        import torch

        def captured(fn):
            graphs = {}

            @functools.wraps(fn)
            def wrapper(self):
                g = graphs.get(id(self))
                if g is None:
                    fn(self)
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        g = torch.cuda.CUDAGraph()
                        g.capture_begin()
                        fn(self)
                        g.capture_end()
                    torch.cuda.current_stream().wait_stream(side)
                    graphs[id(self)] = g
                g.replay()

            return wrapper

        class EMA:
            def __init__(self, params):
                self.params = params
                self.shadow = [p.detach().clone() for p in params]
                self.updates = 0

            @captured
            def _update(self):
                decay = min(0.999, (1 + self.updates) / (10 + self.updates))
                torch._foreach_lerp_(self.shadow, self.params, 1.0 - decay)

            def update(self):
                self.updates += 1
                self._update()
    """
    assert (33, "CG404") in _codes(source)


def test_numbers_set_by_tuple_assignment_and_by_float_of_a_host_value_are_python_numbers():
    source = """
        import numpy as np
        import torch

        class Forecaster:
            def __init__(self):
                self.mu, self.sigma = 0.0, 1.0
                self.x = torch.zeros(8, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            def capture(self):
                (self.x - self.mu) / self.sigma
                with torch.cuda.graph(self.g):
                    self.y = (self.x - self.mu) / self.sigma

            def forecast(self, hist):
                h = np.asarray(hist)
                self.mu, self.sigma = float(h.mean()), float(h.std())
                self.g.replay()
                return self.y.clone()
    """
    codes = _codes(source)
    assert (13, "CG404") in codes and len([c for c in codes if c == (13, "CG404")]) == 2


def test_tolist_of_a_value_not_known_otherwise_is_a_host_copy_and_of_a_cpu_tensor_is_not():
    assert _codes("""
        import torch

        def decode(tokens, pad_id: int):
            pad = tokens == pad_id
            lengths = (~pad).sum(1).tolist()
            sizes = torch.tensor([1, 2]).tolist()
            return lengths, sizes

        step = torch.compile(decode, mode="reduce-overhead")
    """) == [(5, "CG102")]


def test_a_functools_partial_handed_through_two_capture_helpers_is_the_captured_callable():
    source = """
        import functools
        import torch

        def capture(fn):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            return g

        def bench(fn, iters=10):
            return capture(fn)

        def attention(q, cfg):
            return q * q.amax().item()

        def clean(q, cfg):
            return q * cfg.scale

        def run(q, cfg):
            bench(functools.partial(attention, q, cfg))
            bench(functools.partial(clean, q, cfg))
    """
    assert _codes(source) == [(14, "CG101")]


def test_compile_options_held_in_a_module_level_dict_turn_cudagraphs_on():
    source = """
        import torch

        CG = {"triton.cudagraphs": True}
        PLAIN = {"triton.cudagraphs": False}

        class Objective(torch.nn.Module):
            def forward(self, x):
                drift = torch.stack([x, x]).sum()
                if drift > 1.0:
                    x = x * 2
                return x

        graphed = torch.compile(Objective(), options=CG)
        plain = torch.compile(Objective(), options=PLAIN)
    """
    result = check_source(textwrap.dedent(source).lstrip("\n"))
    assert [(f.line, f.code, f.severity) for f in result.findings] == [(9, "CG201", "warning")]
    assert result.findings[0].region["name"] == "torch.compile(Objective(), options=CG)"


def test_loops_over_zipped_or_enumerated_module_lists_reach_the_listed_class():
    source = """
        import torch
        import torch.nn as nn

        class Attn(nn.Module):
            def forward(self, x):
                return x * int(torch.zeros_like(x).sum())

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.ModuleList([Attn() for _ in range(3)])
                self.norms = nn.ModuleList([nn.LayerNorm(8) for _ in range(3)])

            def forward(self, h):
                for attn, norm in zip(self.attn, self.norms):
                    h = h + attn(norm(h))
                for i, attn in enumerate(self.attn):
                    h = h + attn(h) * i
                return h

        fast = torch.compile(Net(), mode="reduce-overhead")
    """
    result = check_source(textwrap.dedent(source).lstrip("\n"))
    assert [(f.line, f.code) for f in result.findings] == [(6, "CG103")]
    assert [step["name"] for step in result.findings[0].chain] == ["Net.forward()", "Attn.forward()"]


def test_a_runner_input_replaced_by_a_method_that_does_not_capture_again():
    assert _codes("""
        import torch

        class Server:
            def __init__(self):
                self.emb = torch.zeros(16, 8, device="cuda")
                self.ids = torch.zeros(4, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self.top = self.ids @ self.emb.t()

            def refresh(self, new_emb):
                self.emb = torch.nn.functional.normalize(new_emb, dim=-1)

            def reload(self, new_emb):
                self.emb = torch.nn.functional.normalize(new_emb, dim=-1)
                self.recapture()

            def recapture(self):
                self.capture()

            def close(self):
                self.emb = None

            def serve(self):
                self.graph.replay()
                return self.top
    """, select=["CG405"]) == [(14, "CG405")]


def test_list_indexes_in_any_dimension_and_in_assignments_are_host_copies():
    assert _codes("""
        import torch

        class Ranker:
            def __init__(self):
                self.blocked = []
                self.rows = torch.arange(4, device="cuda")

            def block(self, ids):
                self.blocked = sorted(set(ids))

            def step(self, keep):
                scores = torch.zeros(4, 8, device="cuda")
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    scores[:, self.blocked] = float("-inf")
                    picked = scores[:, [0, 3]]
                    first = scores[self.rows, 0]
                    kept = scores[:, keep]
                    beside_a_slice = keep[:, self.blocked]  # only arrays take a list beside a slice
                    alone = keep[self.blocked]  # could be anything: not reported
                return g, picked, first, kept, beside_a_slice, alone

        Ranker().step([1, 2])
    """) == [(15, "CG303"), (16, "CG303"), (19, "CG303")]


def test_param_groups_changed_between_calls_of_a_compiled_optimizer_step():
    assert _codes("""
        import torch

        class Trainer:
            def __init__(self, model):
                self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
                self.other = torch.optim.SGD(model.parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=10)
                self.tensor_opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-3), capturable=True)
                self.tensor_sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.tensor_opt, T_max=10)
                self._step = torch.compile(self.opt.step, mode="reduce-overhead")
                self._tensor_step = torch.compile(self.tensor_opt.step, mode="reduce-overhead")
                for group in self.opt.param_groups:
                    group["lr"] = 1e-4  # set up once, before any call

            def epoch(self, batches, decay):
                for loss in batches:
                    loss.backward()
                    self._step()
                    self._tensor_step()
                self.sched.step()
                self.tensor_sched.step()
                for group in self.other.param_groups:
                    group["lr"] *= 0.5
                self.opt.param_groups[0]["weight_decay"] = decay
                self.tensor_opt.param_groups[0]["weight_decay"] = decay
    """) == [(20, "CG404"), (24, "CG404"), (25, "CG404")]


def test_set_up_methods_and_graphs_local_to_one_method_are_not_replacements_between_replays():
    assert _codes("""
        import torch
        import unittest

        class TestDecode(unittest.TestCase):
            def setUp(self):
                self.A = torch.randn(4, device="cuda")

            def test_replay(self):
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = self.A * 2
                graph.replay()
                graph.replay()

        class Runner:
            def __init__(self):
                self._allocate()
                self.graph = torch.cuda.CUDAGraph()

            def _allocate(self):
                self.ids = torch.zeros(4, device="cuda")

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self.out = self.ids * 2

            def run(self):
                self.graph.replay()
                return self.out
    """) == []


def test_a_trainer_replacing_tensors_of_the_model_it_compiled():
    assert _codes("""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("mu", torch.zeros(8))
                self.lin = nn.Linear(8, 8)
                self.unused = torch.zeros(8)

            def forward(self, x):
                return self.lin(x - self.mu)

        class Trainer:
            def __init__(self, model: Net):
                self.base = model.cuda()
                self.fast = torch.compile(model, mode="reduce-overhead")

            def refit(self, stats, new_weights):
                self.base.mu = stats.mean(0)
                self.base.unused = stats.mean(0)
                for p, w in zip(self.base.parameters(), new_weights):
                    p.data = w.clone()
                self.base.mu.copy_(stats.mean(0))

            def step(self, x):
                return self.fast(x)
    """) == [(20, "CG405"), (23, "CG405")]


def test_a_comprehension_variable_is_not_a_list_index():
    assert _codes("""
        import torch
        import torch.nn as nn

        class Tables(nn.Module):
            def __init__(self):
                super().__init__()
                self.tables = nn.ModuleList(nn.EmbeddingBag(100, 8) for _ in range(4))

            def forward(self, indices):
                sparse = [tab(indices[t]) for t, tab in enumerate(self.tables)]
                picked = [0, 2]
                return torch.stack(sparse), torch.zeros(4, 8, device="cuda")[picked]

        fast = torch.compile(Tables(), mode="reduce-overhead")
        fast(torch.zeros(4, 3, 5, dtype=torch.long).cuda())
    """) == [(12, "CG303")]


def test_outputs_that_no_graph_holds_may_be_kept_across_calls():
    assert _codes("""
        import time
        import torch

        FS = 100.0
        CLASSES = ["text", "table"]

        def first_arrival(prob):
            return float(prob.argmax()) / FS

        def postprocess(logits, boxes):
            keep = logits.softmax(-1).amax(-1) > 0.5
            kept = boxes[keep]
            names = [CLASSES[i] for i in kept[:, 0].long().tolist()]
            return kept, names, time.perf_counter()

        def scale(x):
            return x * 2

        arrival = torch.compile(first_arrival, mode="reduce-overhead")
        post = torch.compile(postprocess, mode="reduce-overhead")
        scaled = torch.compile(scale, mode="reduce-overhead")

        def run(batches):
            picks, results, outs = [], [], []
            for logits, boxes in batches:
                picks.append(arrival(logits))
                results.append(post(logits, boxes))
                outs.append(scaled(logits))
            return picks, results, outs
    """, select=["CG407"]) == [(28, "CG407")]


def test_a_capture_helper_that_warms_up_on_a_side_stream_warms_the_capture_it_opens():
    source = """
        import contextlib
        import torch

        @contextlib.contextmanager
        def graph_capture(warmup_fn=None):
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    warmup_fn()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                yield g

        class Net(torch.nn.Module):
            def forward(self, x):
                return x * 2

        class Runner:
            def __init__(self, model):
                self.model = model.cuda().eval()
                self.x = torch.zeros(4, 8, device="cuda")

            def capture(self):
                with graph_capture(warmup_fn=lambda: self.model(self.x)) as g:
                    self.y = self.model(self.x)
                self.graph = g
    """
    assert [code for _line, code in _codes(source)] == []


def test_a_number_that_only_shapes_a_tensor_argument_is_not_a_changing_argument():
    assert _codes("""
        import torch

        def demean(w):
            return w - w.mean(-1, keepdim=True)

        def scale(x, k):
            return x * k

        normalize = torch.compile(demean, mode="reduce-overhead")
        scaled = torch.compile(scale, mode="reduce-overhead")

        def run(traces):
            for i, tr in enumerate(traces):
                T = tr.shape[-1] // 64 * 64
                normalize(tr[None, :, :T].clone())
                scaled(tr, i * 0.5)
    """, select=["CG404"]) == [(7, "CG404")]


def test_a_capture_after_leaving_the_warm_up_side_stream_runs_on_the_default_stream():
    source = """
        import torch

        class Runner:
            def __init__(self, model: torch.nn.Linear):
                self.model = model
                self.x = torch.zeros(4, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()
                self.other = torch.cuda.CUDAGraph()

            def capture(self):
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        self.model(self.x)
                torch.cuda.current_stream().wait_stream(s)
                self.graph.capture_begin()
                self.y = self.model(self.x)
                self.graph.capture_end()

            def capture_inside(self):
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    self.model(self.x)
                    self.other.capture_begin()
                    self.z = self.model(self.x)
                    self.other.capture_end()

            def capture_for_a_caller(self):
                self.other.capture_begin()  # the caller may have set a side stream: not reported
                self.z = self.model(self.x)
                self.other.capture_end()
    """
    assert [(line, code) for line, code in _codes(source) if code == "CG603"] == [(17, "CG603")]


def test_an_entry_of_a_module_level_dict_changed_between_calls():
    assert _codes("""
        import torch

        CFG = {"dt": 0.01, "dx": 0.02, "name": "run"}

        def step(pos, vel):
            dt = CFG["dt"]
            return pos + vel * dt * CFG["dx"]

        step = torch.compile(step, mode="reduce-overhead")

        def rollout(pos, vel, n):
            for i in range(n):
                pos = step(pos, vel)
                CFG["dt"] = 0.01 / (i + 1)
            return pos
    """) == [(6, "CG404"), (13, "CG407")]  # and pos, an output fed back into the next call


def test_an_attribute_set_on_the_object_the_compiled_call_goes_through():
    assert _codes("""
        import torch
        import torch.nn as nn

        class Forecaster(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 720)
                self.horizon = 96

            def forward(self, x):
                return self.head(x)[..., : self.horizon]

        def serve(model, series, horizons, args):
            out = {}
            for name, h in horizons.items():
                model.horizon = h
                args.horizon = h  # another object: not reported
                out[name] = model(series).clone()
            return out

        def build():
            model = Forecaster().cuda()
            model.forward = torch.compile(model.forward, mode="max-autotune")
            return model
    """) == [(11, "CG404")]


def test_long_marks_a_tensor_and_a_list_fallback_is_a_list():
    assert _codes("""
        import torch

        class Pool:
            def __init__(self, n, subset=None):
                self.subset = subset or list(range(n))
                self.adj = torch.ones(n, n, device="cuda")

            def step(self, adj, cap):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    deg = min(int(adj.sum(-1).long().max()), cap)
                    sub = self.adj[self.subset]
                return g, deg, sub
    """) == [(11, "CG103"), (12, "CG303")]


def test_an_output_unpacked_and_used_in_the_same_iteration_is_not_kept():
    assert _codes("""
        import torch

        @torch.compile(mode="reduce-overhead")
        def classify(img):
            probs = img.softmax(-1)
            return probs.argmax(-1), probs.amax(-1)

        def run(bursts):
            results, prev = [], None
            for img in bursts:
                out = classify(img)
                labels, conf = out
                results.append((labels.cpu(), conf.cpu()))
                if prev is not None:
                    results.append(prev[1].sum().cpu())
                prev = out
            return results
    """, select=["CG407"]) == [(16, "CG407")]


def test_compile_options_spread_from_a_dict_call_turn_cudagraphs_on():
    source = """
        import numpy as np
        import torch

        OPTS = dict(mode="reduce-overhead", dynamic=False)
        PLAIN = dict(mode="max-autotune-no-cudagraphs")

        def step(x):
            noise = np.random.rand()
            return x * noise

        fast = torch.compile(step, **OPTS)
        plain = torch.compile(step, **PLAIN)
    """
    assert _codes(source) == [(8, "CG403")]
    assert _codes(source.replace("**OPTS", "**PLAIN")) == []


def test_a_value_the_region_reads_and_a_setter_of_the_file_changes_at_run_time():
    source = """
        import torch

        class Refiner(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.iters = 4
                self.lin = torch.nn.Linear(8, 8)

            def forward(self, x):
                for _ in range(self.iters):
                    x = self.lin(x)
                return x

            def set_quality(self, iters: int):
                self.iters = iters

        def calibrate(refiner, fast):
            refiner.iters = 2 if fast else 6

        class Runner:
            def __init__(self, model):
                self.model = model
                self.x = torch.zeros(4, 8, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            def capture(self):
                self.model(self.x)
                with torch.cuda.graph(self.g):
                    self.y = self.model(self.x)

            def run(self, x):
                self.x.copy_(x)
                self.g.replay()
                return self.y
    """
    source = textwrap.dedent(source)
    assert (10, "CG404") in _codes(source)
    # Neither setter exists: nothing changes the value once the graph is captured.
    without = source.replace("self.iters = iters", "pass").replace("refiner.iters = 2 if fast else 6", "pass")
    assert (10, "CG404") not in _codes(without)
    # A setter called only by the capturing method runs before the capture: set-up, not a change.
    setup_only = without.replace("    def capture(self):", "    def configure(self):\n        self.model.iters = 3\n\n"
                                 "    def capture(self):\n        self.configure()")
    assert "self.configure()" in setup_only
    assert (10, "CG404") not in _codes(setup_only)
    assert (10, "CG404") in _codes(setup_only.replace("        self.configure()\n", "        pass\n")
                                   .replace("self.g.replay()", "self.configure()\n        self.g.replay()"))


def test_configuring_an_object_a_function_builds_is_not_a_change_of_the_one_captured():
    source = """
        import torch

        class Scaler(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.gain = 1.0

            def forward(self, x):
                return x * self.gain

        def make_scaler(gain):
            s = Scaler()
            s.gain = gain
            return s

        def tune(model, gain):
            model.gain = gain

        model = Scaler().cuda()
        x = torch.ones(4, device="cuda")
        model(x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(x)
        g.replay()
    """
    assert (9, "CG404") in _codes(source)
    assert (9, "CG404") not in _codes(source.replace("model.gain = gain", "pass"))


def test_param_groups_changed_between_calls_of_a_compiled_function_that_steps_the_optimizer():
    source = """
        import torch

        model = torch.nn.Linear(8, 8).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)

        @torch.compile(mode="reduce-overhead")
        def opt_step():
            opt.step()

        def train(loader, total):
            for step, (x, y) in enumerate(loader):
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt_step()
                opt.zero_grad(set_to_none=True)
                for group in opt.param_groups:
                    group["lr"] = 1e-3 * (1 - step / total)
    """
    assert _codes(source) == [(16, "CG404")]
    assert _codes(source.replace('mode="reduce-overhead"', 'mode="max-autotune-no-cudagraphs"')) == []


def test_a_compiled_lambda_reaches_the_model_whose_output_it_post_processes():
    source = """
        import torch

        class Tagger(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(100, 16)

            def forward(self, ids):
                if (ids == 1).all():
                    return torch.zeros(*ids.shape, 16, device=ids.device)
                return self.emb(ids)

        model = Tagger().cuda()
        tag = torch.compile(lambda ids: model(ids).argmax(-1), mode="reduce-overhead")
    """
    assert _codes(source) == [(9, "CG201")]


def test_parameters_used_by_torch_operations_or_tensor_only_queries_are_tensors():
    source = """
        import torch
        import torch.nn.functional as F

        @torch.compile(mode="reduce-overhead")
        def loss_fn(pred, y, w, m):
            n = int(y.sum())
            k = int(w.sum())
            if m.any():
                pred = pred + 1
            total = F.mse_loss(pred, y.float()) * y.numel()
            return total + torch.isnan(w).float().sum() + m.device.index

        @torch.compile(mode="reduce-overhead")
        def count(items, model):
            n = int(len(items))
            if model.training:
                return n
            return model(items.to(model.device))
    """
    found = _codes(source)
    assert sorted({line for line, _ in found}) == [6, 7, 8]  # nothing in count(): no evidence of a tensor there


def test_a_capturing_decorator_without_warm_up_and_a_captured_method_that_runs_a_module():
    source = """
        import functools
        import torch

        def cuda_graphed(fn):
            cache = {}

            @functools.wraps(fn)
            def wrapper(self, x):
                if "g" not in cache:
                    static_x = x.clone()
                    g = torch.cuda.CUDAGraph()
                    with torch.no_grad(), torch.cuda.graph(g):
                        static_y = fn(self, static_x)
                    cache["g"] = (g, static_x, static_y)
                g, static_x, static_y = cache["g"]
                static_x.copy_(x)
                g.replay()
                return static_y
            return wrapper

        class Scorer:
            def __init__(self, net):
                self.net = torch.nn.Linear(8, 8).cuda()

            @cuda_graphed
            def score(self, x):
                return self.net(x).sum(-1)

        class Runner:
            def __init__(self):
                self.net = torch.nn.Linear(8, 8).cuda()
                self.x = torch.zeros(4, 8, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            def _step(self):
                return self.net(self.x)

            def capture(self):
                with torch.cuda.graph(self.g):
                    self.y = self._step()
    """
    source = textwrap.dedent(source)
    assert [c for c in _codes(source) if c[1] == "CG508"] == [(12, "CG508"), (39, "CG508")]
    warmed = source.replace("            static_x = x.clone()\n", "            static_x = x.clone()\n            fn(self, static_x)\n") \
        .replace("    def capture(self):\n", "    def capture(self):\n        self._step()\n")
    assert warmed.count("fn(self, static_x)") == 2 and "self._step()\n        with" in warmed
    assert [c for c in _codes(warmed) if c[1] == "CG508"] == []


def test_a_generator_is_registered_by_name_not_by_the_file_mentioning_registration():
    source = """
        import torch

        class Sampler:
            def __init__(self):
                self.gen = torch.Generator(device="cuda")
                self.other_gen = torch.Generator(device="cuda")
                self.x = torch.zeros(64, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            def capture(self):
                self.g.register_generator_state(self.gen)
                with torch.cuda.graph(self.g):
                    gen = self.gen
                    a = torch.rand(64, device="cuda", generator=gen)
                    b = torch.rand(64, device="cuda", generator=self.other_gen)
                    self.y = self.x + a + b
    """
    assert [c for c in _codes(source) if c[1] == "CG409"] == [(15, "CG409")]


def test_a_capture_begin_in_a_method_this_file_calls_off_a_side_stream_is_on_the_default_stream():
    source = """
        import torch

        class Upscaler:
            def __init__(self, net):
                self.net = net
                self.side = torch.cuda.Stream()
                self.x = torch.zeros(1, 3, 64, 64, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            def _warmup(self):
                self.side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.side):
                    self.net(self.x)
                torch.cuda.current_stream().wait_stream(self.side)

            def capture(self):
                self._warmup()
                self.g.capture_begin()
                self.y = self.net(self.x)
                self.g.capture_end()

        class Library:
            def capture(self, g, fn, x):
                g.capture_begin()
                out = fn(x)
                g.capture_end()
                return out

        def main(net):
            up = Upscaler(net)
            up.capture()

        if __name__ == "__main__":
            main(torch.nn.Identity().cuda())
    """
    source = textwrap.dedent(source)
    # Library code, with no script of its file running it: its users may set a side stream.
    library = source.replace('if __name__ == "__main__":\n    main(torch.nn.Identity().cuda())\n', "")
    assert [c for c in _codes(library) if c[1] == "CG603"] == [(18, "CG603")]  # it left its own side stream
    assert [c for c in _codes(source) if c[1] == "CG603"] == [(18, "CG603")]
    # Without the warm-up that came back from its side stream, the capture still runs on the stream
    # of its caller here, main(), which sets none.
    plain = source.replace("        self._warmup()\n        self.g.capture_begin()", "        self.g.capture_begin()")
    assert [c for c in _codes(plain) if c[1] == "CG603"] == [(17, "CG603")]
    assert [c for c in _codes(library.replace("        self._warmup()\n        self.g.capture_begin()",
                                              "        self.g.capture_begin()")) if c[1] == "CG603"] == []
    # A caller that captures on a side stream.
    on_side = plain.replace("    up.capture()", "    with torch.cuda.stream(torch.cuda.Stream()):\n        up.capture()")
    assert [c for c in _codes(on_side) if c[1] == "CG603"] == []


def test_a_capturing_decorator_applied_by_a_call_captures_the_method_it_wraps():
    source = """
        import functools
        import time
        import torch

        def cuda_graphed():
            def deco(fn):
                state = {}

                @functools.wraps(fn)
                def wrapper(*args):
                    if "g" not in state:
                        g = torch.cuda.CUDAGraph()
                        with torch.cuda.graph(g):
                            state["out"] = fn(*args)
                        state["g"] = g
                    state["g"].replay()
                    return state["out"]
                return wrapper
            return deco

        class Predictor:
            def __init__(self):
                self.predict = cuda_graphed()(self._predict)

            def _predict(self, x):
                self.stamp = time.perf_counter()
                return x * 2
    """
    assert _codes(source) == [(26, "CG411")]
    assert _codes(source.replace("cuda_graphed()(self._predict)", "self._predict")) == []


def test_list_indexes_from_module_constants_and_from_lists_passed_to_the_constructor():
    source = """
        import torch

        ANODES = [0, 1, 2]
        SCALE = 2

        class Server:
            def __init__(self, blocked, keep):
                self.blocked = blocked
                self.keep = keep
                self.x = torch.zeros(4, 8, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            def capture(self):
                with torch.cuda.graph(self.g):
                    y = self.x[:, ANODES] * SCALE
                    y[:, self.blocked] = 0.0
                    self.y = y[:, self.keep]

        server = Server([1, 2], keep=torch.arange(2, device="cuda"))
    """
    assert [c for c in _codes(source) if c[1] == "CG303"] == [(15, "CG303"), (16, "CG303")]


def test_random_draws_from_a_gpu_tensor_are_on_the_gpu():
    source = """
        import torch

        x = torch.randn(64, 8, device="cuda")
        sal = x.std(-1)
        g = torch.cuda.CUDAGraph()
        x[:4].sum()
        with torch.cuda.graph(g):
            idx = torch.multinomial(sal, 4)
            cpu_idx = torch.multinomial(torch.ones(64), 4)
            y = x[idx] + x[cpu_idx]
    """
    assert [(line, code) for line, code in _codes(source) if code == "CG303"] == [(10, "CG303")]


def test_a_side_stream_warm_up_on_an_earlier_iteration_of_the_loop_around_the_capture():
    source = """
        import torch

        class Trainer:
            def __init__(self):
                self.model = torch.nn.Linear(8, 8).cuda()
                self.x = torch.zeros(4, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def _step(self):
                loss = self.model(self.x).sum()
                loss.backward()
                return loss

            def _eager_step(self, side):
                with torch.cuda.stream(side):
                    self._step()

            def fit(self, epochs):
                side = torch.cuda.Stream()
                for epoch in range(epochs):
                    if epoch == 1:
                        with torch.cuda.graph(self.graph):
                            self.loss = self._step()
                    if epoch == 0:
                        self._eager_step(side)
                    else:
                        self.graph.replay()
    """
    source = textwrap.dedent(source)
    assert [c for c in _codes(source) if c[1] == "CG508"] == []
    cold = source.replace("            if epoch == 0:\n                self._eager_step(side)\n            else:\n"
                          "                self.graph.replay()\n", "            self.graph.replay()\n")
    assert "_eager_step(side)\n" not in cold.split("def fit")[1]
    assert [c for c in _codes(cold) if c[1] == "CG508"] == [(22, "CG508")]


def test_state_rebound_inside_a_capture_that_a_subclass_implements():
    source = """
        import torch

        class Runner:
            def __init__(self):
                self.x = torch.zeros(1, 8, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            def step_body(self):
                raise NotImplementedError

            def capture(self):
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    self.step_body()
                with torch.cuda.graph(self.g):
                    self.out = self.step_body()

        class Recurrent(Runner):
            def __init__(self):
                super().__init__()
                self.cell = torch.nn.GRUCell(8, 8).cuda()
                self.h = torch.zeros(1, 8, device="cuda")
                self.cache = None

            def step_body(self):
                if self.cache is None:
                    self.cache = torch.zeros(1, 8, device="cuda")
                h = self.cell(self.x, self.h)
                self.h = h
                return h
    """
    assert [c for c in _codes(source) if c[1] == "CG405"] == [(29, "CG405")]
    source = textwrap.dedent(source)
    in_place = source.replace("        self.h = h\n", "        self.h.copy_(h)\n")
    assert "self.h.copy_(h)" in in_place
    assert [c for c in _codes(in_place) if c[1] == "CG405"] == []


def test_flags_switched_on_the_models_parts_and_numbers_read_from_an_untyped_model():
    source = """
        import torch

        class FakeQuant(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.observe = True

            def forward(self, x):
                if self.observe:
                    x = x * 1.0
                return x

        class Scorer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.threshold = 0.5

        @torch.compile(mode="reduce-overhead")
        def score(model, p):
            if p.numel() == 0:
                raise ValueError(f"empty batch at threshold {model.threshold}")
            return p > model.threshold

        def calibrate(model, t):
            model.threshold = t

        def train(model, graph, loader):
            for step, x in enumerate(loader):
                graph.replay()
                if step == 100:
                    for m in model.modules():
                        if isinstance(m, FakeQuant):
                            m.observe = False

        def capture(model, x):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = FakeQuant()(x)
            return g
    """
    found = [c for c in _codes(source) if c[1] == "CG404"]
    # self.observe, switched off on the parts of the model between replays; model.threshold, read by the
    # compiled score and changed by calibrate(); not the same read in the raise message (L21).
    assert found == [(9, "CG404"), (22, "CG404")]


def test_a_caching_autocast_decorating_the_function_that_captures_or_graphs():
    source = """
        import torch

        @torch.autocast("cuda", dtype=torch.bfloat16)
        def graph_modules(modules, samples):
            return torch.cuda.make_graphed_callables(modules, samples)

        class Runner:
            def __init__(self, model):
                self.model = model
                self.x = torch.zeros(4, 8, device="cuda")
                self.g = torch.cuda.CUDAGraph()

            @torch.autocast("cuda", dtype=torch.float16, cache_enabled=False)
            def capture(self):
                with torch.cuda.graph(self.g):
                    self.y = self.x * 2
    """
    assert [c for c in _codes(source) if c[1] == "CG501"] == [(3, "CG501")]


def test_compile_modes_from_a_settings_field_a_table_of_options_and_a_partial_used_as_decorator():
    source = """
        import dataclasses
        import functools
        import time
        import torch

        rcompile = functools.partial(torch.compile, mode="reduce-overhead")
        BACKENDS = {"inductor": dict(mode="reduce-overhead"), "plain": dict(mode="default")}

        @dataclasses.dataclass
        class Config:
            compile_mode: str = "max-autotune"

        @rcompile
        def a(x):
            time.sleep(0)
            return x * 2

        def b(x):
            time.sleep(0)
            return x * 3

        def c(x):
            time.sleep(0)
            return x * 4

        def build(cfg: Config, opts: dict):
            fb = torch.compile(b, mode=cfg.compile_mode)
            fc = torch.compile(c, **BACKENDS[opts.get("backend", "inductor")])
            plain = torch.compile(c, **BACKENDS["plain"])
            return fb, fc, plain
    """
    assert sorted({line for line, _ in _codes(source)}) == [15, 19, 23]


def test_graphed_callables_of_untyped_modules_reach_the_files_modules():
    source = """
        import torch

        class Encoder(torch.nn.Module):
            def forward(self, x):
                return x * x.sum().item()

        class Head(torch.nn.Module):
            def forward(self, h):
                return h + 1

        def graph_models(enc, head, x, h):
            return torch.cuda.make_graphed_callables((enc, head), ((x,), (h,)))
    """
    assert _codes(source) == [(5, "CG101")]


def test_a_slice_padded_back_to_one_shape_is_one_shape():
    source = """
        import torch
        import torch.nn.functional as F

        N = 64
        step = torch.compile(lambda t: t * 2, mode="reduce-overhead")

        def run(batches):
            for b in batches:
                n = b.shape[0]
                y = step(F.pad(b[:n], (0, 0, 0, N - n)))
                z = step(b[:n])
    """
    assert [c for c in _codes(source) if c[1] == "CG206"] == [(11, "CG206")]


def test_a_comprehension_of_copies_of_compiled_outputs_keeps_no_output():
    source = """
        import torch

        plan = torch.compile(lambda x, k: x * k, mode="reduce-overhead")

        def schedule(cohorts):
            copies = {k: plan(x, k).cpu() for k, x in cohorts.items()}
            kept = [plan(x, k)[0] for k, x in cohorts.items()]
            return copies, kept
    """
    assert [c for c in _codes(source) if c[1] == "CG407"] == [(7, "CG407")]


def test_compile_options_forwarded_through_kwargs_a_registry_decorator_and_a_profile_table():
    source = """
        import time
        import torch

        STAGES = {}
        PROFILES = {"cell": dict(mode="reduce-overhead"), "debug": dict(mode="default")}
        OPTS = dict(mode="max-autotune")

        def register(name, **compile_kw):
            def deco(fn):
                STAGES[name] = torch.compile(fn, **compile_kw)
                return fn
            return deco

        def build(fn, **opts):
            return torch.compile(fn, **opts)

        @register("score", backend="cudagraphs")
        def score(x):
            time.sleep(0)
            return x * 2

        def rank(x):
            time.sleep(0)
            return x + 1

        class Service:
            def __init__(self, profile="cell"):
                opts = PROFILES[profile]
                for stage in ("coarse", "refine"):
                    setattr(self, stage, torch.compile(getattr(self, "_" + stage), **opts))

            def _coarse(self, x):
                time.sleep(0)
                return x

            def _refine(self, x):
                time.sleep(0)
                return x

        ranked = build(rank, **OPTS)
    """
    assert sorted({line for line, code in _codes(source) if code == "CG411"}) == [19, 23, 33, 37]


def test_module_tensors_replaced_by_code_that_runs_while_the_graph_is_in_use():
    source = """
        import torch
        from torch import nn

        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.register_buffer("prior", torch.zeros(8))

            def forward(self, x):
                return self.proj(x) + self.prior

        class Service:
            def __init__(self, model):
                self.model = model.cuda()
                self.score = torch.compile(self.model, mode="reduce-overhead")

            def refresh(self, prior):
                self.model.prior = prior.cuda()

            def refresh_in_place(self, prior):
                self.model.prior.copy_(prior)

            def swap_weights(self, w):
                self.model.proj.weight = nn.Parameter(w.cuda())

        def main(model, batches):
            service = Service(model)
            for x in batches:
                service.score(x)
    """
    assert [c for c in _codes(source) if c[1] == "CG405"] == [(19, "CG405"), (25, "CG405")]


def test_a_number_set_by_the_training_loop_after_it_calls_the_function_that_graphs():
    source = """
        import torch

        class Frontend(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mask_width = 8

            def forward(self, x):
                return x[..., : self.mask_width].sum(-1)

        def build():
            frontend = Frontend().cuda()
            x = torch.randn(4, 32, device="cuda", requires_grad=True)
            return torch.cuda.make_graphed_callables(frontend, (x,))

        def train(loader, epochs):
            frontend = build()
            for epoch in range(epochs):
                frontend.mask_width = min(27, 8 + 2 * epoch)
                for x in loader:
                    frontend(x).sum().backward()
    """
    assert (9, "CG404") in _codes(source)
    rebuilt = textwrap.dedent(source).replace("    frontend = build()\n    for epoch in range(epochs):\n",
                                              "    for epoch in range(epochs):\n        frontend = build()\n")
    assert "        frontend = build()" in rebuilt
    assert (9, "CG404") not in _codes(rebuilt)  # graphed again every epoch: each graph sees its own width


def test_warm_up_in_every_caller_of_a_capturing_helper_and_the_captured_input_looked_up_again():
    source = """
        import torch
        from torch import nn

        class Runner:
            def __init__(self, model: nn.Module):
                self.model = model
                self.graphs, self.io = {}, {}

            def _capture(self, x):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = self.model(x)
                self.graphs[x.shape], self.io[x.shape] = g, (x, out)

            def build(self, sizes):
                for size in sizes:
                    x = torch.zeros(size, 8, device="cuda")
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        self.model(x)
                    torch.cuda.current_stream().wait_stream(s)
                    self._capture(x)

            def run(self, batch):
                static, out = self.io[batch.shape]
                static.copy_(batch)
                self.graphs[batch.shape].replay()
                return out.clone()
    """
    assert [c for c in _codes(source) if c[1] in ("CG405", "CG508")] == []
    source = textwrap.dedent(source)
    cold = source.replace("            with torch.cuda.stream(s):\n                self.model(x)\n", "")
    assert "torch.cuda.stream(s)" not in cold
    assert [c for c in _codes(cold) if c[1] == "CG508"] == [(11, "CG508")]


def test_a_graph_held_on_self_captured_for_every_bucket_and_print_in_a_compiled_function():
    source = """
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model
                self.graph = torch.cuda.CUDAGraph()
                self.out = {}

            def capture(self, buckets):
                for bs in buckets:
                    x = torch.zeros(bs, 8, device="cuda")
                    with torch.cuda.graph(self.graph):
                        self.out[bs] = x * 2

            def capture_once(self, buckets):
                for i, bs in enumerate(buckets):
                    if i == 1:
                        with torch.cuda.graph(self.graph):
                            self.out[bs] = torch.zeros(bs, device="cuda") * 2

        @torch.compile(mode="reduce-overhead")
        def step(x):
            print("batch", x.softmax(-1).mean())
            return x * 2
    """
    result = check_source(textwrap.dedent(source).lstrip("\n"))
    codes = [(f.line, f.code, f.category) for f in result.findings if f.severity in ("error", "warning")]
    assert (12, "CG509", "api-misuse") in codes
    assert not [c for c in codes if c[0] == 18]  # captured on one iteration only
    assert (23, "CG106", "host-code") in codes  # a graph break under torch.compile (host-sync in a capture)


def test_keyword_calls_of_graphed_callables_unpacked_from_a_builder_that_returns_the_graphing_call():
    source = """
        import torch

        class Head(torch.nn.Module):
            def forward(self, h, lexical):
                return h + lexical

        def build():
            head = Head().cuda()
            h = torch.randn(4, 8, device="cuda", requires_grad=True)
            lex = torch.randn(4, 8, device="cuda")
            return torch.cuda.make_graphed_callables((head, head), ((h, lex), (h, lex)))

        def train(loader):
            g_a, g_b = build()
            for h, lex in loader:
                g_a(h, lex)
                g_b(h, lexical=lex)
    """
    assert [c for c in _codes(source) if c[1] == "CG511"] == [(17, "CG511")]


def test_a_dataclass_setting_read_by_a_compiled_closure_and_changed_by_the_training_loop():
    source = """
        import dataclasses
        import torch

        @dataclasses.dataclass
        class Config:
            prior_var: float = 4.0
            epochs: int = 10

        def build_step(model, cfg):
            @torch.compile(mode="reduce-overhead")
            def step(x):
                prior_var = cfg.prior_var
                return model(x).square().mean() / prior_var
            return step

        def fit(model, loader, cfg=Config()):
            step = build_step(model, cfg)
            for epoch in range(cfg.epochs):
                for x in loader:
                    step(x).backward()
                cfg.prior_var = max(1.0, cfg.prior_var * 0.9)
    """
    assert (12, "CG404") in _codes(source)
    assert (12, "CG404") not in _codes(source.replace("cfg.prior_var = max(1.0, cfg.prior_var * 0.9)", "pass"))


def test_an_output_fed_back_into_the_next_call_and_a_setting_on_a_copy_made_before_graphing():
    source = """
        import copy
        import torch

        step = torch.compile(lambda x, u: torch.tanh(x + u), mode="reduce-overhead")

        @torch.no_grad()
        def rollout(x, plan):
            for u in plan:
                x = step(x, u)
            return x

        @torch.no_grad()
        def rollout_cloned(x, plan):
            for u in plan:
                x = step(x, u).clone()
            return x

        class Recipe:
            def __init__(self):
                self.margin = 1

        class Layer(torch.nn.Module):
            def __init__(self, recipe):
                super().__init__()
                self.recipe = recipe

            def forward(self, x):
                recipe = self.recipe
                return x * recipe.margin

        def graph_layer(recipe):
            layer = Layer(recipe).cuda()
            x = torch.randn(4, device="cuda", requires_grad=True)
            return torch.cuda.make_graphed_callables(layer, (x,))

        def test_other_margin(recipe):
            recipe = copy.deepcopy(recipe)
            recipe.margin = 2
            return recipe
    """
    found = _codes(source)
    assert (9, "CG407") in found and not [c for c in found if c[0] == 15]
    assert not [c for c in found if c[1] == "CG404"]  # the copy test_other_margin sets is not the graphed one
    shared = source.replace("            recipe = copy.deepcopy(recipe)\n", "")
    assert "deepcopy(recipe)" not in shared
    assert [c for c in _codes(shared) if c[1] == "CG404"] == [(29, "CG404")]


def test_a_host_value_returned_beside_an_output_and_a_warm_up_in_the_constructor():
    source = """
        import time
        import torch

        @torch.compile(mode="reduce-overhead")
        def decode(logits):
            return logits.argmax(-1) * 100, time.time()

        @torch.compile(mode="reduce-overhead")
        def read(x):
            return x * 2

        @torch.no_grad()
        def verify(a, b):
            cents, stamp = decode(a)
            cents = cents.clone()
            other = read(b)
            return cents, other.clone(), stamp

        class Trainer:
            def __init__(self):
                self.model = torch.nn.Linear(8, 8).cuda()
                self.x = torch.zeros(4, 8, device="cuda")
                self.graph = None
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    self._step()
                torch.cuda.current_stream().wait_stream(side)

            def _step(self):
                loss = self.model(self.x).sum()
                loss.backward()
                return loss.detach()

            def start(self):
                if self.graph is None:
                    self.graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self.graph):
                        self.loss = self._step()
    """
    found = _codes(source)
    assert not [c for c in found if c[1] in ("CG407", "CG508")]
    source = textwrap.dedent(source)
    assert [c for c in _codes(source.replace("time.time()", "logits.max()")) if c[1] == "CG407"] == [(17, "CG407")]


def test_reductions_of_values_of_unknown_type_are_tensors_unless_made_by_numpy():
    source = """
        import torch

        @torch.compile(mode="reduce-overhead")
        def fridge(p, valid):
            n = int(valid.sum())
            if (p > 250.0).any():
                p = p.clamp(max=250.0)
            return p / n

        def rollout(out):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                wet = out.mean(1).cpu().numpy() > 0.1
                frac = float(wet.mean())
            return g
    """
    found = _codes(source)
    assert (5, "CG103") in found and (6, "CG201") in found
    assert not [c for c in found if c[0] == 14]  # a NumPy array's mean: host code, not a tensor read


def test_an_input_mutated_through_a_view_or_by_a_helper_the_compiled_function_passes_it_to():
    source = """
        import torch

        def _clip_(obs):
            obs[:, 6:9].clamp_(-3.0, 3.0)
            return obs

        def _scale_(x, table):
            table.mul_(2)
            return x * table

        @torch.compile(mode="reduce-overhead")
        def step(obs, w):
            obs = _clip_(obs)
            t = torch.ones_like(w)
            return _scale_(obs, t) @ w
    """
    # ``_clip_`` gets the compiled function's input; ``_scale_`` mutates a tensor made inside the function.
    assert _codes(source) == [(4, "CG510")]
    # A helper called only from plain code is nobody's input.
    assert _codes(source.replace("@torch.compile(mode=\"reduce-overhead\")", "")) == []
    # The view of the input, in the compiled function itself.
    direct = source.replace("obs = _clip_(obs)", "obs[:, 0].sub_(1.0)")
    assert _codes(direct) == [(13, "CG510")]


def test_compile_options_from_the_class_body_follow_the_subclass_that_sets_them():
    source = """
        import torch

        class Screen:
            compile_kwargs = {}

            def __init__(self, net):
                self.net = torch.compile(net, **self.compile_kwargs)
                self.triage = torch.compile(self._triage, **self.compile_kwargs)

            def _triage(self, scores):
                print("peak", scores.max())
                return scores

        class Realtime(Screen):
            compile_kwargs = {"mode": "reduce-overhead"}

            def serve(self, batches):
                outs = []
                for x in batches:
                    outs.append(self.net(x))
                return outs

        class Nightly(Screen):
            compile_kwargs = {"mode": "max-autotune-no-cudagraphs"}

            def serve(self, batches):
                outs = []
                for x in batches:
                    outs.append(self.net(x))
                return outs
    """
    # The realtime subclass graphs: its kept outputs and the compiled method's print are found; the
    # nightly twin, whose options leave graphs off, keeps its outputs safely.
    assert _codes(source) == [(11, "CG106"), (20, "CG407")]
    # No class of the file turns graphs on: no region at all.
    assert _codes(source.replace('{"mode": "reduce-overhead"}', '{"dynamic": True}')) == []


def test_methods_compiled_by_name_in_a_setattr_loop_are_regions_called_by_their_new_names():
    source = """
        import torch

        class Pipeline:
            stages = ("tag", "score")

            def __init__(self, model):
                self.model = model
                for st in self.stages:
                    setattr(self, st, torch.compile(getattr(self, "_" + st), mode="max-autotune"))

            def _tag(self, ids):
                conf = self.model(ids).softmax(-1)
                if (conf < 0.5).all():
                    conf = conf * 0
                return conf

            def _score(self, ids):
                return self.model(ids).sum(-1)

            def run(self, ids):
                conf = self.tag(ids)
                s = self.score(ids)
                return conf < 0.6, s
    """
    assert _codes(source) == [(13, "CG201"), (23, "CG407")]


def test_functions_of_a_registry_compiled_in_a_loop_are_regions():
    source = """
        import torch

        STAGES, COMPILED = {}, {}

        def register(name):
            def deco(fn):
                STAGES[name] = fn
                return fn
            return deco

        @register("events")
        def events(p):
            return (p > 1.0).nonzero().tolist()

        def helper(p):
            return p.tolist()

        def compile_all(**kw):
            for name, fn in STAGES.items():
                COMPILED[name] = torch.compile(fn, **kw)

        compile_all(backend="cudagraphs")
    """
    assert _codes(source) == [(13, "CG102"), (13, "CG202")]
    # The same registry compiled by subscript, in place.
    in_place = source.replace("for name, fn in STAGES.items():", "for name in list(STAGES):").replace(
        "COMPILED[name] = torch.compile(fn, **kw)", "STAGES[name] = torch.compile(STAGES[name], **kw)")
    assert in_place != source
    assert _codes(in_place) == [(13, "CG102"), (13, "CG202")]
    # Compiled without CUDA graphs: nothing.
    assert _codes(source.replace('backend="cudagraphs"', 'backend="inductor"')) == []


def test_a_cold_capture_through_a_context_manager_helper_is_reported_at_the_helpers_graph():
    source = """
        import contextlib
        import torch

        @contextlib.contextmanager
        def capture(pool=None):
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                with torch.cuda.graph(g, pool=pool, stream=s):
                    yield g
            torch.cuda.current_stream().wait_stream(s)

        class Runner:
            def __init__(self, model: torch.nn.Module):
                self.model = model
                self.x = torch.zeros(8, 16, device="cuda")

            def build(self):
                with capture() as g:
                    self.y = self.model(self.x)
                self.graph = g
    """
    # Entering the side stream only to capture on it warms nothing up.
    findings = [f for f in check_source(textwrap.dedent(source).lstrip("\n"), "x.py").findings if f.code == "CG508"]
    assert [(f.line, f.code) for f in findings] == [(10, "CG508")]
    assert "x.py:20" in findings[0].message
    # A helper that runs the block's work on the side stream before capturing is a warm-up.
    warmed = source.replace("def capture(pool=None):", "def capture(warmup, pool=None):").replace(
        "with torch.cuda.stream(s):\n                with", "with torch.cuda.stream(s):\n                warmup()\n                with"
    ).replace("with capture() as g:", "with capture(lambda: self.model(self.x)) as g:")
    assert "warmup()" in warmed and "capture(lambda" in warmed
    assert _codes(warmed, select=["CG508"]) == []
    # The helper entered as the second item of a with statement is a capture all the same.
    second = source.replace("with capture() as g:", "with torch.no_grad(), capture() as g:")
    assert second != source
    assert _codes(second, select=["CG508"]) == [(10, "CG508")]


def test_a_setting_of_a_held_object_or_one_the_script_changes_after_construction_captured():
    source = """
        import torch

        class Limits:
            def __init__(self, penalty=0.02):
                self.penalty = penalty

        class Runner:
            def __init__(self, limits):
                self.limits = limits
                self.feather = 4
                self.x = torch.zeros(8, device="cuda")
                self._capture()

            def _fill(self):
                return self.x * self.feather - self.limits.penalty

            def _capture(self):
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.out = self._fill()

            def set_limits(self, penalty: float):
                self.limits.penalty = penalty

        if __name__ == "__main__":
            runner = Runner(Limits())
            runner.feather = 8
            runner.g.replay()
    """
    # ``feather`` changed by the script after the constructor captured; ``penalty`` by a setter method.
    assert _codes(source, select=["CG404"]) == [(15, "CG404"), (15, "CG404")]
    # Set before the object (and its graph) exists: nothing to report.
    before = source.replace("runner = Runner(Limits())\n            runner.feather = 8",
                            "Runner.feather = 8\n            runner = Runner(Limits())")
    assert before != source
    assert _codes(before.replace("self.limits.penalty = penalty", "pass"), select=["CG404"]) == []


def test_callables_handed_to_a_capture_helper_from_a_dict_of_cases_are_followed():
    source = """
        import functools
        import torch

        SHORTLIST = list(range(0, 200, 20))

        def bench_graphed(fn, warmup=3):
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(warmup):
                    fn()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            return g

        def rerank(query, db):
            ids = torch.tensor(SHORTLIST, device="cuda")
            return query @ db[ids].t()

        def scale(query):
            return query * 2

        def main(query, db):
            cases = {"rerank": functools.partial(rerank, query, db), "scale": functools.partial(scale, query)}
            for name, case in cases.items():
                bench_graphed(case)
    """
    assert _codes(source) == [(19, "CG301")]
    assert _codes(source.replace("for name, case in cases.items():", "for case in cases.values():")) == [(19, "CG301")]


def test_a_generator_parameter_is_judged_by_what_the_callers_pass():
    source = """
        import torch

        def crop(batch, gen):
            return torch.rand(batch, 3, device="cuda", generator=gen)

        class Augment:
            def __init__(self):
                self.crop_gen = torch.Generator(device="cuda")
                self.x = torch.zeros(8, 3, device="cuda")

            def _run(self):
                return self.x + crop(8, self.crop_gen)

            def capture(self):
                self._run()
                g = torch.cuda.CUDAGraph()
                g.register_generator_state(self.crop_gen)
                with torch.cuda.graph(g):
                    self.out = self._run()
    """
    assert _codes(source, select=["CG409"]) == []
    # The caller passes a generator no graph registers.
    other = source.replace("crop(8, self.crop_gen)", "crop(8, self.other_gen)")
    assert _codes(other, select=["CG409"]) == [(4, "CG409")]


def test_hooks_from_the_constructor_an_enumerate_loop_or_a_named_tuple_reach_the_graphing_call():
    source = """
        import torch

        def check(m, args):
            pass

        class Model:
            def __init__(self):
                self.blocks = [torch.nn.Linear(8, 8).cuda() for _ in range(2)]
                self.head = torch.nn.Linear(8, 8).cuda()
                for blk in self.blocks:
                    blk.register_forward_pre_hook(check)

            def graph(self, x):
                modules = (*self.blocks, self.head)
                return torch.cuda.make_graphed_callables(modules, ((x,), (x,), (x,)))
    """
    assert _codes(source, select=["CG503"]) == [(11, "CG503"), (15, "CG503")]
    # The same hooks put on in the graphing function, in a loop over ``enumerate``.
    local = source.replace("""                for blk in self.blocks:
                    blk.register_forward_pre_hook(check)
""", "").replace("""                modules = (*self.blocks, self.head)
""", """                for i, blk in enumerate(self.blocks):
                    blk.register_forward_pre_hook(check)
                modules = tuple(self.blocks)
""")
    assert "enumerate" in local and "self.blocks:" not in local
    assert _codes(local, select=["CG503"]) == [(13, "CG503"), (15, "CG503")]


def test_a_cold_capture_of_a_cublas_kernel_needs_a_warm_up_but_elementwise_code_does_not():
    source = """
        import torch

        x = torch.randn(64, 256, device="cuda")
        w = torch.randn(256, 256, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x @ w
    """
    assert _codes(source, select=["CG508"]) == [(6, "CG508")]
    assert _codes(source.replace("y = x @ w", "y = torch.nn.functional.linear(x, w)"), select=["CG508"]) == [(6, "CG508")]
    assert _codes(source.replace("y = x @ w", "y = (x * 2 + 1).relu()"), select=["CG508"]) == []
    # An eager matmul before the capture has set cuBLAS up.
    warmed = source.replace("g = torch.cuda.CUDAGraph()", "z = x @ w\n        g = torch.cuda.CUDAGraph()")
    assert "        z = x @ w\n        g = torch" in warmed
    assert _codes(warmed, select=["CG508"]) == []
    assert _codes(warmed, select=["CG508", "CG901"]) == []  # and it parses


def test_settings_changed_through_a_table_a_clamp_a_dict_entry_or_on_a_graphed_module():
    compiled = """
        import torch

        PACK = {"multiple": 64, "pad": 0}

        @torch.compile(mode="reduce-overhead")
        def pack(x):
            return x * PACK["multiple"]

        def set_epoch(epoch: int):
            PACK["multiple"] = 64 if epoch < 2 else 128

        class Gate:
            LEVELS = {"low": 0.3, "mid": 0.5}

            def __init__(self, alpha: float = 5.0):
                self.threshold = self.LEVELS["mid"]
                self.alpha = alpha
                self.step = torch.compile(self._step, mode="reduce-overhead")

            def _step(self, x):
                return (x > self.threshold).float() * self.alpha

            def set_level(self, level):
                self.threshold = self.LEVELS[level]

            def train(self, xs):
                for x in xs:
                    y = self.step(x).clone()
                    self.alpha = max(0.0, self.alpha - 0.1)
    """
    # a module-level dict entry set by a public function; a class table entry; a clamp of a number
    assert _codes(compiled, select=["CG404"]) == [(7, "CG404"), (21, "CG404"), (21, "CG404")]
    graphed = """
        import torch

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 2)
                self.smoothing = 0.0

            def forward(self, h, y):
                return torch.nn.functional.cross_entropy(self.lin(h), y, label_smoothing=self.smoothing)

        def main(loader):
            head = Head().cuda()
            h = torch.randn(4, 8, device="cuda", requires_grad=True)
            y = torch.zeros(4, dtype=torch.long, device="cuda")
            (head,) = torch.cuda.make_graphed_callables((head,), ((h, y),))
            for epoch in range(3):
                head.smoothing = 0.1 * epoch
                for hb, yb in loader:
                    head(hb, yb).backward()
    """
    assert _codes(graphed, select=["CG404"]) == [(10, "CG404")]


def test_graph_outputs_kept_across_replays_by_the_callers_of_a_replaying_method():
    source = """
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model
                self.x = torch.zeros(8, 4, device="cuda")
                self.xy = torch.zeros(8, 2, device="cuda")
                self.outs = {}
                self.trail = []
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    self.model(self.x)
                torch.cuda.current_stream().wait_stream(s)
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.outs[8] = self.model(self.x)
                    self.xy.copy_(self.outs[8][:, :2])

            def run(self, x):
                self.x.copy_(x)
                self.g.replay()
                self.trail.append(self.xy)
                return self.outs[8]

        def serve(runner, batches):
            results = []
            for x in batches:
                y = runner.run(x)
                results.append(y)
            return results
    """
    # ``self.xy`` (written by a copy_ in the capture) kept on the runner on every call; ``y`` kept
    # across the next call by the caller's loop.
    assert _codes(source, select=["CG407"]) == [(23, "CG407"), (30, "CG407")]
    assert _codes(source.replace("results.append(y)", "results.append(y.clone())").replace(
        "self.trail.append(self.xy)", "self.trail.append(self.xy.clone())"), select=["CG407"]) == []


def test_a_function_compiled_through_a_top_level_alias_is_a_region():
    source = """
        import torch

        def denoise(x):
            print("std", x.std())
            return x * 2

        _eager_denoise = denoise

        def install():
            global denoise
            denoise = torch.compile(_eager_denoise, mode="reduce-overhead")
    """
    assert _codes(source) == [(4, "CG106")]


def test_compile_settings_from_a_dataclass_built_with_keywords_or_spread_with_asdict():
    source = """
        from dataclasses import asdict, dataclass
        import torch

        @dataclass
        class Plugin:
            backend: str = "inductor"
            mode: str = "default"

        TRAIN = Plugin(mode="max-autotune")

        def step(x):
            print("mean", x.mean())
            return x * 2

        def prepare(plugin: Plugin = TRAIN):
            return torch.compile(step, **asdict(plugin))

        def prepare_mode(plugin: Plugin = TRAIN):
            return torch.compile(step, mode=plugin.mode)
    """
    assert _codes(source) == [(12, "CG106")]
    # No object of the file turns graphs on: nothing.
    assert _codes(source.replace('Plugin(mode="max-autotune")', 'Plugin(mode="max-autotune-no-cudagraphs")')) == []
    backend = source.replace('TRAIN = Plugin(mode="max-autotune")', "TRAIN = Plugin()").replace(
        'backend: str = "inductor"', 'backend: str = "cudagraphs"').replace(
        "return torch.compile(step, mode=plugin.mode)", "return torch.compile(step, backend=plugin.backend)")
    assert _codes(backend.replace("return torch.compile(step, **asdict(plugin))", "return step")) == [(12, "CG106")]


def test_a_capture_on_the_current_stream_run_by_a_constructor_the_script_calls_is_on_the_default_stream():
    source = """
        import torch

        class Cropper:
            def __init__(self, net):
                self.net = net
                self.x = torch.zeros(4, 8, device="cuda")
                self._capture()

            def _capture(self):
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g, stream=torch.cuda.current_stream()):
                    self.y = self.x * 2

        if __name__ == "__main__":
            Cropper(None)
    """
    assert _codes(source, select=["CG603"]) == [(11, "CG603")]
    side = source.replace("            Cropper(None)", "            with torch.cuda.stream(torch.cuda.Stream()):\n                Cropper(None)")
    assert side != source
    assert _codes(side, select=["CG603"]) == []


def test_a_mixin_compiling_a_method_its_users_define_and_a_captured_closure_from_a_factory():
    mixin = """
        import torch

        CG = {"triton.cudagraphs": True}

        class CompiledMixin:
            compile_options = CG

            def __init__(self):
                self._predict = torch.compile(self._predict, options=self.compile_options)

        class Service(CompiledMixin):
            def _predict(self, x):
                print("mean", x.mean())
                return x * 2
    """
    assert _codes(mixin) == [(13, "CG106")]
    factory = """
        import torch

        def make_step(model, batch):
            def step():
                loss = model(batch).sum()
                if loss > 10.0:
                    loss = loss * 0
                return loss
            return step

        class Graphed:
            def __init__(self, fn):
                self.fn = fn

            def __call__(self):
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    self.fn()
                torch.cuda.current_stream().wait_stream(s)
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.out = self.fn()

        def build(model, batch):
            return Graphed(make_step(model, batch))
    """
    assert _codes(factory) == [(6, "CG201")]


def test_a_learning_rate_set_by_a_callback_fired_between_replays_is_found():
    source = """
        import math
        import torch

        class Cosine:
            def on_epoch_end(self, trainer):
                for group in trainer.opt.param_groups:
                    group["lr"] = 1e-3 * 0.5 * (1 + math.cos(math.pi * trainer.epoch / 10))

        class Trainer:
            def __init__(self, model, callbacks):
                self.model, self.cbs = model, callbacks
                self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
                self.x = torch.zeros(8, 4, device="cuda")

            def _fire(self, hook):
                for cb in self.cbs:
                    getattr(cb, hook)(self)

            def _step(self):
                self.model(self.x).sum().backward()
                self.opt.step()

            def fit(self, loader):
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    self._step()
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    self._step()
                for self.epoch in range(10):
                    for x in loader:
                        self.x.copy_(x)
                        g.replay()
                    self._fire("on_epoch_end")
    """
    assert _codes(source, select=["CG404"]) == [(7, "CG404")]


def test_an_element_of_an_input_list_updated_in_place_in_a_compiled_loop():
    source = """
        import torch

        @torch.compile(mode="reduce-overhead")
        def accumulate(buffers, grads, scale):
            for b, g in zip(buffers, grads):
                b.add_(g, alpha=scale)

        @torch.compile(mode="reduce-overhead")
        def averaged(buffers, scale):
            return [b * scale for b in buffers]
    """
    assert _codes(source, select=["CG510"]) == [(6, "CG510")]


def test_cases_bound_in_the_scripts_main_block_and_a_buffer_a_runner_method_writes_in_the_capture():
    script = """
        import functools
        import torch

        CFG = {"width": 2.0}

        def bench(fn):
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                fn()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = fn()
            return g, out

        def case(x):
            return x * CFG["width"]

        if __name__ == "__main__":
            x = torch.randn(8, device="cuda")
            cases = {"scale": functools.partial(case, x)}
            for name, fn in cases.items():
                g, out = bench(fn)
                for w in (1.0, 3.0):
                    CFG["width"] = w
                    g.replay()
    """
    assert _codes(script, select=["CG404"]) == [(18, "CG404")]
    runner = """
        import torch

        class Sampler:
            def __init__(self, model):
                self.model = model
                self.x = torch.zeros(4, 8, device="cuda")
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    self._step()
                torch.cuda.current_stream().wait_stream(s)
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self._step()

            def _step(self):
                self.x.copy_(self.model(self.x).tanh())

            def sample(self):
                for _ in range(8):
                    self.graph.replay()
                return self.x

        def main(model):
            sampler = Sampler(model)
            grids = []
            for _ in range(4):
                grids.append(sampler.sample())
            return grids
    """
    assert _codes(runner, select=["CG407"]) == [(28, "CG407")]


def test_a_setting_changed_in_the_loop_around_the_function_that_calls_the_compiled_code():
    source = """
        import torch

        SMOOTH = {"value": 0.001}

        def smooth_loss(logits, target):
            s = SMOOTH["value"]
            return torch.nn.functional.binary_cross_entropy_with_logits(logits, target * (1 - s) + 0.5 * s)

        loss_fn = torch.compile(smooth_loss, mode="reduce-overhead")

        def train_epoch(model, xs, ys):
            for x, y in zip(xs, ys):
                loss_fn(model(x), y).backward()

        def fit(model, opt, xs, ys):
            opt_step = torch.compile(opt.step, mode="reduce-overhead")  # this function compiles: set-up code
            for epoch in range(30):
                SMOOTH["value"] = 0.001 if epoch < 20 else 0.0
                train_epoch(model, xs, ys)
                opt_step()
    """
    assert _codes(source, select=["CG404"]) == [(6, "CG404")]


def test_outputs_of_a_capture_on_first_call_decorator_kept_by_its_callers():
    source = """
        import functools
        import torch

        def cuda_graphed(method):
            @functools.wraps(method)
            def wrapper(self, x):
                if not hasattr(self, "_g"):
                    self._x = x.clone()
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        method(self, self._x)
                    torch.cuda.current_stream().wait_stream(s)
                    self._g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self._g):
                        static_out = method(self, self._x)
                    self._out = static_out
                self._x.copy_(x)
                self._g.replay()
                return self._out
            return wrapper

        class Net:
            @cuda_graphed
            def classify(self, x):
                return x.softmax(-1)

        def run(net, loader):
            out = []
            for x in loader:
                out.append(net.classify(x))
            return out
    """
    assert _codes(source, select=["CG407"]) == [(31, "CG407")]


def test_a_mixin_capturing_a_method_that_only_the_class_built_on_it_defines():
    source = """
        import torch

        class GraphCacheMixin:
            def _graph_for(self, x):
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    self._infer(x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = self._infer(x)
                return g, out

        class Locator(GraphCacheMixin):
            def _infer(self, csi):
                return torch.unique(csi.argmax(dim=1))
    """
    assert _codes(source) == [(17, "CG202")]


def test_keyword_calls_of_graphed_callables_held_on_self():
    source = """
        import torch

        class CTR:
            def __init__(self, cross, deep):
                self.cross, self.deep = cross, deep

            def graph(self, x0):
                self.cross_g, self.deep_g = torch.cuda.make_graphed_callables((self.cross, self.deep), ((x0,), (x0,)))

            def train_step(self, x0, mask):
                c = self.cross_g(x0)
                return c + self.deep_g(x0, field_mask=mask)
    """
    assert _codes(source, select=["CG511"]) == [(12, "CG511")]


def test_a_runner_input_replaced_while_graphs_kept_in_a_dict_on_the_runner_replay():
    source = """
        import torch

        class Transform:
            def __init__(self):
                self.bounds = torch.zeros(8, device="cuda")
                self.x = torch.zeros(4, 8, device="cuda")
                self.entries = {}

            def _transform(self, x):
                return torch.bucketize(x, self.bounds)

            def capture(self):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = self._transform(self.x)
                self.entries[4] = (g, out)

            def __call__(self, x):
                g, out = self.entries[4]
                self.x.copy_(x)
                g.replay()
                return out.clone()

            def refresh(self, bounds):
                self.bounds = torch.as_tensor(bounds, device="cuda")
    """
    assert _codes(source, select=["CG405"]) == [(25, "CG405")]


def test_a_compiled_function_called_with_rows_a_boolean_mask_selects():
    source = """
        import torch

        bonus = torch.compile(lambda obs: (obs ** 2).sum(-1), mode="reduce-overhead")

        def reward_alive(obs, alive):
            kept = obs[alive]
            return bonus(kept)

        def reward_recent(obs, age):
            return bonus(obs[age < 365.0].cuda())

        def reward_all(obs):
            return bonus(obs)
    """
    assert _codes(source, select=["CG206"]) == []  # no evidence that ``alive`` is a mask, or that ``obs`` is a tensor
    typed = source.replace("def reward_alive(obs, alive):", "def reward_alive(obs: torch.Tensor, alive: torch.Tensor):")
    typed = typed.replace("kept = obs[alive]", "kept = obs[alive > 0]")
    typed = typed.replace("def reward_recent(obs, age):", "def reward_recent(obs, age: torch.Tensor):")
    assert _codes(typed, select=["CG206"]) == [(7, "CG206"), (10, "CG206")]


def test_indexing_with_a_negated_tensor_or_a_mask_attribute_selects_elements():
    source = """
        import torch

        @torch.compile(mode="reduce-overhead")
        def negatives(sim: torch.Tensor, self_mask: torch.Tensor):
            return sim[~self_mask]

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("keep_mask", torch.ones(8, dtype=torch.bool))

            def forward(self, x):
                return x[:, self.keep_mask]

        head = torch.compile(Head().cuda(), mode="reduce-overhead")
    """
    assert _codes(source, select=["CG203"]) == [(5, "CG203"), (13, "CG203")]


def test_the_parts_of_a_module_called_in_a_loop_are_modules_not_another_classes_call():
    source = """
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.levels = torch.nn.ModuleList([
                    torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()) for _ in range(3)])

            def forward(self, x):
                for lvl, enc in enumerate(self.levels):
                    x = enc(x)
                return x

        class Inferencer:
            def __init__(self, net):
                self.net = net
                self.x = torch.zeros(4, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self.net(self.x)

            def __call__(self, x):
                self.x.copy_(x)
                self.graph.replay()
                return self.out.cpu()
    """
    assert [c for c in _codes(source) if c[1] == "CG102"] == []


def test_int_of_a_cpu_constant_and_a_compiled_function_handing_back_its_input():
    captured = """
        import torch

        C = torch.tensor([[0, 0], [1, 0], [0, 1]])

        class LBM:
            def __init__(self):
                self.f = torch.zeros(3, 8, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.step()

            def step(self):
                for q in range(3):
                    cx, cy = int(C[q, 0]), int(C[q, 1])
                    self.f[q] = torch.roll(self.f[q], shifts=(cx, cy), dims=(0, 1))
    """
    assert _codes(captured, select=["CG103"]) == []
    compiled = """
        import torch

        @torch.compile(mode="reduce-overhead")
        def push_(hist, obs):
            hist.copy_(torch.cat([hist[:, 1:], obs[:, None]], dim=1))
            return hist

        def run(obs_stream, hist):
            for obs in obs_stream:
                hist = push_(hist, obs)
            return hist
    """
    assert _codes(compiled, select=["CG407"]) == []
    graph_output = compiled.replace("    return hist\n\n", "    return hist * 1\n\n", 1)
    assert graph_output != compiled
    assert _codes(graph_output, select=["CG407"]) == [(10, "CG407")]


def test_list_indexes_from_a_tuple_store_or_a_method_that_returns_a_list():
    source = """
        import torch

        class Head:
            def __init__(self, solid, score_thr=0.05, classes=None):
                self.score_thr, self.keep = score_thr, list(classes or range(15))
                self.boundary = self._boundary_nodes(solid)
                self.f = torch.zeros(9, 64, device="cuda")
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.out = self.f[:, self.keep] + self.f[:, self.boundary]

            @staticmethod
            def _boundary_nodes(solid):
                return solid.flatten().nonzero().squeeze(1).tolist()
    """
    assert _codes(source, select=["CG303"]) == [(10, "CG303"), (10, "CG303")]


def test_a_setting_picked_from_a_module_level_list_of_numbers_is_a_python_value():
    source = """
        import torch

        WAVELENGTHS = (0.75e-3, 1.0e-3, 1.25e-3)

        class D2NN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.wavelength = WAVELENGTHS[1]

            def forward(self, x):
                lam = self.wavelength
                return x * lam

        def train(model, loader):
            model.forward = torch.compile(model.forward, mode="reduce-overhead")
            for step, x in enumerate(loader):
                model.wavelength = WAVELENGTHS[step % 3]
                model(x)
    """
    assert _codes(source, select=["CG404"]) == [(11, "CG404")]
    assert _codes(source.replace("WAVELENGTHS[step % 3]", "choose(step)"), select=["CG404"]) == []


def test_a_graph_made_once_and_captured_again_by_a_method_that_recaptures():
    source = """
        import torch

        class Cueing:
            def __init__(self):
                self.x = torch.zeros(8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self.y = self.x * 2

            def switch_vehicle(self, profile):
                self.profile = profile
                self.capture()

        def main():
            c = Cueing()
            c.capture()
            c.switch_vehicle("truck")
    """
    assert _codes(source, select=["CG509"]) == [(9, "CG509")]
    # A fresh graph for each capture is fine.
    fresh = source.replace("            def capture(self):\n", "            def capture(self):\n                self.graph = torch.cuda.CUDAGraph()\n")
    assert fresh != source
    assert _codes(fresh, select=["CG509"]) == []


def test_an_output_copied_before_the_loop_comes_round_is_not_fed_back():
    source = """
        import torch

        step = torch.compile(lambda b, r, lam: (b * lam, r - b), mode="reduce-overhead")

        def path(beta, resid, lambdas):
            for lam in lambdas:
                beta, resid = step(beta, resid, float(lam))
                beta, resid = beta.clone(), resid.clone()
            return beta
    """
    assert _codes(source, select=["CG407"]) == []
    # A view of the output is still the output: the next call overwrites what it is given.
    viewed = source.replace("beta.clone(), resid.clone()", "beta.view(-1), resid[:]")
    assert viewed != source
    assert _codes(viewed, select=["CG407"]) == [(7, "CG407")]


def test_a_module_constant_read_by_a_function_a_decorator_captures_is_not_a_change():
    source = """
        import functools
        import torch

        RANGE = 350.0

        def graphed_once(fn):
            state = {}

            @functools.wraps(fn)
            def wrapper(*args):
                if "g" not in state:
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        state["out"] = fn(*args)
                    state["g"] = g
                state["g"].replay()
                return state["out"]
            return wrapper

        @graphed_once
        def predict(h):
            return (h / RANGE).clamp(max=1.0)

        if __name__ == "__main__":
            h = torch.ones(8, device="cuda")
            for _ in range(3):
                out = predict(h)
    """
    assert _codes(source, select=["CG404"]) == []
    # Changed in the loop between the replays: that change is ignored by the graph.
    changed = source.replace("                out = predict(h)", "                out = predict(h)\n                RANGE = 200.0")
    assert changed != source
    assert _codes(changed, select=["CG404"]) == [(22, "CG404")]


def test_a_side_stream_joined_through_an_event_another_method_waits_on():
    source = """
        import torch

        class Streamer:
            def __init__(self, host):
                self.host = [w.pin_memory() for w in host]
                self.slots = [torch.empty_like(self.host[0], device="cuda") for _ in range(2)]
                self.ready = [torch.cuda.Event() for _ in range(2)]
                self.copy_stream = torch.cuda.Stream()
                self.graph = torch.cuda.CUDAGraph()

            def _prefetch(self, i, slot):
                self.copy_stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.copy_stream):
                    self.slots[slot].copy_(self.host[i], non_blocking=True)
                    self.ready[slot].record(self.copy_stream)

            def forward(self):
                self._prefetch(0, 0)
                torch.cuda.current_stream().wait_event(self.ready[0])
                return self.slots[0] * 2

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self.out = self.forward()
    """
    assert _codes(source, select=["CG601"]) == []
    # Recorded after the block, on the stream it names: the same join.
    after = source.replace("""                    self.ready[slot].record(self.copy_stream)
""", "").replace("""non_blocking=True)
""", """non_blocking=True)
                self.ready[slot].record(self.copy_stream)
""")
    assert after != source
    assert _codes(after, select=["CG601"]) == []
    # Nobody waits on the event: the copy stream's work is never joined.
    unjoined = source.replace("                torch.cuda.current_stream().wait_event(self.ready[0])\n", "")
    assert unjoined != source
    assert _codes(unjoined, select=["CG601"]) == [(13, "CG601")]


def test_a_module_graphing_its_layers_in_a_comprehension_does_not_graph_itself():
    source = """
        import random
        import torch
        import torch.nn as nn

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.ff = nn.Linear(8, 8)

            def forward(self, x):
                return self.ff(x)

        class NoisyHead(nn.Module):  # eager, never graphed
            def forward(self, x):
                return x + random.random()

        class Encoder(nn.Module):
            def __init__(self, depth):
                super().__init__()
                self.layers = nn.ModuleList(Layer() for _ in range(depth))

            def graph(self, x):
                self.graphed = [torch.cuda.make_graphed_callables(layer, (x,)) for layer in self.layers]

            def forward(self, x, layerdrop=0.1):
                for g in self.graphed:
                    if random.random() < layerdrop:
                        continue
                    x = g(x)
                return x
    """
    assert _codes(source, select=["CG403"]) == []
    # The layers' own host draws are captured.
    drawn = source.replace("return self.ff(x)", "return self.ff(x) * random.random()")
    assert drawn != source
    assert _codes(drawn, select=["CG403"]) == [(11, "CG403")]
    # Layers the checker cannot type (a plain list handed in) are a guess among the file's modules,
    # but never the module that graphs them.
    untyped = source.replace("nn.ModuleList(Layer() for _ in range(depth))", "list(depth)")
    assert untyped != source
    assert _codes(untyped, select=["CG403"]) == [(15, "CG403")]


def test_a_custom_autograd_function_runs_its_forward_and_its_context_is_no_setting():
    source = """
        import torch
        import torch.nn as nn

        class DropMLP(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, p, gen):
                ctx.state = gen.clone_state()
                ctx.p = p
                return x * (torch.rand(x.shape, device=x.device, generator=gen) > p)

            @staticmethod
            def backward(ctx, gout):
                return gout, None, None

        class Tagger(nn.Module):
            def __init__(self, p=0.1):
                super().__init__()
                self.p = p
                self.gen = torch.Generator(device="cuda")

            def forward(self, x):
                return DropMLP.apply(x, self.p, self.gen)

        model = Tagger()
        x = torch.zeros(8, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(x)
    """
    # Cloning the generator's state inside the capture is refused; `ctx.p = p` sets nothing the graph reads.
    assert _codes(source, select=["CG408", "CG404"]) == [(7, "CG408")]
    # Called through an alias the walk does not follow, the context's attribute is still no change.
    aliased = source.replace("return DropMLP.apply(x, self.p, self.gen)", "return self.fn(x, self.p, self.gen)").replace(
        'self.gen = torch.Generator(device="cuda")', 'self.gen = torch.Generator(device="cuda")\n                self.fn = DropMLP.apply')
    assert aliased != source
    assert _codes(aliased, select=["CG408", "CG404"]) == []


def test_a_capture_that_calls_a_callable_chosen_at_run_time():
    source = """
        import torch

        class Lane:
            def __init__(self, model):
                self.model = model
                self.x = torch.zeros(8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def body(self):
                return self.model(self.x).softmax(-1)

            def capture(self, extra_body=None):
                body = extra_body or self.body
                with torch.cuda.graph(self.graph):
                    self.out = body()

        class Server:
            def __init__(self, model):
                self.lane = Lane(model)

            def _audited(self, lane):
                def body():
                    probs = lane.body()
                    print(probs.max().item())
                    return probs
                return body

            def build(self, audit=False):
                self.lane.capture(self._audited(self.lane) if audit else None)
    """
    # Both the lane's own body and the audited closure a caller passes may be captured.
    assert _codes(source, select=["CG101"]) == [(24, "CG101")]
    # Callers that pass no body: only the lane's own is captured.
    plain = source.replace("self._audited(self.lane) if audit else None", "None")
    assert plain != source
    assert _codes(plain, select=["CG101"]) == []


def test_a_new_parameter_for_a_part_the_capture_calls():
    source = """
        import torch
        import torch.nn as nn

        class Router:
            def __init__(self):
                self.head = nn.Linear(8, 4).cuda()
                self.spare = nn.Linear(8, 4).cuda()
                self.x = torch.zeros(2, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self.out = self.head(self.x)

            def load_head(self, state):
                self.head.weight = nn.Parameter(state["weight"].cuda())

            def load_spare(self, state):
                self.spare.weight = nn.Parameter(state["weight"].cuda())
    """
    # The captured head gets a new weight tensor: replays keep the old one. The spare is never captured.
    assert _codes(source, select=["CG405"]) == [(16, "CG405")]


def test_calling_the_graphed_module_between_replays_runs_the_graph_not_its_python():
    source = """
        import torch
        import torch.nn as nn

        _BACKENDS = {"requires_update": True}

        class Attention(nn.Module):
            def forward(self, q):
                if _BACKENDS["requires_update"]:
                    _BACKENDS["requires_update"] = False
                return q.softmax(-1)

        def run(with_graph):
            model = Attention()
            q = torch.randn(4, 8, device="cuda", requires_grad=True)
            if with_graph:
                model = torch.cuda.make_graphed_callables(model, (q,))
            for _ in range(3):
                out = model(q)
            return out
    """
    # The entry is set while the module is graphed (at capture): calling the graphed callable sets nothing.
    assert _codes(source, select=["CG404"]) == []
    # A function that is not the graphed module, called between the calls, does change it.
    changed = source.replace("                out = model(q)\n", "                out = model(q)\n                reset()\n") + (
        "\n        def reset():\n            _BACKENDS[\"requires_update\"] = True\n")
    assert _codes(textwrap.dedent(changed), select=["CG404"]) == [(8, "CG404")]


def test_a_parameter_rebound_to_a_new_list_is_no_host_state():
    source = """
        import torch

        def gather(x, world_size, out_shape=None):
            if out_shape is None:
                out_shape = list(x.size())
                out_shape[0] *= world_size
            return x.new_empty(out_shape)

        x = torch.ones(4, 8, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = gather(x, 2)
    """
    assert _codes(source, select=["CG402"]) == []
    # The caller's own list, counted up at capture: state that the replays never update.
    kept = source.replace("                out_shape = list(x.size())\n", "                pass\n")
    assert kept != source
    assert _codes(kept, select=["CG402"]) == [(6, "CG402")]


def test_a_custom_autograd_function_s_backward_is_captured_with_the_backward_pass():
    source = """
        import torch
        import torch.nn as nn

        class Recompute(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return x @ w

            @staticmethod
            def backward(ctx, gout):
                x, w = ctx.saved_tensors
                if torch.isnan(gout).any():
                    gout = torch.nan_to_num(gout)
                return gout @ w.t(), x.t() @ gout

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(8, 8))

            def forward(self, x):
                return Recompute.apply(x, self.w)

        block = Block().cuda()
        x = torch.randn(4, 8, device="cuda", requires_grad=True)
        graphed = torch.cuda.make_graphed_callables(block, (x,))
    """
    # make_graphed_callables captures the backward too: its branch on a tensor fails capture.
    assert _codes(source, select=["CG201"]) == [(13, "CG201")]
    # A forward-only capture never runs it.
    inference = source.replace("graphed = torch.cuda.make_graphed_callables(block, (x,))",
                               "g = torch.cuda.CUDAGraph()\n        with torch.no_grad(), torch.cuda.graph(g):\n            y = block(x)")
    assert inference != source
    assert _codes(inference, select=["CG201"]) == []


def test_an_autograd_function_applied_in_another_file_is_a_library_s_and_not_followed(tmp_path):
    from cgkit.check import check_paths

    function = textwrap.dedent("""
        import torch

        class FusedAttn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, debug):
                if debug:
                    print(q.amax().item())
                return q.softmax(-1)
    """)
    (tmp_path / "fused.py").write_text(function)
    (tmp_path / "layers.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from fused import FusedAttn

        class Attention(nn.Module):
            def forward(self, q):
                return FusedAttn.apply(q, False)
    """))
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import torch
        from layers import Attention

        model = Attention()
        q = torch.randn(4, 8, device="cuda")
        model(q)  # warm-up
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(q)
    """))
    result = check_paths([str(tmp_path)], use_config=False)
    assert not result.errors, result.errors
    assert [f for f in result.findings if f.severity in ("error", "warning")] == []
    # Applied by the captured script itself, the same function's forward is followed.
    (tmp_path / "train.py").write_text(function + textwrap.dedent("""
        q = torch.randn(4, 8, device="cuda")
        FusedAttn.apply(q, False)  # warm-up
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = FusedAttn.apply(q, False)
    """))
    result = check_paths([str(tmp_path / "train.py")], use_config=False)
    assert sorted({(f.line, f.code) for f in result.findings if f.severity in ("error", "warning")}) == [(8, "CG101"), (8, "CG401")]


def test_callables_a_harness_takes_from_a_dict_its_caller_fills_entry_by_entry():
    source = """
        import functools
        import torch

        def _capture(fn, pool):
            fn()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                out = fn()
            return g, out

        def bench_cases(cases):
            pool = torch.cuda.graph_pool_handle()
            for name, fn in sorted(cases.items(), key=lambda kv: kv[0]):
                g, out = _capture(fn, pool)
                g.replay()

        def timed(model, x):
            out = model(x)
            torch.cuda.synchronize()
            return out

        def plain(model, x):
            return model(x)

        def main(model):
            cases = {}
            for res in (224, 384):
                x = torch.randn(2, 3, res, res, device="cuda")
                cases[f"plain{res}"] = functools.partial(plain, model, x)
                cases[f"timed{res}"] = functools.partial(timed, model, x)
            bench_cases(cases)
    """
    assert _codes(source, select=["CG104"]) == [(19, "CG104")]
    # Only the plain cases: nothing to report.
    plain = source.replace('cases[f"timed{res}"] = functools.partial(timed, model, x)', "pass")
    assert plain != source
    assert _codes(plain, select=["CG104"]) == []


def test_a_hook_on_one_layer_of_a_list_graphed_layer_by_layer():
    source = """
        import torch
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self, depth):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(depth))
                self.probe = {}

            def _probe(self, mod, inp, out):
                self.probe["last"] = out.detach()

            def graph(self, x):
                self.layers[-1].register_forward_hook(self._probe)
                self.graphed = [torch.cuda.make_graphed_callables(layer, (x,)) for layer in self.layers]
    """
    # make_graphed_callables refuses a module with hooks: reported at the hook and at the graphing call.
    assert _codes(source, select=["CG503"]) == [(14, "CG503"), (15, "CG503")]
    looped = source.replace(
        "self.graphed = [torch.cuda.make_graphed_callables(layer, (x,)) for layer in self.layers]",
        "for layer in self.layers:\n                    torch.cuda.make_graphed_callables(layer, (x,))")
    assert looped != source
    assert _codes(looped, select=["CG503"]) == [(14, "CG503"), (16, "CG503")]


def test_a_learning_rate_a_method_sets_after_the_optimizer_step_is_captured():
    source = """
        import torch

        class CapturedStep:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.05)
                self.x = torch.zeros(8, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def _body(self):
                loss = self.model(self.x).sum()
                loss.backward()
                self.opt.step()

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self._body()

            def decay(self, factor=0.5):
                for g in self.opt.param_groups:
                    g["lr"] *= factor
    """
    # The step kept the learning rate it had at capture: the method's change never reaches a replay.
    assert _codes(source, select=["CG404"]) == [(21, "CG404")]
    # With the optimizer step left out of the capture (eager), the change takes effect.
    eager_step = source.replace("                self.opt.step()\n", "")
    assert eager_step != source
    assert _codes(eager_step, select=["CG404"]) == []


def test_a_compiled_model_a_builder_returns_is_called_where_its_callers_bind_it():
    source = """
        import torch
        import torch.nn as nn

        def build(width):
            model = nn.Linear(width, width).cuda().eval()
            return torch.compile(model, mode="reduce-overhead")

        @torch.no_grad()
        def serve(requests):
            encoder = build(64)
            outs = []
            for x in requests:
                y = encoder(x)
                outs.append(y)
            return outs
    """
    # Each output is kept past the next call, which overwrites it.
    assert _codes(source, select=["CG407"]) == [(14, "CG407")]
    cloned = source.replace("outs.append(y)", "outs.append(y.clone())")
    assert cloned != source
    assert _codes(cloned, select=["CG407"]) == []


def test_a_setting_changed_through_a_part_of_a_local_object_between_calls():
    source = """
        import torch
        import torch.nn as nn

        class RunningTime(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(12, 1)
                self.weather_factor = 1.0

            def forward(self, feats):
                return self.proj(feats).squeeze(-1) * self.weather_factor

        class Service:
            def __init__(self):
                self.running = RunningTime().cuda()
                self.run_c = torch.compile(self.running, mode="reduce-overhead")

            def predict(self, feats):
                return self.run_c(feats).clone()

        if __name__ == "__main__":
            live = Service()
            for tick in range(600):
                if tick % 20 == 0:
                    live.running.weather_factor = 1.0 + 0.15 * ((tick // 20) % 3)
                eta = live.predict(torch.randn(900, 12, device="cuda"))
    """
    assert _codes(source, select=["CG404"]) == [(11, "CG404")]
    # Set once before the calls: its starting value.
    once = source.replace("""            for tick in range(600):
                if tick % 20 == 0:
                    live.running.weather_factor = 1.0 + 0.15 * ((tick // 20) % 3)
""", """            live.running.weather_factor = 1.15
            for tick in range(600):
""")
    assert once != source
    assert _codes(once, select=["CG404"]) == []


def test_a_setting_changed_in_the_loop_that_first_uses_a_compiling_object():
    source = """
        import torch

        class Calibrator:
            def __init__(self, pricer):
                self.pricer = pricer
                self.mean_reversion = 1.5
                self.objective = torch.compile(self._objective, mode="reduce-overhead")

            def _objective(self, raw):
                return self.pricer(raw) * self.mean_reversion

            def calibrate(self, raw, opt):
                def closure():
                    return self.objective(raw).sum()
                for _ in range(50):
                    loss = opt.step(closure)
                return float(loss)

        if __name__ == "__main__":
            cal = Calibrator(torch.nn.Linear(4, 4).cuda())
            opt = torch.optim.LBFGS(cal.pricer.parameters())
            for day in range(30):
                cal.mean_reversion = 2.5 if day % 2 else 1.5
                cal.calibrate(torch.randn(8, 4, device="cuda"), opt)
    """
    # Set before the first call, but again on every later day: each new value recompiles.
    assert _codes(source, select=["CG404"]) == [(10, "CG404")]
    once = source.replace("""            for day in range(30):
                cal.mean_reversion = 2.5 if day % 2 else 1.5
""", """            cal.mean_reversion = 2.5
            for day in range(30):
""")
    assert once != source
    assert _codes(once, select=["CG404"]) == []


_GRAPHED_ONCE = """
    import functools
    import torch

    def graphed_once(fn):
        state = {}

        @functools.wraps(fn)
        def wrapper(*args):
            if "g" not in state:
                fn(*args)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    state["out"] = fn(*args)
                state["g"] = g
            state["g"].replay()
            return state["out"]
        return wrapper
"""


def test_what_a_method_captured_by_a_decorator_returns_and_reads():
    source = _GRAPHED_ONCE + """
    class Kriger:
        def __init__(self, values):
            self.values = torch.as_tensor(values, device="cuda")
            self.history = []

        @graphed_once
        def predict(self):
            return self.values * 2

        def update(self, new_values):
            self.values = torch.as_tensor(new_values, device="cuda")

        def update_in_place(self, new_values):
            self.values.copy_(torch.as_tensor(new_values))

        def predict_and_keep(self):
            out = self.predict()
            self.history.append(out)
            return out

    def run(k, campaigns):
        means = []
        for c in campaigns:
            m = k.predict()
            means.append(m)
        return means
    """
    codes = _codes(source, select=["CG405", "CG407"])
    # A new tensor for what the graph reads; the returned static output kept in the object's list and in
    # the caller's list across calls (each replay overwrites it).
    assert codes == [(29, "CG405"), (36, "CG407"), (43, "CG407")]


def test_a_changing_number_is_reported_where_a_helper_uses_it_not_where_it_is_handed_on():
    source = """
        import torch
        import torch.nn.functional as F

        def sample(logits, temperature):
            return torch.multinomial(F.softmax(logits / temperature, -1), 1)

        @torch.compile(mode="reduce-overhead")
        def decode_step(logits, temperature):
            return sample(logits, temperature)

        def finish(logits, max_len=250):
            for i in range(max_len):
                temperature = max(0.1, 0.65 * (1.0 - i / max_len))
                tok = decode_step(logits, temperature)
    """
    assert _codes(source, select=["CG404"]) == [(5, "CG404")]


def test_a_setting_changed_after_the_last_loop_that_calls_the_compiled_code():
    source = """
        import torch

        class Synth:
            def __init__(self, model):
                self.model = model
                self.verbose = True
                self.loss = torch.compile(self._loss, mode="reduce-overhead")
                self.eval_loss = torch.compile(self._loss, mode="max-autotune-no-cudagraphs")

            def _loss(self, x):
                loss = self.model(x).square().mean()
                if self.verbose:
                    print("loss computed")
                return loss

            def run(self, x, iters=100):
                for it in range(iters):
                    self.loss(x).backward()
                self.verbose = False
                return self.eval_loss(x)
    """
    # After the last call of the CUDA-graph-compiled loss: no call of it sees the new value here.
    assert _codes(source, select=["CG404"]) == []
    inside = source.replace("                    self.loss(x).backward()\n                self.verbose = False\n",
                            "                    self.loss(x).backward()\n                    self.verbose = it < 10\n")
    assert inside != source
    assert _codes(inside, select=["CG404"]) == [(12, "CG404")]


def test_an_entry_of_a_settings_dict_the_object_holds_changed_after_capture():
    source = """
        import json
        import torch

        class Compressor:
            def __init__(self, model):
                self.model = model
                self.params = {"makeup_db": 0.0, "ceiling": 0.98}
                self.x = torch.zeros(1, 512, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def set_param(self, name, value):
                self.params[name] = value

            def _tick(self):
                makeup = 10.0 ** (self.params["makeup_db"] / 20.0)
                return self.model(self.x) * makeup

            def prepare(self):
                with torch.cuda.graph(self.graph):
                    self.y = self._tick()

        class Worker:
            def __init__(self, path):
                self.path = path
                self.cfg = json.load(open(path))
                self.x = torch.zeros(1, 512, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def prepare(self):
                with torch.cuda.graph(self.graph):
                    self.y = self.x * self.cfg["nlms_step"]

        def reload(worker):
            worker.cfg = json.load(open(worker.path))
    """
    # A setter that may change any entry; a reload that replaces the whole dict.
    assert _codes(source, select=["CG404"]) == [(15, "CG404"), (31, "CG404")]
    # Entries nothing changes after the capture are the settings the graph was built with.
    fixed = source.replace("        self.params[name] = value", "        pass").replace(
        "    worker.cfg = json.load(open(worker.path))", "    pass")
    assert fixed != source
    assert _codes(fixed, select=["CG404"]) == []


def test_a_dict_of_tensors_the_object_reloads_is_no_python_value():
    source = """
        import torch

        class Localizer:
            def __init__(self):
                self.fp = None
                self.x = torch.zeros(4, 64, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def load_fingerprints(self, path):
                db = torch.load(path, map_location="cuda")
                self.fp = {k: v.contiguous() for k, v in db.items()}

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self.out = torch.cdist(self.x, self.fp["emb"])
    """
    assert _codes(source, select=["CG404"]) == []
    # The same entry as a number from a settings file is one.
    settings = source.replace("{k: v.contiguous() for k, v in db.items()}", "json.load(open(path))").replace(
        "import torch", "import json\n        import torch").replace('torch.cdist(self.x, self.fp["emb"])', 'self.x * self.fp["emb"]')
    assert settings != source
    assert _codes(settings, select=["CG404"]) == [(16, "CG404")]


def test_te_graphed_callables_with_weight_caching_need_is_first_microbatch():
    source = """
        import torch
        import transformer_engine.pytorch as te

        class Opponent:
            def __init__(self, layers, head, x):
                self.layers, self.head = layers, head
                graphed = te.make_graphed_callables(tuple(self.layers) + (self.head,), tuple((x,) for _ in range(5)),
                                                    enabled=True, cache_quantized_params=True)
                self.g_layers, self.g_head = graphed[:-1], graphed[-1]

            def train_step(self, h, micro):
                for layer in self.g_layers:
                    h = layer(h, is_first_microbatch=(micro == 0))
                return self.g_head(h, is_first_microbatch=(micro == 0))

            @torch.no_grad()
            def predict(self, h):
                for i, layer in enumerate(self.g_layers):
                    h = layer(h)
                return self.g_head(h, is_first_microbatch=False)

            def evaluate(self, h):
                for layer in self.layers:
                    layer.eval()
                    h = layer(h)
                return h
    """
    # The replay in predict() without the keyword raises; eval-mode modules run their own forward.
    assert _codes(source, select=["CG512"]) == [(19, "CG512")]
    # Without weight caching there is nothing to pass.
    plain = source.replace("cache_quantized_params=True", "cache_quantized_params=False")
    assert plain != source
    assert _codes(plain, select=["CG512"]) == []
    # The deprecated name works the same.
    old = source.replace("cache_quantized_params=True", "fp8_weight_caching=True")
    assert _codes(old, select=["CG512"]) == [(19, "CG512")]


def test_te_weight_caching_through_script_globals_and_helpers_the_callables_are_handed_to():
    source = """
        import torch
        import transformer_engine.pytorch as te

        def build(layers, h):
            graphed = te.make_graphed_callables(tuple(layers), tuple((h,) for _ in layers),
                                                enabled=True, cache_quantized_params=True)
            return graphed

        def nightly(graphed, batches):
            g_embed, *g_layers = graphed
            for i, x in enumerate(batches):
                x = g_embed(x, is_first_microbatch=(i == 0))
                for layer in g_layers:
                    x = layer(x)

        def main(layers, h, batches):
            graphed = build(layers, h)
            nightly(graphed, batches)
    """
    assert _codes(source, select=["CG512"]) == [(14, "CG512")]
    script = '''
        import torch
        import transformer_engine.pytorch as te

        enc, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)
        x = torch.randn(4, 8, device="cuda", requires_grad=True)
        g_enc, g_head = te.make_graphed_callables((enc, head), ((x,), (x,)), cache_quantized_params=True)

        def validate(batches):
            for b in batches:
                h = g_enc(b, is_first_microbatch=False)
                yield g_head(h)
    '''
    assert _codes(script, select=["CG512"]) == [(11, "CG512")]


def test_the_nccl_error_handling_setting_is_reported_where_the_process_group_is_made():
    source = """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        def main(build):
            dist.init_process_group("nccl")
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                model = DDP(build().cuda())
            x = torch.randn(4, 8, device="cuda")
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(11):
                    model(x).sum().backward()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
    """
    assert _codes(source, select=["CG506"]) == [(6, "CG506")]
    # A file that does not make the group: at the DDP construction.
    assert _codes(source.replace('dist.init_process_group("nccl")', "pass"), select=["CG506"]) == [(9, "CG506")]


def test_ddp_built_by_a_trainer_s_constructor_and_a_logged_loss_of_unknown_making():
    source = """
        import logging
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        log = logging.getLogger("train")

        class Trainer:
            def __init__(self, net, criterion):
                self.model = DDP(net.cuda())
                self.criterion = criterion
                self.x = torch.randn(8, 3, device="cuda")
                self.y = torch.randint(0, 3, (8,), device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def _step(self):
                loss = self.criterion(self.model(self.x), self.y)
                loss.backward()
                log.debug(f"captured loss {loss}")
                return loss.detach()

            def capture(self):
                with torch.cuda.graph(self.graph):
                    self.loss = self._step()
    """
    codes = _codes(source, select=["CG504", "CG106"])
    assert (9, "CG504") in codes and (18, "CG106") in codes
    # Without the backward pass nothing says what the criterion returns.
    no_backward = source.replace("                loss.backward()\n", "")
    assert (17, "CG106") not in _codes(no_backward, select=["CG106"])


def test_ddp_requirements_are_for_capturing_its_backward():
    source = """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        class Scorer:
            def __init__(self, net):
                self.model = DDP(net.cuda())
                self.x = torch.randn(8, 3, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            @torch.no_grad()
            def freeze(self):
                with torch.cuda.graph(self.graph):
                    self.score = self.model(self.x).mean(-1)
    """
    # A forward-only capture: DDP's all-reduce hooks (and their stream and warm-up needs) never run in it.
    assert _codes(source, select=["CG504", "CG505", "CG506"]) == []
    training = source.replace("                    self.score = self.model(self.x).mean(-1)",
                              "                    self.model(self.x).sum().backward()").replace("            @torch.no_grad()\n", "")
    assert training != source
    assert (6, "CG504") in _codes(training, select=["CG504"])


def test_ops_on_host_tensors_stay_on_the_host():
    source = """
        import torch

        def crops_forward(backbone, crops):
            sizes = torch.tensor([c.shape[-1] for c in crops])
            ends = torch.cumsum(torch.unique_consecutive(sizes, return_counts=True)[1], 0)
            out, start = [], 0
            for end in ends.tolist():
                out.append(backbone(torch.cat(crops[start:end])))
                start = end
            return torch.cat(out)

        net = torch.nn.Linear(8, 8).cuda()
        crops = [torch.randn(2, 8, device="cuda")]
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = crops_forward(net, crops)
    """
    # Bookkeeping on a CPU tensor built from Python sizes: no GPU value is read, nothing syncs.
    assert _codes(source, select=["CG202", "CG102"]) == []
    on_gpu = source.replace("torch.tensor([c.shape[-1] for c in crops])",
                            'torch.tensor([c.shape[-1] for c in crops], device="cuda")')
    assert on_gpu != source
    assert {(5, "CG202"), (7, "CG102")} <= set(_codes(on_gpu, select=["CG202", "CG102"]))


def test_a_host_tensor_returned_by_a_compiled_function_is_not_overwritten():
    source = """
        import torch

        @torch.compile(mode="reduce-overhead")
        def select(scores, noisy):
            kept = torch.argsort(scores)[:8]
            ratio = 1.0 - noisy[kept].float().mean().cpu()
            return scores[kept].sum(), ratio

        ratios = []
        for _ in range(3):
            loss, ratio = select(torch.randn(32, device="cuda"), torch.zeros(32, device="cuda"))
            ratios.append(ratio)
    """
    # The ratio is a CPU tensor: cudagraph trees never hold it, so the next call cannot overwrite it.
    assert (12, "CG407") not in _codes(source, select=["CG407"])
    on_gpu = source.replace(".mean().cpu()", ".mean()")
    assert (12, "CG407") in _codes(on_gpu, select=["CG407"])


def test_a_capture_helper_learns_its_parameter_from_its_callers():
    source = """
        import torch

        class InnerLoop:
            def __init__(self, model):
                self.model = model

            def run(self):
                return self.model(torch.randn(4, 2, device="cuda")).sum().item()

        def capture(inner):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                inner.run()
            return g

        def main():
            inner, graph = InnerLoop(torch.nn.Linear(2, 2).cuda()), None
            graph = capture(inner)
    """
    # ``run`` is too common a name to guess from; the caller says ``inner`` is an InnerLoop.
    assert (8, "CG101") in _codes(source, select=["CG101"])
    no_caller = source.replace("            graph = capture(inner)\n", "")
    assert no_caller != source
    assert _codes(no_caller, select=["CG101"]) == []


def test_a_method_only_one_class_of_the_file_defines_is_followed_on_a_handed_in_object():
    source = """
        import torch

        class LossComputer:
            def loss(self, out, y):
                if out.mean() > 0:
                    return out.sum()
                return out.mean()

        class Learner:
            def observe(self, x):
                return x.norm().item()

        def capture_step(model, lc, learner, x):
            def step():
                return lc.loss(model(x), x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = step()
                learner.observe(x)
            return g, out
    """
    # ``lc`` (read by the nested step) and ``learner`` are handed in untyped; one class defines each method.
    assert {(5, "CG201"), (11, "CG101")} <= set(_codes(source, select=["CG201", "CG101"]))
    shared = source.replace("    def observe(self, x):", "    def loss(self, x):").replace(
        "learner.observe(x)", "learner.loss(x)")
    assert shared != source
    # Two unrelated classes define ``loss``: nothing tells which one is meant.
    assert _codes(shared, select=["CG201", "CG101"]) == []


def test_a_counter_set_by_tuple_unpacking_in_init_is_a_python_number():
    source = """
        import torch

        class Learner(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)
                self.task, self.seen = 0, 0

            def forward(self, x):
                self.seen += x.size(0)
                return self.lin(x)

        net = Learner().cuda()
        x = torch.randn(2, 4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = net(x)
    """
    # ``seen`` starts as the number 0: adding the batch size counts on the host, once, at capture.
    assert (10, "CG402") in _codes(source, select=["CG402"])
    as_tensor = source.replace("self.task, self.seen = 0, 0", "self.task, self.seen = 0, torch.zeros(())")
    assert as_tensor != source
    assert (10, "CG402") not in _codes(as_tensor, select=["CG402"])


def test_a_capture_helper_called_through_a_partial_and_the_generators_it_registers():
    source = """
        import functools
        import torch

        def capture(case, warmup=3, generators=()):
            g = torch.cuda.CUDAGraph()
            for gen in generators:
                g.register_generator_state(gen)
            with torch.cuda.graph(g):
                out = case()
            return g, out

        class Noisy:
            def __init__(self, x):
                self.x = x
                self.gen = torch.Generator(device="cuda")

            def __call__(self):
                return self.x + torch.randn(self.x.shape, device="cuda", generator=self.gen)

        def main(x):
            bench = functools.partial(capture, warmup=3)
            return bench(Noisy(x))
    """
    # The helper registers only what it is given, and the partial passes nothing.
    assert (18, "CG409") in _codes(source, select=["CG409"])
    given = source.replace("bench(Noisy(x))", "bench(case, generators=(case.gen,))").replace(
        "            return bench", "            case = Noisy(x)\n            return bench")
    assert given != source
    assert _codes(given, select=["CG409"]) == []


def test_a_host_generator_object_draws_on_the_host():
    source = """
        import numpy as np
        import torch

        rng = np.random.RandomState(0)
        x = torch.randn(16, device="cuda")

        def step():
            perm = rng.permutation(16)
            return x[perm[:8]].sum()

        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = step()
    """
    # The permutation drawn at capture is replayed every time.
    assert (8, "CG403") in _codes(source, select=["CG403"])
    device = source.replace("np.random.RandomState(0)", 'torch.Generator(device="cuda")').replace(
        "rng.permutation(16)", 'torch.randperm(16, device="cuda", generator=rng)')
    assert device != source
    assert (8, "CG403") not in _codes(device, select=["CG403"])


def test_a_parameter_given_new_storage_inside_a_capture():
    source = """
        import torch

        model = torch.nn.Linear(4, 4).cuda()
        saved = {p: p.detach().clone() for p in model.parameters()}
        x = torch.randn(2, 4, device="cuda")

        def restore():
            for p in model.parameters():
                p.data = saved[p]

        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(x).sum().backward()
            restore()
    """
    # The swap happens once, at capture; replays keep the storage the graph recorded.
    assert (9, "CG406") in _codes(source, select=["CG406"])
    in_place = source.replace("p.data = saved[p]", "p.data.copy_(saved[p])")
    assert in_place != source
    assert _codes(in_place, select=["CG406"]) == []


def test_a_command_line_number_set_again_between_replays():
    source = """
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--mean_field_factor", type=float, default=0.4)
        args = parser.parse_args()

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)
                self.factor = args.mean_field_factor

            def forward(self, x):
                return self.lin(x) * self.factor

        def tune(model, graph, grid):
            for value in grid:
                model.factor = value
                graph.replay()

        head = Head().cuda()
        x = torch.randn(2, 4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = head(x)
        tune(head, g, [0.1, 0.2])
    """
    # The factor starts as a number from the command line: the new values never reach the graph.
    assert (15, "CG404") in _codes(source, select=["CG404"])
    as_text = source.replace('type=float, default=0.4', 'type=str, default="0.4"')
    assert as_text != source
    assert (15, "CG404") not in _codes(as_text, select=["CG404"])
    # A loop variable over ``map(float, ...)`` is a number too, whatever the option says.
    parsed = as_text.replace("for value in grid:", "for value in map(float, grid):")
    assert (15, "CG404") in _codes(parsed, select=["CG404"])


def test_a_parameter_replaced_in_the_loop_that_calls_a_compiled_step():
    source = """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.W_E = nn.Parameter(torch.randn(8, 8))

            def forward(self, x):
                return x @ self.W_E

        @torch.compile(mode="reduce-overhead")
        def train_step(model, x):
            return model(x).sum()

        def main(x):
            model = Net().cuda()
            opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(0.01, device="cuda"), capturable=True)
            opt_step = torch.compile(opt.step, mode="reduce-overhead")
            for epoch in range(10):
                if epoch == 5:
                    model.W_E = nn.Parameter(torch.randn(8, 8, device="cuda"))
                train_step(model, x).backward()
                opt_step()
    """
    # ``main`` compiles the optimizer step too; its loop still runs while train_step is in use.
    assert (22, "CG405") in _codes(source, select=["CG405"])
    before_first_call = source.replace("            for epoch in range(10):\n                if epoch == 5:\n    ",
                                       "            if True:\n    ").replace(
        "                train_step(model, x).backward()", "            for epoch in range(10):\n                train_step(model, x).backward()")
    assert before_first_call != source
    # Set before the first call (and outside the loop that calls it): the model's starting state.
    assert not [c for c in _codes(before_first_call, select=["CG405"]) if c[1] == "CG405"]


def test_a_helper_returning_arithmetic_on_a_torch_reduction_returns_a_tensor():
    source = """
        import torch

        def smape(forecast, target):
            return 200 * torch.mean(torch.abs(forecast - target))

        @torch.compile(mode="max-autotune")
        def training_loss(forecast, target):
            loss = smape(forecast, target)
            if float(loss) != float(loss):
                raise FloatingPointError("nan")
            return loss
    """
    assert (9, "CG103") in _codes(source, select=["CG103"])
    python_number = source.replace("200 * torch.mean(torch.abs(forecast - target))", "200 * len(forecast)")
    assert python_number != source
    assert _codes(python_number, select=["CG103"]) == []


def test_a_setting_of_the_capturing_runner_swept_in_the_loop_that_uses_it():
    source = """
        import torch

        class Smooth:
            def __init__(self, model, sigma):
                self.model, self.sigma, self.graph = model, sigma, None
                self.x = torch.zeros(8, 4, device="cuda")

            def _capture(self):
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self.model(self.x + torch.randn_like(self.x) * self.sigma)

            def certify(self, x):
                if self.graph is None:
                    self._capture()
                self.x.copy_(x)
                self.graph.replay()
                return self.out.argmax(1)

        def main(model, xs):
            smoothed = Smooth(model, 0.25)
            for sigma in (0.25, 0.5, 1.0):
                smoothed.sigma = sigma
                for x in xs:
                    smoothed.certify(x)
    """
    # Built here, but the loop that sets sigma also replays it: each new sigma is ignored.
    assert (11, "CG404") in _codes(source, select=["CG404"])
    set_once = source.replace("            for sigma in (0.25, 0.5, 1.0):\n                smoothed.sigma = sigma\n",
                              "            smoothed.sigma = 0.5\n            for sigma in (0.25, 0.5, 1.0):\n")
    assert set_once != source
    assert _codes(set_once, select=["CG404"]) == []


def test_an_untyped_object_the_class_calls_eval_on_is_a_module_to_warm_up():
    source = """
        import torch

        class Smooth:
            def __init__(self, classifier):
                self.classifier = classifier
                self.x = torch.zeros(8, 4, device="cuda")

            def capture(self):
                self.classifier.eval()
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self.predict()

            def predict(self):
                return self.classifier(self.x).argmax(1)
    """
    # ``.eval()`` says the classifier is a module: its first run, inside the capture, is cold.
    assert (11, "CG508") in _codes(source, select=["CG508"])
    unknown = source.replace("                self.classifier.eval()\n", "")
    assert unknown != source
    assert _codes(unknown, select=["CG508"]) == []


def test_a_side_stream_chosen_by_a_conditional_expression():
    source = """
        import contextlib
        import torch

        side = torch.cuda.Stream()
        x = torch.randn(8, device="cuda")
        overlap = True
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            with (torch.cuda.stream(side) if overlap else contextlib.nullcontext()):
                y = x * 2
    """
    assert (9, "CG601") in _codes(source, select=["CG601"])
    joined = source.replace("            with (torch.cuda.stream", "            side.wait_stream(torch.cuda.current_stream())\n            with (torch.cuda.stream").replace(
        "                y = x * 2\n", "                y = x * 2\n            torch.cuda.current_stream().wait_stream(side)\n")
    assert joined.count("wait_stream") == 2
    assert _codes(joined, select=["CG601"]) == []


def test_sample_inputs_written_out_must_be_tensors():
    source = """
        import torch

        def calibrate(logits, temperature):
            return logits / temperature

        x = torch.randn(8, 4, device="cuda", requires_grad=True)
        graphed = torch.cuda.make_graphed_callables(calibrate, (x, 1.5))
    """
    assert (7, "CG513") in _codes(source, select=["CG513"])
    as_tensor = source.replace("(x, 1.5)", "(x, torch.tensor(1.5, device=\"cuda\"))")
    assert as_tensor != source
    assert _codes(as_tensor, select=["CG513"]) == []


def test_learning_rates_set_through_zip_for_a_captured_step_of_the_scripts_own_optimizer():
    source = """
        import torch

        class LARS(torch.optim.Optimizer):
            def __init__(self, params, lr):
                super().__init__(params, dict(lr=lr))

            @torch.no_grad()
            def step(self):
                for g in self.param_groups:
                    for p in g["params"]:
                        p.add_(p.grad, alpha=-g["lr"])

        model = torch.nn.Linear(4, 4).cuda()
        opt = LARS(model.parameters(), lr=0.1)
        x = torch.randn(2, 4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(x).sum().backward()
            opt.step()
        for step in range(10):
            for group, scale in zip(opt.param_groups, (1.0, 0.1)):
                group["lr"] = 0.1 * scale / (step + 1)
            g.replay()
    """
    # The script's own optimizer is an optimizer too; the group comes out of a zip.
    assert (22, "CG404") in _codes(source, select=["CG404"])
    # Stepped eagerly after each replay, the optimizer reads the new rate every time.
    eager_step = source.replace("            opt.step()\n", "", 1).replace(
        "            g.replay()\n", "            g.replay()\n            opt.step()\n")
    assert eager_step.count("opt.step()") == 1 and eager_step != source
    assert (22, "CG404") not in _codes(eager_step, select=["CG404"])


def test_a_learning_rate_put_back_after_each_compiled_step_is_not_a_change():
    source = """
        import torch

        model = torch.nn.Linear(4, 4).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        opt_step = torch.compile(optimizer.step, mode="reduce-overhead")

        def train(batches):
            for x, seq_len in batches:
                lr2 = optimizer.param_groups[0]["lr"]
                optimizer.param_groups[0]["lr"] = lr2 * seq_len / 70
                model(x).sum().backward()
                opt_step()
                optimizer.param_groups[0]["lr"] = lr2
    """
    # The scaled rate changes from call to call; putting the base rate back is overwritten before any step.
    codes = _codes(source, select=["CG404"])
    assert (10, "CG404") in codes and (13, "CG404") not in codes
    no_scaling = source.replace("                optimizer.param_groups[0][\"lr\"] = lr2 * seq_len / 70\n", "")
    assert no_scaling != source
    assert (12, "CG404") in _codes(no_scaling, select=["CG404"])


def test_an_output_passed_as_an_argument_of_the_next_compiled_call_is_read_before_it():
    source = """
        import torch

        control = torch.compile(torch.nn.Linear(4, 4).cuda(), mode="reduce-overhead")
        unet = torch.compile(torch.nn.Linear(4, 4).cuda(), mode="reduce-overhead")

        @torch.inference_mode()
        def report(x):
            mid = control(x)
            unet(x,
                 mid.clone())
            return float(mid.abs().mean())
    """
    # ``mid.clone()`` runs before ``unet`` does; the read on the last line comes after it.
    codes = _codes(source, select=["CG407"])
    assert (10, "CG407") not in codes and (11, "CG407") in codes


def test_a_tensor_of_written_numbers_in_a_compiled_function_is_a_constant():
    source = """
        import numpy as np
        import torch

        @torch.compile(mode="reduce-overhead")
        def refine(x, size):
            ids = list(size) + [0, 0, 6.0]
            time_ids = torch.tensor([ids, ids], device=x.device)
            mask = torch.as_tensor(np.ones(4, dtype=np.float32), device=x.device)
            return x * time_ids.sum() * mask

        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            ids = torch.tensor([1.0, 2.0], device="cuda")
    """
    # Measured (benchmarks/compile_hazards.py): the list is folded into the compiled graph; the NumPy array
    # is not, and no CUDA graph is recorded (a copy of a host array: CG302). Under manual capture both fail.
    codes = _codes(source, select=["CG301", "CG302"])
    assert (7, "CG301") not in codes and (8, "CG302") in codes and (13, "CG301") in codes


def test_callbacks_of_several_kinds_held_in_a_list_and_called_in_a_capture():
    source = """
        import torch

        class Preview:
            def __call__(self, pipe, i, kw):
                print(kw["latents"].float().cpu())
                return kw

        class Safety:
            def __call__(self, pipe, i, kw):
                if torch.isnan(kw["latents"]).any():
                    raise FloatingPointError(i)
                return kw

        class Runner:
            def __init__(self, callbacks):
                self.callbacks = list(callbacks)
                self.latents = torch.zeros(4, device="cuda")
                self.graph = torch.cuda.CUDAGraph()

            def capture(self):
                with torch.cuda.graph(self.graph):
                    kw = {"latents": self.latents * 2}
                    for cb in self.callbacks:
                        kw = cb(self, 0, kw)
    """
    # Either kind may be in the list: each takes the arguments the loop gives.
    codes = set(_codes(source, select=["CG102", "CG201"]))
    assert {(5, "CG102"), (10, "CG201")} <= codes
    other_arity = source.replace("kw = cb(self, 0, kw)", "kw = cb(kw)")
    assert other_arity != source
    assert _codes(other_arity, select=["CG102", "CG201"]) == []


def test_a_compiled_function_first_called_in_a_method_the_capture_runs():
    source = """
        import torch

        class Pipeline:
            def __init__(self, proj):
                self.proj_fn = torch.compile(proj)
                self.clip = torch.zeros(2, 8, device="cuda")

            def _eps(self):
                return self.proj_fn(self.clip) * 2

            def capture(self):
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self._eps()
    """
    assert (9, "CG507") in _codes(source, select=["CG507"])
    warmed = source.replace("                self.graph = torch.cuda.CUDAGraph()\n",
                            "                self._eps()\n                self.graph = torch.cuda.CUDAGraph()\n")
    assert warmed != source
    assert _codes(warmed, select=["CG507"]) == []


def test_a_graphed_models_weight_data_replaced_by_a_reload():
    source = """
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(10, 4)

            def forward(self, ids):
                return self.embed(ids).sum(1)

        def build(vectors):
            model = Net().cuda()
            model.embed.weight.data.copy_(vectors)
            sample = torch.ones(2, 3, dtype=torch.long, device="cuda")
            return torch.cuda.make_graphed_callables(model, (sample,))

        def reload_vectors(model, vectors):
            model.embed.weight.data = vectors.cuda()
    """
    # The graphed forward keeps reading the old storage; copying in place keeps the address.
    assert (18, "CG405") in _codes(source, select=["CG405"])
    in_place = source.replace("model.embed.weight.data = vectors.cuda()", "model.embed.weight.data.copy_(vectors)")
    assert in_place != source
    assert _codes(in_place, select=["CG405"]) == []


def test_a_list_index_into_the_weight_of_a_torch_layer_or_a_part_of_the_files_own_module():
    # ``self.emb.weight`` of an nn.Embedding is a parameter; ``self.net.threat`` is read through the file's class
    assert _codes("""
        import torch
        from torch import nn

        VOWELS = [1, 5, 9]

        class Threats(nn.Module):
            def __init__(self):
                super().__init__()
                self.threat = nn.Linear(4, 64)

        class Scorer(nn.Module):
            def __init__(self, squares):
                super().__init__()
                self.emb = nn.Embedding(32, 8)
                self.net = Threats()
                self.ids = list(squares)

            def forward(self, x):
                vowel = self.emb.weight[VOWELS]
                bias = self.net.threat.weight[self.ids].sum()
                return x + vowel.sum() + bias

        scorer = Scorer([3, 7]).cuda()
        x = torch.randn(8, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = scorer(x)
    """, select=["CG303"]) == [(19, "CG303"), (20, "CG303")]


def test_hooks_on_the_blocks_of_a_module_list_graphed_one_by_one_are_refused_at_the_graphing_call():
    # ``tuple(model.blocks)`` graphs each block: a ModuleList is a list of modules, not one module with parts
    assert _codes("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))

        def probe(module, args, out):
            pass

        model = Net().cuda()
        for blk in model.blocks:
            blk.register_forward_hook(probe)
        samples = tuple((torch.randn(2, 8, device="cuda", requires_grad=True),) for _ in model.blocks)
        graphed = torch.cuda.make_graphed_callables(tuple(model.blocks), samples)
    """, select=["CG503"]) == [(14, "CG503"), (16, "CG503")]


def test_compiled_callables_assigned_together_are_each_called_through_their_own_name():
    # ``self.loss_fn, self.decode = cg(self.loss), cg(self.net)``: an output of self.decode kept in a list
    assert _codes("""
        import functools
        import torch

        cg = functools.partial(torch.compile, mode="reduce-overhead")

        class Solver:
            def __init__(self, net):
                self.net = net
                self.loss_fn, self.decode = cg(self.loss), cg(self.net)

            def loss(self, x):
                return self.net(x).sum()

            @torch.no_grad()
            def traverse(self, zs):
                frames = []
                for z in zs:
                    recon = self.decode(z)
                    frames.append(recon)
                return frames
    """, select=["CG407"]) == [(19, "CG407")]


def test_a_number_computed_from_an_attribute_the_class_counts_up_changes_every_call():
    # ``C = min(self.C_max, self.C_max / self.C_stop * self.global_iter)``: no literal in it, but the counter is a number
    assert _codes("""
        import torch

        class Solver:
            def __init__(self, net, C_max=25.0, C_stop=1e5):
                self.net = net
                self.C_max, self.C_stop, self.global_iter = C_max, C_stop, 0
                self.loss_fn = torch.compile(self.loss, mode="reduce-overhead")

            def loss(self, x, C):
                return (self.net(x) - C).abs().sum()

            def train(self, loader):
                for x in loader:
                    self.global_iter += 1
                    C = min(self.C_max, self.C_max / self.C_stop * self.global_iter)
                    self.loss_fn(x.cuda(), C).backward()
    """, select=["CG404"]) == [(10, "CG404")]


def test_a_capture_that_first_runs_a_model_stored_from_eval_has_no_warm_up():
    # ``self.model = model.eval()``: only a torch module has .eval(); its first run is in the capture
    assert _codes("""
        import torch

        class Decoder:
            def __init__(self, model, batch):
                self.model, self.batch = model.eval(), batch
                self.static_q = torch.zeros(batch, 32, dtype=torch.long, device="cuda")
                self.graph = None

            @torch.inference_mode()
            def capture(self):
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.static_out = self.model(self.static_q)

            @torch.inference_mode()
            def retrieve(self, ids):
                if self.graph is None:
                    self.capture()
                self.static_q.copy_(ids)
                self.graph.replay()
                return self.static_out.clone()
    """, select=["CG508"]) == [(12, "CG508")]


def test_a_setting_computed_from_number_parameters_and_set_again_on_each_adapter_is_a_python_number():
    # ``self.scaling = alpha / r`` (number defaults), then ``layer.scaling = cfg["lora_alpha"] / layer.r`` per request
    assert _codes("""
        import torch
        from torch import nn

        class LoraLinear(nn.Module):
            def __init__(self, base, r=16, alpha=32):
                super().__init__()
                self.base, self.r = base, r
                self.lora_A = nn.Linear(base.in_features, r, bias=False)
                self.lora_B = nn.Linear(r, base.out_features, bias=False)
                self.scaling = alpha / r

            def forward(self, x):
                return self.base(x) + self.lora_B(self.lora_A(x)) * self.scaling

        class Server:
            def __init__(self, model):
                self.model = model
                self.layers = {n: m for n, m in model.named_modules() if isinstance(m, LoraLinear)}
                self.fwd = torch.compile(self.model.forward, mode="reduce-overhead")

            def activate(self, cfg):
                for name, layer in self.layers.items():
                    layer.scaling = cfg["lora_alpha"] / layer.r

            def score(self, ids, cfg):
                self.activate(cfg)
                return self.fwd(ids).clone()
    """, select=["CG404"]) == [(13, "CG404")]


def test_an_optimizer_made_capturable_by_a_setting_is_not_reported_and_a_literal_false_is():
    source = """
        import torch

        def train(model, x, use_graphs, flag):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=use_graphs)
            off = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=False)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x).sum().backward()
                opt.step()
                off.step()
    """
    assert _codes(source, select=["CG502"]) == [(10, "CG502")]


def test_a_capture_method_called_by_the_method_that_replays_runs_on_the_default_stream():
    # ``push`` captures lazily (``self.capture()``) and replays: nothing sets a side stream on the way
    source = """
        import torch

        class Runner:
            def __init__(self, model):
                self.model, self.graph = model, None
                self.x = torch.zeros(8, device="cuda")

            def capture(self):
                for _ in range(3):
                    self.model(self.x)
                self.graph = torch.cuda.CUDAGraph()
                self.graph.capture_begin()
                self.out = self.model(self.x)
                self.graph.capture_end()

            def capture_on(self, stream):
                with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):
                    self.out = self.model(self.x)

            def push(self, x):
                if self.graph is None:
                    self.capture()
                self.x.copy_(x)
                self.graph.replay()
                return self.out.clone()

            def push_side(self, x, side):
                with torch.cuda.stream(side):
                    self.capture_on(side)
                self.graph.replay()
    """
    assert _codes(source, select=["CG603"]) == [(12, "CG603")]


def test_a_setting_taken_from_the_call_in_a_runner_that_captures_lazily_changes_between_replays():
    # ``__call__`` sets self.step, captures under ``if self.graph is None:`` and replays, on every call;
    # what it builds inside that if (the graph itself) runs once and is no change
    source = """
        import torch

        class Runner:
            def __init__(self, model):
                self.model, self.step, self.graph = model, 0, None
                self.x = torch.zeros(8, device="cuda")

            def _update(self):
                return self.model(self.x) * (0.1 * self.step)

            def __call__(self, x, step):
                self.x.copy_(x)
                self.step = step
                if self.graph is None:
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        self._update()
                    torch.cuda.current_stream().wait_stream(s)
                    self.graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self.graph):
                        self.out = self._update()
                self.graph.replay()
                return self.out
    """
    assert _codes(source) == [(9, "CG404")]


def test_a_loop_counter_passed_to_a_function_a_capturing_decorator_wraps_is_baked_into_the_graph():
    source = """
        import functools
        import torch

        def cuda_graphed(fn):
            cache = {}

            @functools.wraps(fn)
            def wrapper(self, *args):
                if "g" not in cache:
                    static = [a.clone() if torch.is_tensor(a) else a for a in args]
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        fn(self, *static)
                    torch.cuda.current_stream().wait_stream(s)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        out = fn(self, *static)
                    cache["g"] = (g, static, out)
                g, static, out = cache["g"]
                for dst, src in zip(static, args):
                    if torch.is_tensor(src):
                        dst.copy_(src)
                g.replay()
                return out
            return wrapper

        class Sampler:
            def __init__(self, model, steps):
                self.model, self.T = model, steps

            @cuda_graphed
            def decode_step(self, tokens, step):
                ratio = (step + 1) / self.T
                return self.model(tokens) * ratio

            def sample(self, tokens):
                for t in range(self.T):
                    tokens = self.decode_step(tokens, t).clone()
                return tokens
    """
    assert _codes(source, select=["CG404"]) == [(34, "CG404")]


def test_blocks_appended_to_a_list_then_held_in_a_module_list_are_followed():
    # ``stages.append(nn.Sequential(down, *[Block(d) ...]))`` then ``self.stages = nn.ModuleList(stages)``
    assert _codes("""
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return x + self.fc(x) * x.abs().max().item()

        class Net(nn.Module):
            def __init__(self, dims=(8, 16)):
                super().__init__()
                stages = []
                for d in dims:
                    stages.append(nn.Sequential(nn.Identity(), *[Block(d) for _ in range(2)]))
                self.stages = nn.ModuleList(stages)

            def forward(self, x):
                for st in self.stages:
                    x = st(x)
                return x

        model = Net().cuda()
        x = torch.randn(4, 8, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(x)
    """, select=["CG101"]) == [(10, "CG101")]



def test_outputs_of_a_capture_wrapper_called_as_an_object_and_kept_in_a_list_are_overwritten():
    # ``net = CUDAGraphModule(model)`` ... ``outs.append(net(x))``: __call__ hands back the static output
    assert _codes("""
        import torch

        class CUDAGraphModule:
            def __init__(self, module):
                self.module, self.graph = module, None

            def _capture(self, x):
                self.static_in = x.clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    self.module(self.static_in)
                torch.cuda.current_stream().wait_stream(s)
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.static_out = self.module(self.static_in)

            def __call__(self, x):
                if self.graph is None:
                    self._capture(x)
                self.static_in.copy_(x)
                self.graph.replay()
                return self.static_out

        def predict(model, batches):
            net = CUDAGraphModule(model)
            outs = []
            for x in batches:
                outs.append(net(x))
            return torch.cat(outs)
    """, select=["CG407"]) == [(29, "CG407")]


def test_outputs_of_the_replay_closure_a_capture_helper_returns_kept_in_a_list_are_overwritten():
    assert _codes("""
        import torch

        def capture_graph(fn, *args):
            static_args = [a.clone() for a in args]
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                fn(*static_args)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = fn(*static_args)

            def replay(*new_args):
                for dst, src in zip(static_args, new_args):
                    dst.copy_(src)
                g.replay()
                return static_out
            return replay

        def forecast(head, windows):
            head_fn = capture_graph(head, windows[0])
            kept, cloned = [], []
            for w in windows:
                kept.append(head_fn(w))
                cloned.append(head_fn(w).clone())
            return kept, cloned
    """, select=["CG407"]) == [(25, "CG407")]


def test_a_sequence_the_decode_loop_makes_longer_with_cat_changes_shape_between_compiled_calls():
    # ``idx = torch.cat([idx, nxt], dim=1)``: the compiled model sees a longer prefix each call (up to the
    # window); the last token alone (``idx[:, -1:]``) keeps one shape
    assert _codes("""
        import torch

        def generate(model, idx, steps, block_size=256):
            cmodel = torch.compile(model, mode="reduce-overhead")
            for _ in range(steps):
                logits = cmodel(idx[:, -block_size:])
                nxt = torch.multinomial(logits[:, -1].softmax(-1), 1)
                idx = torch.cat([idx, nxt], dim=1)
            return idx

        def step_last(model, idx, steps):
            cmodel = torch.compile(model, mode="reduce-overhead")
            for _ in range(steps):
                logits = cmodel(idx[:, -1:])
                idx = torch.cat((idx, logits.argmax(-1)), dim=1)
            return idx
    """, select=["CG206"]) == [(6, "CG206")]


def test_an_optimizer_a_nested_step_function_reads_from_its_enclosing_function_is_known():
    # ``def step(): ... opt.step()`` inside ``main``, captured: ``opt`` is the enclosing function's Adam
    source = """
        import torch

        def main(model, x):
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)

            def step():
                opt.zero_grad(set_to_none=True)
                model(x).sum().backward()
                opt.step()

            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step()
            for _ in range(10):
                g.replay()
                sched.step()
    """
    assert _codes(source, select=["CG502", "CG404"]) == [(10, "CG502"), (22, "CG404")]


def test_a_tensor_indexed_by_a_comparison_of_a_value_of_unknown_type_selects_rows():
    # ``x[e == 0]`` where ``e`` comes from an untyped helper: a mask (a NumPy one would select rows too)
    source = """
        import torch

        @torch.compile(mode="reduce-overhead")
        def plan(x: torch.Tensor, gate):
            e = gate(x)
            first = x[e == 0]
            kept = x[e.argmax(-1)]
            named = x["key" == "key"] if False else x
            return first.sum() + kept.sum() + named.sum()
    """
    assert _codes(source, select=["CG203"]) == [(6, "CG203")]


def test_capturing_on_the_current_stream_with_no_side_stream_in_view_is_the_default_stream():
    # a helper's ``stream=torch.cuda.current_stream()``: reported unless a side stream is set around it or
    # around a call of it
    source = """
        import torch

        def capture(graph, fn, pool=None):
            with torch.cuda.graph(graph, pool=pool, stream=torch.cuda.current_stream()):
                return fn()

        def capture_on_side(graph, fn):
            with torch.cuda.graph(graph, stream=torch.cuda.current_stream()):
                return fn()

        class Trainer:
            def step(self, fn):
                self.g = torch.cuda.CUDAGraph()
                self.out = capture(self.g, fn)

            def step_side(self, fn):
                side = torch.cuda.Stream()
                with torch.cuda.stream(side):
                    self.out = capture_on_side(torch.cuda.CUDAGraph(), fn)
    """
    assert _codes(source, select=["CG603"]) == [(4, "CG603")]


def test_keywords_to_graphed_layers_returned_as_parts_of_the_graphed_tuple_and_looped_over():
    # ``return graphed[0], list(graphed[1:-1]), graphed[-1]`` then ``for layer in layers: layer(h, adj=adj)``
    assert _codes("""
        import torch

        def build(embed, layers, readout, samples):
            graphed = torch.cuda.make_graphed_callables((embed,) + tuple(layers) + (readout,), samples)
            return graphed[0], list(graphed[1:-1]), graphed[-1]

        def train(embed, layers, readout, samples, x, adj):
            embed, layers, readout = build(embed, layers, readout, samples)
            h = embed(x)
            for layer in layers:
                h = layer(h, adj=adj)
            return readout(h)
    """, select=["CG511"]) == [(11, "CG511")]


def test_keywords_to_blocks_graphed_in_place_from_a_models_list_are_found_in_the_models_forward():
    assert _codes("""
        import torch
        from torch import nn

        class Model(nn.Module):
            def __init__(self, d=64, n=4):
                super().__init__()
                self.blocks = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
                self.bias = torch.zeros(d, device="cuda")

            def forward(self, x):
                for blk in self.blocks:
                    x = blk(x, bias=self.bias)
                return x

        def graph(model: Model, x):
            samples = tuple((x.clone().requires_grad_(),) for _ in model.blocks)
            graphed = torch.cuda.make_graphed_callables(tuple(model.blocks), samples)
            for i, g in enumerate(graphed):
                model.blocks[i] = g
            return model
    """, select=["CG511"]) == [(12, "CG511")]


def test_keywords_to_callables_graphed_at_the_top_of_a_script_are_found_in_its_functions():
    assert _codes("""
        import torch

        head = torch.nn.Linear(8, 1).cuda()
        s_z = torch.randn(4, 8, device="cuda", requires_grad=True)
        g_head = torch.cuda.make_graphed_callables(head, (s_z,))

        def score(z):
            return torch.sigmoid(g_head(z))

        def score_named(z):
            return torch.sigmoid(g_head(input=z))
    """, select=["CG511"]) == [(11, "CG511")]


def test_an_uncalled_function_taking_the_graphed_callables_under_their_name_is_checked():
    # ``def eval_step(graphed, x)`` with no caller in view, beside ``graphed = make_graphed_callables(...)``;
    # ``model`` is also bound to other things in the file, so ``check(model, x)`` says nothing
    assert _codes("""
        import torch

        def build(blocks, samples):
            graphed = torch.cuda.make_graphed_callables(tuple(blocks), samples)
            return list(graphed)

        def train(blocks, samples, x):
            graphed = build(blocks, samples)
            model = blocks[0]
            for g in graphed:
                x = g(x)
            return model(x)

        @torch.no_grad()
        def eval_step(graphed, x):
            for g in graphed:
                x = g(x=x)
            return x

        def check(model, x):
            return model(x=x)
    """, select=["CG511"]) == [(17, "CG511")]


def test_python_data_made_a_gpu_tensor_is_a_host_sync_and_a_host_array_a_pageable_copy():
    # the labelled sets' convention (heldout4's table): torch.tensor(list) is host-sync, as_tensor(array) pinned-memory
    result = check_source(textwrap.dedent("""
        import numpy as np
        import torch

        table = np.ones(3, dtype=np.float32)
        x = torch.randn(3, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            w = torch.tensor([0.5, 2.0, 1.0], device="cuda")
            t = torch.as_tensor(table, device="cuda")
            y = x * w * t
    """).lstrip("\n"))
    assert [(f.line, f.code, f.category) for f in result.findings if f.code in ("CG301", "CG302")] == [
        (8, "CG301", "host-sync"), (9, "CG302", "pinned-memory")]


def test_a_step_function_handed_to_a_capturing_class_constructor_is_captured():
    # ``GraphedStep(train_step, x, y)``: the class's __init__ captures ``step_fn(*static_args)``
    assert _codes("""
        import torch

        class GraphedStep:
            def __init__(self, step_fn, *static_args):
                self.step_fn, self.static_args = step_fn, static_args
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    step_fn(*static_args)
                torch.cuda.current_stream().wait_stream(s)
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = step_fn(*static_args)

        def train_step(x, y):
            loss = (x - y).pow(2).mean()
            print("loss", loss.item())
            return loss

        x = torch.randn(8, device="cuda")
        y = torch.randn(8, device="cuda")
        step = GraphedStep(train_step, x, y)
    """, select=["CG101"]) == [(17, "CG101")]


def test_a_compiled_function_called_with_cpu_then_gpu_tensors_keeps_its_gpu_outputs_in_view():
    # the cudagraph-trees docs example after a CPU call: the GPU call's kept output is overwritten, the CPU one is not
    assert _codes("""
        import torch

        @torch.compile(mode="reduce-overhead")
        def my_model(x):
            return torch.matmul(x, x)

        xc = torch.randn(10, 10)
        y1 = my_model(xc)
        y2 = my_model(xc)
        print(y1)

        x = torch.randn(10, 10, device="cuda")
        y1 = my_model(x)
        y2 = my_model(x)
        print(y1)
    """, select=["CG407"]) == [(15, "CG407")]


def test_a_static_input_a_capture_helper_returns_and_the_caller_rebinds_before_replay():
    assert _codes("""
        import torch

        def capture_step(model, opt):
            static_input = torch.zeros(8, 16, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                model(static_input).sum().backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_loss = model(static_input).sum()
                static_loss.backward()
            return g, static_input, static_loss

        def train(model, opt, batches):
            g, static_input, static_loss = capture_step(model, opt)
            for data in batches:
                static_input.copy_(data)
                g.replay()
            for data in batches:
                static_input = data.cuda(non_blocking=True)
                g.replay()
            g, static_input, static_loss = capture_step(model, opt)
    """, select=["CG405"]) == [(22, "CG405")]


def test_a_capture_context_on_the_current_stream_held_in_a_name_is_the_default_stream():
    assert _codes("""
        import contextlib
        import torch

        @contextlib.contextmanager
        def graph_capture(graph, pool=None):
            stream = torch.cuda.current_stream()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                yield graph
    """, select=["CG603"]) == [(7, "CG603")]


def test_a_tensor_made_in_the_call_with_a_size_the_loop_changes_changes_shape():
    # ``for n in (16, 24, 32): f(torch.randn(n, n))``: a loop over written numbers gives a new size each call
    assert _codes("""
        import torch

        @torch.compile(mode="reduce-overhead")
        def my_model(x):
            return torch.matmul(x, x)

        for n in (16, 24, 32):
            out = my_model(torch.randn(n, n, device="cuda"))
            print(n, out.norm().item())
        for _ in range(3):
            out = my_model(torch.randn(16, 16, device="cuda"))
    """, select=["CG206"]) == [(8, "CG206")]


def test_a_model_built_once_by_a_lazy_singleton_getter_is_followed_into_a_capture():
    # ``global _MODEL; if _MODEL is None: _MODEL = Net().cuda().eval(); return _MODEL``
    assert _codes("""
        import torch
        from torch import nn

        _MODEL = None

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return self.fc(x) * x.abs().max().item()

        def _get_model():
            global _MODEL
            if _MODEL is None:
                _MODEL = Net().cuda().eval()
            return _MODEL

        def capture(x):
            model = _get_model()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = model(x)
            return g, y
    """, select=["CG101"]) == [(12, "CG101")]


def test_a_settings_entry_an_uncalled_replaying_method_sets_from_its_argument_changes_between_replays():
    # a UI node's ``upscale(self, image, sharpen)``: ``SETTINGS["sharpen"] = sharpen``, then a lazy capture and a replay
    assert _codes("""
        import torch

        SETTINGS = {"sharpen": 0.35}
        GRAPHS = {}

        def _capture(model, h, w):
            static_in = torch.zeros(1, 3, h, w, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                model(static_in)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = model(static_in) * SETTINGS["sharpen"]
            return g, static_in, static_out

        class Upscale:
            def upscale(self, model, image, sharpen):
                SETTINGS["sharpen"] = sharpen
                key = tuple(image.shape[-2:])
                if key not in GRAPHS:
                    GRAPHS[key] = _capture(model, *key)
                g, static_in, static_out = GRAPHS[key]
                outs = []
                for frame in image:
                    static_in.copy_(frame)
                    g.replay()
                    outs.append(static_out.clone())
                return outs
    """, select=["CG404"]) == [(15, "CG404")]


def test_a_cache_object_built_by_a_lazy_getter_is_not_followed_into_a_capture():
    # Megatron-LM's ``get_global_GTP_cache()`` pattern: a cache's bookkeeping at capture is by design
    assert _codes("""
        import torch

        _CACHE = None

        class BufferCache:
            def __init__(self):
                self.total_bytes = 0

            def get(self, n):
                self.total_bytes += n
                return torch.empty(n, device="cuda")

        def get_cache():
            global _CACHE
            if _CACHE is None:
                _CACHE = BufferCache()
            return _CACHE

        def capture(x):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                buf = get_cache().get(16)
                y = x * 2
            return g, y
    """, select=["CG402"]) == []


def test_a_settings_dict_a_callback_updates_changes_the_entries_a_compiled_function_reads():
    # an engine plugin's ``def on_settings(seed, octaves): WORLD.update(...)`` runs between calls
    assert _codes("""
        import torch

        WORLD = {"octaves": 4, "roughness": 0.5}

        @torch.compile(mode="reduce-overhead")
        def terrain(noise):
            h, amp = torch.zeros_like(noise), 1.0
            for _ in range(WORLD["octaves"]):
                h = h + amp * noise
                amp *= 0.5
            return h

        def on_settings(octaves, roughness):
            WORLD.update(octaves=octaves, roughness=roughness)

        def generate(noise):
            return terrain(noise).clone()
    """, select=["CG404"]) == [(8, "CG404")]


def test_a_compiled_output_kept_in_a_list_inside_a_module_level_dict_outlives_the_call():
    assert _codes("""
        import torch

        UI = {"frames": []}

        @torch.compile(mode="reduce-overhead")
        def gen(z):
            return torch.tanh(z @ z.T)

        def show(z, record=False):
            img = gen(z)
            if record:
                UI["frames"].append(img)
                UI["frames"].append(img.clone())
            return img.cpu()
    """, select=["CG407"]) == [(12, "CG407")]


def test_a_model_put_on_a_namespace_object_above_the_capture_is_followed():
    # ``st = _GraphState`` ... ``st.net = Net().cuda()`` then ``st.net(st.static_in)`` captured
    assert _codes("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return self.fc(x) * x.abs().max().item()

        class _GraphState:
            net = None
            graph = None

        def ensure_graph():
            st = _GraphState
            if st.net is None:
                st.net = Net().cuda().eval()
            st.static_in = torch.zeros(4, 8, device="cuda")
            st.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(st.graph):
                st.static_out = st.net(st.static_in)
            return st
    """, select=["CG101"]) == [(10, "CG101")]


def test_a_graph_output_kept_in_a_global_and_appended_by_the_replaying_callback_is_overwritten():
    assert _codes("""
        import torch

        model = torch.nn.Linear(8, 8).cuda()
        static_in = torch.zeros(4, 8, device="cuda")
        graph = None
        history = []

        def _capture():
            global graph, static_out
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                model(static_in)
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = model(static_in)

        def stylize(x, keep):
            if graph is None:
                _capture()
            static_in.copy_(x)
            graph.replay()
            if keep:
                history.append(static_out)
            return static_out.clone()
    """, select=["CG407"]) == [(25, "CG407")]


def test_a_learning_rate_helper_handed_the_optimizer_in_the_loop_of_a_compiled_step_changes_its_groups():
    # MAE/DeiT's ``adjust_learning_rate(optimizer, epoch)`` called before each compiled ``opt_step()``
    assert _codes("""
        import torch

        def adjust_learning_rate(optimizer, epoch):
            lr = 1e-3 * min(1.0, epoch / 5)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr

        def train(model, loader, epochs):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            opt_step = torch.compile(optimizer.step, mode="reduce-overhead")
            for epoch in range(epochs):
                for x in loader:
                    adjust_learning_rate(optimizer, epoch)
                    model(x).sum().backward()
                    opt_step()
                    optimizer.zero_grad()
    """, select=["CG404"]) == [(6, "CG404")]


def test_a_setter_method_changing_the_groups_of_an_optimizer_whose_step_the_class_compiles():
    assert _codes("""
        import torch

        class Trainer:
            def __init__(self, model, lr=1e-4):
                self.model = model
                self.opt = torch.optim.AdamW(model.parameters(), lr=lr)
                self.opt_step = torch.compile(self.opt.step, mode="max-autotune")
                for g in self.opt.param_groups:
                    g["weight_decay"] = 0.01

            def set_lr(self, lr):
                for g in self.opt.param_groups:
                    g["lr"] = lr

            def train_step(self, x):
                self.model(x).sum().backward()
                self.opt_step()
                self.opt.zero_grad(set_to_none=True)
    """, select=["CG404"]) == [(13, "CG404")]


def test_a_graph_output_cached_in_a_tuple_entry_and_appended_in_the_callers_replay_loop_is_overwritten():
    source = """
        import torch

        GRAPHS = {}

        def graph_for(model, h):
            if h not in GRAPHS:
                x = torch.zeros(1, h, device="cuda")
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = model(x)
                GRAPHS[h] = (g, x, out)
            return GRAPHS[h]

        def run(model, frames):
            g, x, out = graph_for(model, frames.shape[-1])
            kept, copied = [], []
            for frame in frames:
                x.copy_(frame)
                g.replay()
                kept.append(out)
                copied.append(out.clone())
            return kept, copied
    """
    assert _codes(source, select=["CG407"]) == [(20, "CG407")]


_BUCKET_RUNNER = """
    import torch

    class Runner:
        def __init__(self, model):
            self.model = model
            self.graphs, self.inputs, self.outputs = {}, {}, {}
            self.tokens = torch.zeros(4, 8, device="cuda")

        def _run(self, bs):
            return self.model(self.inputs[bs]) + self.tokens[:bs].sum()

        def capture(self):
            for bs in (1, 2, 4):
                self.inputs[bs] = torch.zeros(bs, 8, device="cuda")
                self.graphs[bs] = g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    self.outputs[bs] = self._run(bs)

        def add_bucket(self, bs):
            self.inputs[bs] = torch.zeros(bs, 8, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.outputs[bs] = self._run(bs)
            self.graphs[bs] = g

        def admit(self, slot, q):
            self.tokens[slot] = torch.ones(8, device="cuda") * q

        def reset(self, bs):
            self.inputs[bs] = torch.zeros(bs, 8, device="cuda")

        def infer(self, x):
            bs = x.shape[0]
            self.inputs[bs] = x
            self.graphs[bs].replay()
            return self.outputs[bs].clone()
"""


def test_an_entry_of_a_container_of_static_inputs_rebound_by_the_replaying_method_or_replaced_by_another():
    # the graph is kept through a chained assignment; the capture reads the entries in a method it runs
    found = _codes(_BUCKET_RUNNER, select=["CG405"])
    assert found == [(30, "CG405"), (34, "CG405")]  # reset() and infer(); not add_bucket (a new capture), not admit


def test_writes_into_a_tensor_attribute_are_not_container_entries():
    source = _BUCKET_RUNNER.replace("self.inputs[bs] = x", "self.inputs[bs].copy_(x)").replace(
        "self.inputs[bs] = torch.zeros(bs, 8, device=\"cuda\")\n\n", "pass\n\n")
    assert _codes(source, select=["CG405"]) == []


def test_functions_of_a_dispatch_table_are_reached_whichever_key_is_looked_up():
    source = """
        import torch

        FEATURES = {}

        def feature(name):
            def deco(fn):
                FEATURES[name] = fn
                return fn
            return deco

        @feature("bucket")
        def bucket(x):
            return torch.bucketize(x, torch.tensor([0.5, 1.0], device=x.device))

        def scale(x):
            return x * float(x.max())

        TRANSFORMS = {"scale": scale}

        class Runner:
            def __init__(self, names):
                self.names = names
                self.stages = {"sum": self._sum}

            def _sum(self, x):
                return x.sum().item()

            def run(self, x):
                cols = [FEATURES[n](x) for n in self.names] + [TRANSFORMS[n](x) for n in self.names]
                return torch.stack(cols), self.stages["sum"](x)

        x = torch.zeros(4, device="cuda")
        r = Runner(["bucket"])
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = r.run(x)
    """
    assert sorted(_codes(source)) == [(13, "CG301"), (16, "CG103"), (26, "CG101")]


def test_a_property_read_in_the_region_runs_its_getter_there():
    source = """
        import functools
        import torch

        class Scaled(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            @property
            def gain(self):
                return float(self.lin.weight.abs().max())

            @functools.cached_property
            def width(self):
                return 4

            def forward(self, x):
                return self.lin(x) * self.gain + self.width

        model = Scaled().cuda()
        x = torch.zeros(2, 4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(x)
    """
    assert _codes(source, ignore=["CG508"]) == [(11, "CG103")]


def test_the_wrapper_a_file_decorator_puts_around_a_compiled_method_runs_in_the_region():
    source = """
        import functools
        import time
        import torch

        def timed(fn):
            @functools.wraps(fn)
            def wrapper(self, *args):
                start = time.perf_counter()
                out = fn(self, *args)
                return out
            return wrapper

        def retry(times):
            def deco(fn):
                def wrapper(*args):
                    return fn(*args).tolist()
                return wrapper
            return deco

        class Stepper:
            def __init__(self):
                self.step = torch.compile(self._step, mode="reduce-overhead")

            @timed
            @retry(2)
            def _step(self, x):
                return x * 2
    """
    assert _codes(source) == [(8, "CG411"), (16, "CG102")]


def test_an_object_chosen_between_a_class_and_its_subclass_runs_either_method():
    source = """
        import torch

        class Gate:
            def apply(self, x):
                if (x > 1).any():
                    x = x * 0.5
                return x

        class SoftGate(Gate):
            def apply(self, x):
                return x.clamp(max=1.0).sum().item()

        class Filter:
            def __init__(self, gate):
                self.gate = gate
            def step(self, x):
                return self.gate.apply(x)

        def run(robust, x):
            f = Filter(SoftGate() if robust else Gate())
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = f.step(x)
            return g, y
    """
    expected = [(5, "CG201"), (11, "CG101")]
    assert _codes(source, ignore=["CG508"]) == expected
    assert _codes(source.replace("SoftGate() if robust else Gate()", "Gate() if robust else SoftGate()"),
                  ignore=["CG508"]) == expected


def test_methods_the_class_puts_in_a_list_it_calls_in_a_loop_are_reached():
    source = """
        import torch

        class Hooks:
            def __init__(self):
                self.hooks = [self._peak]
                self.hooks.append(self._mean)

            def fire(self, x):
                for h in self.hooks:
                    h(x)

            @staticmethod
            def _peak(x):
                return float(x.max())

            def _mean(self, x):
                return x.mean().item()

        @torch.compile(mode="reduce-overhead")
        def step(x, hooks: Hooks):
            hooks.fire(x)
            return x * 2
    """
    assert _codes(source) == [(14, "CG103"), (17, "CG101")]


def test_a_caching_autocast_entered_by_a_helper_around_the_graphing_call():
    source = """
        import contextlib
        import torch

        @contextlib.contextmanager
        def mixed_precision():
            with torch.autocast("cuda", dtype=torch.float16):
                yield

        class Amp:
            def context(self):
                return torch.autocast("cuda", dtype=torch.float16)

        class NoCache:
            def context(self):
                return torch.autocast("cuda", dtype=torch.float16, cache_enabled=False)

        def build(model, x, amp: Amp, safe: NoCache):
            with mixed_precision():
                a = torch.cuda.make_graphed_callables(model, (x,))
            with amp.context():
                b = torch.cuda.make_graphed_callables(model, (x,))
            with safe.context():
                c = torch.cuda.make_graphed_callables(model, (x,))
            return a, b, c
    """
    assert _codes(source, select=["CG501"]) == [(6, "CG501"), (11, "CG501")]


def test_a_hook_a_helper_object_registers_on_the_module_it_is_handed_before_graphing():
    source = """
        import torch

        class Probe:
            def __init__(self):
                self.seen = []
            def install(self, module):
                return module.register_forward_pre_hook(lambda m, args: self.seen.append(args[0].shape))
            def count(self, module):
                return sum(p.numel() for p in module.parameters())

        def build(model, probe: Probe, x):
            probe.install(model.blocks[0])
            probe.count(model)
            graphed = torch.cuda.make_graphed_callables(tuple(model.blocks), ((x,), (x,)))
            return graphed
    """
    assert _codes(source, select=["CG503"]) == [(7, "CG503"), (14, "CG503")]


def test_a_settings_object_handed_to_the_capturing_class_and_changed_in_the_loop_that_runs_it():
    source = """
        from dataclasses import dataclass
        import torch

        @dataclass
        class Config:
            weight: float = 1.0
            def blend(self, x):
                return x * self.weight

        class Head(torch.nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.cfg, self.lin = cfg, torch.nn.Linear(8, 8)
            def forward(self, x):
                return self.cfg.blend(self.lin(x))

        class Trainer:
            def __init__(self, cfg):
                self.head = Head(cfg).cuda()
                x = torch.randn(4, 8, device="cuda", requires_grad=True)
                self.graphed = torch.cuda.make_graphed_callables(self.head, (x,))
            def step(self, x):
                return self.graphed(x).sum()

        def train(batches):
            cfg = Config()
            cfg.weight = 2.0
            trainer = Trainer(cfg)
            for epoch in range(3):
                cfg.weight = 1.0 - 0.3 * epoch
                for x in batches:
                    trainer.step(x)
    """
    assert _codes(source, select=["CG404"]) == [(8, "CG404")]
    # set up once, before the object is handed over: not a change between replays
    assert _codes(source.replace("                cfg.weight = 1.0 - 0.3 * epoch\n", ""), select=["CG404"]) == []


def test_a_settings_object_handed_through_a_holder_to_the_compiling_class_and_changed_between_calls():
    source = """
        from dataclasses import dataclass
        import torch

        @dataclass
        class Config:
            weight: float = 1.0
            def blend(self, x):
                return x * self.weight

        class Pipeline:
            def __init__(self, cfg):
                self.cfg = cfg
                self.score = torch.compile(self._score, mode="reduce-overhead")
            def _score(self, x):
                return self.cfg.blend(x)

        class Ranker:
            def __init__(self, pipeline):
                self.p = pipeline
            def rank(self, x):
                return self.p.score(x).clone()

        def serve(traffic):
            cfg = Config()
            ranker = Ranker(Pipeline(cfg))
            for i, x in enumerate(traffic):
                ranker.rank(x)
                cfg.weight = 0.1 * i
    """
    assert _codes(source, select=["CG404"]) == [(8, "CG404")]


def test_a_counter_read_with_getattr_and_a_default_is_a_host_counter():
    source = """
        import torch

        class Ranker(torch.nn.Module):
            def forward(self, x):
                self.served = getattr(self, "served", 0) + 1
                self.name = getattr(self, "name", "ranker")
                return x * 2

        model = Ranker().cuda()
        x = torch.zeros(4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(x)
    """
    assert _codes(source, select=["CG402"]) == [(5, "CG402")]


def test_a_runner_input_replaced_through_the_runner_object_by_a_function_of_the_file():
    source = """
        import torch

        class Step:
            def __init__(self, model):
                self.model = model
                self.items = torch.zeros(8, 4, device="cuda")

            def capture(self):
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.out = self.model(self.items)

        def swap_table(step, table):
            step.items = table.cuda()

        def refill(step, table):
            step.items.copy_(table)

        def serve(model, days):
            step = Step(model)
            step.items = days[0].cuda()
            step.capture()
            for table in days:
                swap_table(step, table)
                refill(step, table)
                step.g.replay()
    """
    assert _codes(source, select=["CG405"]) == [(14, "CG405")]


def test_an_output_of_a_function_compiled_by_a_held_object_kept_past_its_next_compiled_call():
    source = """
        import torch

        class Pipeline:
            def __init__(self):
                self.score = torch.compile(self._score, mode="reduce-overhead")
                self.diversify = torch.compile(self._mmr, mode="reduce-overhead")
            def _score(self, q):
                return q * 2
            def _mmr(self, d, rel):
                return d + rel

        class Reranker:
            def __init__(self, pipeline):
                self.p = pipeline
            def rerank(self, q, d):
                rel = self.p.score(q)
                div = self.p.diversify(d, rel)
                return div, rel.sum()
            def rerank_safe(self, q, d):
                rel = self.p.score(q).clone()
                div = self.p.diversify(d, rel)
                return div, rel.sum()

        def serve(traffic):
            ranker = Reranker(Pipeline())
            return [ranker.rerank(q, d) for q, d in traffic]
    """
    assert _codes(source, select=["CG407"]) == [(18, "CG407")]


def test_a_graph_made_once_and_captured_again_when_the_input_shape_changes():
    source = """
        import torch

        class Runner:
            def __init__(self, model):
                self.model = model
                self.g = torch.cuda.CUDAGraph()

            def build(self, n):
                self.x = torch.zeros(8, n, device="cuda")
                with torch.cuda.graph(self.g):
                    self.out = self.model(self.x)

            def solve(self, x):
                if not hasattr(self, "x") or x.shape[1] != self.x.shape[1]:
                    self.build(x.shape[1])
                self.x.copy_(x)
                self.g.replay()
                return self.out.clone()
    """
    assert _codes(source, select=["CG509"]) == [(10, "CG509")]
    first_time_only = source.replace(' or x.shape[1] != self.x.shape[1]', '')
    assert _codes(first_time_only, select=["CG509"]) == []


def test_graphed_callables_returned_by_a_builder_made_in_place_and_kept_on_self():
    source = """
        import torch

        class Builder:
            def __init__(self, blocks):
                self.blocks = blocks
            def build(self, x):
                graphed = torch.cuda.make_graphed_callables(tuple(self.blocks), ((x,), (x,)))
                return list(graphed), None

        class Scorer:
            def __init__(self, blocks, x):
                self.layers, self.extra = Builder(blocks).build(x)
            def score(self, h, mask):
                for layer in self.layers:
                    h = layer(h, mask=mask)
                return h
    """
    assert _codes(source, select=["CG511"]) == [(15, "CG511")]


def test_a_tuple_written_at_the_top_of_the_module_is_a_constant_to_a_compiled_function():
    source = """
        import numpy as np
        import torch

        CFG = {"edges": (5.0, 20.0, 30.0), "weight": 0.1}
        EDGES = [1.0, 2.0]
        TABLE = np.arange(4.0)

        @torch.compile(mode="reduce-overhead")
        def loss(pred, target):
            a = torch.tensor(CFG["edges"], device=target.device)
            b = torch.tensor(EDGES, device=target.device)
            c = torch.as_tensor(TABLE, device=target.device)
            return (pred - target).pow(2).mean() + a.sum() + b.sum() + c.sum()

        def anneal(epoch):
            CFG["weight"] = 0.1 * epoch
    """
    assert _codes(source, select=["CG301", "CG302"]) == [(12, "CG302")]
    changed = source.replace('CFG["weight"] = 0.1 * epoch', 'CFG["edges"] = (1.0, float(epoch))')
    assert _codes(changed, select=["CG301", "CG302"]) == [(10, "CG301"), (12, "CG302")]


def test_graphed_callables_returned_in_a_nested_tuple_keep_their_names_in_the_caller():
    source = """
        import torch

        def build(enc, head, x, z):
            enc_g, head_g = torch.cuda.make_graphed_callables((enc, head), ((x,), (z,)))
            return (enc, head), (enc_g, head_g), None

        def train(enc, head, x, z, batches):
            (enc, head), (enc_g, head_g), monitor = build(enc, head, x, z)
            for b in batches:
                head_g(enc_g(b), scale=2.0)
    """
    assert _codes(source, select=["CG511"]) == [(10, "CG511")]


def test_a_hook_a_helper_registers_on_each_module_of_the_list_it_is_handed():
    source = """
        import torch

        class Profiler:
            def install(self, layers):
                for i, layer in enumerate(layers):
                    layer.register_forward_pre_hook(lambda m, a: None)

        def graph_model(layers, x, profiler: Profiler):
            profiler.install(layers)
            return torch.cuda.make_graphed_callables(tuple(layers), tuple((x,) for _ in layers))
    """
    assert _codes(source, select=["CG503"]) == [(6, "CG503"), (10, "CG503")]


def test_a_list_field_of_a_settings_dataclass_used_as_an_index_in_a_region():
    source = """
        from dataclasses import dataclass, field
        import torch

        @dataclass
        class Config:
            montage: list = field(default_factory=lambda: [0, 1, 2])
            picks: tuple = (0, 1)
            scale: float = 1.0

        class Net(torch.nn.Module):
            def __init__(self, cfg: Config):
                super().__init__()
                self.montage, self.picks, self.scale = cfg.montage, cfg.picks, cfg.scale
            def forward(self, x):
                return x[:, self.montage] * self.scale + x[:, 0]

        net = Net(Config()).cuda()
        x = torch.zeros(2, 4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = net(x)
    """
    assert _codes(source, select=["CG303"]) == [(15, "CG303")]


def test_numbers_unpacked_from_a_table_of_tuples_by_a_setter_change_between_replays():
    source = """
        import torch

        PRESETS = {"lung": (-600.0, 1500.0), "soft": (40.0, 400.0)}

        class Viewer:
            def __init__(self):
                self.center, self.width = PRESETS["soft"]
                self.x = torch.zeros(4, device="cuda")
                self.g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.g):
                    self.out = (self.x - self.center) / self.width

            def set_preset(self, name):
                self.center, self.width = PRESETS[name]

            def show(self, x):
                self.x.copy_(x)
                self.g.replay()
                return self.out.clone()
    """
    assert _codes(source, select=["CG404"]) == [(11, "CG404"), (11, "CG404")]  # the centre and the width


def test_an_output_read_after_another_compiled_call_in_the_same_loop_iteration():
    source = """
        import torch

        def demo(head, other, clips):
            head_c = torch.compile(head, mode="reduce-overhead")
            other_c = torch.compile(other, mode="reduce-overhead")
            for z in clips:
                logits = head_c(z)
                cal = other_c(z)
                probs = logits.softmax(-1)
                first = head_c(z).clone()
                again = other_c(z)
                both = first + again
    """
    assert _codes(source, select=["CG407"]) == [(9, "CG407")]


def test_parameters_of_the_model_a_compiled_optimizer_step_updates_replaced_by_the_holder():
    source = """
        import torch

        class Client:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self._opt_step = torch.compile(self.opt.step, mode="reduce-overhead")

            def receive(self, state):
                self.model.load_state_dict(state)

            def receive_fast(self, params):
                with torch.no_grad():
                    for p, g in zip(self.model.parameters(), params):
                        p.data = g.clone()
    """
    assert _codes(source, select=["CG405"]) == [(15, "CG405")]


_SCHEDULE_OBJECT = """
    import torch

    class Trainer:
        def __init__(self, model):
            self.model = model.cuda()
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
            self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")

        def step(self, x):
            self.model(x).sum().backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=True)

    class Schedule:
        def __init__(self, holder):
            self.opt = holder.opt

        def on_epoch(self, epoch):
            for g in self.opt.param_groups:
                g["lr"] = 0.05 * (0.5 ** (epoch // 3))

    def fit(model, loader, epochs=12):
        tr = Trainer(model)
        sched = Schedule(tr)
        for epoch in range(epochs):
            for x in loader:
                tr.step(x.cuda())
            sched.on_epoch(epoch)
"""


def test_a_schedule_object_holding_the_compiled_steps_optimizer_changes_its_groups_between_steps():
    assert _codes(_SCHEDULE_OBJECT, select=["CG404"]) == [(20, "CG404")]


def test_a_schedule_object_holding_another_optimizer_is_not_reported():
    other = _SCHEDULE_OBJECT.replace("sched = Schedule(tr)", "sched = Schedule(make_holder())")
    assert _codes(other, select=["CG404"]) == []


def test_a_compiled_output_appended_to_a_list_a_dict_of_the_object_keeps_per_key():
    source = """
        import torch

        class Assessor:
            def __init__(self, model):
                self.run = torch.compile(model, mode="reduce-overhead")
                self.history = {}

            def assess(self, pack_id, x):
                soh = self.run(x)
                self.history.setdefault(pack_id, []).append(soh)
                self.history.setdefault("copies", []).append(soh.clone())
                return soh.clone()
    """
    assert _codes(source, select=["CG407"]) == [(10, "CG407")]


def test_a_module_handed_to_the_graphing_function_and_changed_in_the_loop_that_replays():
    source = """
        import torch

        class Stem(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)
                self.scale = 1.0
            def forward(self, x):
                return self.lin(x) * self.scale

        def graph_model(stem, x):
            return torch.cuda.make_graphed_callables(stem, (x,))

        def main(batches, x):
            stem = Stem().cuda()
            stem.scale = 0.5
            stem_g = graph_model(stem, x)
            for step, b in enumerate(batches):
                stem.scale = 1.0 + 0.5 * min(step / 5000, 1.0)
                stem_g(b).sum().backward()
    """
    assert _codes(source, select=["CG404"]) == [(9, "CG404")]
    set_up_once = source.replace("                stem.scale = 1.0 + 0.5 * min(step / 5000, 1.0)\n", "")
    assert _codes(set_up_once, select=["CG404"]) == []


def test_a_dataclass_runner_filling_its_inputs_in_post_init_is_setting_up_not_replacing():
    source = """
        from dataclasses import dataclass, field
        import torch

        @dataclass
        class Runner:
            model: torch.nn.Module
            graphs: dict = field(default_factory=dict)

            def __post_init__(self) -> None:
                self.bias = torch.zeros(8, device="cuda")

            def build(self) -> None:
                x = torch.zeros(4, 8, device="cuda")
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    y = self.model(x) + self.bias
                self.graphs[4] = (g, x, y)

            def reset_bias(self) -> None:
                self.bias = torch.ones(8, device="cuda")

            def run(self, x):
                g, static_x, y = self.graphs[4]
                static_x.copy_(x)
                g.replay()
                return y.clone()
    """
    assert _codes(source, select=["CG405"]) == [(20, "CG405")]  # reset_bias, not __post_init__


def test_compile_options_bound_with_a_type_annotation_at_the_top_of_the_module():
    source = """
        from typing import Final
        import torch

        CG: Final[dict[str, bool]] = {"triton.cudagraphs": True}

        @torch.compile(options=CG)
        def mask(x: torch.Tensor) -> torch.Tensor:
            return x[x > 0]
    """
    assert _codes(source) == [(8, "CG203")]


def test_an_annotated_local_keeps_the_device_its_value_shows():
    source = """
        import torch
        from torch import Tensor

        def norm_stats() -> tuple[Tensor, Tensor]:
            mean: Tensor = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
            on_gpu: Tensor = torch.zeros(3, device="cuda")
            return mean.to("cuda", non_blocking=True), on_gpu.to("cuda", non_blocking=True)

        x = torch.zeros(2, 3, 4, 4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            m, s = norm_stats()
            y = (x - m) / s
    """
    assert _codes(source, select=["CG302"]) == [(7, "CG302")]


def test_a_caching_autocast_helper_entered_in_the_same_with_as_the_capture():
    source = """
        import contextlib
        import torch

        class Runner:
            def __init__(self, model):
                self.model, self.graph = model, torch.cuda.CUDAGraph()
                self.x = torch.zeros(2, 4, device="cuda")

            @contextlib.contextmanager
            def _precision(self):
                with torch.autocast("cuda", dtype=torch.float16):
                    yield

            def capture(self):
                with self._precision(), torch.cuda.graph(self.graph):
                    self.y = self.model(self.x)
    """
    assert _codes(source, select=["CG501"]) == [(11, "CG501")]


def test_a_caching_autocast_entered_in_the_same_with_as_the_capture():
    source = """
        import torch

        model = torch.nn.Linear(4, 4).cuda()
        x = torch.zeros(2, 4, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.autocast("cuda", dtype=torch.float16), torch.cuda.graph(g):
            y = model(x)
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False), torch.cuda.graph(torch.cuda.CUDAGraph()):
            z = model(x)
    """
    assert _codes(source, select=["CG501"]) == [(6, "CG501")]


_SCRIPT_COMPILED_MODEL = """
    import torch

    class Detrend:
        sigma_clip: float = 3.0

    class Net(torch.nn.Module):
        def __init__(self, detrend):
            super().__init__()
            self.detrend = detrend
            self.lin = torch.nn.Linear(8, 8)
        def forward(self, x):
            return self.lin(x).clamp(-self.detrend.sigma_clip, self.detrend.sigma_clip)

    detrend = Detrend()
    model = Net(detrend).cuda()
    model.forward = torch.compile(model.forward, mode="max-autotune")

    def vet(batches):
        return [model(b).clone() for b in batches]

    if __name__ == "__main__":
        batches = [torch.randn(4, 8, device="cuda") for _ in range(3)]
        detrend.sigma_clip = 3.5
        vet(batches)
        detrend.sigma_clip = 4.0
        vet(batches)
"""


def test_a_settings_object_a_script_compiled_model_was_built_with_changed_after_its_first_use():
    assert _codes(_SCRIPT_COMPILED_MODEL, select=["CG404"]) == [(12, "CG404")]


def test_a_settings_object_set_before_the_script_first_uses_its_compiled_model_is_set_up():
    once = _SCRIPT_COMPILED_MODEL.replace("        detrend.sigma_clip = 4.0\n        vet(batches)\n", "")
    assert once != _SCRIPT_COMPILED_MODEL
    assert _codes(once, select=["CG404"]) == []


def test_an_annotated_compiled_output_kept_across_iterations():
    source = """
        from typing import NamedTuple
        import torch
        from torch import Tensor

        class Decision(NamedTuple):
            logits: Tensor
            label: Tensor

        model = torch.nn.Linear(8, 8).cuda()
        model.forward = torch.compile(model.forward, mode="max-autotune")

        def session(stream: list[Tensor]) -> list[Tensor]:
            history: list[Tensor] = []
            whole, stamp = 0, 0
            for window in stream:
                dec: Tensor = model(window)
                history.append(dec)
            return history
    """
    assert _codes(source, select=["CG407"]) == [(17, "CG407")]


def test_annotated_assignments_in_code_are_read_as_assignments():
    source = """
        import torch
        from torch import Tensor

        class Runner:
            def __init__(self, model: torch.nn.Module) -> None:
                self.x: Tensor = torch.zeros(4, 8, device="cuda")
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out: Tensor = model(self.x)

            def run(self, x: Tensor) -> Tensor:
                self.x.copy_(x)
                self.graph.replay()
                return self.out

        def track(runner: Runner, frames: list[Tensor]) -> list[Tensor]:
            gallery: list[Tensor] = []
            for f in frames:
                emb: Tensor = runner.run(f)
                gallery.append(emb)
            return gallery
    """
    assert _codes(source, select=["CG407"]) == [(20, "CG407")]


def test_a_runner_method_giving_the_captured_models_parameters_new_storage():
    source = """
        import torch

        class Sampler:
            def __init__(self, model):
                self.model = model
                self.x = torch.zeros(4, 8, device="cuda")

            def build(self):
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.out = self.model(self.x)

            def reload(self, state):
                for name, p in self.model.named_parameters():
                    p.data = state[name].cuda()

            def reload_in_place(self, state):
                for name, p in self.model.named_parameters():
                    p.data.copy_(state[name])

            def sample(self):
                self.graph.replay()
                return self.out.clone()
    """
    assert _codes(source, select=["CG405"]) == [(15, "CG405")]
