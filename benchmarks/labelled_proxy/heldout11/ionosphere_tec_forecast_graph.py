"""Regional TEC forecaster for GNSS ionospheric corrections: a ConvGRU over the last 12 TEC
maps plus F10.7 / Kp / Dst drivers, one CUDA graph per region-count bucket in one pool."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BUCKETS = (1, 4, 8)
H, W = 71, 73          # 2.5 x 5 degree grid, IONEX layout
HIST = 12


class ConvGRUCell(nn.Module):
    def __init__(self, ch, hid):
        super().__init__()
        self.gates = nn.Conv2d(ch + hid, 2 * hid, 3, padding=1)
        self.cand = nn.Conv2d(ch + hid, hid, 3, padding=1)

    def forward(self, x, h):
        z, r = torch.sigmoid(self.gates(torch.cat([x, h], 1))).chunk(2, 1)
        c = torch.tanh(self.cand(torch.cat([x, r * h], 1)))
        return (1 - z) * h + z * c


class TECForecaster(nn.Module):
    def __init__(self, hid=48, n_drivers=3):
        super().__init__()
        self.hid = hid
        self.inp = nn.Conv2d(1 + n_drivers, 32, 3, padding=1)
        self.cell = ConvGRUCell(32, hid)
        self.out = nn.Conv2d(hid, 1, 1)

    def step(self, tec, drivers, h):
        d = drivers[:, :, None, None].expand(-1, -1, tec.shape[-2], tec.shape[-1])
        h = self.cell(F.gelu(self.inp(torch.cat([tec, d], 1))), h)
        return tec + self.out(h), h


class TECGraphRunner:
    def __init__(self, model, kp_table, device="cuda"):
        self.model = model.eval().to(device)
        self.device = device
        self.kp_table = kp_table            # np.ndarray (regions, 3), refreshed hourly from NOAA SWPC
        self.lead_steps = 8
        self.storm_tecu = 120.0
        self.quiet_bias = torch.tensor([70.0, 1.0, -5.0], device=device)  # CLEAN: built once in __init__, outside any capture
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_in, self.static_out = {}, {}, {}

    def set_lead(self, steps):
        self.lead_steps = steps             # operators switch between 2 h and 6 h products

    @torch.no_grad()
    def _rollout(self, hist):
        b = hist.shape[0]
        drivers = torch.from_numpy(self.kp_table[:b]).float().to(self.device)  # HAZARD: pinned-memory
        drivers = (drivers - self.quiet_bias) / 50.0
        h = hist.new_zeros(b, self.model.hid, H, W)
        for t in range(HIST):
            _, h = self.model.step(hist[:, t:t + 1], drivers, h)
        tec, maps = hist[:, -1:], []
        lead = self.lead_steps  # HAZARD: python-scalar
        for _ in range(lead):
            tec, h = self.model.step(tec, drivers, h)
            tec = torch.where(tec < 0, torch.zeros_like(tec), tec)  # CLEAN: torch.where clamp stays on the device
            maps.append(tec)
        out = torch.cat(maps, 1)
        if out.amax() > self.storm_tecu:  # HAZARD: dynamic-control-flow
            out = F.avg_pool2d(out, 3, stride=1, padding=1)   # smooth storm-time artefacts
        return out

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        for b in sorted(BUCKETS, reverse=True):
            x = torch.zeros(b, HIST, H, W, device=self.device)
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._rollout(x)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                y = self._rollout(x)
            self.graphs[b], self.static_in[b], self.static_out[b] = g, x, y

    def forecast(self, hist):
        n = hist.shape[0]
        b = next(k for k in BUCKETS if k >= n)
        self.static_in[b][:n].copy_(hist)  # CLEAN: copy_ into the captured input keeps its address
        self.graphs[b].replay()
        return self.static_out[b][:n]

    def forecast_day(self, hist_stream):
        products = []
        for hist in hist_stream:
            products.append(self.forecast(hist))  # HAZARD: static-address
        return products


def write_ionex(runner, hist, path):
    maps = runner.forecast(hist).cpu().numpy()  # CLEAN: host read after the replay, outside the graph
    np.save(path, maps.astype(np.float32))


if __name__ == "__main__":
    runner = TECGraphRunner(TECForecaster(), kp_table=np.random.rand(8, 3).astype(np.float32))
    runner.capture()
    runner.set_lead(24)                 # the 6 h product is requested after start-up
    products = runner.forecast_day([torch.rand(4, HIST, H, W, device="cuda") * 60 for _ in range(96)])
    write_ionex(runner, torch.rand(4, HIST, H, W, device="cuda") * 60, "tec_forecast.npy")
