"""Remaining-useful-life service for a turbofan fleet (C-MAPSS style sensor windows).

Every flight cycle each engine uploads 21 sensors; the 14 informative ones are normalised per
operating condition and a CNN-LSTM predicts the RUL. One graph covers the whole fleet batch.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("rul")
WINDOW, N_RAW, N_COND = 30, 21, 6
INFORMATIVE = [1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 16, 19, 20]


class RULNet(nn.Module):
    def __init__(self, n_sensors=len(INFORMATIVE), hidden=64, rul_cap=125.0):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(n_sensors, 32, 5, padding=2), nn.ReLU(),
            nn.Conv1d(32, 32, 5, padding=2), nn.ReLU(),
        )
        self.lstm = nn.LSTM(32, hidden, num_layers=2, batch_first=True)
        self.head = nn.Sequential(nn.Linear(hidden, 32), nn.ReLU(), nn.Linear(32, 1))
        self.rul_cap = rul_cap

    def forward(self, x):                                   # x: B, T, S
        h = self.conv(x.transpose(1, 2)).transpose(1, 2)
        h, _ = self.lstm(h)
        return self.head(h[:, -1]).squeeze(-1).clamp(0.0, self.rul_cap)


class FleetRUL:
    def __init__(self, model, cond_mean, cond_std, n_engines=512, sensor_cols=INFORMATIVE):
        self.model = model.cuda().eval()
        self.sensor_cols = list(sensor_cols)
        self.cond_mean = cond_mean.cuda()  # CLEAN: uploaded once in __init__, before capture
        self.cond_std = cond_std.cuda()
        self.raw = torch.zeros(n_engines, WINDOW, N_RAW, device="cuda")
        self.cond = torch.zeros(n_engines, WINDOW, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _forward(self, raw, cond):
        x = raw[:, :, self.sensor_cols]  # HAZARD: host-sync
        mu = self.cond_mean[cond]  # CLEAN: gather with a CUDA index tensor
        x = (x - mu) / self.cond_std[cond]
        rul = self.model(x)
        print(f"fleet mean RUL {rul.mean():.1f} cycles")  # HAZARD: host-sync
        return rul

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._forward(self.raw, self.cond)
            torch.cuda.current_stream().wait_stream(s)
            log.info("capturing fleet RUL graph")  # CLEAN: plain string, no tensor formatted
            with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
                self.rul = self._forward(self.raw, self.cond)

    def update(self, raw_window, cond_window):
        self.raw.copy_(raw_window, non_blocking=True)  # CLEAN: copy_ into the static input
        self.cond.copy_(cond_window, non_blocking=True)
        self.graph.replay()
        return self.rul.float().clone()


def maintenance_queue(rul, threshold=20.0):
    due = (rul < threshold).nonzero().flatten()  # CLEAN: eager, after the replay
    return due.tolist()


if __name__ == "__main__":
    svc = FleetRUL(RULNet(), torch.zeros(N_COND, 14), torch.ones(N_COND, 14))
    svc.capture()
    for cycle in range(1, 400):
        raw = torch.randn(512, WINDOW, N_RAW).pin_memory()
        cond = torch.randint(0, N_COND, (512, WINDOW)).pin_memory()
        rul = svc.update(raw, cond)
        if cycle % 50 == 0:
            log.warning("engines due for borescope: %s", maintenance_queue(rul))
