"""In-hive acoustic monitoring for an apiary: queenless and pre-swarm states from a
4-microphone array in the brood box. Scoring is wrapped in a capture-on-first-call
decorator so the gateway replays one CUDA graph per 4-second window.
"""
import functools
import logging
import time

import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("hive")
SR = 8000
WIN = SR * 4


def cuda_graphed(warmup=3):
    """Capture the decorated method on its first call; later calls copy the
    arguments into the static inputs and replay."""
    def deco(method):
        @functools.wraps(method)
        def wrapper(self, *args):
            state = self.__dict__.setdefault("_graph_state", {})
            if "graph" not in state:
                static = [a.clone() for a in args]
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(warmup):
                        method(self, *static)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream just above
                    out = method(self, *static)
                state.update(graph=g, static=static, out=out)
            for s, a in zip(state["static"], args):
                s.copy_(a)
            state["graph"].replay()
            return state["out"]
        return wrapper
    return deco


class HiveNet(nn.Module):
    def __init__(self, n_filt=64):
        super().__init__()
        self.filterbank = nn.Conv1d(4, n_filt, 400, stride=160)  # learned, mel-initialised
        self.body = nn.Sequential(nn.Conv1d(n_filt + 1, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.head = nn.Linear(128, 3)  # normal / queenless / pre-swarm


class HiveMonitor:
    def __init__(self, net, mic_gain_db: np.ndarray, device="cuda"):
        self.dev = device
        self.net = net.to(device).eval()
        self.mic_gain_db = mic_gain_db.astype(np.float32)  # from the yearly calibration visit
        self.archive_stream = torch.cuda.Stream()
        self.archive = torch.zeros(4, WIN, device=device)

    @torch.no_grad()
    @cuda_graphed(warmup=3)
    def score(self, audio):
        log.info("scoring hive window")  # CLEAN: plain-string log, no tensor formatted
        gain = torch.from_numpy(10 ** (self.mic_gain_db / 20)).to(self.dev, non_blocking=True)  # HAZARD: pinned-memory
        x = audio * gain.view(1, 4, 1)
        feats = torch.relu(self.net.filterbank(x)).clamp_min(1e-6).log()
        hour = time.localtime(time.time()).tm_hour  # HAZARD: host-code
        diurnal = torch.full_like(feats[:, :1], float(np.sin(2 * np.pi * hour / 24)))
        pooled = self.net.body(torch.cat([feats, diurnal], 1)).flatten(1)
        probs = torch.softmax(self.net.head(pooled), -1)
        with torch.cuda.stream(self.archive_stream):  # HAZARD: stream
            self.archive.copy_(audio[0])
        swarm_risk = probs[0, 2].item()  # HAZARD: host-sync
        alert = torch.where(probs[:, 2] > 0.7, probs[:, 2], torch.zeros_like(probs[:, 2]))  # CLEAN: torch.where instead of a host branch
        return probs, alert, swarm_risk


if __name__ == "__main__":
    mon = HiveMonitor(HiveNet(), np.array([0.0, 1.5, -0.5, 0.8]))
    for minute in range(60):
        audio = torch.randn(1, 4, WIN, device="cuda") * 0.05
        probs, alert, risk = mon.score(audio)
        if minute % 10 == 0:
            print(minute, probs.cpu().numpy().round(3), float(alert[0]))
