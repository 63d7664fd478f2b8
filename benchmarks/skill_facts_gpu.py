"""Facts the skill's references state from source, measured on one GPU (one JSON line per fact).

Self-contained (torch and the standard library; cgkit need not be installed), single GPU, about a
minute and a half on an H200. Run it with each torch the references name (2.11 on the GPU machine):

    python benchmarks/skill_facts_gpu.py            # every fact
    python benchmarks/skill_facts_gpu.py --fact NAME

Each line: {"fact": NAME, "ok": bool (the code ran without raising), ...measured values...,
"error": first line of the exception when ok is false, "torch": ..., "device": ...}. For some facts
an error *is* the expected measurement (a check that refuses a call during capture); the docstring
of each fact says what the references expect.

Facts that are expected to fail a capture, and the ones that compile or start NCCL, run in a
process of their own: a failed capture can leave the CUDA context unusable. The others share one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import torch


def _side_warmup(fn, n=3):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(n):
            fn()
    torch.cuda.current_stream().wait_stream(side)


# ---------------------------------------------------------------------------- CUDA RNG in capture


def rng_get_state_in_capture() -> dict:
    """Expected on torch >= 2.10 (pytorch/pytorch#162505): reading the CUDA RNG state and setting it
    back (same seed) inside capture work, and replays still draw new numbers."""
    torch.cuda.manual_seed(1234)
    out = torch.zeros(1024, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        state = torch.cuda.get_rng_state()
        torch.cuda.set_rng_state(state)
        out.copy_(torch.rand(1024, device="cuda"))
    g.replay()
    first = out.clone()
    g.replay()
    torch.cuda.synchronize()
    return {"captured": True, "state_bytes": int(state.numel()), "replays_draw_new_numbers": not torch.equal(first, out)}


def rng_same_seed_in_capture() -> dict:
    """Expected on torch >= 2.10: `torch.cuda.manual_seed(seed it already has)` inside capture is allowed."""
    torch.cuda.manual_seed(77)
    x = torch.zeros(16, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        torch.cuda.manual_seed(77)
        y = x + torch.rand(16, device="cuda")
    g.replay()
    torch.cuda.synchronize()
    return {"captured": True, "finite": bool(torch.isfinite(y).all())}


def rng_new_seed_in_capture() -> dict:
    """Expected: raises `CUDAGeneratorImpl::set_current_seed can be called during stream capture only
    if new seed is the same as the original seed.`"""
    torch.cuda.manual_seed(1)
    x = torch.zeros(16, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        torch.cuda.manual_seed(2)
        _ = x + torch.rand(16, device="cuda")
    return {"captured": True}


def _default_cuda_generator() -> torch.Generator:
    """The current device's default CUDA generator. `torch.cuda.default_generators` stays an empty
    tuple until CUDA is initialised, which a fact run in a fresh process has not done yet."""
    torch.cuda.init()
    return torch.cuda.default_generators[torch.cuda.current_device()]


def rng_clone_state_in_capture() -> dict:
    """Expected: raises `Cannot call CUDAGeneratorImpl::clone_impl during CUDA graph capture`."""
    gen = _default_cuda_generator()
    x = torch.zeros(16, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gen.clone_state()
        _ = x + 1
    return {"captured": True}


def rng_graphsafe_in_capture() -> dict:
    """Expected: `graphsafe_get_state()` / `graphsafe_set_state()` work inside capture."""
    gen = _default_cuda_generator()
    x = torch.zeros(16, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        state = gen.graphsafe_get_state()
        gen.graphsafe_set_state(state)
        y = x + torch.rand(16, device="cuda")
    g.replay()
    torch.cuda.synchronize()
    return {"captured": True, "finite": bool(torch.isfinite(y).all())}


# ---------------------------------------------------------------------------- memory pools


def pool_sharing_order() -> dict:
    """The rule of a shared pool: a later capture's output can sit in an earlier graph's scratch
    block. Expected: when `same_block` is true, replaying g1 after g2 overwrites g2's output
    (`clobbered_if_read_after_other_replay`), and reading it right after its own replay is right."""
    n = 1 << 20
    x1 = torch.randn(n, device="cuda")
    x2 = torch.randn(n, device="cuda")

    def work1():
        t = x1 * 2  # scratch of g1: t and u are freed inside its capture
        u = t + 1
        return u.sum(), {t.data_ptr(), u.data_ptr()}

    def work2():
        return x2 + 1

    _side_warmup(lambda: (work1(), work2()))
    pool = torch.cuda.graph_pool_handle()
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1, pool=pool):
        y1, scratch_ptrs = work1()
    with torch.cuda.graph(g2, pool=pool):
        y2 = work2()
    expected = x2 + 1
    g2.replay()
    g1.replay()
    torch.cuda.synchronize()
    clobbered = not torch.equal(y2, expected)
    g1.replay()
    g2.replay()
    torch.cuda.synchronize()
    right = torch.equal(y2, expected)
    return {"same_block": y2.data_ptr() in scratch_ptrs, "clobbered_if_read_after_other_replay": clobbered,
            "right_if_read_after_own_replay": right}


def pinned_alloc_in_capture() -> dict:
    """Expected on torch >= 2.11: pinned host memory allocated during capture (into the graph's
    private host pool) captures; replays copy what the block holds at replay time."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        host = torch.full((64,), 2.0).pin_memory()
        empty = torch.empty(64, pin_memory=True)
        out = host.to("cuda", non_blocking=True) * 3
    g.replay()
    torch.cuda.synchronize()
    first = float(out[0])
    host.fill_(5.0)
    g.replay()
    torch.cuda.synchronize()
    return {"captured": True, "pinned": bool(host.is_pinned() and empty.is_pinned()), "replay_value": first,
            "after_refilling_the_block": float(out[0])}


def keep_graph_instantiate() -> dict:
    """Expected: `CUDAGraph(keep_graph=True)` keeps the raw graph; `instantiate()` then `replay()` work.
    With `cuda.bindings` installed, the node count of the raw graph too."""
    x = torch.randn(1024, device="cuda")
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        y = x * 2 + 1
    raw = g.raw_cuda_graph()
    g.instantiate()
    exec_handle = g.raw_cuda_graph_exec()
    x.fill_(1.0)
    g.replay()
    torch.cuda.synchronize()
    nodes = None
    try:
        from cuda.bindings import runtime as cudart

        result = cudart.cudaGraphGetNodes(raw, numNodes=0)
        nodes = int(result[-1])
    except Exception as exc:  # noqa: BLE001 - optional package
        nodes = f"not counted: {type(exc).__name__}"
    return {"raw_graph": bool(raw), "raw_exec": bool(exec_handle), "replayed_right": bool(torch.equal(y, x * 2 + 1)),
            "nodes": nodes}


# ---------------------------------------------------------------------------- optimizers, BatchNorm


def _scaler_step(fused: bool) -> dict:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
    ref = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
    ref.load_state_dict(model.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True, fused=fused)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-3, capturable=True, fused=fused)
    scaler, ref_scaler = torch.amp.GradScaler("cuda"), torch.amp.GradScaler("cuda")
    x = torch.randn(32, 64, device="cuda")
    t = torch.randn(32, 1, device="cuda")

    def step(m, o, sc, xs, ts):
        o.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(m(xs), ts)
        sc.scale(loss).backward()
        sc.step(o)
        sc.update()
        return loss

    _side_warmup(lambda: step(model, opt, scaler, x, t))
    for _ in range(3):
        step(ref, ref_opt, ref_scaler, x, t)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(model, opt, scaler, x, t)
    for _ in range(5):
        xs, ts = torch.randn(32, 64, device="cuda"), torch.randn(32, 1, device="cuda")
        x.copy_(xs)
        t.copy_(ts)
        g.replay()
        step(ref, ref_opt, ref_scaler, xs, ts)
    torch.cuda.synchronize()
    diff = max(float((p - q).abs().max()) for p, q in zip(model.parameters(), ref.parameters(), strict=True))
    return {"captured": True, "max_param_diff_vs_eager": diff, "scale": float(scaler.get_scale()),
            "eager_scale": float(ref_scaler.get_scale())}


