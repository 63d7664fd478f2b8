"""PTB-XL 12-lead ECG multi-label classifier (71 SCP statements), xresnet1d-style, batch inference.

The assistant added a generic `CUDAGraphModule` wrapper ("drop-in: wrap any nn.Module,
falls back to eager when the shape changes") and wrapped the classifier for the hospital export job.
"""
import numpy as np
import scipy.signal
import torch
import torch.nn as nn


class CUDAGraphModule:
    """Capture `module(x)` once for a fixed input shape and replay it afterwards."""

    def __init__(self, module, warmup=3, enabled=True):
        self.module, self.warmup, self.enabled = module, warmup, enabled
        self.graph = None

    @torch.no_grad()
    def _capture(self, x):
        self.static_in = x.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # CLEAN: forked and joined warm-up stream
            for _ in range(self.warmup):
                self.module(self.static_in)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_out = self.module(self.static_in)

    @torch.no_grad()
    def __call__(self, x):
        if not self.enabled or (self.graph is not None and x.shape != self.static_in.shape):
            return self.module(x)  # CLEAN: eager fallback for other shapes
        if self.graph is None:
            self._capture(x)
        self.static_in.copy_(x)  # CLEAN: copy_ into the static input
        self.graph.replay()
        return self.static_out


class ResBlock1d(nn.Module):
    def __init__(self, c, k=5):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(c, c, k, padding=k // 2), nn.BatchNorm1d(c), nn.ReLU(), nn.Conv1d(c, c, k, padding=k // 2), nn.BatchNorm1d(c))

    def forward(self, x):
        return torch.relu(x + self.body(x))


class ECGNet(nn.Module):
    def __init__(self, n_classes=71, c=128, fs=100):
        super().__init__()
        b, a = scipy.signal.butter(2, 0.5 / (fs / 2), btype="highpass")
        self.hp_kernel = scipy.signal.lfilter(b, a, np.r_[1.0, np.zeros(63)]).astype(np.float32)[::-1].copy()
        self.stem = nn.Sequential(nn.Conv1d(12, c, 7, padding=3), nn.BatchNorm1d(c), nn.ReLU())
        self.blocks = nn.Sequential(*[ResBlock1d(c) for _ in range(6)])
        self.head = nn.Linear(2 * c, n_classes)
        self.min_prob = 0.0  # floor applied to reported probabilities
        self.log_stats = True

    def forward(self, x):
        k = torch.from_numpy(self.hp_kernel).to(x.device)  # HAZARD: pinned-memory
        x = nn.functional.conv1d(x, k.view(1, 1, -1).expand(12, 1, -1).contiguous(), padding=63, groups=12)[..., : x.shape[-1]]
        h = self.blocks(self.stem(x))
        h = torch.cat([h.mean(-1), h.amax(-1)], -1)
        probs = torch.sigmoid(self.head(h))
        if self.log_stats:
            self.last_mean_prob = probs.mean(0).cpu()  # HAZARD: host-sync
        return probs.clamp_min(self.min_prob)  # HAZARD: python-scalar


def export_predictions(model, records, batch=256, calibrate_floor=None):
    net = CUDAGraphModule(model.cuda().eval())
    outs = []
    for i in range(0, len(records), batch):
        x = torch.from_numpy(np.stack(records[i:i + batch])).float().pin_memory().cuda(non_blocking=True)  # CLEAN: pinned upload outside capture
        if i == batch and calibrate_floor is not None:
            model.min_prob = calibrate_floor  # set after the first batch has been reviewed
        outs.append(net(x))  # HAZARD: static-address
    return torch.cat(outs).cpu().numpy()


def single_record(model, rec):
    net = CUDAGraphModule(model.cuda().eval(), enabled=False)
    x = torch.from_numpy(rec[None]).float().cuda()  # CLEAN: eager path, no graph
    return net(x)[0].cpu().numpy()
