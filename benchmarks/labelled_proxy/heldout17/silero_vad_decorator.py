"""Multi-stream voice activity detection for a conferencing bridge (Silero-like VAD).

Each tick processes one 32 ms chunk for every open stream. The tick method is wrapped by a
decorator that warms it up, captures it into a CUDA graph on first use, then replays it.
"""
import functools
import time

import torch
import torch.nn as nn


def graphed_on_first_call(warmup=3):
    def deco(method):
        @functools.wraps(method)
        def wrapper(self):
            cache = self.__dict__.setdefault("_graphs", {})
            if method.__name__ not in cache:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(warmup):
                        method(self)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream before capture
                    out = method(self)
                cache[method.__name__] = (g, out)
            g, out = cache[method.__name__]
            g.replay()
            return out
        return wrapper
    return deco


class VADNet(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.frontend = nn.Sequential(nn.Conv1d(1, 32, 64, stride=32), nn.ReLU(),
                                      nn.Conv1d(32, hidden, 3, padding=1), nn.ReLU())
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)


class StreamingVAD:
    LEVELS = {"low": 0.7, "mid": 0.5, "high": 0.3}

    def __init__(self, model, n_streams=64, chunk=512, hidden=64):
        self.model = model.eval().cuda()
        self.audio = torch.zeros(n_streams, chunk, device="cuda")
        self.h = torch.zeros(1, n_streams, hidden, device="cuda")
        self.c = torch.zeros(1, n_streams, hidden, device="cuda")
        self.speech_frames = torch.zeros(n_streams, dtype=torch.long, device="cuda")
        self.loudness = torch.zeros(n_streams, device="cuda")
        self.meter_stream = torch.cuda.Stream()
        self.threshold = self.LEVELS["mid"]
        self.peak, self.tick_t = 0.0, 0.0

    def set_sensitivity(self, level):
        self.threshold = self.LEVELS[level]

    @graphed_on_first_call()
    @torch.no_grad()
    def _tick(self):
        feats = self.model.frontend(self.audio.unsqueeze(1)).transpose(1, 2)
        out, (h, c) = self.model.lstm(feats, (self.h, self.c))
        self.h.copy_(h)  # CLEAN: recurrent state written in place
        self.c.copy_(c)
        prob = torch.sigmoid(self.model.head(out[:, -1])).squeeze(-1)
        thr = self.threshold  # HAZARD: python-scalar
        is_speech = prob > thr
        self.speech_frames.add_(is_speech.long())  # CLEAN: device-side counter
        self.peak = float(prob.max())  # HAZARD: host-sync
        self.tick_t = time.monotonic()  # HAZARD: host-code
        with torch.cuda.stream(self.meter_stream):  # HAZARD: stream
            self.loudness.copy_(self.audio.pow(2).mean(1).sqrt())
        return torch.where(is_speech, prob, torch.zeros_like(prob))  # CLEAN: torch.where instead of a host branch

    def push(self, chunk_batch):
        self.audio.copy_(chunk_batch, non_blocking=True)  # CLEAN: copy into the static chunk buffer
        probs = self._tick()
        return probs.cpu()

    def close_stream(self, i):
        self.h[:, i].zero_()
        self.c[:, i].zero_()
        self.speech_frames[i] = 0
