"""Delayed-scaling FP8 linear from an in-house quantization toolkit (emulation mode):
amax history and scale live on the device; a runner captures the quantized MLP once
per token count and replays it during accuracy evaluation.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("fp8kit")
E4M3_MAX = 448.0


class Fp8DelayedLinear(nn.Module):
    def __init__(self, in_f, out_f, history=16, margin=0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_f, in_f) * in_f ** -0.5)
        self.register_buffer("amax_hist", torch.zeros(history))
        self.register_buffer("scale", torch.ones(()))
        self.margin = margin  # exposed as a knob of the accuracy sweep
        self.hist_pos = 0
        self.last_scale = 1.0

    @staticmethod
    def _fake_cast(t, scale):
        q = (t * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        return q.to(t.dtype) / scale

    def forward(self, x):
        self.amax_hist[self.hist_pos] = x.detach().abs().amax()
        self.hist_pos = (self.hist_pos + 1) % self.amax_hist.numel()  # HAZARD: host-code
        margin = self.margin  # HAZARD: python-scalar
        new_scale = E4M3_MAX / self.amax_hist.max().clamp_min(1e-12) / (2.0 ** margin)
        self.scale.copy_(new_scale)  # CLEAN: in-place update of a registered buffer
        self.last_scale = float(self.scale)  # HAZARD: host-sync
        w_scale = E4M3_MAX / self.weight.detach().abs().amax().clamp_min(1e-12)
        return F.linear(self._fake_cast(x, self.scale), self._fake_cast(self.weight, w_scale))


class Fp8MLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.up = Fp8DelayedLinear(d, ffn)
        self.down = Fp8DelayedLinear(ffn, d)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class QuantEvalRunner:
    def __init__(self, model: Fp8MLP, d_model: int, amp_dtype=torch.bfloat16):
        self.model = model.cuda().eval()
        self.d_model, self.amp_dtype = d_model, amp_dtype
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs = {}

    @torch.no_grad()
    def _capture(self, tokens):
        x = torch.zeros(tokens, self.d_model, device="cuda")
        s = torch.cuda.Stream()
        with torch.autocast("cuda", dtype=self.amp_dtype):  # HAZARD: autocast-cache
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.model(x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                y = self.model(x)
        self.graphs[tokens] = (g, x, y)

    @torch.no_grad()
    def __call__(self, x):
        tokens = x.size(0)
        if tokens not in self.graphs:
            self._capture(tokens)
        g, sx, sy = self.graphs[tokens]
        sx.copy_(x)  # CLEAN: copy_ into the static input
        g.replay()
        return sy.clone()


class ReferenceRunner(QuantEvalRunner):
    """Same runner with a cache-free autocast, used for the bf16 baseline numbers."""

    @torch.no_grad()
    def _capture(self, tokens):
        x = torch.zeros(tokens, self.d_model, device="cuda")
        s = torch.cuda.Stream()
        with torch.autocast("cuda", dtype=self.amp_dtype, cache_enabled=False):  # CLEAN: autocast cache disabled
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.model(x)
            torch.cuda.synchronize()  # CLEAN: before the capture starts
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                y = self.model(x)
        self.graphs[tokens] = (g, x, y)


def sweep_margin(runner, batches, margins=(0, 1, 2)):
    for m in margins:
        for mod in runner.model.modules():
            if isinstance(mod, Fp8DelayedLinear):
                mod.margin = m
        err = sum(float((runner(b) - b).pow(2).mean()) for b in batches) / len(batches)
        log.info("margin=%d mse=%.5f", m, err)
