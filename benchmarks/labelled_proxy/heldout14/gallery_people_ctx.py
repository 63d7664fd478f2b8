"""'People' album of a photo-backup app: group detected face crops into persons.

Face crops of a backup batch are embedded and matched against the person centroids of
the account. The matching step is captured through a small context-manager helper.
"""
import contextlib
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("people")


@contextlib.contextmanager
def graph_capture(pool=None):
    """Capture everything run inside the block into a fresh CUDA graph on a side stream."""
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, pool=pool, stream=s):  # HAZARD: api-misuse
            yield g
    torch.cuda.current_stream().wait_stream(s)


class FaceEmbedder(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        chans, layers, cin = (32, 64, 128, 128), [], 3
        for c in chans:
            layers += [nn.Conv2d(cin, c, 3, 2, 1), nn.BatchNorm2d(c), nn.PReLU(c)]
            cin = c
        self.net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, d))

    def forward(self, x):
        return F.normalize(self.net(x), dim=-1)


class PeopleAlbum:
    def __init__(self, embedder, max_people=512, batch=64, device="cuda"):
        self.embedder = embedder.eval().to(device)
        self.new_person_thr = 0.45
        self.centroids = torch.zeros(max_people, 128, device=device)
        self.faces = torch.zeros(batch, 3, 112, 112, device=device)
        self.seed_queue = torch.zeros(batch, 128, device=device)
        with torch.no_grad(), graph_capture() as self.graph:
            self.assign, self.is_new = self._group(self.faces)

    def _group(self, faces):
        emb = self.embedder(faces)
        best, assign = (emb @ self.centroids.T).max(1)
        is_new = best < self.new_person_thr
        log.debug(f"best match in batch {best.max():.3f}")  # HAZARD: host-sync
        log.debug("grouping backup batch")  # CLEAN: plain string, nothing formatted from a tensor
        newcomers = is_new.nonzero().squeeze(1)  # HAZARD: dynamic-shape
        self.seed_queue[: newcomers.numel()].copy_(emb[newcomers])
        w = F.one_hot(assign, self.centroids.shape[0]).float() * (~is_new).float()[:, None]  # CLEAN: one_hot with num_classes, fixed shape
        self.centroids.add_(0.05 * (w.T @ emb))
        self.centroids.copy_(F.normalize(self.centroids, dim=-1))  # CLEAN: in-place update keeps the address
        torch.cuda.empty_cache()  # HAZARD: memory
        return assign, is_new

    @torch.no_grad()
    def add_photos(self, crops):
        self.faces.copy_(crops)
        self.graph.replay()
        return self.assign.clone(), self.is_new.clone()


def backup_job(album, detector, photos):
    persons = []
    for batch in detector.face_batches(photos, size=64):
        assign, is_new = album.add_photos(batch.cuda())
        persons.append(torch.where(is_new, -1, assign))
    return torch.cat(persons)
