"""Full-batch GAT node classification on a citation graph (Cora / PubMed style).

Both attention layers go through torch.cuda.make_graphed_callables; the classifier
head and the loss stay eager. Edge softmax is done with scatter ops on fixed edge lists.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GATLayer(nn.Module):
    def __init__(self, in_dim, out_dim, heads, edge_index, n_nodes, att_drop=0.6, drop_edge=0.2):
        super().__init__()
        self.heads, self.out_dim, self.n_nodes = heads, out_dim, n_nodes
        self.lin = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.randn(1, heads, out_dim) * 0.1)
        self.att_dst = nn.Parameter(torch.randn(1, heads, out_dim) * 0.1)
        self.register_buffer("src", edge_index[0].clone())
        self.register_buffer("dst", edge_index[1].clone())
        self.att_drop, self.drop_edge = att_drop, drop_edge
        self.n_calls = 0

    def forward(self, x):
        h = self.lin(x).view(-1, self.heads, self.out_dim)
        src, dst = self.src, self.dst
        if self.training:
            keep = torch.rand(src.shape[0], device=src.device) > self.drop_edge
            src, dst = src[keep], dst[keep]  # HAZARD: dynamic-shape
        self.n_calls += 1  # HAZARD: host-code
        p = self.att_drop if self.n_calls > 50 else 0.0
        score = F.leaky_relu((h * self.att_src).sum(-1)[src] + (h * self.att_dst).sum(-1)[dst], 0.2)
        idx = dst.unsqueeze(-1).expand_as(score)
        smax = torch.full((self.n_nodes, self.heads), -1e9, device=x.device)
        smax = smax.scatter_reduce(0, idx, score, reduce="amax", include_self=True)  # CLEAN: scatter_reduce with a CUDA index
        alpha = (score - smax[dst]).exp()
        denom = torch.zeros(self.n_nodes, self.heads, device=x.device).index_add_(0, dst, alpha)
        alpha = F.dropout(alpha / denom[dst].clamp_min(1e-16), p, self.training)  # CLEAN: dropout on the default CUDA generator
        out = torch.zeros_like(h).index_add_(0, dst, h[src] * alpha.unsqueeze(-1))
        return out.flatten(1)


class CitationGAT:
    def __init__(self, data, hidden=8, heads=8, n_classes=7):
        self.x, self.y = data.x.cuda(), data.y.cuda()
        self.train_mask, self.val_mask = data.train_mask.cuda(), data.val_mask.cuda()
        ei, n = data.edge_index.cuda(), data.num_nodes
        self.l1 = GATLayer(self.x.shape[1], hidden, heads, ei, n).cuda()
        self.l2 = GATLayer(hidden * heads, n_classes, 1, ei, n).cuda()
        self.attn_maps = []
        self.l1.register_forward_hook(lambda m, i, o: self.attn_maps.append(o.detach()))  # HAZARD: api-misuse
        params = list(self.l1.parameters()) + list(self.l2.parameters())
        self.opt = torch.optim.Adam(params, lr=5e-3, weight_decay=5e-4)

    def graph_layers(self):
        h_sample = torch.randn(self.x.shape[0], self.l2.lin.in_features, device="cuda", requires_grad=True)
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.g1, self.g2 = torch.cuda.make_graphed_callables(
                (self.l1, self.l2), ((self.x,), (h_sample,)))
        self.g2.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing

    def forward(self):
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without its cache around replays
            h = F.elu(self.g1(self.x))
            return self.g2(h)

    def fit(self, epochs=200):
        self.graph_layers()
        best = 0.0
        for epoch in range(epochs):
            self.l1.train()
            self.l2.train()
            logits = self.forward()
            loss = F.cross_entropy(logits[self.train_mask].float(), self.y[self.train_mask])
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            with torch.no_grad():
                pred = logits.argmax(-1)
                acc = (pred[self.val_mask] == self.y[self.val_mask]).float().mean().item()  # CLEAN: eager metric outside the graphed layers
            best = max(best, acc)
        return best
