"""Graph Transformer with Laplacian positional encodings (Dwivedi & Bresson 2020)
on ZINC, dense padded batches; embedding, layers and readout are graphed with
torch.cuda.make_graphed_callables in one call."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--hidden_dim", type=int, default=80)
parser.add_argument("--n_heads", type=int, default=8)
parser.add_argument("--L", type=int, default=10)
parser.add_argument("--pos_enc_dim", type=int, default=8)
parser.add_argument("--max_nodes", type=int, default=38)
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--init_lr", type=float, default=7e-4)
parser.add_argument("--epochs", type=int, default=1000)
args = parser.parse_args()

def laplacian_pe(adj, k):
    deg = adj.sum(-1).clamp(min=1)
    lap = torch.eye(adj.size(-1), device=adj.device) - adj / deg.sqrt().unsqueeze(-1) / deg.sqrt().unsqueeze(-2)
    _, vecs = torch.linalg.eigh(lap)  # CLEAN: eigendecomposition runs eagerly in preprocessing
    return vecs[..., 1:k + 1]

class InputEmbed(nn.Module):
    def __init__(self, n_atoms=28):
        super().__init__()
        self.atom = nn.Embedding(n_atoms, args.hidden_dim)
        self.pe = nn.Linear(args.pos_enc_dim, args.hidden_dim)

    def forward(self, atom_ids, lap_pe):
        if self.training:
            sign_flip = torch.rand(lap_pe.size(-1)).to(lap_pe.device)  # HAZARD: pinned-memory
            sign_flip[sign_flip >= 0.5] = 1.0  # CLEAN: boolean-mask assignment of a scalar
            sign_flip[sign_flip < 0.5] = -1.0
            lap_pe = lap_pe * sign_flip.view(1, 1, -1)
        return self.atom(atom_ids) + self.pe(lap_pe)

class GTLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.qkv, self.o, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))

    def forward(self, h, adj):
        B, N, D = h.shape
        q, k, v = self.qkv(h).view(B, N, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) / (D // self.heads) ** 0.5
        scores = scores.masked_fill(adj.unsqueeze(1) == 0, -1e9)  # CLEAN: graph sparsity applied as a dense mask
        h = self.ln1(h + self.o((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, N, D)))
        return self.ln2(h + self.ffn(h))

class Readout(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(args.hidden_dim, args.hidden_dim // 2), nn.ReLU(), nn.Linear(args.hidden_dim // 2, 1))

    def forward(self, h, node_mask):
        assert torch.all(node_mask.sum(1) > 0), "empty molecule in batch"  # HAZARD: host-sync
        hg = torch.stack([h[b][node_mask[b] > 0].mean(0) for b in range(h.size(0))])  # HAZARD: dynamic-shape
        return self.mlp(hg)

def build():
    embed, layers, readout = InputEmbed().cuda(), [GTLayer(args.hidden_dim, args.n_heads).cuda() for _ in range(args.L)], Readout().cuda()
    B, N = args.batch_size, args.max_nodes
    ids = torch.zeros(B, N, dtype=torch.long, device="cuda")
    pe = torch.randn(B, N, args.pos_enc_dim, device="cuda")
    adj = torch.ones(B, N, N, device="cuda")
    mask = torch.ones(B, N, device="cuda")
    def h():
        return torch.randn(B, N, args.hidden_dim, device="cuda", requires_grad=True)
    samples = ((ids, pe),) + tuple((h(), adj.clone()) for _ in layers) + ((h(), mask),)
    graphed = torch.cuda.make_graphed_callables((embed,) + tuple(layers) + (readout,), samples)
    return graphed[0], list(graphed[1:-1]), graphed[-1]

def train(loader):
    embed, layers, readout = build()
    params = [p for m in [embed, *layers, readout] for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=args.init_lr)
    for epoch in range(args.epochs):
        for ids, adj, mask, y in loader:
            pe = laplacian_pe(adj, args.pos_enc_dim)
            h = embed(ids, pe)
            for layer in layers:
                h = layer(h, adj=adj)  # HAZARD: api-misuse
            loss = F.l1_loss(readout(h, mask).squeeze(-1), y)
            opt.zero_grad(); loss.backward(); opt.step()
