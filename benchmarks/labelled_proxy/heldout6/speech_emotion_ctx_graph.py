"""Speech emotion recognition (arousal, valence, 4-way category) for call-centre audio.

Utterances are cut into 4 s windows of 64-band log-mel frames. A CNN front-end with
attentive statistics pooling predicts the emotion; inference for a fixed batch of 16
windows is captured through a small `graph_capture` context manager.
"""
import contextlib
import logging
import random
import torch
import torch.nn as nn

log = logging.getLogger("ser")
N_MELS, WIN_FRAMES, BATCH = 64, 400, 16


@contextlib.contextmanager
def graph_capture(graph, pool=None):
    torch.cuda.synchronize()  # CLEAN: synchronize before the capture begins
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, pool=pool, stream=stream):  # HAZARD: api-misuse
            yield
    torch.cuda.current_stream().wait_stream(stream)


class AttentiveStatsPool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.att = nn.Sequential(nn.Linear(d, 128), nn.Tanh(), nn.Linear(128, 1))

    def forward(self, h, valid):
        w = self.att(h).squeeze(-1).masked_fill(~valid, float("-inf")).softmax(-1)  # CLEAN: masked_fill keeps shapes static
        mu = (w.unsqueeze(-1) * h).sum(1)
        sd = ((w.unsqueeze(-1) * (h - mu.unsqueeze(1)) ** 2).sum(1) + 1e-5).sqrt()
        return torch.cat([mu, sd], -1)


class EmotionNet(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(N_MELS, d, 5, padding=2), nn.BatchNorm1d(d), nn.ReLU(),
            nn.Conv1d(d, d, 3, padding=2, dilation=2), nn.BatchNorm1d(d), nn.ReLU())
        self.pool = AttentiveStatsPool(d)
        self.dims = nn.Linear(2 * d, 2)
        self.cat = nn.Linear(2 * d, 4)

    def forward(self, mel, lengths):
        t_max = int(lengths.max())  # HAZARD: host-sync
        mel = mel[..., :t_max]
        h = self.conv(mel).transpose(1, 2)
        valid = torch.arange(h.shape[1], device=mel.device)[None] < lengths[:, None]
        z = self.pool(h, valid)
        return torch.cat([torch.tanh(self.dims(z)), self.cat(z).softmax(-1)], -1)


class EmotionService:
    def __init__(self, model):
        self.model = model.eval()
        self.static_mel = torch.zeros(BATCH, N_MELS, WIN_FRAMES, device="cuda")
        self.static_len = torch.full((BATCH,), WIN_FRAMES, device="cuda", dtype=torch.long)
        self.arousal_ema = torch.zeros((), device="cuda")
        self.stats_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def _tta(self):
        gain_db = random.uniform(-3.0, 3.0)  # HAZARD: host-code
        out = self.model(self.static_mel + gain_db / 10.0, self.static_len)
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.arousal_ema.mul_(0.99).add_(0.01 * out[:, 0].mean())
        return out

    @torch.no_grad()
    def build(self):
        log.info("capturing SER graph for %d windows", BATCH)  # CLEAN: plain message, no tensor formatted
        with graph_capture(self.graph):
            self.static_out = self._tta()

    @torch.no_grad()
    def predict(self, mel, lengths):
        self.static_mel.copy_(mel)  # CLEAN: copy_ into the static input
        self.static_len.copy_(lengths)
        self.graph.replay()
        return self.static_out.clone()


if __name__ == "__main__":
    svc = EmotionService(EmotionNet().cuda())
    svc.build()
    for call in range(8):
        mel = torch.randn(BATCH, N_MELS, WIN_FRAMES, device="cuda")
        lengths = torch.randint(200, WIN_FRAMES + 1, (BATCH,), device="cuda")
        out = svc.predict(mel, lengths)
        print(call, "mean arousal", out[:, 0].mean().item(), "valence", out[:, 1].mean().item())
