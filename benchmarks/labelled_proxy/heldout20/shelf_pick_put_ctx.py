"""Cashierless store: pick/put event detection per shelf bay from load-cell deltas and the
bay camera's product embeddings.  Bay models are captured through the store runtime's
`graph_session` context manager.
"""
import contextlib
import logging

import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("store.shelf")


@contextlib.contextmanager
def graph_session(warmup_fn, warmup_iters=3, pool=None):
    """Warm up on a forked stream, then capture whatever runs inside the with-block."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # CLEAN: forked warm-up stream, joined right after
        for _ in range(warmup_iters):
            warmup_fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
        log.debug("capturing bay graph")  # CLEAN: plain-string log, no tensor formatted
        yield g


class BayModel(nn.Module):
    def __init__(self, n_cells=8, emb=256, n_sku=64):
        super().__init__()
        self.cell_net = nn.Sequential(nn.Linear(n_cells * 2, 64), nn.ReLU())
        self.fuse = nn.Linear(64 + emb, n_sku + 1)  # last class: no event

    def forward(self, delta, vis):
        return self.fuse(torch.cat([self.cell_net(delta), vis], -1))


class BayRuntime:
    def __init__(self, model, tare_np, planogram_sku_mask, n_cells=8, emb=256, window=16):
        self.model = model.cuda().eval()
        self.tare_np = tare_np.astype(np.float32)  # per-cell tare in grams, refreshed by store ops
        self.sku_mask = planogram_sku_mask.cuda()  # [n_sku + 1] bool, SKUs planned for this bay
        self.grams = torch.zeros(window, n_cells, device="cuda")
        self.vis = torch.zeros(window, emb, device="cuda")
        self.tta_gen = torch.Generator(device="cuda")
        self.tta_gen.manual_seed(11)

    @torch.no_grad()
    def _detect(self):
        tare = torch.from_numpy(self.tare_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        w = self.grams - tare
        delta = torch.cat([w[1:] - w[:-1], w[1:]], dim=-1)
        vis = self.vis[1:] + 0.01 * torch.randn(self.vis[1:].shape, device="cuda", generator=self.tta_gen)  # HAZARD: rng
        logits = self.model(delta, vis).masked_fill(~self.sku_mask, -1e4)  # CLEAN: masked_fill keeps the shape fixed
        torch.cuda.empty_cache()  # HAZARD: memory
        events = (delta[:, : delta.shape[1] // 2].abs().sum(-1) > 5.0).nonzero()  # HAZARD: dynamic-shape
        return logits.softmax(-1), events

    def build(self):
        with graph_session(self._detect) as g:
            self.static_probs, self.static_events = self._detect()
        self.graph = g

    def on_tick(self, grams, vis):
        self.grams.copy_(grams)  # CLEAN: copy_ into the captured window
        self.vis.copy_(vis)
        self.graph.replay()
        return self.static_probs.argmax(-1).cpu()


def start_store(bays: dict, model_path: str):
    runtimes = {}
    for bay_id, cfg in bays.items():
        rt = BayRuntime(torch.load(model_path), cfg["tare"], cfg["sku_mask"])
        rt.build()
        runtimes[bay_id] = rt
        log.info("bay %s ready", bay_id)
    return runtimes
