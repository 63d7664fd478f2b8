"""Flow-field pathfinding for an RTS game server.

A small CNN turns terrain, threat and congestion layers into a traversal cost
map; a few sweeps of min-plus value iteration give the distance-to-goal field,
and every unit steers down its gradient. The sweeps and the steering are
compiled with mode="reduce-overhead"; the level editor previews with a default
compile.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

GRID, MAX_UNITS = 128, 512


class CostNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))

    def forward(self, layers):
        return 1.0 + F.softplus(self.net(layers))


class FlowField:
    def __init__(self, k_sweeps: int = 8):
        self.cost_net = CostNet().cuda().eval()
        self.k = k_sweeps
        self.relax = torch.compile(self._relax, mode="reduce-overhead")
        self.steer = torch.compile(self._steer, mode="reduce-overhead")
        self.preview_relax = torch.compile(self._relax)

    def _relax(self, value, cost):
        for _ in range(self.k):
            nb = -F.max_pool2d(-value, 3, stride=1, padding=1)
            value = torch.minimum(value, nb + cost)
        if (value > 1e5).any():  # HAZARD: dynamic-control-flow
            value = value.clamp(max=1e5)                 # unreachable pockets behind walls
        return value

    def _steer(self, value, units):
        gy, gx = torch.gradient(value[0, 0])
        ys, xs = units[:, 0], units[:, 1]
        d = -torch.stack([gx[ys, xs], gy[ys, xs]], -1)
        print("steering, mean |grad|:", d.abs().mean())  # HAZARD: host-code
        return F.normalize(d, dim=-1)

    @torch.no_grad()
    def tick(self, terrain, goal_mask, units):
        cost = self.cost_net(terrain)
        value = torch.where(goal_mask, 0.0, 1e6)
        for _ in range(4):
            value = self.relax(value, cost)  # HAZARD: static-address
        value = value.clone()
        dirs = self.steer(value, units)  # HAZARD: dynamic-shape
        return dirs.clone()

    @torch.no_grad()
    def tick_lockstep(self, terrain, goal_mask, units_padded, alive):
        """Multiplayer lockstep: always MAX_UNITS slots, dead units masked."""
        cost = self.cost_net(terrain)
        value = torch.where(goal_mask, 0.0, 1e6)
        for _ in range(4):
            value = self.relax(value, cost).clone()  # CLEAN: cloned before it is fed back
        dirs = self.steer(value, units_padded)  # CLEAN: padded to MAX_UNITS slots
        return dirs.masked_fill(~alive[:, None], 0.0).clone()

    @torch.no_grad()
    def editor_preview(self, terrain, goal_mask):
        cost = self.cost_net(terrain)
        value = torch.where(goal_mask, 0.0, 1e6)
        for _ in range(16):
            value = self.preview_relax(value, cost)  # CLEAN: default compile, no CUDA graphs
        return value


def simulate(match_ticks: int = 200):
    ff = FlowField()
    terrain = torch.rand(1, 3, GRID, GRID, device="cuda")
    goal = torch.zeros(1, 1, GRID, GRID, dtype=torch.bool, device="cuda")
    goal[..., 100:104, 100:104] = True
    n_units = 40
    for t in range(match_ticks):
        units = torch.randint(0, GRID, (n_units, 2), device="cuda")
        dirs = ff.tick(terrain, goal, units)
        n_units = min(MAX_UNITS, n_units + (t % 3))          # reinforcements arrive every few ticks
    return dirs


if __name__ == "__main__":
    print(simulate(20).shape)
