"""RTS bot: predict where hidden enemy units are under the fog of war (minimap heatmap),
used by the AI commander to plan scouting. Ported from a TF2 prototype; the team kept a
`@tf_function` decorator that "traces" the method into a CUDA graph on the first call.
"""
import functools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAP, MAX_UNITS, UNIT_FEATS = 64, 200, 6


def tf_function(method):
    """Trace on first call (like tf.function), then replay the captured graph."""
    @functools.wraps(method)
    def wrapper(self, *args):
        if not hasattr(self, "_tf_graphs"):
            self._tf_graphs = {}
        g = self._tf_graphs.get(method.__name__)
        if g is None:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):  # HAZARD: api-misuse
                self._tf_out = method(self, *args)
            self._tf_graphs[method.__name__] = g
        g.replay()
        return self._tf_out
    return wrapper


class FogNet(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.unit_mlp = nn.Sequential(nn.Linear(UNIT_FEATS, 32), nn.ReLU(), nn.Linear(32, 8))
        self.conv = nn.Sequential(nn.Conv2d(8 + 3, ch, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=2, dilation=2), nn.ReLU(),
                                  nn.Conv2d(ch, 1, 1))

    def forward(self, planes, units):
        emb = self.unit_mlp(units)                               # (U, 8)
        xy = (units[:, :2] * (MAP - 1)).long().clamp(0, MAP - 1)
        flat = xy[:, 1] * MAP + xy[:, 0]
        grid = torch.zeros(8, MAP * MAP, device=units.device).index_add_(1, flat, emb.t())  # CLEAN: scatter with CUDA indices
        x = torch.cat([planes, grid.view(1, 8, MAP, MAP)], 1)
        return torch.sigmoid(self.conv(x))


class Commander:
    def __init__(self, net, debug=True):
        self.net = net.cuda().eval()
        self.debug = debug
        self.unit_np = np.zeros((MAX_UNITS, UNIT_FEATS), np.float32)
        self.last_seen_np = np.zeros((1, 1, MAP, MAP), np.float32)     # decaying memory of past sightings
        self.unit_pinned = torch.zeros(MAX_UNITS, UNIT_FEATS).pin_memory()
        self.planes = torch.zeros(1, 3, MAP, MAP, device="cuda")     # terrain, vision, creep
        self.units_dev = torch.zeros(MAX_UNITS, UNIT_FEATS, device="cuda")

    @torch.no_grad()
    @tf_function
    def predict(self):
        memory = torch.from_numpy(self.last_seen_np).cuda(non_blocking=True)  # HAZARD: pinned-memory
        self.units_dev.copy_(self.unit_pinned, non_blocking=True)  # CLEAN: copy from pinned memory is recorded
        heat = self.net(self.planes, self.units_dev) * (1.0 + memory)
        seen = self.units_dev[self.units_dev[:, 5] > 0]  # HAZARD: dynamic-shape
        vision = self.planes[:, 1:2]
        heat = torch.where(vision > 0.5, torch.zeros_like(heat), heat)  # CLEAN: visible cells zeroed by select
        if self.debug:
            print(f"[fog] max threat {heat.max():.2f}")  # HAZARD: host-sync
        return heat, seen.shape[0]

    def on_game_tick(self, obs):
        self.planes.copy_(torch.from_numpy(obs.planes))  # CLEAN: eager copy into the static planes
        self.unit_np[:] = 0
        self.unit_np[: len(obs.units)] = obs.units
        self.unit_pinned.copy_(torch.from_numpy(self.unit_np))
        self.last_seen_np *= 0.98
        for x, y in obs.sightings:
            self.last_seen_np[0, 0, y, x] = 1.0
        heat, n_seen = self.predict()
        target = torch.argmax(heat.flatten()).item()  # CLEAN: eager argmax for the scouting order
        return divmod(target, MAP), n_seen
