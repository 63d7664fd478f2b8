"""Live timbre transfer (voice -> violin / flute) with a DDSP decoder, ported from the
Magenta DDSP TF2 code: f0 + loudness in, harmonic amplitudes + filtered-noise
magnitudes out, additive synth + noise. 4096-sample blocks at 16 kHz. Each instrument
graph is captured through the `graph_capture` helper below.
"""
import contextlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SR, BLOCK, FRAMES, N_HARM, N_NOISE = 16000, 4096, 16, 60, 65


@contextlib.contextmanager
def graph_capture(graph, pool=None, warmup_fn=None, warmup_iters=3):
    if warmup_fn is not None:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup_iters):
                warmup_fn()
        torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph, pool=pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield graph


class DDSPDecoder(nn.Module):
    def __init__(self, hidden=512):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(2, hidden), nn.LayerNorm(hidden), nn.LeakyReLU())
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1 + N_HARM + N_NOISE)

    def forward(self, f0, loud):
        h = self.mlp(torch.stack([f0 / 1000.0, loud], -1))
        h, _ = self.gru(h)
        return self.out(h)


class TimbreTransfer:
    def __init__(self, decoder, preview_decoder):
        self.dec = decoder.cuda().eval()
        self.preview_dec = preview_decoder.cuda().eval()     # small model, shown while the full one loads
        self.f0_in = torch.zeros(1, FRAMES, device="cuda")
        self.loud_in = torch.zeros(1, FRAMES, device="cuda")
        self.f0_hist = [220.0] * FRAMES          # pitch tracker history, refreshed per block
        self.pool = torch.cuda.graph_pool_handle()
        self.graph, self.preview_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _synth(self, dec=None):
        f0_prior = torch.tensor(self.f0_hist, device="cuda")  # HAZARD: host-sync
        f0 = 0.5 * self.f0_in + 0.5 * f0_prior[None]
        p = (dec or self.dec)(f0, self.loud_in)
        amp = F.softplus(p[..., :1])
        harm = F.softmax(p[..., 1:1 + N_HARM], -1)
        k = torch.arange(1, N_HARM + 1, device="cuda")
        harm = torch.where(f0[..., None] * k < SR / 2, harm, torch.zeros_like(harm))  # CLEAN: anti-aliasing by select
        f0_up = F.interpolate(f0[:, None], BLOCK, mode="linear")[:, 0]
        phase = 2 * np.pi * torch.cumsum(f0_up / SR, -1)
        h_up = F.interpolate((amp * harm).transpose(1, 2), BLOCK, mode="linear")
        audio = (h_up * torch.sin(phase[:, None] * k[:, None])).sum(1)
        humanize = np.random.uniform(0.95, 1.05)  # HAZARD: host-code
        noise = torch.rand(1, BLOCK, device="cuda") * 2 - 1  # CLEAN: default-generator CUDA RNG
        return audio * humanize + 0.01 * noise * F.softplus(p[..., -1]).mean()

    def build(self):
        with graph_capture(self.graph, self.pool, warmup_fn=self._synth):  # CLEAN: warmed up through warmup_fn
            self.out = self._synth()

    def build_preview(self):
        with graph_capture(self.preview_graph, self.pool):  # HAZARD: api-misuse
            self.preview_out = self._synth(self.preview_dec)

    def start(self):
        self.build_preview()
        self.build()

    def process(self, f0, loud):
        self.f0_in.copy_(f0)  # CLEAN: static inputs written in place
        self.loud_in.copy_(loud)
        self.f0_hist = f0[0].tolist()  # eager, after the previous replay
        self.graph.replay()
        return self.out
