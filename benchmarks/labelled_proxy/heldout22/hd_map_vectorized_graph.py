"""MapTR-style vectorised HD-map head (mmdet3d-like registry): BEV features -> map-element queries ->
polyline points and class scores (divider / ped crossing / boundary). A runner captures the head with
capture_begin/capture_end and replays it per frame."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HEADS = {}

def register_head(cls):
    HEADS[cls.__name__] = cls
    return cls

class CrossAttentionLayer(nn.Module):
    def __init__(self, dim, heads=8):
        super().__init__()
        self.heads, self.q, self.kv = heads, nn.Linear(dim, dim), nn.Linear(dim, 2 * dim)
        self.norm, self.ffn = nn.LayerNorm(dim), nn.Sequential(nn.Linear(dim, 4 * dim), nn.ReLU(), nn.Linear(4 * dim, dim))

    def forward(self, q, mem):
        b, n, d = q.shape
        k, v = self.kv(mem).view(b, mem.shape[1], 2, self.heads, -1).unbind(2)
        qh = self.q(q).view(b, n, self.heads, -1)
        att = torch.einsum("bnhd,bmhd->bhnm", qh, k).mul(qh.shape[-1] ** -0.5).softmax(-1)
        q = self.norm(q + torch.einsum("bhnm,bmhd->bnhd", att, v).reshape(b, n, d))
        return q + self.ffn(q)

@register_head
class MapTRLiteHead(nn.Module):
    def __init__(self, num_vec=50, num_pts=20, embed=256, num_classes=3, layers=3):
        super().__init__()
        self.num_vec, self.num_pts = num_vec, num_pts
        self.instance_q = nn.Embedding(num_vec, embed)
        self.point_q = nn.Embedding(num_pts, embed)
        self.layers = nn.ModuleList([CrossAttentionLayer(embed) for _ in range(layers)])
        self.cls, self.reg = nn.Linear(embed, num_classes), nn.Linear(embed, 2)

    def forward(self, bev, lidar2ego):
        b = bev.shape[0]
        q = (self.instance_q.weight[:, None] + self.point_q.weight[None]).flatten(0, 1)[None].expand(b, -1, -1)
        mem = bev.flatten(2).transpose(1, 2)
        for layer in self.layers:
            q = layer(q, mem)
        h = q.view(b, self.num_vec, self.num_pts, -1)
        scores = self.cls(h.mean(2)).sigmoid()
        pts = self.reg(h).sigmoid() * 60.0 - 30.0
        pts = pts @ lidar2ego[:, None, :2, :2].transpose(-1, -2) + lidar2ego[:, None, None, :2, 2]
        return scores, pts

class MapRunner:
    def __init__(self, head_cfg, bev_shape):
        cfg = dict(head_cfg)
        self.head = HEADS[cfg.pop("type")](**cfg).cuda().eval()
        self.bev = torch.zeros(bev_shape, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _infer(self, meta):
        lidar2ego = torch.from_numpy(meta["lidar2ego"]).cuda()  # HAZARD: pinned-memory
        scores, pts = self.head(self.bev, lidar2ego)
        if scores.max() < 0.05:  # HAZARD: dynamic-control-flow
            scores = torch.zeros_like(scores)
        torch.cuda.empty_cache()  # HAZARD: memory
        top_s, top_i = scores.amax(-1).topk(20, dim=1)  # CLEAN: fixed-k topk is capturable
        top_pts = pts.gather(1, top_i[:, :, None, None].expand(-1, -1, self.head.num_pts, 2))  # CLEAN: gather with a CUDA index
        return top_s, top_pts

    @torch.no_grad()
    def capture(self, meta):
        for _ in range(3):
            self._infer(meta)
        self.graph.capture_begin()  # HAZARD: stream
        self.static_out = self._infer(meta)
        self.graph.capture_end()

    @torch.no_grad()
    def __call__(self, bev, meta):
        self.bev.copy_(bev)  # CLEAN: copy_ into the captured input
        self.graph.replay()
        top_s, top_pts = self.static_out
        return top_s.cpu().numpy(), top_pts.cpu().numpy()

if __name__ == "__main__":
    runner = MapRunner(dict(type="MapTRLiteHead", num_vec=50, num_pts=20), (1, 256, 100, 50))
    meta = {"lidar2ego": np.eye(3, dtype=np.float32)[None]}
    runner.capture(meta)
    for frame in range(500):
        meta = {"lidar2ego": np.eye(3, dtype=np.float32)[None] + 0.01 * frame}
        polylines = runner(torch.randn(1, 256, 100, 50, device="cuda"), meta)
