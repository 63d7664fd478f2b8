"""Global placement: routability-driven cell gradient from a learned congestion model.

The placer (legacy C++ core with Python bindings, being migrated to PyTorch) calls
`CongestionOracle.step()` once per Nesterov iteration.  The density maps, the congestion
model and the gradient of the overflow penalty are replayed from one CUDA graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CongestionUNet(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        self.out = nn.Conv2d(c, 2, 1)  # horizontal / vertical routing overflow

    def forward(self, maps):
        return F.softplus(self.out(self.enc(maps)))


class CongestionOracle:
    def __init__(self, model, n_cells, grid=256, die_um=1000.0):
        self.model = model.cuda().eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.grid, self.die_um = grid, die_um
        self.overflow_target = 0.15
        self.static_pos = torch.zeros(n_cells, 2, device="cuda", requires_grad=True)
        self.static_size = torch.ones(n_cells, 2, device="cuda")
        self.blockage = torch.zeros(grid, grid, device="cuda")
        self.stream = torch.cuda.Stream()

    def _density_maps(self, pos):
        g = self.grid
        ij = (pos * (g / self.die_um)).long().clamp(0, g - 1)
        flat = ij[:, 0] * g + ij[:, 1]
        area = self.static_size[:, 0] * self.static_size[:, 1]
        dens = torch.zeros(g * g, device=pos.device).scatter_add_(0, flat, area)  # CLEAN: scatter_add_ with a CUDA index
        pins = torch.zeros(g * g, device=pos.device).scatter_add_(0, flat, torch.ones_like(area))
        return torch.stack([dens, pins, self.blockage.flatten()]).view(1, 3, g, g)

    def _body(self):
        pos = self.static_pos
        cong = self.model(self._density_maps(pos.detach()))  # [1, 2, g, g]
        grid = (pos / self.die_um) * 2 - 1
        at_cells = F.grid_sample(cong, grid.view(1, -1, 1, 2), align_corners=False)
        target = self.overflow_target  # HAZARD: python-scalar
        penalty = F.relu(at_cells - target).sum()
        grad, = torch.autograd.grad(penalty, pos)
        overflow = cong.mean()
        while (overflow > 4 * target).any():  # HAZARD: dynamic-control-flow
            grad, overflow = grad * 0.5, overflow * 0.5
        # legacy: keep per-iteration timings comparable with the C++ core
        torch.cuda.synchronize()  # HAZARD: host-sync
        return grad, overflow

    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self._body()
            self.graph = torch.cuda.CUDAGraph()
            self.graph.capture_begin()  # CLEAN: capture_begin on the non-default placer stream
            self.static_grad, self.static_overflow = self._body()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.stream)

    def step(self, pos: torch.Tensor) -> torch.Tensor:
        """Called by the Nesterov loop with the current cell positions."""
        self.static_pos = pos.detach().requires_grad_(True)  # HAZARD: static-address
        self.graph.replay()
        return self.static_grad

    def tighten(self):
        self.overflow_target = max(0.05, self.overflow_target * 0.8)


def place(cells_xy, sizes, model, iters=800, lr=0.5):
    oracle = CongestionOracle(model, cells_xy.shape[0])
    oracle.static_size.copy_(sizes)  # CLEAN: sizes written into the captured tensor in place
    with torch.no_grad():
        oracle.static_pos.copy_(cells_xy)
    oracle.capture()
    pos = cells_xy.clone()
    for it in range(iters):
        g = oracle.step(pos)
        pos = (pos - lr * g).clamp(0, oracle.die_um)
        if it % 100 == 99:
            oracle.tighten()
            torch.cuda.synchronize()  # CLEAN: sync between replays, outside the graph
    return pos
