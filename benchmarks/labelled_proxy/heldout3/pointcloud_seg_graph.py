"""Indoor point-cloud semantic segmentation (PointNet++-style) with a captured forward.

Scans are padded to a fixed number of points; `valid` marks the real ones.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def farthest_point_sample(xyz, npoint):
    b, n, _ = xyz.shape
    idx = torch.zeros(b, npoint, dtype=torch.long, device=xyz.device)
    dist = torch.full((b, n), 1e10, device=xyz.device)
    far = torch.zeros(b, dtype=torch.long, device=xyz.device)
    batch = torch.arange(b, device=xyz.device)
    for i in range(npoint):  # CLEAN: fixed trip count, npoint is a constructor constant
        idx[:, i] = far
        centre = xyz[batch, far][:, None]
        dist = torch.minimum(dist, ((xyz - centre) ** 2).sum(-1))
        far = dist.argmax(-1)
    return idx


def voxel_density(xyz, voxel):
    keys = torch.floor(xyz / voxel).long()
    keys = (keys[..., 0] * 1_000_003 + keys[..., 1]) * 1_000_003 + keys[..., 2]
    _, inverse, counts = torch.unique(keys, return_inverse=True, return_counts=True)  # HAZARD: dynamic-shape
    return counts[inverse].float().log1p()


class SegNet(nn.Module):
    def __init__(self, in_dim=6, num_classes=13, npoint=512, voxel=0.05):
        super().__init__()
        self.npoint, self.voxel = npoint, voxel
        self.point_mlp = nn.Sequential(nn.Linear(in_dim + 1, 64), nn.ReLU(), nn.Linear(64, 128))
        self.head = nn.Linear(256, num_classes)
        self.shuffle_gen = torch.Generator(device="cuda")
        self.shuffle_gen.manual_seed(7)

    def forward(self, pts, valid):
        order = torch.randperm(pts.shape[1], device=pts.device, generator=self.shuffle_gen)  # HAZARD: rng
        pts, valid = pts[:, order], valid[:, order]
        xyz = pts[..., :3]
        dens = voxel_density(xyz, self.voxel)
        feats = self.point_mlp(torch.cat([pts, dens[..., None]], -1))
        feats[~valid] = 0.0  # CLEAN: boolean-mask assignment of a scalar lowers to masked_fill, no sync
        centres = farthest_point_sample(xyz, self.npoint)
        ctr = feats.gather(1, centres[..., None].expand(-1, -1, feats.shape[-1]))
        glob = ctr.max(dim=1, keepdim=True).values.expand_as(feats)
        logits = self.head(torch.cat([feats, glob], -1))
        inv = torch.argsort(order)
        return logits[:, inv]


class SegRunner:
    def __init__(self, model, batch=4, num_points=16384, num_classes=13):
        self.model = model.eval().cuda()
        self.pts = torch.zeros(batch, num_points, 6, device="cuda")
        self.valid = torch.ones(batch, num_points, dtype=torch.bool, device="cuda")
        self.class_hist = torch.zeros(num_classes, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _labels_for_valid(self, logits):
        return logits[self.valid].argmax(-1)  # HAZARD: dynamic-shape

    @torch.no_grad()
    def build(self):
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.logits = self.model(self.pts, self.valid)
            probs = F.softmax(self.logits, -1)
            self.pred = torch.where(self.valid, probs.argmax(-1), -1)  # CLEAN: torch.where keeps a fixed shape
            self.labels = self._labels_for_valid(self.logits)
            with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
                self.class_hist.add_(probs.sum(dim=(0, 1)))

    @torch.no_grad()
    def segment(self, pts, valid):
        self.pts.copy_(pts)
        self.valid.copy_(valid)
        self.graph.replay()
        return self.pred.clone()