def grad_scaler_fused_in_capture() -> dict:
    """GradScaler with a fused, capturable AdamW: `step()` takes the fused path (no `_maybe_opt_step`,
    no `.item()`). The references make no claim until this runs: does the whole fp16 step capture,
    and does it match eager?"""
    return _scaler_step(fused=True)


def grad_scaler_default_in_capture() -> dict:
    """Expected: fails (the non-fused path reads found-inf with `.item()` in `_maybe_opt_step`)."""
    return _scaler_step(fused=False)


def _batchnorm(momentum) -> dict:
    bn = torch.nn.BatchNorm1d(8, momentum=momentum).cuda().train()
    x = torch.randn(16, 8, device="cuda")
    _side_warmup(lambda: bn(x))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = bn(x)
    g.replay()
    torch.cuda.synchronize()
    return {"captured": True, "finite": bool(torch.isfinite(y).all())}


def batchnorm_momentum_none_in_capture() -> dict:
    """Expected: fails (`float(self.num_batches_tracked)` is a host read during capture)."""
    return _batchnorm(None)


def batchnorm_momentum_default_in_capture() -> dict:
    """Expected: captures (a numeric momentum reads nothing on the host)."""
    return _batchnorm(0.1)


# ---------------------------------------------------------------------------- CUDAGraph Trees


