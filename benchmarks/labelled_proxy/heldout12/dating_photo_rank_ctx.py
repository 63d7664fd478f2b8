"""Profile-photo ordering for a dating app ("smart photos").

A user's up-to-nine photos are scored by an attractiveness-agnostic "first
impression" model (lighting, framing, face visibility) with a few random
crop jitters as test-time augmentation, and re-ordered. The scoring pass is
captured through a small context-manager helper and replayed per profile.
"""
import contextlib
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("smart_photos")
N_PHOTOS, N_TTA, RES = 9, 4, 384


@contextlib.contextmanager
def captured(fn, warmup=3):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    try:
        yield g, out
    finally:
        g.reset()


class ImpressionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 32, 7, 4, 3), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                               nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.out = nn.Linear(128, 1)

    def forward(self, x):
        return self.out(self.f(x)).squeeze(-1)


class PhotoRanker:
    def __init__(self, model, low_memory=False, seed=1234):
        self.model = model.cuda().eval()
        self.photos = torch.zeros(N_PHOTOS, 3, RES, RES, device="cuda")
        self.thumbs = torch.zeros(N_PHOTOS, 3, 96, 96, device="cuda")
        self.crop_gen = torch.Generator(device="cuda")
        self.crop_gen.manual_seed(seed)
        self.thumb_stream = torch.cuda.Stream()
        self.laplace = torch.tensor([[[[0., 1., 0.], [1., -4., 1.], [0., 1., 0.]]]]).cuda()  # CLEAN: built once in __init__, outside the capture
        self.low_memory = low_memory

    @torch.no_grad()
    def rank(self):
        log.info("ranking profile photos")  # CLEAN: plain-string log, nothing read from the GPU
        shift = (torch.rand(N_TTA, 2, device="cuda", generator=self.crop_gen) - 0.5) * 0.2  # HAZARD: rng
        zoom = 0.85 + 0.1 * torch.rand(N_TTA, 1, device="cuda")  # CLEAN: default CUDA generator, capturable
        theta = torch.zeros(N_TTA, 2, 3, device="cuda")
        theta[:, 0, 0], theta[:, 1, 1] = zoom[:, 0], zoom[:, 0]
        theta[:, :, 2] = shift
        theta = theta[:, None].expand(N_TTA, N_PHOTOS, 2, 3).reshape(-1, 2, 3)
        grid = F.affine_grid(theta, (N_TTA * N_PHOTOS, 3, 224, 224), align_corners=False)
        crops = F.grid_sample(self.photos.repeat(N_TTA, 1, 1, 1), grid, align_corners=False)
        scores = self.model(crops).view(N_TTA, N_PHOTOS).mean(0)
        gray = self.photos.mean(1, keepdim=True)
        sharp = F.conv2d(gray, self.laplace).var(dim=(1, 2, 3))
        scores = torch.where(sharp < 1e-3, scores - 1.0, scores)  # CLEAN: blur penalty without a host branch
        log.debug(f"best photo score {scores.max():.2f}")  # HAZARD: host-sync
        with torch.cuda.stream(self.thumb_stream):  # HAZARD: stream
            self.thumbs.copy_(F.interpolate(self.photos, size=(96, 96), mode="area"))
        if self.low_memory:
            torch.cuda.empty_cache()  # HAZARD: memory
        return scores.argsort(descending=True)


def reorder_profiles(ranker, profiles):
    orders = {}
    with captured(ranker.rank) as (graph, order):
        for user_id, photos in profiles:
            ranker.photos.copy_(photos)  # CLEAN: new photos copied into the captured input
            graph.replay()
            orders[user_id] = order.tolist()
    return orders


if __name__ == "__main__":
    ranker = PhotoRanker(ImpressionNet(), low_memory=True)
    batch = [(uid, torch.rand(N_PHOTOS, 3, RES, RES, device="cuda")) for uid in range(256)]
    print(list(reorder_profiles(ranker, batch).items())[:3])
