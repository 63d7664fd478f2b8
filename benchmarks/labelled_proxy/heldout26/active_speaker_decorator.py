"""Active-speaker detection for a video-conferencing room camera (auto-framing).

Face tracks from the room camera and the beamformed microphone audio are fused by an
audio-visual model; the framing controller cuts to the active speaker. The scoring method is
wrapped in a capture-on-first-call decorator from the company's "fastpath" utilities, so later
calls replay the graph. The cut hysteresis is fixed per room at install time.
"""
import functools
import time

import torch
import torch.nn as nn

FACES, FRAMES, MELS = 6, 16, 64
SWITCH_HYSTERESIS = 0.15


def cuda_graphed(fn):
    """Capture ``fn`` on the first call, replay it afterwards (inputs are copied in)."""
    state = {}

    @functools.wraps(fn)
    def wrapper(self, *tensors):
        if "graph" not in state:
            state["inputs"] = [t.clone() for t in tensors]
            state["graph"] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(state["graph"]):  # HAZARD: api-misuse
                state["out"] = fn(self, *state["inputs"])
        for dst, src in zip(state["inputs"], tensors):
            dst.copy_(src)  # CLEAN: copy into the captured inputs
        state["graph"].replay()
        return state["out"]

    return wrapper


class AVNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = nn.Sequential(nn.Conv3d(1, 16, (3, 5, 5), (1, 2, 2), (1, 2, 2)), nn.ReLU(),
                               nn.AdaptiveAvgPool3d((FRAMES, 1, 1)), nn.Flatten(2))
        self.a = nn.Conv1d(MELS, 16, 3, padding=1)
        self.fuse = nn.GRU(32, 32, batch_first=True)
        self.out = nn.Linear(32, 1)
        self.drop = nn.Dropout(0.2)


class SpeakerSelector:
    def __init__(self, dev="cuda"):
        self.net = AVNet().to(dev).eval()
        self.current = torch.zeros((), dtype=torch.long, device=dev)
        self.last_switch_t = 0.0
        self.frame = 0

    @cuda_graphed
    @torch.no_grad()
    def score(self, faces, mel):
        torch.cuda.manual_seed(self.frame)  # HAZARD: rng
        v = self.net.v(faces.unsqueeze(1)).transpose(1, 2)
        a = self.net.a(mel).transpose(1, 2).expand(FACES, -1, -1)
        h, _ = self.net.fuse(self.net.drop(torch.cat([v, a], -1)))
        p = self.net.out(h[:, -1]).squeeze(-1).sigmoid()
        hyst = SWITCH_HYSTERESIS  # CLEAN: module constant, never changed after capture
        best = p.argmax()
        switch = p.gather(0, best.view(1)) > p.gather(0, self.current.view(1)) + hyst
        self.current.copy_(torch.where(switch.squeeze(0), best, self.current))  # CLEAN: device-side select written in place
        self.speaker = int(self.current)  # HAZARD: host-sync
        self.last_switch_t = time.time()  # HAZARD: host-code
        return p, self.current


class FramingController:
    def __init__(self, ptz):
        self.sel, self.ptz = SpeakerSelector(), ptz
        self.last_cut = time.time()

    def on_tick(self, faces, mel, boxes):
        p, cur = self.sel.score(faces, mel)
        idx = int(cur)  # CLEAN: read after replay, outside the capture
        if time.time() - self.last_cut > 2.0 and p[idx] > 0.5:
            self.ptz.frame(boxes[idx])
            self.last_cut = time.time()
        self.sel.frame += 1
