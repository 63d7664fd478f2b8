"""Stem separation (vocals/drums/bass/other) for a DJ app: generator pipeline feeding a captured separator."""
import time
import numpy as np
import torch
import torch.nn as nn

class StemGain:
    def __init__(self, db=0.0):
        self.user_db = db
    @property
    def linear(self):
        return 10.0 ** (self.user_db / 20.0)  # HAZARD: python-scalar
    @property
    def n_stems(self):
        return 4  # CLEAN: constant property

class HostEq:
    def __init__(self, n_bins=1025):
        self.curve = np.linspace(1.0, 0.8, n_bins, dtype=np.float32)
    def apply(self, spec):
        return spec * torch.from_numpy(self.curve).cuda().unsqueeze(-1)  # HAZARD: pinned-memory

class LatencyMeter:
    def __init__(self):
        self.stamps = []
    def on_chunk(self, masks):
        self.stamps.append(time.time())  # HAZARD: host-code

class MaskNet(nn.Module):
    def __init__(self, n_bins=1025, n_stems=4):
        super().__init__()
        self.n_stems = n_stems
        self.lstm = nn.LSTM(n_bins, 256, batch_first=True, bidirectional=True)
        self.out = nn.Linear(512, n_bins * n_stems)
    def forward(self, mag):
        h, _ = self.lstm(mag.transpose(1, 2))
        m = self.out(h).view(mag.shape[0], -1, self.n_stems, mag.shape[1])
        return torch.softmax(m, 2).permute(0, 2, 3, 1)

class Separator(nn.Module):
    def __init__(self, net, eq, gain, callbacks):
        super().__init__()
        self.net, self.eq, self.gain, self.callbacks = net, eq, gain, callbacks
        self.register_buffer("window", torch.hann_window(2048))  # CLEAN: buffer built once
    def forward(self, mix):
        spec = torch.stft(mix, 2048, 512, window=self.window, return_complex=True)
        masks = self.net(self.eq.apply(spec.abs()))
        for cb in self.callbacks:
            cb.on_chunk(masks)
        stems = masks * spec.unsqueeze(1) * self.gain.linear
        return torch.view_as_real(stems)

class SeparatorRunner:
    def __init__(self, sep, batch=2, samples=44100 * 6):
        self.sep = sep.cuda().eval()
        self.mix = torch.zeros(batch, samples, device="cuda")
    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.sep(self.mix)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # CLEAN: warmed on a side stream
            self.stems = self.sep(self.mix)

def read_chunks(track, samples):
    for start in range(0, track.shape[-1] - samples + 1, samples):
        yield track[:, start:start + samples]

def upload(chunks):
    for c in chunks:
        yield c.pin_memory().to("cuda", non_blocking=True)  # CLEAN: pinned upload, outside the capture

def separate(runner, chunks, in_place=True):
    for c in chunks:
        if in_place:
            runner.mix.copy_(c)  # CLEAN: copy_ into the captured input
        else:
            runner.mix = c  # HAZARD: static-address
        runner.graph.replay()
        yield runner.stems.clone()

def process_set(tracks, gain_db_per_track, live=False):
    gain = StemGain()
    runner = SeparatorRunner(Separator(MaskNet(), HostEq(), gain, [LatencyMeter()]))
    runner.capture()
    for track, db in zip(tracks, gain_db_per_track):
        gain.user_db = db
        yield torch.cat(list(separate(runner, upload(read_chunks(track, runner.mix.shape[-1])), not live)), -2)
