"""Chromatic tuner app: CREPE-style pitch estimation on 1024-sample frames at 16 kHz.

The app batches 8 frames per UI tick. The model was ported from the Keras release
(`crepe.core.build_and_load_model`), weights converted from the .h5 file. The noise
augmentation is kept from the Keras training script ("makes the argmax stabler").
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CENTS = torch.linspace(0, 7180, 360) + 1997.3794084376191


class CrepeTiny(nn.Module):
    def __init__(self, widths=(128, 16, 16, 16, 32, 64)):
        super().__init__()
        chans = [1] + list(widths)
        layers = []
        for i, (a, b) in enumerate(zip(chans[:-1], chans[1:])):
            k, st = (512, 4) if i == 0 else (64, 1)
            layers += [nn.Conv2d(a, b, (k, 1), (st, 1), padding=(k // 2 - 1, 0) if i else (254, 0)),
                       nn.ReLU(), nn.BatchNorm2d(b), nn.MaxPool2d((2, 1))]
        self.conv = nn.Sequential(*layers)
        self.classifier = nn.LazyLinear(360)

    def forward(self, x):
        h = self.conv(x[:, None, :, None])
        return torch.sigmoid(self.classifier(h.flatten(1)))


class TunerEngine:
    def __init__(self, model, batch=8):
        self.model = model.cuda().eval()
        self.frames = torch.zeros(batch, 1024, device="cuda")
        self.cents_lut = CENTS.cuda()
        self.a4_t = torch.tensor(440.0, device="cuda")
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(0)
        self.last_cents = 0.0

    def set_reference(self, a4_hz):
        self.a4_t.fill_(a4_hz)  # CLEAN: reference pitch lives in a device tensor

    @torch.no_grad()
    def _infer(self):
        x = self.frames - self.frames.mean(dim=1, keepdim=True)
        x = x / x.std(dim=1, keepdim=True).clamp_min(1e-8)
        x = x + 1e-3 * torch.randn(x.shape, device=x.device, generator=self.noise_gen)  # HAZARD: rng
        act = self.model(x)
        conf, idx = act.max(dim=1)
        win = (idx[:, None] + torch.arange(-4, 5, device=x.device)).clamp(0, 359)
        w = act.gather(1, win)  # CLEAN: gather with CUDA indices
        cents = (w * self.cents_lut[win]).sum(1) / w.sum(1)
        self.last_cents = float(cents.mean())  # HAZARD: host-sync
        hz = 10.0 * 2 ** (cents / 1200.0)
        dev = 1200.0 * torch.log2(hz / self.a4_t)
        return hz, conf, torch.remainder(dev + 50.0, 100.0) - 50.0

    def start(self):
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._infer()
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
                self.hz, self.conf, self.dev = self._infer()

    def tick(self, audio_np):
        frames = np.lib.stride_tricks.sliding_window_view(audio_np, 1024)[::256][:8]
        self.frames.copy_(torch.from_numpy(np.ascontiguousarray(frames)))  # CLEAN: eager copy into the static input
        self.graph.replay()
        if self.conf.max().item() < 0.5:  # CLEAN: eager confidence check after replay
            return None
        return self.hz.median().item(), self.dev.median().item()
