"""Graphormer-style graph transformer for molecular property prediction on dense padded batches.

Both the encoder and the property head go through one functools.partial(torch.compile, ...) wrapper.
"""
import functools
import torch
import torch.nn as nn
import torch.nn.functional as F

cg_compile = functools.partial(torch.compile, mode="reduce-overhead", fullgraph=False)
MAX_SPD = 16


class GraphormerEncoder(nn.Module):
    def __init__(self, n_atom=128, dim=256, heads=8, layers=6, max_deg=32):
        super().__init__()
        self.atom = nn.Embedding(n_atom, dim, padding_idx=0)
        self.deg = nn.Embedding(max_deg + 1, dim)
        self.spd = nn.Embedding(MAX_SPD + 2, heads)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(dim, heads, 4 * dim, batch_first=True, norm_first=True)
                                    for _ in range(layers))
        self.heads, self.max_deg = heads, max_deg

    def forward(self, atoms, adj, spd):  # atoms (B, N), adj (B, N, N) float, spd (B, N, N) long
        degree = adj.sum(-1).long()
        deg_cap = min(int(degree.max()), self.max_deg)  # HAZARD: host-sync
        h = self.atom(atoms) + self.deg(degree.clamp(max=deg_cap))
        bias = self.spd(spd.clamp(max=MAX_SPD + 1)).permute(0, 3, 1, 2)  # (B, H, N, N)
        bias = bias.masked_fill((atoms == 0)[:, None, None, :], -1e9)  # CLEAN: padding mask applied with masked_fill
        print("graphormer batch", tuple(atoms.shape))  # HAZARD: host-code
        mask = bias.flatten(0, 1)
        for layer in self.layers:
            h = layer(h, src_mask=mask)
        return h


class PropertyHead(nn.Module):
    def __init__(self, dim=256, n_tasks=12):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, n_tasks))

    def forward(self, h, atoms):
        m = (atoms != 0).unsqueeze(-1).float()
        return self.mlp((h * m).sum(1) / m.sum(1).clamp(min=1))


encoder = cg_compile(GraphormerEncoder().cuda().eval())
head = cg_compile(PropertyHead().cuda().eval())


@torch.no_grad()
def predict(loader):
    preds, embs = [], []
    for atoms, adj, spd in loader:  # each batch padded to its own largest molecule
        node_h = encoder(atoms, adj, spd)  # HAZARD: dynamic-shape
        y = head(node_h, atoms)
        embs.append(node_h.mean(1))  # HAZARD: static-address
        preds.append(y.clone())  # CLEAN: output cloned before the next call
    return torch.cat(preds), torch.cat(embs)


def pad_to(atoms, adj, spd, n):
    p = n - atoms.shape[1]
    return F.pad(atoms, (0, p)), F.pad(adj, (0, p, 0, p)), F.pad(spd, (0, p, 0, p), value=MAX_SPD + 1)


@torch.no_grad()
def predict_bucketed(loader, max_nodes=64):
    preds, embs = [], []
    for atoms, adj, spd in loader:
        atoms, adj, spd = pad_to(atoms, adj, spd, max_nodes)
        node_h = encoder(atoms, adj, spd)  # CLEAN: every batch padded to max_nodes
        pooled = node_h.mean(1).clone()  # CLEAN: encoder output read before the head is called
        preds.append(head(node_h, atoms).clone())
        embs.append(pooled)
    return torch.cat(preds), torch.cat(embs)


if __name__ == "__main__":
    def fake(B, N):
        atoms = torch.randint(1, 128, (B, N), device="cuda")
        adj = (torch.rand(B, N, N, device="cuda") < 0.1).float()
        return atoms, adj, torch.randint(0, 10, (B, N, N), device="cuda")
    y, e = predict_bucketed([fake(32, n) for n in (23, 41, 64)])
    print(y.shape, e.shape)
