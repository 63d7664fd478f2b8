"""Silhouette-based gait recognition (GaitSet style) for access-control cameras.

Each walking sequence is a set of 64x44 binary silhouettes; a frame-level CNN, set
pooling (max over frames) and horizontal pyramid pooling give a 31-strip embedding.
Enrolment builds a gallery; probes are matched by mean strip distance. The encoder is
compiled with options passed through `**OPTS`.
"""
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("gait")
OPTS = dict(mode="max-autotune", dynamic=False)
FRAMES, H, W = 30, 64, 44


class GaitSetLite(nn.Module):
    def __init__(self, c=128, bins=(1, 2, 4, 8, 16)):
        super().__init__()
        self.bins = bins
        self.frame_cnn = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.LeakyReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.LeakyReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.LeakyReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, c, 3, padding=1), nn.LeakyReLU())
        self.fc = nn.Parameter(torch.randn(sum(bins), c, c) * 0.01)

    def forward(self, sil):
        # sil: (B, T, H, W)
        B = sil.shape[0]
        nonempty = sil.flatten(2).sum(-1) > 0
        sil = sil[:, nonempty.any(0)]  # HAZARD: dynamic-shape
        f = self.frame_cnn(sil.flatten(0, 1).unsqueeze(1))
        f = f.view(B, -1, *f.shape[1:]).amax(1)  # set pooling over frames
        strips = []
        for b in self.bins:
            z = f.view(B, f.shape[1], b, -1)
            strips.append(z.mean(-1) + z.amax(-1))
        z = torch.cat(strips, -1).permute(2, 0, 1)
        return F.normalize(torch.bmm(z, self.fc).permute(1, 0, 2), dim=-1)


def sample_frames(seq, n=FRAMES):
    idx = torch.linspace(0, seq.shape[0] - 1, n, device=seq.device).long()
    return seq[idx]


encoder = torch.compile(GaitSetLite().cuda().eval(), **OPTS)


@torch.compile(**OPTS)
def summarize(emb):
    logger.info("embedding norm spread %.4f", emb.norm(dim=-1).std())  # HAZARD: host-code
    return emb.mean(1)


@torch.no_grad()
def enroll(people):
    gallery, ids = [], []
    for pid, seq in people:
        emb = encoder(sample_frames(seq)[None])  # CLEAN: always FRAMES sampled frames
        gallery.append(emb)  # HAZARD: static-address
        ids.append(pid)
    return gallery, ids


@torch.no_grad()
def identify(probe_seq, gallery, ids, thr=0.6):
    emb = encoder(sample_frames(probe_seq)[None]).clone()  # CLEAN: fixed shape and cloned before reuse
    g = torch.cat(gallery)
    dist = (g - emb).norm(dim=-1).mean(-1)
    best = int(dist.argmin())  # CLEAN: host read outside the compiled encoder
    return ids[best] if dist[best] < thr else None


if __name__ == "__main__":
    people = [(f"emp{i:04d}", (torch.rand(int(n), H, W, device="cuda") > 0.7).float())
              for i, n in enumerate(torch.randint(40, 90, (50,)))]
    gallery, ids = enroll(people)
    print(summarize(torch.cat(gallery)).shape)
    print(identify((torch.rand(70, H, W, device="cuda") > 0.7).float(), gallery, ids))
