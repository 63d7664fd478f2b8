"""Dst geomagnetic index forecast from L1 solar-wind data (DSCOVR + ACE).

Every minute the operations loop copies the last four hours of plasma/IMF data
into static buffers and replays two graphs: the deterministic forecast and a
small input-perturbation ensemble for the uncertainty band.
"""
import torch
import torch.nn as nn

FEATS = ("bx", "by", "bz", "v", "n", "t")
WINDOW = 240          # minutes
HORIZON = 6           # hours ahead
N_ENS = 16


class DstLSTM(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.lstm = nn.LSTM(len(FEATS) + 2, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, HORIZON)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def newell_coupling(x):
    by, bz, v = x[..., 1], x[..., 2], x[..., 3].abs()
    bt = torch.sqrt(by * by + bz * bz)
    theta = torch.atan2(by, bz)
    return v.pow(4.0 / 3.0) * bt.pow(2.0 / 3.0) * torch.sin(theta / 2).abs().pow(8.0 / 3.0) * 1e-3


class DstForecaster:
    def __init__(self, model, n_src=2):
        self.model = model.cuda().eval()
        self.x = torch.zeros(n_src, WINDOW, len(FEATS), device="cuda")
        self.valid = torch.ones(n_src, WINDOW, dtype=torch.bool, device="cuda")
        self.clim = torch.tensor([0.0, 0.0, 0.0, 420.0, 5.0, 1e5], device="cuda")  # CLEAN: built in __init__, outside the captures
        self.side = torch.cuda.Stream()
        self.main_graph = torch.cuda.CUDAGraph()
        self.ens_graph = torch.cuda.CUDAGraph()

    def _features(self):
        x = torch.where(self.valid.unsqueeze(-1), self.x, self.clim)  # CLEAN: gap fill on the device
        pdyn = 1.6726e-6 * x[..., 4] * x[..., 3] ** 2
        jumps = torch.nonzero(pdyn[:, 1:] - pdyn[:, :-1] > 3.0)  # HAZARD: dynamic-shape
        ssc = torch.zeros_like(pdyn)
        ssc[jumps[:, 0], jumps[:, 1] + 1] = 1.0
        if float(x[..., 2].min()) < -10.0:  # HAZARD: host-sync
            ssc = ssc * 2.0
        return torch.cat([x, newell_coupling(x).unsqueeze(-1), ssc.unsqueeze(-1)], -1)

    def _step(self):
        return self.model(self._features())

    def _ensemble(self):
        x = torch.where(self.valid.unsqueeze(-1), self.x, self.clim)
        x = x[:1].expand(N_ENS, -1, -1) + 0.05 * x[:1].abs() * torch.randn(N_ENS, WINDOW, len(FEATS), device="cuda")  # CLEAN: default CUDA generator
        zeros = torch.zeros(N_ENS, WINDOW, 1, device="cuda")
        return self.model(torch.cat([x, newell_coupling(x).unsqueeze(-1), zeros], -1))

    @torch.no_grad()
    def capture(self):
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                for _ in range(3):
                    self.out = self._step()
            torch.cuda.current_stream().wait_stream(self.side)
            self.main_graph.capture_begin()  # HAZARD: stream
            self.out = self._step()
            self.main_graph.capture_end()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._ensemble()
            self.ens_graph.capture_begin()  # CLEAN: begun inside the side-stream context after warm-up
            self.ens_out = self._ensemble()
            self.ens_graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.side)

    @torch.no_grad()
    def forecast(self, window, valid):
        self.x.copy_(window)
        self.valid.copy_(valid)
        self.main_graph.replay()
        self.ens_graph.replay()
        dst = self.out.float().mean(0)
        band = self.ens_out.float().std(0)
        return dst.cpu(), band.cpu(), dst.min().item()  # CLEAN: host reads after the replays
