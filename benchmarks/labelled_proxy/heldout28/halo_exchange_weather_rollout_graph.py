"""Spatially model-parallel global weather emulator: each rank owns a band of latitudes of a
0.25-degree grid, halo rows are exchanged with all_gather_into_tensor every layer, and a
6-hour step is captured once and replayed for 10-day ensemble rollouts."""
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def exchange_halo(x, halo, group):
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    edges = torch.stack([x[..., :halo, :], x[..., -halo:, :]]).contiguous()
    allb = edges.new_empty((world,) + tuple(edges.shape))
    dist.all_gather_into_tensor(allb, edges, group=group)
    north = allb[rank - 1, 1] if rank > 0 else torch.zeros_like(edges[0])  # CLEAN: neighbour chosen by a fixed rank, not by data
    south = allb[rank + 1, 0] if rank < world - 1 else torch.zeros_like(edges[0])
    return torch.cat([north, x, south], dim=-2)


class HaloConv(nn.Module):
    def __init__(self, cin, cout, group):
        super().__init__()
        self.conv, self.group = nn.Conv2d(cin, cout, 3, padding=0), group

    def forward(self, x):
        x = exchange_halo(x, 1, self.group)
        x = torch.cat([x[..., -1:], x, x[..., :1]], dim=-1)  # CLEAN: periodic longitude pad by static slicing
        return F.silu(self.conv(x))


class BandModel(nn.Module):
    def __init__(self, ch, group, width=256, depth=8):
        super().__init__()
        self.inp = HaloConv(ch + 2, width, group)
        self.body = nn.ModuleList(HaloConv(width, width, group) for _ in range(depth))
        self.out = nn.Conv2d(width, ch, 1)

    def forward(self, state, forcing):
        h = self.inp(torch.cat([state, forcing], 1))
        for blk in self.body:
            h = h + blk(h)
        return state + self.out(h)


class EnsembleRollout:
    def __init__(self, model, state0, solar_np, sigma=0.02, member_seed=0):
        self.model, self.sigma = model, sigma
        self.state = state0.clone()
        self.solar_np = solar_np  # (1460, 2, lat_band, lon) top-of-atmosphere forcing, float32
        self.lead_hours = 0
        self.blowup = 80.0
        self.ens_gen = torch.Generator(device="cuda")
        self.ens_gen.manual_seed(1000 + member_seed)
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        k = (self.lead_hours // 6) % self.solar_np.shape[0]
        forcing = torch.as_tensor(self.solar_np[k]).to("cuda", non_blocking=True)[None]  # HAZARD: pinned-memory
        pert = torch.randn(self.state.shape, generator=self.ens_gen, device="cuda")  # HAZARD: rng
        out = self.model(self.state + self.sigma * pert, forcing)
        if out.abs().amax() > self.blowup:  # HAZARD: dynamic-control-flow
            out = out.clamp(-self.blowup, self.blowup)
        self.state = out  # HAZARD: static-address
        self.lead_hours += 6  # HAZARD: host-code
        return out

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        dist.barrier()
        with torch.cuda.graph(self.graph):
            self.static_out = self._step()

    @torch.no_grad()
    def reset(self, init):
        self.state.copy_(init)  # CLEAN: in-place reset of the state tensor
        self.lead_hours = 0

    @torch.no_grad()
    def run(self, steps=40):
        frames = []
        for _ in range(steps):
            self.graph.replay()
            frames.append(self.static_out.clone())  # CLEAN: cloned before the next replay
        return torch.stack(frames)


if __name__ == "__main__":
    dist.init_process_group("nccl")
    solar = np.load("toa_solar_band.npy").astype(np.float32)
