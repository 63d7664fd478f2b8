"""Graph-captured RAFT-style refinement loop for the optical-flow service.

The correlation lookup and the convolutional GRU update are captured once per
feature resolution; every frame pair of that resolution replays the graph.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("flowsvc.refine")


def local_corr(f1, f2, radius=3):
    b, c, h, w = f1.shape
    f2p = F.pad(f2, [radius] * 4)
    vols = []
    for dy in range(2 * radius + 1):  # CLEAN: loop bound is a fixed Python int, identical on every replay
        for dx in range(2 * radius + 1):
            vols.append((f1 * f2p[:, :, dy:dy + h, dx:dx + w]).mean(1, keepdim=True))
    return torch.cat(vols, 1)


class ConvGRUUpdate(nn.Module):
    def __init__(self, hidden=96, corr_ch=49):
        super().__init__()
        self.enc = nn.Conv2d(corr_ch + 2, hidden, 3, padding=1)
        self.zr = nn.Conv2d(hidden * 2, hidden * 2, 3, padding=1)
        self.q = nn.Conv2d(hidden * 2, hidden, 3, padding=1)
        self.head = nn.Sequential(nn.Conv2d(hidden, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 2, 3, padding=1))

    def forward(self, h, corr, flow):
        x = F.relu(self.enc(torch.cat([corr, flow], 1)))
        z, r = torch.sigmoid(self.zr(torch.cat([h, x], 1))).chunk(2, 1)
        q = torch.tanh(self.q(torch.cat([r * h, x], 1)))
        h = (1 - z) * h + z * q
        return h, self.head(h)


class FlowRefiner:
    def __init__(self, update: ConvGRUUpdate, iters=12, early_stop_eps=1e-3):
        self.update = update.eval().cuda()
        self.iters = iters
        self.early_stop_eps = early_stop_eps
        self.graphs, self.static = {}, {}
        self.pool = torch.cuda.graph_pool_handle()
        self.stream = torch.cuda.Stream()

    def set_quality(self, iters):
        self.iters = iters

    def _refine(self, f1, f2, h):
        b, _, hh, ww = f1.shape
        flow = torch.zeros(b, 2, hh, ww, device=f1.device)
        for _ in range(self.iters):  # HAZARD: python-scalar
            corr = local_corr(f1, f2)
            h, delta = self.update(h, corr, flow)
            flow = flow + delta
            if delta.abs().amax() < self.early_stop_eps:  # HAZARD: dynamic-control-flow
                break
        norm = torch.tensor([ww, hh], dtype=flow.dtype).to(flow.device)  # HAZARD: pinned-memory
        return flow / norm.view(1, 2, 1, 1)

    def _capture(self, key):
        b, c, h, w = key
        s = {"f1": torch.zeros(key, device="cuda"), "f2": torch.zeros(key, device="cuda"),
             "hid": torch.zeros(b, 96, h, w, device="cuda")}
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(self.stream):
            for _ in range(3):
                self._refine(s["f1"], s["f2"], s["hid"])
        torch.cuda.current_stream().wait_stream(self.stream)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g, pool=self.pool, stream=self.stream):
            s["out"] = self._refine(s["f1"], s["f2"], s["hid"])
            log.info("captured refinement graph")  # CLEAN: a plain string logged once at capture time
        self.graphs[key], self.static[key] = g, s

    def __call__(self, feat1, feat2, hidden):
        key = tuple(feat1.shape)
        if key not in self.graphs:
            self._capture(key)
        s = self.static[key]
        s["f1"].copy_(feat1)  # CLEAN: copied into the captured input buffer
        s["f2"] = feat2  # HAZARD: static-address
        s["hid"].copy_(hidden)
        self.graphs[key].replay()
        return s["out"]


def run_clip(refiner, feats, hidden, budget_ms=25.0):
    flows = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for a, b in zip(feats[:-1], feats[1:]):
        start.record()
        flow = refiner(a, b, hidden)
        end.record()
        flows.append(flow.clone())  # CLEAN: cloned before the next replay overwrites the output
        end.synchronize()
        if start.elapsed_time(end) > budget_ms and refiner.iters > 4:
            refiner.set_quality(refiner.iters - 2)
    mean_mag = torch.stack([f.norm(dim=1).mean() for f in flows]).mean().item()  # CLEAN: host read after replay, outside the capture
    return flows, mean_mag
