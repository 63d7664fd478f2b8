"""Deepfake screening of uploaded clips for a short-video platform.

The trust & safety pipeline samples 16 face crops per upload; a per-frame CNN
plus a temporal GRU give frame-level and clip-level manipulation logits. Clips
above the review threshold go to human moderators with per-frame evidence.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("trust.deepfake")
T, S = 16, 224


class FrameEncoder(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.SiLU(),
            nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.SiLU(),
            nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.SiLU(),
            nn.Conv2d(128, dim, 3, 2, 1), nn.BatchNorm2d(dim), nn.SiLU())

    def forward(self, x):
        return self.features(x).mean((2, 3))


class ClipScreener(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.enc = FrameEncoder(dim)
        self.temporal = nn.GRU(dim, dim // 2, batch_first=True, bidirectional=True)
        self.frame_head = nn.Linear(dim, 1)
        self.clip_head = nn.Linear(dim, 1)

    def forward(self, clips):
        b = clips.shape[0]
        f = self.enc(clips.flatten(0, 1)).view(b, T, -1)
        h, _ = self.temporal(f)
        return self.frame_head(h).squeeze(-1), self.clip_head(h.mean(1)).squeeze(-1)


class DeepfakeService:
    def __init__(self, batch: int = 4):
        self.model = ClipScreener().cuda().eval()
        self.tta_gen = torch.Generator(device="cuda")
        self.tta_gen.manual_seed(99)
        self.static_clips = torch.zeros(batch, T, 3, S, S, device="cuda")
        self.side = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        self._capture()

    def _screen(self, clips):
        # test-time noise: re-encoded fakes are brittle, real camera noise is not
        noise = torch.randn(clips.shape, device=clips.device, generator=self.tta_gen) * 0.01  # HAZARD: rng
        frame_logits, clip_logit = self.model(clips + noise)
        manipulated = frame_logits[frame_logits > 0]  # HAZARD: dynamic-shape
        frac = frame_logits.gt(0).float().mean(1)  # CLEAN: fraction via a comparison, fixed shape
        score = 0.5 * torch.sigmoid(clip_logit) + 0.5 * frac
        log.debug(f"clip scores {score}")  # HAZARD: host-sync
        with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
            evidence = frame_logits.sigmoid()
        torch.cuda.empty_cache()  # HAZARD: memory
        return {"score": score, "evidence": evidence, "n_manipulated": manipulated.numel()}

    @torch.no_grad()
    def _capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(2):
                self._screen(self.static_clips)
        torch.cuda.current_stream().wait_stream(self.side)
        with torch.cuda.graph(self.graph):
            log.info("capturing deepfake screening graph")  # CLEAN: plain string, logged once at capture
            self.out = self._screen(self.static_clips)
        torch.cuda.empty_cache()  # CLEAN: runs after the capture, outside the graph

    @torch.no_grad()
    def screen(self, clips, review_thr=0.7):
        n = clips.shape[0]
        self.static_clips[:n].copy_(clips)  # CLEAN: copy_ into the static input
        self.graph.replay()
        scores = self.out["score"][:n].cpu()
        flagged = (scores > review_thr).nonzero().flatten().tolist()  # CLEAN: eager host-side triage after replay
        return scores, {i: self.out["evidence"][i].cpu() for i in flagged}


if __name__ == "__main__":
    svc = DeepfakeService()
    uploads = torch.rand(3, T, 3, S, S, device="cuda")
    s, ev = svc.screen(uploads)
    print(s, list(ev))
