"""SR-GNN session-based recommendation (YooChoose 1/64): gated GNN over each session graph,
soft-attention readout, scores against all item embeddings.

The assistant compiled `model.forward` with mode="max-autotune" and moved session-graph building
from NumPy into the model "so everything runs on the GPU".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_ITEMS, D, L = 37_484, 100, 20  # items, hidden size, max session length


class SRGNN(nn.Module):
    def __init__(self, steps=1):
        super().__init__()
        self.embedding = nn.Embedding(N_ITEMS, D, padding_idx=0)
        self.w_in, self.w_out = nn.Linear(D, D), nn.Linear(D, D)
        self.gru = nn.GRUCell(2 * D, D)
        self.q, self.w1, self.w2 = nn.Linear(D, 1), nn.Linear(D, D), nn.Linear(D, D)
        self.w3 = nn.Linear(2 * D, D)
        self.steps = steps
        self.hybrid_weight = 1.0  # weight of the global preference in the hybrid embedding

    def session_graph(self, seq):
        items, alias = torch.unique(seq, return_inverse=True)  # HAZARD: dynamic-shape
        n = items.numel()
        A = torch.zeros(seq.shape[0], n, n, device=seq.device)
        src, dst = alias[:, :-1], alias[:, 1:]
        b = torch.arange(seq.shape[0], device=seq.device)[:, None].expand_as(src)
        A[b, src, dst] = 1.0
        return items.expand(seq.shape[0], -1), alias, A

    def gnn(self, h, A):
        a_in = (A.transpose(1, 2) / A.sum(1, keepdim=True).transpose(1, 2).clamp_min(1)) @ self.w_in(h)
        a_out = (A / A.sum(2, keepdim=True).clamp_min(1)) @ self.w_out(h)
        m = torch.cat([a_in, a_out], -1)
        return self.gru(m.flatten(0, 1), h.flatten(0, 1)).view_as(h)

    def forward(self, seq, mask):
        items, alias, A = self.session_graph(seq)
        h = self.embedding(items)
        for _ in range(self.steps):
            h = self.gnn(h, A)
        seq_h = torch.gather(h, 1, alias.unsqueeze(-1).expand(-1, -1, D))  # CLEAN: gather with a CUDA index tensor
        last = seq_h[torch.arange(seq.shape[0], device=seq.device), mask.sum(1) - 1]  # CLEAN: integer-tensor indexing, no host read
        alpha = self.q(torch.sigmoid(self.w1(last)[:, None] + self.w2(seq_h)))
        glob = (alpha * seq_h * mask.unsqueeze(-1)).sum(1)
        w = self.hybrid_weight  # HAZARD: python-scalar
        s = self.w3(torch.cat([w * glob, last], -1))
        return s @ self.embedding.weight[1:].T


model = SRGNN().cuda()
model.forward = torch.compile(model.forward, mode="max-autotune")


@torch.no_grad()
def recommend(seq, mask, k=20):
    scores = model(seq, mask)
    return scores.topk(k).indices.tolist()  # CLEAN: eager host read right after the call


@torch.compile(mode="max-autotune")
def recommend_ids(seq, mask, k: int = 20):
    return model.forward(seq, mask).topk(k).indices.tolist()  # HAZARD: host-sync


def load_pretrained_items(path):
    w = torch.load(path, map_location="cuda")  # item2vec embeddings
    model.embedding.weight = nn.Parameter(w)  # HAZARD: static-address


def load_pretrained_items_inplace(path):
    with torch.no_grad():
        model.embedding.weight.copy_(torch.load(path, map_location="cuda"))  # CLEAN: copy_ keeps the parameter's storage


def train(loader, epochs=30):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    for epoch in range(epochs):
        model.hybrid_weight = 0.5 if epoch < 5 else 1.0
        for seq, mask, target in loader:  # sessions right-padded to L
            loss = F.cross_entropy(model(seq.cuda(), mask.cuda()), target.cuda() - 1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
