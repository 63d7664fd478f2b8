"""Iterative point tracker (PIPs/CoTracker-style refinement) captured through a context manager."""
import contextlib
import torch
import torch.nn as nn
import torch.nn.functional as F


@contextlib.contextmanager
def graph_capture(pool=None, warmup_fn=None, n_warmup=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    if warmup_fn is not None:
        with torch.cuda.stream(s):
            for _ in range(n_warmup):
                warmup_fn()
        torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool, stream=s):
        yield g
    torch.cuda.current_stream().wait_stream(s)


def local_corr(fmap, coords, feats, radius=3):
    B, C, H, W = fmap.shape
    r = torch.arange(-radius, radius + 1, device=fmap.device, dtype=fmap.dtype)
    dy, dx = torch.meshgrid(r, r, indexing="ij")
    pts = coords[:, :, None] + torch.stack([dx, dy], -1).reshape(1, 1, -1, 2)
    grid = torch.stack([pts[..., 0] / (W - 1), pts[..., 1] / (H - 1)], -1) * 2 - 1
    sampled = F.grid_sample(fmap, grid, align_corners=True)  # (B, C, N, K)
    return torch.einsum("bcnk,bnc->bnk", sampled, feats) / C ** 0.5


corr_lookup = torch.compile(local_corr)


class PointTracker(nn.Module):
    def __init__(self, dim=128, iters=4, radius=3, n_points=256):
        super().__init__()
        self.fnet = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3), nn.ReLU(), nn.Conv2d(64, dim, 3, 2, 1))
        self.update = nn.Sequential(nn.Linear((2 * radius + 1) ** 2 + dim + 2, 256), nn.GELU(), nn.Linear(256, dim + 3))
        self.iters = iters
        self.max_disp = 64.0
        self.jitter_gen = torch.Generator(device="cuda")
        self.jitter_gen.manual_seed(1234)
        self.active_ids = list(range(n_points))

    def refine(self, fmap, coords, feats):
        for _ in range(self.iters):  # CLEAN: iteration count fixed at construction
            corr = corr_lookup(fmap, coords, feats)  # HAZARD: api-misuse
            delta = self.update(torch.cat([corr, feats, coords / 64.0], -1))
            coords = coords + delta[..., :2]
            feats = feats + delta[..., 3:]
            if delta[..., :2].abs().amax() < 0.01:  # HAZARD: dynamic-control-flow
                break
        return coords, torch.sigmoid(delta[..., 2])

    def forward(self, frame, queries, feats):
        fmap = self.fnet(frame)
        q = queries[:, self.active_ids]  # HAZARD: host-sync
        jitter = torch.randn(q.shape, device=q.device, generator=self.jitter_gen) * 0.5  # HAZARD: rng
        coords = (q + jitter).clamp(0, self.max_disp * 4)  # CLEAN: clamp instead of a data-dependent branch
        return self.refine(fmap, coords / 4.0, feats)


class TrackerRunner:
    def __init__(self, model, B=1, N=256, H=384, W=512, dim=128):
        self.model = model.cuda().eval()
        self.frame = torch.zeros(B, 3, H, W, device="cuda")
        self.queries = torch.zeros(B, N, 2, device="cuda")
        self.feats = torch.zeros(B, N, dim, device="cuda")
        self.pool = torch.cuda.graph_pool_handle()

    @torch.no_grad()
    def capture(self):
        with graph_capture(self.pool, warmup_fn=lambda: self.model.fnet(self.frame)) as g:
            self.coords, self.vis = self.model(self.frame, self.queries, self.feats)
        self.graph = g

    @torch.no_grad()
    def track(self, video, queries, feats):
        self.queries.copy_(queries)
        self.feats.copy_(feats)
        tracks, vis = [], []
        for frame in video:
            self.frame.copy_(frame)  # CLEAN: copy_ into the static frame buffer
            self.graph.replay()
            tracks.append(self.coords.clone())
            vis.append(self.vis.clone())
        vis = torch.stack(vis, 1)
        visible_frac = (vis > 0.5).float().mean().item()  # CLEAN: .item() after all replays, outside the graph
        return torch.stack(tracks, 1), vis, visible_frac

    def add_points(self, ids):
        self.model.active_ids = sorted(set(self.model.active_ids) | set(ids))
