"""Full-graph GraphSAGE training on a partitioned power-grid topology (one METIS partition per
GPU). Halo (boundary) node features are all-gathered eagerly once per epoch; the local
aggregation layer is compiled with backend="cudagraphs"."""
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class PartitionSAGE(nn.Module):
    def __init__(self, d_in, d_hid, n_cls, part, drop_edge=0.0):
        super().__init__()
        self.lin_self = nn.ModuleList([nn.Linear(d_in, d_hid), nn.Linear(d_hid, n_cls)])
        self.lin_nb = nn.ModuleList([nn.Linear(d_in, d_hid), nn.Linear(d_hid, n_cls)])
        self.register_buffer("edge_index", part["edge_index"])  # (2, E) into [local ; halo]
        self.register_buffer("edge_mask", part["edge_mask"])  # edges inside the training horizon
        self.register_buffer("halo", torch.zeros(part["n_halo"], d_in))
        self.register_buffer("halo_hidden", torch.zeros(part["n_halo"], d_hid))
        self.register_buffer("inv_deg", part["inv_deg"])
        self.drop_edge = drop_edge
        self.layer = torch.compile(self._layer, backend="cudagraphs")

    def _layer(self, i, h_local):
        h_all = torch.cat([h_local, self.halo if i == 0 else self.halo_hidden])
        n_local = h_local.shape[0]
        src, dst = self.edge_index[:, self.edge_mask]  # HAZARD: dynamic-shape
        self.edges_used = int(self.edge_mask.sum())  # HAZARD: host-sync
        if np.random.rand() < self.drop_edge:  # HAZARD: host-code
            src, dst = src[::2], dst[::2]
        agg = torch.zeros(n_local, h_all.shape[1], device=h_all.device)
        agg.index_add_(0, dst, h_all.index_select(0, src))  # CLEAN: scatter-style aggregation with CUDA indices
        agg = agg * self.inv_deg[:, None]  # CLEAN: precomputed inverse degree buffer, no host read
        return self.lin_self[i](h_all[:n_local]) + self.lin_nb[i](agg)

    def forward(self, x_local):
        h = F.relu(self.layer(0, x_local))
        return self.layer(1, h)


def refresh_halo(model, x_local, part, group=None):
    world = dist.get_world_size(group)
    bnd = x_local.index_select(0, part["boundary_idx"])
    pad = F.pad(bnd, (0, 0, 0, part["max_boundary"] - bnd.shape[0]))
    everyone = pad.new_empty((world,) + tuple(pad.shape))
    dist.all_gather_into_tensor(everyone, pad, group=group)
    new_halo = everyone.flatten(0, 1).index_select(0, part["halo_src"])
    model.halo = new_halo  # HAZARD: static-address


def refresh_halo_inplace(model, x_local, part, group=None):
    world = dist.get_world_size(group)
    bnd = F.pad(x_local.index_select(0, part["boundary_idx"]),
                (0, 0, 0, part["max_boundary"] - part["boundary_idx"].numel()))
    everyone = bnd.new_empty((world,) + tuple(bnd.shape))
    dist.all_gather_into_tensor(everyone, bnd, group=group)
    model.halo.copy_(everyone.flatten(0, 1).index_select(0, part["halo_src"]))  # CLEAN: buffer refreshed in place


def train(model, x_local, y, train_mask, part, epochs=200):
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for ep in range(epochs):
        refresh_halo(model, x_local, part)
        out = model(x_local)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
        if ep % 20 == 0:
            deg_max = int(part["deg"].max())  # CLEAN: eager read in the driver, outside compiled code
            print(ep, loss.item(), deg_max)
