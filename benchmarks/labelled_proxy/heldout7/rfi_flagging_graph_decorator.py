"""Radio-frequency-interference flagging for a radio-telescope correlator backend.

Each integration (polarisations x time x channels) is robustly normalised, scored by
a small U-Net and flagged; flags go back to the host through a pinned buffer. The
flagging method is graphed by a capture-on-first-call decorator.
"""
import functools
import logging

import torch
import torch.nn as nn

log = logging.getLogger("rfi")
N_POL, N_TIME, N_CHAN = 4, 256, 4096


def cuda_graphed(warmup=3):
    def deco(method):
        @functools.wraps(method)
        def wrapper(self):
            graphs = self.__dict__.setdefault("_graphs", {})
            if method.__name__ not in graphs:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(warmup):
                        method(self)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream before capture
                    out = method(self)
                graphs[method.__name__] = (g, out)
            g, out = graphs[method.__name__]
            g.replay()
            return out
        return wrapper
    return deco


class TinyUNet(nn.Module):
    def __init__(self, c=N_POL, w=16):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(c, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * w, w, 2, stride=2)
        self.out = nn.Conv2d(2 * w, 1, 1)

    def forward(self, x):
        d = self.down(x)
        return self.out(torch.cat([d, self.up(self.mid(d))], 1))


class RFIFlagger:
    def __init__(self, model, dither=1e-3, device="cuda"):
        self.model = model.eval().to(device)
        self.dither = dither
        self.static_vis = torch.zeros(N_POL, N_TIME, N_CHAN, device=device)
        self.dither_gen = torch.Generator(device=device)
        self.dither_gen.manual_seed(99)
        self.flag_stream = torch.cuda.Stream()
        self.host_flags = torch.zeros(N_TIME, N_CHAN, dtype=torch.uint8).pin_memory()

    @cuda_graphed()
    @torch.no_grad()
    def flag(self):
        amp = self.static_vis.abs()
        amp = amp + torch.normal(0.0, self.dither, size=amp.shape, generator=self.dither_gen, device=amp.device)  # HAZARD: rng
        x = torch.log1p(amp)
        med = x.median(dim=-1, keepdim=True).values
        mad = (x - med).abs().median(dim=-1, keepdim=True).values
        z = (x - med) / (1.4826 * mad + 1e-6)
        prob = torch.sigmoid(self.model(z.unsqueeze(0)))[0, 0]
        flags = (prob > 0.5) | (z.abs() > 6.0).any(0)
        occupancy = flags.float().mean()
        log.info(f"RFI occupancy {occupancy:.2%}")  # HAZARD: host-sync
        log.debug("flagging integration")  # CLEAN: plain string, no tensor formatted
        if occupancy > 0.5:  # HAZARD: dynamic-control-flow
            flags = torch.ones_like(flags)                      # flag the whole integration
        with torch.cuda.stream(self.flag_stream):  # HAZARD: stream
            self.host_flags.copy_(flags.to(torch.uint8), non_blocking=True)
        cleaned = torch.where(flags, torch.zeros_like(self.static_vis), self.static_vis)  # CLEAN: flagged samples zeroed with where
        return cleaned, flags

    def process(self, integration_pinned):
        self.static_vis.copy_(integration_pinned, non_blocking=True)  # CLEAN: copy_ into the captured input
        cleaned, flags = self.flag()
        return cleaned, self.host_flags
