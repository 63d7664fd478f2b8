"""A/B variant router of a feed-ranking service.

Each model variant of the running experiment gets its own CUDA graph (captured under
fp16 autocast on a dedicated capture stream, all in one pool); a small blend graph
mixes the control and challenger scores with the experiment's traffic share. The
experiment controller hot-swaps variants and moves the traffic share.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("ab_router")


class VariantRouter:
    def __init__(self, variants: dict, batch: int, feat_dim: int):
        self.pool = torch.cuda.graph_pool_handle()
        self.capture_stream = torch.cuda.Stream()
        self.static_x = torch.zeros(batch, feat_dim, device="cuda")
        self.challenger_share = 0.1  # moved by the experiment controller
        self.models, self.graphs, self.outs = {}, {}, {}
        for name, model in variants.items():
            self._capture_variant(name, model)
        self._capture_blend()

    @torch.no_grad()
    def _capture_variant(self, name: str, model: nn.Module):
        model = model.cuda().eval()
        self.models[name] = model
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.capture_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.capture_stream):
                for _ in range(3):
                    model(self.static_x)
            torch.cuda.current_stream().wait_stream(self.capture_stream)
            g = self.graphs.get(name) or torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=self.capture_stream):  # HAZARD: api-misuse
                self.outs[name] = model(self.static_x).float()
        self.graphs[name] = g
        log.info("captured variant %s", name)

    def _blend(self):
        control, challenger = self.outs["control"], self.outs["challenger"]
        w = self.challenger_share  # HAZARD: python-scalar
        bucket = (self.static_x[:, 0].abs() * 1e4).long() % 1000
        use_challenger = bucket < int(w * 1000)
        return torch.where(use_challenger.unsqueeze(-1), challenger, control)  # CLEAN: torch.where, fixed shape

    @torch.no_grad()
    def _capture_blend(self):
        for _ in range(2):
            self._blend()
        torch.cuda.synchronize()  # CLEAN: before the capture, outside it
        self.blend_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.blend_graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.blended = self._blend()

    @torch.no_grad()
    def score(self, x):
        n = x.size(0)
        self.static_x[:n].copy_(x)
        self.static_x[n:].zero_()
        for name in ("control", "challenger"):
            self.graphs[name].replay()
        self.blend_graph.replay()
        return self.blended[:n].clone()  # CLEAN: cloned before the next request

    # -- experiment controller ------------------------------------------------------
    def set_share(self, share: float):
        self.challenger_share = min(max(share, 0.0), 1.0)

    def update_variant(self, name: str, model: nn.Module):
        """Hot-swap a variant with a new build (new architecture allowed)."""
        self._capture_variant(name, model)
        self._capture_blend()

    def reload_weights(self, name: str, state_dict):
        self.models[name].load_state_dict(state_dict)  # CLEAN: weights copied into the captured parameters
