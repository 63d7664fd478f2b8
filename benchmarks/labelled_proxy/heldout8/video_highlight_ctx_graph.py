"""Highlight detection for a gameplay-clip sharing site.

Frame features (from the upload transcoder) are scored by a temporal
transformer; the top windows become the auto-generated highlight reel.  The
scorer is captured once through a small context-manager helper.
"""
import contextlib
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("highlights")
T, FEAT = 512, 768


@contextlib.contextmanager
def captured(graph, pool=None):
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(graph, pool=pool, stream=stream):  # HAZARD: api-misuse
        yield graph
    torch.cuda.current_stream().wait_stream(stream)


class SaliencyNet(nn.Module):
    def __init__(self, d=384):
        super().__init__()
        self.inp = nn.Linear(FEAT, d)
        self.pos = nn.Parameter(torch.randn(1, T, d) * 0.02)
        self.tf = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 6, 4 * d, batch_first=True), 4)
        self.out = nn.Linear(d, 1)

    def forward(self, feats):
        return self.out(self.tf(self.inp(feats) + self.pos)).squeeze(-1)


class HighlightDetector:
    def __init__(self, model, reel_len=8):
        self.model = model.cuda().eval()
        self.reel_len = reel_len
        self.static_feats = torch.zeros(1, T, FEAT, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), captured(self.graph):
            self.out = self._detect(self.static_feats)

    def _detect(self, feats):
        sal = self.model(feats)[0]
        log.info("scoring a clip window")  # CLEAN: plain string, logged once at capture
        smooth = F.avg_pool1d(sal[None, None], 9, 1, 4)[0, 0]
        top = torch.topk(smooth, self.reel_len)  # CLEAN: topk has a fixed output shape
        peaks = (smooth > smooth.mean() + 2 * smooth.std()).nonzero().squeeze(-1)  # HAZARD: dynamic-shape
        log.debug(f"peak saliency {smooth.max():.3f}")  # HAZARD: host-sync
        torch.cuda.empty_cache()  # HAZARD: memory
        return top.indices, top.values, peaks

    def reel(self, clip_feats, fps=30):
        windows = []
        for start in range(0, clip_feats.shape[0], T):
            chunk = clip_feats[start:start + T]
            self.static_feats.zero_()
            self.static_feats[0, : chunk.shape[0]].copy_(chunk)  # CLEAN: copy_ into the captured input
            self.graph.replay()
            idx, val, _ = self.out
            windows += [(start + int(i), float(v)) for i, v in zip(idx.tolist(), val.tolist())]  # CLEAN: host reads after the replay
        windows.sort(key=lambda w: -w[1])
        return [(s / fps, (s + 90) / fps) for s, _ in windows[: self.reel_len]]


if __name__ == "__main__":
    det = HighlightDetector(SaliencyNet())
    for n_frames in (1800, 5400, 900):
        print(det.reel(torch.randn(n_frames, FEAT, device="cuda")))
