"""R-GCN (basis decomposition) over an enterprise knowledge graph: entity typing plus
DistMult link scoring for the question-answering service.

The encoder is a compiled zero-argument lambda over the fixed graph; the decoder and the
evaluation report are reduce-overhead compiled functions.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RGCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim, n_rels, n_bases=8):
        super().__init__()
        self.bases = nn.Parameter(torch.randn(n_bases, in_dim, out_dim) * 0.05)
        self.coef = nn.Parameter(torch.randn(n_rels, n_bases) * 0.1)
        self.self_loop = nn.Linear(in_dim, out_dim)
        self.isolated_bias = nn.Parameter(torch.zeros(out_dim))

    def forward(self, h, src, dst, etype, norm):
        w = torch.einsum("rb,bio->rio", self.coef, self.bases)
        msg = torch.bmm(h[src].unsqueeze(1), w[etype]).squeeze(1) * norm.unsqueeze(1)
        agg = torch.zeros(h.shape[0], msg.shape[1], device=h.device).index_add_(0, dst, msg)  # CLEAN: index_add_ with CUDA edge indices
        out = agg + self.self_loop(h)
        deg = torch.zeros(h.shape[0], device=h.device).index_add_(0, dst, torch.ones_like(norm))
        if (deg == 0).any():  # HAZARD: dynamic-control-flow
            out = out + (deg == 0).float().unsqueeze(1) * self.isolated_bias
        return out


class RGCN(nn.Module):
    def __init__(self, n_nodes, n_rels, n_classes, dim=64):
        super().__init__()
        self.emb = nn.Embedding(n_nodes, dim)
        self.l1 = RGCNLayer(dim, dim, n_rels)
        self.l2 = RGCNLayer(dim, dim, n_rels)
        self.cls = nn.Linear(dim, n_classes)

    def forward(self, src, dst, etype, norm):
        h = F.relu(self.l1(self.emb.weight, src, dst, etype, norm))
        return self.l2(h, src, dst, etype, norm)


@torch.compile(mode="reduce-overhead")
def link_scores(h, heads, rels, tails, rel_diag):
    return (h[heads] * rel_diag[rels] * h[tails]).sum(-1)


@torch.compile(mode="reduce-overhead")
def entity_report(logits, labels, mask):
    pred = logits.argmax(-1)
    acc = (pred[mask] == labels[mask]).float().mean()  # HAZARD: dynamic-shape
    print("entity typing accuracy", acc)  # HAZARD: host-code
    return acc


class EntityService:
    def __init__(self, model, graph, n_rels, dim=64):
        self.model = model.eval().cuda()
        self.g = {k: v.cuda() for k, v in graph.items()}
        self.rel_diag = nn.Parameter(torch.ones(n_rels, dim, device="cuda"))
        g = self.g
        self.encode = torch.compile(lambda: self.model(g["src"], g["dst"], g["etype"], g["norm"]),
                                    mode="reduce-overhead")
        self.encode_debug = torch.compile(lambda: self.model(g["src"], g["dst"], g["etype"], g["norm"]))

    @torch.no_grad()
    def answer(self, heads, rels, k=10, slots=16):
        heads, rels = F.pad(heads, (0, slots - heads.shape[0])), F.pad(rels, (0, slots - rels.shape[0]))
        h = self.encode().clone()  # CLEAN: cloned before it is handed to another compiled function
        tails = torch.arange(h.shape[0], device="cuda")
        scores = link_scores(h, heads.repeat_interleave(h.shape[0]), rels.repeat_interleave(h.shape[0]),
                             tails.repeat(heads.shape[0]), self.rel_diag)
        return torch.topk(scores.view(slots, -1), k).indices  # CLEAN: questions padded to a fixed slot count

    @torch.no_grad()
    def type_report(self, labels, test_mask):
        h = self.encode()
        logits = self.model.cls(h)
        acc = entity_report(logits, labels, test_mask)
        return h.norm(dim=-1), acc  # HAZARD: static-address

    @torch.no_grad()
    def debug_embeddings(self):
        h = self.encode_debug()
        print("embedding norms", h.norm(dim=-1)[:10])  # CLEAN: eager print outside compiled code
        return h
