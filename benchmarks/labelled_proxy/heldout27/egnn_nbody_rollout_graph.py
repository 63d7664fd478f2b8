"""EGNN (Satorras, Hoogeboom & Welling 2021) on the charged N-body task with a
rollout runner that replays one captured EGNN step per particle count."""
import argparse
import torch
import torch.nn as nn

parser = argparse.ArgumentParser(description="E(n) GNN n-body")
parser.add_argument("--nf", type=int, default=64)
parser.add_argument("--n_layers", type=int, default=4)
parser.add_argument("--tanh", type=int, default=1)
parser.add_argument("--coords_range", type=float, default=15.0)
parser.add_argument("--radius_graph", type=int, default=1)
parser.add_argument("--cutoff", type=float, default=3.0)
parser.add_argument("--dt", type=float, default=1e-3)
parser.add_argument("--thermo_sigma", type=float, default=1e-3)
parser.add_argument("--drift_tol", type=float, default=0.05)
parser.add_argument("--seed", type=int, default=7)
args = parser.parse_args()

def unsorted_segment_sum(data, segment_ids, num_segments):
    result = data.new_zeros((num_segments, data.size(1)))
    return result.index_add_(0, segment_ids, data)  # CLEAN: index_add_ with CUDA indices, fixed output shape

def radius_edges(coord, cutoff):
    d = torch.cdist(coord, coord)
    adj = (d < cutoff) & ~torch.eye(coord.size(0), dtype=torch.bool, device=coord.device)
    return adj.nonzero().t()  # HAZARD: dynamic-shape

class E_GCL(nn.Module):
    def __init__(self, nf):
        super().__init__()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * nf + 1, nf), nn.SiLU(), nn.Linear(nf, nf), nn.SiLU())
        self.node_mlp = nn.Sequential(nn.Linear(2 * nf, nf), nn.SiLU(), nn.Linear(nf, nf))
        self.coord_mlp = nn.Sequential(nn.Linear(nf, nf), nn.SiLU(), nn.Linear(nf, 1, bias=False))

    def forward(self, h, edge_index, coord):
        row, col = edge_index
        coord_diff = coord[row] - coord[col]
        m = self.edge_mlp(torch.cat([h[row], h[col], (coord_diff ** 2).sum(1, keepdim=True)], 1))
        trans = coord_diff * self.coord_mlp(m)
        if args.tanh:
            trans = torch.tanh(trans) * args.coords_range
        count = unsorted_segment_sum(torch.ones_like(trans[:, :1]), row, coord.size(0)).clamp(min=1)
        coord = coord + unsorted_segment_sum(trans, row, coord.size(0)) / count
        return h + self.node_mlp(torch.cat([h, unsorted_segment_sum(m, row, h.size(0))], 1)), coord

class EGNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Linear(1, args.nf)
        self.layers = nn.ModuleList([E_GCL(args.nf) for _ in range(args.n_layers)])

    def forward(self, charges, edges, coord):
        h = self.embedding(charges)
        for layer in self.layers:
            h, coord = layer(h, edges, coord)
        return coord

class RolloutRunner:
    def __init__(self, model, cfg):
        self.model, self.graphs, self.pool = model, {}, torch.cuda.graph_pool_handle()
        self.charge_table = torch.tensor([-1.0, 1.0], device="cuda")  # CLEAN: Python list uploaded once, outside any graph
        self.particle_types = cfg["types"]
        self.thermo_gen = torch.Generator(device="cuda")
        self.thermo_gen.manual_seed(args.seed)

    def _step(self, coord, vel, e0):
        q = self.charge_table[self.particle_types]  # HAZARD: host-sync
        edges = radius_edges(coord, args.cutoff) if args.radius_graph else self.full_edges
        coord_new = self.model(q.unsqueeze(1), edges, coord + args.dt * vel)
        vel_new = (coord_new - coord) / args.dt
        vel_new = vel_new + args.thermo_sigma * torch.randn(vel.shape, device=vel.device, generator=self.thermo_gen)  # HAZARD: rng
        energy = 0.5 * (vel_new ** 2).sum()
        if (energy - e0).abs() / e0 > args.drift_tol:  # HAZARD: dynamic-control-flow
            vel_new = vel_new * torch.sqrt(e0 / energy)
        return coord_new, vel_new

    def _capture(self, n, coord, vel):
        sc, sv = coord.clone(), vel.clone()
        se = 0.5 * (vel ** 2).sum()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step(sc, sv, se)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
            out = self._step(sc, sv, se)
        self.graphs[n] = (g, sc, sv, se, out)

    @torch.no_grad()
    def rollout(self, coord, vel, steps):
        if coord.size(0) not in self.graphs:
            self._capture(coord.size(0), coord, vel)
        g, sc, sv, se, (oc, ov) = self.graphs[coord.size(0)]
        sc.copy_(coord); sv.copy_(vel); se.copy_(0.5 * (vel ** 2).sum())  # CLEAN: static inputs refreshed with copy_
        traj = []
        for _ in range(steps):
            g.replay()
            sc.copy_(oc); sv.copy_(ov)
            traj.append(oc.clone())  # CLEAN: cloned before the next replay overwrites it
        return torch.stack(traj)
