"""Micro-benchmarks for weight-only int8 dequant-matmul paths of a quantization toolkit.

Each case is a zero-argument callable (functools.partial or a small callable object)
handed to `bench_graphed`, which warms the case up on a side stream, captures it
in fp16 autocast and times graph replays with CUDA events. `first_look` is the quick
variant used by the notebook to eyeball outputs.
"""
import functools

import torch
import torch.nn as nn


def bench_graphed(fn, iters=200, warmup=5, dtype=torch.float16):
    side = torch.cuda.Stream()
    with torch.autocast("cuda", dtype=dtype):  # HAZARD: autocast-cache
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()  # CLEAN: outside the capture, before timing
    start.record()
    for _ in range(iters):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters, graph, out


def first_look(fn):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # HAZARD: api-misuse
        out = fn()
    graph.replay()
    return out.float().cpu()


class SmoothQuantInt8:
    """Per-channel int8 weights with a SmoothQuant migration strength `alpha`."""

    def __init__(self, linear: nn.Linear, act_absmax: torch.Tensor, alpha=0.5):
        self.linear, self.act_absmax, self.alpha = linear, act_absmax, alpha
        w = linear.weight.detach()
        self.w_absmax = w.abs().amax(dim=0).clamp_min(1e-5)
        self.qweight = torch.round(w / (w.abs().amax(dim=1, keepdim=True) / 127)).to(torch.int8)
        self.row_scale = w.abs().amax(dim=1) / 127

    def __call__(self, x):
        alpha = self.alpha  # HAZARD: python-scalar
        s = self.act_absmax.pow(alpha) / self.w_absmax.pow(1.0 - alpha)
        w = self.qweight.to(x.dtype) * self.row_scale.to(x.dtype).unsqueeze(1)
        return (x / s) @ (w * s).t()


def staged_case(kernel, x_pinned, x_dev):
    x_dev.copy_(x_pinned, non_blocking=True)  # CLEAN: H2D copy from a pinned buffer is recorded
    y = kernel(x_dev)
    torch.cuda.synchronize()  # HAZARD: host-sync
    return y


def main(in_f=4096, out_f=11008, tokens=(1, 16, 128)):
    linear = nn.Linear(in_f, out_f, bias=False).cuda()
    act_absmax = torch.rand(in_f, device="cuda") * 8 + 0.1
    kernel = SmoothQuantInt8(linear, act_absmax)
    for t in tokens:
        x = torch.randn(t, in_f, device="cuda", dtype=torch.float16)
        x_pinned = torch.randn(t, in_f, dtype=torch.float16).pin_memory()
        ref_ms, _, ref_out = bench_graphed(functools.partial(linear, x))
        q_ms, q_graph, q_out = bench_graphed(functools.partial(kernel, x))
        st_ms, _, _ = bench_graphed(functools.partial(staged_case, kernel, x_pinned, x.clone()))
        print(f"tokens={t:4d} fp16 {ref_ms:.3f} ms  int8 {q_ms:.3f} ms  staged {st_ms:.3f} ms")
        for alpha in (0.3, 0.5, 0.7, 0.85):
            kernel.alpha = alpha
            q_graph.replay()
            err = (q_out.float() - ref_out.float()).abs().mean().item()  # CLEAN: read after the replay, outside any capture
            print(f"   alpha={alpha:.2f} mean abs err {err:.4f}")
    print(first_look(functools.partial(kernel, torch.randn(4, in_f, device="cuda", dtype=torch.float16)))[:, :4])


if __name__ == "__main__":
    main()
