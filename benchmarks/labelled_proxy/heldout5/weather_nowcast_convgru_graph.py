"""Radar precipitation nowcasting with a ConvGRU encoder-forecaster.

Serving path: one CUDA graph per batch bucket, all graphs share one memory pool.
Frames are radar reflectivity composites in dBZ, 5-minute cadence.
"""
import numpy as np
import torch
import torch.nn as nn


class ConvGRUCell(nn.Module):
    def __init__(self, ch, hidden):
        super().__init__()
        self.gates = nn.Conv2d(ch + hidden, 2 * hidden, 3, padding=1)
        self.cand = nn.Conv2d(ch + hidden, hidden, 3, padding=1)

    def forward(self, x, h):
        z, r = torch.sigmoid(self.gates(torch.cat([x, h], 1))).chunk(2, 1)
        c = torch.tanh(self.cand(torch.cat([x, r * h], 1)))
        return (1 - z) * h + z * c


class Nowcaster(nn.Module):
    def __init__(self, climatology, hidden=64):
        super().__init__()
        self.enc = ConvGRUCell(1, hidden)
        self.dec = ConvGRUCell(1, hidden)
        self.head = nn.Conv2d(hidden, 1, 1)
        self.hidden = hidden
        self.lead_steps = 12
        self.max_rate = 120.0
        self.climatology = climatology  # (H, W) float32 numpy array, mm/h
        self.stats_stream = torch.cuda.Stream()
        self.stats = None

    def forward(self, frames):  # (B, T, 1, H, W)
        B, T, _, H, W = frames.shape
        h = frames.new_zeros(B, self.hidden, H, W)
        for t in range(T):
            h = self.enc(frames[:, t] / 60.0, h)
        clim = torch.from_numpy(self.climatology).to(frames.device)  # HAZARD: pinned-memory
        x, outs = frames[:, -1], []
        for _ in range(self.lead_steps):  # HAZARD: python-scalar
            h = self.dec(x / 60.0, h)
            x = self.head(h) + 0.05 * clim
            outs.append(x)
        rain = torch.stack(outs, 1).relu()
        if (rain > self.max_rate).any():  # HAZARD: dynamic-control-flow
            rain = rain.clamp(max=self.max_rate)
        rain = torch.where(rain < 0.1, torch.zeros_like(rain), rain)  # CLEAN: torch.where keeps it on the device
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.stats = rain.mean(dim=(0, 1))
        return rain


class NowcastRunner:
    BUCKETS = (1, 2, 4, 8)

    def __init__(self, model, hw=(256, 256), history=6):
        self.model = model.cuda().eval()
        self.hw, self.history = hw, history
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_in, self.static_out = {}, {}, {}
        self.land_mask = torch.ones(1, 1, 1, *hw, device="cuda")

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        for b in sorted(self.BUCKETS, reverse=True):
            x = torch.zeros(b, self.history, 1, *self.hw, device="cuda")
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.model(x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                y = self.model(x) * self.land_mask
            self.graphs[b], self.static_in[b], self.static_out[b] = g, x, y

    def set_horizon(self, minutes):
        self.model.lead_steps = minutes // 5

    def update_land_mask(self, mask_np):
        self.land_mask = torch.from_numpy(mask_np).cuda()[None, None, None]  # HAZARD: static-address

    @torch.no_grad()
    def run(self, frames):
        n = frames.shape[0]
        b = next(k for k in self.BUCKETS if k >= n)
        self.static_in[b][:n].copy_(frames)  # CLEAN: copy_ into the static input
        self.static_in[b][n:].zero_()
        self.graphs[b].replay()
        out = self.static_out[b][:n].clone()
        peak = out.amax().item()  # CLEAN: .item() after replay, outside the region
        return out, peak


if __name__ == "__main__":
    runner = NowcastRunner(Nowcaster(np.load("climatology_mmh.npy").astype(np.float32)))
    runner.capture()
    runner.set_horizon(90)
    print(runner.run(torch.randn(3, 6, 1, 256, 256, device="cuda"))[1])
