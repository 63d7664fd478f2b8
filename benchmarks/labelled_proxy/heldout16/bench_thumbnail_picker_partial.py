"""Latency benchmarks for the thumbnail picker of a video-hosting platform.

64 candidate frames per upload are scored for quality, faces and text overlays; a
diversity-aware top-K (MMR) proposes 5 thumbnails. Each case is a callable handed
to `bench_graph`, which warms it up, captures it once and times the replays."""
import functools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_FRAMES, S = 64, 224


class FrameScorer(nn.Module):
    def __init__(self, d: int = 128):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(64, d, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.heads = nn.Linear(d, 3)     # quality, face, text overlay

    def embed(self, frames):
        return self.backbone(frames)

    def forward(self, frames):
        return self.heads(self.backbone(frames))


def bench_graph(case, *, iters: int = 100, warmup: int = 3, sweep=None, attr: str = "diversity"):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        with torch.cuda.stream(side):
            for _ in range(warmup):
                case()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = case()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    timings = {}
    for value in sweep or [None]:
        if value is not None:
            setattr(case, attr, value)
        start.record()
        for _ in range(iters):
            g.replay()
        end.record()
        torch.cuda.synchronize()  # CLEAN: synchronize after the replays, outside the capture
        timings[value] = start.elapsed_time(end) / iters
    return timings, out


def score_frames(model, frames):
    return model(frames).sigmoid()


def staged_score(model, frames):
    emb = model.embed(frames)
    torch.cuda.synchronize()  # HAZARD: host-sync
    return model.heads(emb).sigmoid()


class DiverseTopK:
    """Pick K thumbnails greedily, penalising frames similar to ones already chosen (MMR)."""
    def __init__(self, model, frames, k: int = 5, diversity: float = 0.3):
        self.model, self.frames, self.k, self.diversity = model, frames, k, diversity

    def __call__(self):
        emb = F.normalize(self.model.embed(self.frames).float(), dim=-1)
        q = self.model(self.frames)[:, 0].float()
        lam = self.diversity  # HAZARD: python-scalar
        sim = emb @ emb.t()
        chosen = torch.zeros_like(q, dtype=torch.bool)
        for _ in range(self.k):
            pen = torch.where(chosen[None, :], sim, torch.full_like(sim, -1.0)).amax(1)
            mmr = (q - lam * pen.clamp_min(0)).masked_fill(chosen, -1e4)
            chosen = chosen | F.one_hot(mmr.argmax(), N_FRAMES).bool()  # CLEAN: one_hot with num_classes
        return chosen


class FaceAwareCase:
    """Quality score boosted by face area; face boxes come from the upstream detector."""
    def __init__(self, model, frames, face_boxes: np.ndarray, pinned: bool = False):
        self.model, self.frames, self.face_boxes = model, frames, face_boxes
        self.host = torch.from_numpy(face_boxes).pin_memory() if pinned else None
        self.dev_boxes = torch.empty(face_boxes.shape, device="cuda")

    def __call__(self):
        if self.host is not None:
            self.dev_boxes.copy_(self.host, non_blocking=True)  # CLEAN: H2D copy from pinned memory is recorded
            boxes = self.dev_boxes
        else:
            boxes = torch.from_numpy(self.face_boxes).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        return self.model(self.frames)[:, 1].sigmoid() * (1 + area)


if __name__ == "__main__":
    model = FrameScorer().cuda().eval()
    frames = torch.rand(N_FRAMES, 3, S, S, device="cuda")
    boxes = np.random.default_rng(0).random((N_FRAMES, 4)).astype(np.float32)
    with torch.no_grad():
        print(bench_graph(functools.partial(score_frames, model, frames)))
        print(bench_graph(functools.partial(staged_score, model, frames)))
        print(bench_graph(DiverseTopK(model, frames), sweep=[0.0, 0.3, 0.6]))
        print(bench_graph(FaceAwareCase(model, frames, boxes)))
        print(bench_graph(FaceAwareCase(model, frames, boxes, pinned=True)))
