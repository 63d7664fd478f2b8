"""Agent trajectory forecasting for an autonomous shuttle's planner (vector map + tracks).

The tracker publishes the 64 nearest agents' histories at 10 Hz; the forecaster (polyline
encoder + multi-modal decoder) predicts 6 modes x 30 steps per agent and the planner checks
them against its candidate paths. Plugins (metrics, map-consistency checks) subscribe to
the runner's ``on_forward`` event, which fires inside the captured forward.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

AGENTS, HIST, MODES, FUT, POLY = 64, 20, 6, 30, 256


class Forecaster(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.agent_enc = nn.GRU(4, d, batch_first=True)
        self.map_enc = nn.Sequential(nn.Linear(20, d), nn.ReLU(), nn.Linear(d, d))
        self.q, self.kv = nn.Linear(d, d), nn.Linear(d, 2 * d)
        self.dec = nn.Linear(d, MODES * (FUT * 2 + 1))

    def forward(self, hist, polylines):
        _, h = self.agent_enc(hist)
        a = h[-1].unsqueeze(0)
        m = self.map_enc(polylines).unsqueeze(0)
        k, v = self.kv(m).chunk(2, -1)
        ctx = F.scaled_dot_product_attention(self.q(a), k, v)
        out = self.dec((a + ctx).squeeze(0)).view(AGENTS, MODES, FUT * 2 + 1)
        return out[..., :-1].reshape(AGENTS, MODES, FUT, 2).cumsum(2), out[..., -1].softmax(-1)


class MetricsPlugin:
    def __init__(self):
        self.metrics = {"calls": 0}

    def on_forward(self, runner, traj, probs):
        self.metrics["calls"] += 1  # HAZARD: host-code


class NearFieldPlugin:
    def __init__(self, radius=30.0):
        self.radius = radius

    def on_forward(self, runner, traj, probs):
        dist = traj[:, :, -1].norm(dim=-1).amin(-1)
        near = traj[dist < self.radius]  # HAZARD: dynamic-shape
        runner.near_field = near


class MapConsistencyPlugin:
    def on_forward(self, runner, traj, probs):
        off_map = torch.where(probs > 0.1, traj[..., -1, 0].abs(), torch.zeros_like(probs))  # CLEAN: fixed-shape select
        runner.off_map_score = off_map.amax()


class ForecastRunner:
    def __init__(self, plugins, dev="cuda"):
        self.dev, self.plugins = dev, plugins
        self.model = Forecaster().to(dev).eval()
        self.smooth = torch.compile(lambda t: t.cumsum(2) / torch.arange(1, FUT + 1, device=dev).view(1, 1, FUT, 1),
                                    mode="reduce-overhead")
        self.static_hist = torch.zeros(AGENTS, HIST, 4, device=dev)
        self.static_map = torch.zeros(POLY, 20, device=dev)
        self.graph = torch.cuda.CUDAGraph()

    def _forward(self):
        traj, probs = self.model(self.static_hist, self.static_map)
        for p in self.plugins:
            p.on_forward(self, traj, probs)
        self.out = (traj, probs)
        return self.out

    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._forward()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            traj, probs = self._forward()
            self.smoothed = self.smooth(traj)  # HAZARD: api-misuse

    def on_tile_change(self, tile_polylines):
        self.static_map = tile_polylines.to(self.dev)  # HAZARD: static-address

    def on_tile_change_inplace(self, tile_polylines):
        self.static_map.copy_(tile_polylines)  # CLEAN: in-place copy keeps the captured address

    def predict(self, hist):
        self.static_hist.copy_(hist)
        self.graph.replay()
        traj, probs = self.out
        return traj.float().clone(), probs.float().clone()  # CLEAN: cloned after replay
