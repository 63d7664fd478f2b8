"""GIN with a virtual node for molecular property prediction (OGB molhiv-style screening).

The service compiles the model's forward with mode="max-autotune" and scores libraries of
molecules delivered as collated graph batches (x, edge_index, edge_attr, batch vector).
"""
import copy

import torch
import torch.nn as nn


class GINConv(nn.Module):
    def __init__(self, dim, n_bond_types=5):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.bond = nn.Embedding(n_bond_types, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.BatchNorm1d(2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))

    def forward(self, h, edge_index, edge_attr):
        src, dst = edge_index
        msg = torch.relu(h[src] + self.bond(edge_attr))
        agg = torch.zeros_like(h).index_add_(0, dst, msg)  # CLEAN: index_add_ with a CUDA index tensor
        return self.mlp((1 + self.eps) * h + agg)


class GINVirtualNode(nn.Module):
    def __init__(self, n_atom_types=120, dim=300, n_layers=5, n_tasks=1):
        super().__init__()
        self.atom = nn.Embedding(n_atom_types, dim)
        self.convs = nn.ModuleList(GINConv(dim) for _ in range(n_layers))
        self.vn_emb = nn.Parameter(torch.zeros(1, dim))
        self.vn_mlps = nn.ModuleList(nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
                                     for _ in range(n_layers - 1))
        self.head = nn.Linear(dim, n_tasks)

    def forward(self, x, edge_index, edge_attr, batch):
        num_graphs = int(batch.max()) + 1  # HAZARD: host-sync
        vn = self.vn_emb.expand(num_graphs, -1)
        h = self.atom(x)
        for i, conv in enumerate(self.convs):
            h = conv(h + vn[batch], edge_index, edge_attr)
            if i < len(self.vn_mlps):
                pooled = torch.zeros_like(vn).index_add_(0, batch, h) + vn
                vn = vn + self.vn_mlps[i](pooled)
        if torch.isnan(h).any():  # HAZARD: dynamic-control-flow
            h = torch.nan_to_num(h)
        graph_h = torch.zeros_like(vn).index_add_(0, batch, h)
        return self.head(graph_h)


class ScreeningService:
    def __init__(self, model):
        model = model.eval().cuda()
        self.audit = torch.compile(copy.deepcopy(model), mode="max-autotune-no-cudagraphs")
        model.forward = torch.compile(model.forward, mode="max-autotune")
        self.model = model

    @torch.no_grad()
    def score_library(self, loader):
        preds = []
        for data in loader:  # collated batches: node and edge counts differ per batch
            out = self.model(data.x, data.edge_index, data.edge_attr, data.batch)  # HAZARD: dynamic-shape
            preds.append(torch.sigmoid(out))
        return torch.cat(preds)

    @torch.no_grad()
    def score_padded(self, padded_batches):
        preds = []
        for x, ei, ea, b in padded_batches:  # packed to 2048 nodes / 4096 edges / 64 graphs
            out = self.model(x, ei, ea, b)  # CLEAN: fixed padded shapes
            preds.append(out.clone())  # CLEAN: cloned before the next compiled call
        return torch.cat(preds)

    @torch.no_grad()
    def hits(self, padded_batches, threshold=0.8):
        hits = []
        for x, ei, ea, b in padded_batches:
            out = self.model(x, ei, ea, b)
            hits.append(out)  # HAZARD: static-address
        return [h for h in hits if torch.sigmoid(h).max() > threshold]

    @torch.no_grad()
    def audit_batch(self, data):
        return self.audit(data.x, data.edge_index, data.edge_attr, data.batch)  # CLEAN: max-autotune-no-cudagraphs copy
