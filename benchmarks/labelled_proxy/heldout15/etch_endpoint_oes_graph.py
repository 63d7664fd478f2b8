"""Plasma etch endpoint detection from optical emission spectroscopy (OES).

The spectrometer delivers a 2048-pixel spectrum every 100 ms. Emission lines of
the etch products (CO, SiF, F) are normalised by the chamber reference spectrum
and the local continuum, and a small temporal CNN gives the endpoint probability.
"""
import numpy as np
import torch
import torch.nn as nn

N_PIX, T = 2048, 64
LINE_PIX = (412, 518, 611, 745, 1333, 1402)      # CO 483.5, SiF 440, F 703.7, ... (pixel indices)
CONTINUUM = (900, 980)                             # featureless band used as background


class EndpointNet(nn.Module):
    def __init__(self, n_lines=len(LINE_PIX), ch=48):
        super().__init__()
        self.tcn = nn.Sequential(
            nn.Conv1d(n_lines, ch, 5, padding=2), nn.ReLU(),
            nn.Conv1d(ch, ch, 5, padding=4, dilation=2), nn.ReLU(),
            nn.Conv1d(ch, 1, 1),
        )

    def forward(self, x):
        return self.tcn(x)[:, 0, -1]


class EndpointMonitor:
    def __init__(self, net, ref_np):
        self.net = net.cuda().eval()
        self.ref_np = ref_np.astype(np.float32)        # rewritten by the seasoning job after each wet clean
        self.ref_dev = torch.from_numpy(self.ref_np).cuda()  # CLEAN: uploaded in __init__, outside the captures
        self.line_idx = torch.tensor(LINE_PIX, device="cuda")  # CLEAN: index tensor built once, outside the captures
        self.band = torch.tensor(CONTINUUM, device="cuda")
        self.window = torch.zeros(1, T, N_PIX, device="cuda")
        self.p_end = torch.zeros(1, device="cuda")
        self.drift = torch.zeros(1, device="cuda")
        self.side = torch.cuda.Stream()
        self.g = torch.cuda.CUDAGraph()
        self.g_drift = torch.cuda.CUDAGraph()

    def _detect(self):
        ref = torch.as_tensor(self.ref_np, device="cuda")  # HAZARD: pinned-memory
        spec = self.window / ref.clamp_min(1e-3)
        lines = spec.index_select(-1, self.line_idx)  # CLEAN: gather with a CUDA index tensor
        bg = spec[..., self.band[0]:self.band[1]].mean(-1, keepdim=True)  # HAZARD: host-sync
        feats = (lines / bg.clamp_min(1e-3)).transpose(1, 2)
        self.p_end.copy_(torch.sigmoid(self.net(feats)))

    def _drift(self):
        self.drift.copy_(self.window[:, -1].sum(-1) / self.ref_dev.sum())

    @torch.no_grad()
    def capture(self):
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                for _ in range(3):
                    self._detect()
            torch.cuda.current_stream().wait_stream(self.side)
            with torch.cuda.graph(self.g, stream=torch.cuda.current_stream()):  # HAZARD: stream
                self._detect()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._drift()
        with torch.cuda.graph(self.g_drift, stream=self.side):  # CLEAN: explicit side stream, warmed up on it
            self._drift()
        torch.cuda.current_stream().wait_stream(self.side)

    @torch.no_grad()
    def push(self, spectrum):
        self.window[:, :-1].copy_(self.window[:, 1:].clone())
        self.window[0, -1].copy_(spectrum)
        self.g.replay()
        self.g_drift.replay()
        if self.drift.item() < 0.7:  # CLEAN: host read after the replays
            print("window clouding: request chamber check")
        return self.p_end.item() > 0.9
