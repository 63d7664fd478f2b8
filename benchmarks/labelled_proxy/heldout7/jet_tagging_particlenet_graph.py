"""ParticleNet-style boosted-jet tagger (top / W / QCD) for the trigger farm.

Jets are padded point clouds of constituents in (eta, phi) with per-particle features.
Inference is graphed per constituent bucket; a small regressor gives the jet mass.
"""
import torch
import torch.nn as nn

BUCKETS = (32, 64, 128)
BATCH = 256
FEATURE_SCALE = [1.0, 1.0, 0.2, 0.2, 0.5, 1.0, 1.0]   # deta, dphi, log pt, log E, log pt/ptJ, dR, charge


def knn(points, k, mask):
    d = torch.cdist(points, points)
    d = d.masked_fill(~mask.unsqueeze(1), float("inf"))
    return d.topk(k + 1, dim=-1, largest=False).indices[..., 1:]  # CLEAN: fixed-k topk, static output shape


class EdgeConv(nn.Module):
    def __init__(self, c_in, c_out, k=16):
        super().__init__()
        self.k = k
        self.mlp = nn.Sequential(nn.Linear(2 * c_in, c_out), nn.BatchNorm1d(c_out), nn.ReLU(),
                                 nn.Linear(c_out, c_out), nn.ReLU())
        self.skip = nn.Linear(c_in, c_out)

    def forward(self, pts, x, mask):
        b, n, c = x.shape
        idx = knn(pts, self.k, mask)
        base = torch.arange(b, device=x.device).view(b, 1, 1) * n
        nbr = x.reshape(b * n, c)[(idx + base).reshape(-1)].view(b, n, self.k, c)
        centre = x.unsqueeze(2).expand(-1, -1, self.k, -1)
        e = torch.cat([centre, nbr - centre], -1).reshape(-1, 2 * c)
        e = self.mlp(e).view(b, n, self.k, -1).mean(2)
        return torch.relu(e + self.skip(x)) * mask.unsqueeze(-1)


class ParticleNet(nn.Module):
    def __init__(self, n_feat=7, n_cls=3):
        super().__init__()
        self.register_buffer("feature_scale", torch.tensor(FEATURE_SCALE))  # CLEAN: buffer built at construction
        self.convs = nn.ModuleList([EdgeConv(n_feat, 64), EdgeConv(64, 128), EdgeConv(128, 256)])
        self.fc = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, n_cls))

    def forward(self, pts, feats, mask):
        n_max = int(mask.sum(1).max())  # HAZARD: host-sync
        pts, x, mask = pts[:, :n_max], feats[:, :n_max] * self.feature_scale, mask[:, :n_max]
        for conv in self.convs:
            x = conv(pts, x, mask)
            pts = x
        pooled = x.sum(1) / mask.sum(1, keepdim=True).clamp_min(1)
        return self.fc(pooled)


class JetTaggerService:
    def __init__(self, model, mass_reg, device="cuda"):
        self.model, self.mass_reg = model.eval().to(device), mass_reg.eval().to(device)
        self.device = device
        self.aux = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.graph = None
        self.static = {}

    def _infer(self, pts, feats, mask):
        probs = self.model(pts, feats, mask).softmax(-1)
        with torch.cuda.stream(self.aux):  # HAZARD: stream
            mass = self.mass_reg(feats.sum(1)).squeeze(-1)
        return probs, mass

    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    @torch.no_grad()
    def capture_buckets(self):
        self.graph = torch.cuda.CUDAGraph()
        for n in BUCKETS:
            pts = torch.zeros(BATCH, n, 2, device=self.device)
            feats = torch.zeros(BATCH, n, 7, device=self.device)
            mask = torch.ones(BATCH, n, dtype=torch.bool, device=self.device)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._infer(pts, feats, mask)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(self.graph, pool=self.pool):  # HAZARD: api-misuse
                out = self._infer(pts, feats, mask)
            self.static[n] = (pts, feats, mask, out)

    @torch.no_grad()
    def tag(self, pts, feats, mask):
        n = next(b for b in BUCKETS if b >= pts.shape[1])
        s_pts, s_feats, s_mask, (probs, mass) = self.static[n]
        s_mask.zero_()
        s_pts[:, : pts.shape[1]].copy_(pts)  # CLEAN: copy_ into the static inputs
        s_feats[:, : feats.shape[1]].copy_(feats)
        s_mask[:, : mask.shape[1]].copy_(mask)
        self.graph.replay()
        return probs.float().clone(), mass.float().clone()
