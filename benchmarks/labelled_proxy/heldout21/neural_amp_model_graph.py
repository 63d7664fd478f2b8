"""Offline renderer for a NAM-style LSTM guitar-amp model.

`render_eager` is the original block loop from the plugin repo. `GraphedAmp` was added
after asking the coding assistant to "make the renderer faster with CUDA graphs": one
2048-sample block per replay, LSTM state kept on the GPU between blocks.
"""
import logging

import soundfile as sf
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("amp")
BLOCK = 2048


class LSTMAmp(nn.Module):
    def __init__(self, hidden=32, layers=1):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, state):
        y, state = self.lstm(x, state)
        return self.head(y) + x, state


def render_eager(model, audio, gain_db=0.0):
    # old path, kept for A/B listening tests
    state, out = None, []
    with torch.no_grad():
        for blk in audio.split(BLOCK, dim=1):
            y, state = model(blk * 10 ** (gain_db / 20), state)  # CLEAN: eager reference path, no graph involved
            out.append(y)
    return torch.cat(out, dim=1)


class GraphedAmp:
    def __init__(self, model, hidden=32, device="cuda"):
        self.model = model.eval().to(device)
        self.input_gain_db = 0.0
        self.static_in = torch.zeros(1, BLOCK, 1, device=device)
        self.h = torch.zeros(1, 1, hidden, device=device)
        self.c = torch.zeros(1, 1, hidden, device=device)
        self.graph = torch.cuda.CUDAGraph()

    def set_gain(self, db):
        self.input_gain_db = db

    def _process(self):
        x = self.static_in * (10 ** (self.input_gain_db / 20))  # HAZARD: python-scalar
        y, (h, c) = self.model(x, (self.h, self.c))
        self.h = h  # HAZARD: static-address
        self.c.copy_(c)  # CLEAN: cell state written back into the captured buffer
        peak = y.abs().amax()
        if peak > 1.0:  # HAZARD: dynamic-control-flow
            y = y / peak
        log.debug(f"block peak {peak:.3f}")  # HAZARD: host-sync
        self.static_out = torch.tanh(y)
        return self.static_out

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._process()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self._process()

    @torch.no_grad()
    def render(self, audio):
        self.h.zero_()
        self.c.zero_()
        out = []
        for blk in audio.split(BLOCK, dim=1):
            n = blk.shape[1]
            if n < BLOCK:
                blk = F.pad(blk, (0, 0, 0, BLOCK - n))
            self.static_in.copy_(blk)
            self.graph.replay()
            out.append(self.static_out[:, :n].clone())  # CLEAN: cloned before the next replay overwrites it
        return torch.cat(out, dim=1)


if __name__ == "__main__":
    model = LSTMAmp()
    model.load_state_dict(torch.load("jcm800_lstm.pt", weights_only=True))
    audio, sr = sf.read("di_riff.wav", dtype="float32")
    x = torch.from_numpy(audio).view(1, -1, 1).cuda()
    amp = GraphedAmp(model)
    amp.capture()
    for db in (-6.0, 0.0, 6.0):
        amp.set_gain(db)
        y = amp.render(x)
        ref = render_eager(amp.model, x, gain_db=db)
        print(f"{db:+.0f} dB  max diff vs eager {(y - ref).abs().max().item():.2e}")  # CLEAN: host read after replay
        sf.write(f"riff_{int(db):+d}dB.wav", y.view(-1).cpu().numpy(), sr)
