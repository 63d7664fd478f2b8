"""Real-time NPC lip-sync: streamed dialogue audio -> 52 ARKit blendshapes.

The dialogue system pushes 20 ms of 16 kHz audio per tick. The GRU keeps a
recurrent state across ticks, the output is smoothed and a little blink and
breathing motion is layered on top before the animation graph consumes it.
The per-tick work is tiny, so the whole tick is replayed from one CUDA graph.
"""
import logging
import math
import time

import torch
import torch.nn as nn

log = logging.getLogger("npc.lipsync")
HOP, N_MELS, N_SHAPES = 320, 40, 52
BLINK_L, BLINK_R = 9, 10


class Audio2Face(nn.Module):
    def __init__(self, hidden=192):
        super().__init__()
        self.mel = nn.Conv1d(1, N_MELS, kernel_size=400, stride=HOP, padding=40)
        self.gru = nn.GRUCell(N_MELS + 8, hidden)
        self.emotion = nn.Embedding(8, 8)
        self.out = nn.Linear(hidden, N_SHAPES)

    def forward(self, wav, emo_id, h):
        feat = torch.log1p(self.mel(wav).abs()).mean(-1)
        h = self.gru(torch.cat([feat, self.emotion(emo_id)], -1), h)
        return torch.sigmoid(self.out(h)), h


class LipSyncTick:
    def __init__(self, model, n_npcs=16, seed=7):
        self.model = model.cuda().eval()
        self.wav = torch.zeros(n_npcs, 1, HOP, device="cuda")
        self.emo = torch.zeros(n_npcs, dtype=torch.long, device="cuda")
        self.h = torch.zeros(n_npcs, 192, device="cuda")
        self.smoothed = torch.zeros(n_npcs, N_SHAPES, device="cuda")
        self.blink_gen = torch.Generator(device="cuda")
        self.blink_gen.manual_seed(seed)
        self.emotion_intensity = 1.0
        self.t_start = time.perf_counter()

    def set_emotion(self, npc, emo_id, intensity):
        self.emo[npc] = emo_id
        self.emotion_intensity = intensity

    def _tick(self):
        log.debug("lipsync tick")  # CLEAN: plain-string log, no tensor formatted
        weights, h_new = self.model(self.wav, self.emo, self.h)
        self.h = h_new  # HAZARD: static-address
        intensity = self.emotion_intensity  # HAZARD: python-scalar
        weights = weights * intensity
        self.smoothed.lerp_(weights, 0.35)  # CLEAN: in-place update of a persistent buffer
        blink = torch.rand(self.wav.shape[0], generator=self.blink_gen, device="cuda") < 0.02  # HAZARD: rng
        self.smoothed[:, BLINK_L] = torch.where(blink, 1.0, self.smoothed[:, BLINK_L])
        self.smoothed[:, BLINK_R] = torch.where(blink, 1.0, self.smoothed[:, BLINK_R])
        phase = (time.perf_counter() - self.t_start) * 2.0 * math.pi * 0.25  # HAZARD: host-code
        jitter = 0.01 * torch.randn_like(self.smoothed)  # CLEAN: default CUDA generator, advanced on every replay
        return (self.smoothed + jitter + 0.02 * math.sin(phase)).clamp(0.0, 1.0)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self._tick()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.out = self._tick()

    def step(self, pcm_chunks):
        self.wav.copy_(pcm_chunks)  # CLEAN: new audio copied into the captured input
        self.graph.replay()
        return self.out


if __name__ == "__main__":
    tick = LipSyncTick(Audio2Face())
    tick.capture()
    frames = []
    for t in range(3000):
        pcm = torch.randn(16, 1, HOP, device="cuda") * 0.1
        if t == 1200:
            tick.set_emotion(3, emo_id=5, intensity=1.6)
        frames.append(tick.step(pcm).cpu())