def cudagraph_trees_memory_per_shape() -> dict:
    """`reduce-overhead` with a new input shape per step: `torch.cuda.memory_reserved()` after each
    new shape is recorded (outputs cloned and dropped), to size the growth per recorded shape."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
    rows = []
    base = torch.cuda.memory_reserved()
    with torch.no_grad():
        for batch in (16, 32, 64, 128, 256):
            x = torch.randn(batch, 1024, device="cuda")
            for _ in range(3):  # warm-up, record, replay
                y = compiled(x).clone()
            torch.cuda.synchronize()
            del y
            rows.append({"batch": batch, "reserved_mb": round((torch.cuda.memory_reserved() - base) / 2**20, 1),
                         "allocated_mb": round(torch.cuda.memory_allocated() / 2**20, 1)})
    from torch._dynamo.utils import counters

    return {"rows": rows, "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


def _static_address(mark: bool) -> dict:
    from torch._dynamo.utils import counters

    cache = torch.zeros(8, 4096, 256, device="cuda")  # 32 MB, written in place every call
    big = torch.randn(64, 1 << 20, device="cuda")     # 256 MB, read every call
    if mark:
        torch._dynamo.mark_static_address(cache)
        torch._dynamo.mark_static_address(big)

    @torch.compile(mode="reduce-overhead")
    def decode(x, cache, pos):
        cache.index_copy_(1, pos, x)
        return cache.sum(dim=1)

    @torch.compile(mode="reduce-overhead")
    def read(v, big):
        return big[:, :4096].sum(dim=0) + v

    reference = cache.clone()
    before = torch.cuda.memory_reserved()
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    v = torch.randn(4096, device="cuda")
    for step in range(8):  # warm-up and recording
        x = torch.randn(8, 1, 256, device="cuda")
        pos.fill_(step)
        decode(x, cache, pos).clone()
        reference.index_copy_(1, pos, x)
        read(v, big).clone()
    torch.cuda.synchronize()
    timings = {}
    for name, call in (("decode", lambda: decode(x, cache, pos)), ("read", lambda: read(v, big))):
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(200):
            call()
        torch.cuda.synchronize()
        timings[f"{name}_ms"] = round((time.perf_counter() - start) / 200 * 1e3, 4)
    reference.index_copy_(1, pos, x)  # the timed decode calls rewrote the same slot
    return {"marked": mark, **timings, "cache_right": bool(torch.allclose(cache, reference)),
            "reserved_growth_mb": round((torch.cuda.memory_reserved() - before) / 2**20, 1),
            "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


def mark_static_address() -> dict:
    """With `torch._dynamo.mark_static_address` on a mutated cache and a large read-only input."""
    return _static_address(True)


def mark_static_address_off() -> dict:
    """The same without it: expected a per-call copy of the read-only input, and for the mutated
    cache either a copy or a `skipping cudagraphs due to mutated inputs` (see cudagraph_skips)."""
    return _static_address(False)


# ---------------------------------------------------------------------------- collectives


def all_reduce_in_capture() -> dict:
    """A raw `dist.all_reduce` (and an async one with `wait()`) captured and replayed by a process
    group of one over NCCL."""
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        a = torch.ones(1 << 16, device="cuda")
        b = torch.ones(1 << 16, device="cuda")

        def collectives():
            dist.all_reduce(a)
            work = dist.all_reduce(b, async_op=True)
            work.wait()

        _side_warmup(collectives)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            collectives()
        a.fill_(3.0)
        b.fill_(4.0)
        g.replay()
        torch.cuda.synchronize()
        right = bool((a == 3.0).all() and (b == 4.0).all())  # a sum over one rank is the identity
        return {"captured": True, "replayed_right": right, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------------------- driver

FACTS = {
    "rng-get-state-in-capture": rng_get_state_in_capture,
    "rng-same-seed-in-capture": rng_same_seed_in_capture,
    "rng-graphsafe-in-capture": rng_graphsafe_in_capture,
    "pool-sharing-order": pool_sharing_order,
    "keep-graph-instantiate": keep_graph_instantiate,
    "batchnorm-momentum-default-in-capture": batchnorm_momentum_default_in_capture,
    "pinned-alloc-in-capture": pinned_alloc_in_capture,  # last of the shared ones: new in torch 2.11
    # each in a process of its own:
    "rng-new-seed-in-capture": rng_new_seed_in_capture,
    "rng-clone-state-in-capture": rng_clone_state_in_capture,
    "batchnorm-momentum-none-in-capture": batchnorm_momentum_none_in_capture,
    "grad-scaler-fused-in-capture": grad_scaler_fused_in_capture,
    "grad-scaler-default-in-capture": grad_scaler_default_in_capture,
    "cudagraph-trees-memory-per-shape": cudagraph_trees_memory_per_shape,
    "mark-static-address": mark_static_address,
    "mark-static-address-off": mark_static_address_off,
    "all-reduce-in-capture": all_reduce_in_capture,
}
SHARED = list(FACTS)[:7]  # expected to pass, no compile, no NCCL: one process for all of them


def _run(name: str) -> dict:
    try:
        out = {"fact": name, "ok": True, **FACTS[name]()}
    except Exception as exc:  # noqa: BLE001 - the error is the measurement
        out = {"fact": name, "ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:240]}"}
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        out["context_after"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return {**out, "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def main(argv: list[str]) -> int:
    if not torch.cuda.is_available():
        print("skill_facts_gpu: needs a CUDA device", file=sys.stderr)
        return 2
    if argv[:1] == ["--fact"]:
        for name in argv[1:]:
            print(json.dumps(_run(name)), flush=True)
        return 0
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="skill_facts_inductor_"))
    groups = [SHARED] + [[name] for name in FACTS if name not in SHARED]
    for group in groups:
        try:
            subprocess.run([sys.executable, __file__, "--fact", *group], check=False, env=env, timeout=300)
        except subprocess.TimeoutExpired:
            print(json.dumps({"fact": group[0], "ok": False, "error": "timed out after 300 s"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
