"""Medium-term conflict probe for an en-route ATC sector.

A GRU trajectory predictor extrapolates every tracked aircraft 20 minutes ahead (40 steps of
30 s) from ADS-B history and the latest wind grid; pairs that lose 5 NM / 1000 ft separation
are reported to the controller working position. The probe is one captured graph.
"""
import torch
import torch.nn as nn

SEP_NM, SEP_FT = 5.0, 1000.0


class TrajectoryPredictor(nn.Module):
    def __init__(self, horizon=40, hid=128):
        super().__init__()
        self.horizon = horizon
        self.enc = nn.GRU(6 + 2, hid, batch_first=True)
        self.dec = nn.Linear(hid, horizon * 3)
        self.register_buffer("scale", torch.tensor([1.0, 1.0, 100.0]))  # NM, NM, 100 ft

    def forward(self, hist, wind):
        # hist: (n, 20, 6) x/y [NM], alt [ft], gs, track, vs ; wind: (n, 2) u/v at the current level
        w = wind[:, None, :].expand(-1, hist.shape[1], -1)
        _, h = self.enc(torch.cat([hist, w], -1))
        delta = self.dec(h[-1]).view(-1, self.horizon, 3).cumsum(1)
        return hist[:, -1:, :3] + delta * self.scale


class WindSource:
    def latest_at(self, hist):
        import numpy as np
        return np.zeros((hist.shape[0], 2), dtype=np.float32)    # GRIB2 lookup, refreshed hourly


class ConflictProbe:
    def __init__(self, model, wind_source, n_ac=256):
        self.model = model.cuda().eval()
        self.wind_source = wind_source
        self.n = n_ac
        self.static_hist = torch.zeros(n_ac, 20, 6, device="cuda")
        self.static_valid = torch.zeros(n_ac, dtype=torch.bool, device="cuda")
        self.eye = torch.eye(n_ac, dtype=torch.bool, device="cuda")

    @torch.no_grad()
    def _probe(self):
        wind = torch.as_tensor(self.wind_source.latest_at(self.static_hist), device="cuda")  # HAZARD: pinned-memory
        traj = self.model(self.static_hist, wind)                          # (n, T, 3)
        xy, alt = traj[..., :2].transpose(0, 1), traj[..., 2].T             # (T, n, 2), (T, n)
        d = torch.cdist(xy, xy)
        dv = (alt[:, :, None] - alt[:, None, :]).abs()
        both = self.static_valid[:, None] & self.static_valid[None, :] & ~self.eye
        los = ((d < SEP_NM) & (dv < SEP_FT) & both).any(0)
        d_min = torch.where(both, d.amin(0), torch.full_like(d[0], 1e4))  # CLEAN: masking with torch.where keeps shapes static
        nearest = d_min.topk(3, dim=1, largest=False)  # CLEAN: fixed-k topk keeps shapes static
        pairs = los.triu(1).nonzero()  # HAZARD: dynamic-shape
        torch.cuda.synchronize()  # HAZARD: host-sync
        return pairs, nearest.values, nearest.indices

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._probe()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.pairs, self.nn_dist, self.nn_idx = self._probe()

    def update(self, tracks, valid):
        self.static_hist.copy_(tracks)  # CLEAN: copy_ into the captured input buffer
        self.static_valid.copy_(valid)
        self.graph.replay()
        return self.nn_dist.cpu(), self.nn_idx.cpu()  # CLEAN: host read after the replay


if __name__ == "__main__":
    probe = ConflictProbe(TrajectoryPredictor(), WindSource())
    probe.capture()
    for _ in range(120):                                     # one radar update every 5 s
        dist, idx = probe.update(torch.randn(256, 20, 6, device="cuda"), torch.rand(256, device="cuda") > 0.3)
