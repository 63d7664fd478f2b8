"""End-to-end coreference resolution (span enumeration, mention pruning, antecedent ranking) over
pre-computed contextual token embeddings. A nested config dict carries the compile options
({"triton.cudagraphs": True}, dynamic=False) used for the training step and the optimizer step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {
    "model": {"hidden": 768, "ffnn": 256, "max_span_width": 10, "top_span_ratio": 0.4, "max_antecedents": 50},
    "compile": {"options": {"triton.cudagraphs": True}, "dynamic": False},
    "optim": {"lr": 2e-4, "decay_every": 2, "gamma": 0.5, "epochs": 6},
}

def mlp_scorer(i, h):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Dropout(0.3), nn.Linear(h, 1))

class CorefModel(nn.Module):
    def __init__(self, hidden, ffnn, max_span_width, top_span_ratio, max_antecedents):
        super().__init__()
        self.W, self.ratio, self.K = max_span_width, top_span_ratio, max_antecedents
        d = 3 * hidden + 20
        self.width_emb = nn.Embedding(max_span_width, 20)
        self.mention, self.pair = mlp_scorer(d, ffnn), mlp_scorer(3 * d, ffnn)
        self.coarse = nn.Linear(d, d, bias=False)

    def spans(self, tok):
        T = tok.shape[0]
        starts = torch.arange(T, device=tok.device).repeat_interleave(self.W)
        widths = torch.arange(self.W, device=tok.device).repeat(T)
        ends = (starts + widths).clamp_max(T - 1)
        emb = torch.cat([tok[starts], tok[ends], (tok[starts] + tok[ends]) / 2, self.width_emb(widths)], -1)
        score = self.mention(emb).squeeze(-1).masked_fill(starts + widths >= T, -1e4)  # CLEAN: masked_fill keeps the shape
        top_s, top_i = score.topk(int(T * self.ratio))  # CLEAN: topk with a shape-derived k
        return emb[top_i], top_s, starts[top_i], ends[top_i]

    def antecedents(self, emb, s):
        k = emb.shape[0]
        coarse = self.coarse(emb) @ emb.t() + s[:, None] + s[None]
        coarse = coarse.masked_fill(torch.ones(k, k, dtype=torch.bool, device=emb.device).triu(), -1e4)
        top_c, ant = coarse.topk(min(self.K, k), dim=1)
        a_emb = emb[ant]
        fine = self.pair(torch.cat([emb[:, None].expand_as(a_emb), a_emb, emb[:, None] * a_emb], -1)).squeeze(-1)
        return torch.cat([torch.zeros(k, 1, device=emb.device), top_c + fine], 1), ant, top_c > -1e3

    def forward(self, tok, cluster_of_token):
        emb, s, st, en = self.spans(tok)
        scores, ant, valid = self.antecedents(emb, s)
        gold = cluster_of_token[st] * (cluster_of_token[st] == cluster_of_token[en])
        same = (gold[:, None] == gold[ant]) & (gold[ant] > 0) & valid
        if not (gold > 0).any():  # HAZARD: dynamic-control-flow
            return scores.sum() * 0.0
        labels = torch.cat([~same.any(1, keepdim=True), same], 1)
        return -(torch.logsumexp(scores.masked_fill(~labels, -1e4), 1) - torch.logsumexp(scores, 1)).sum()

    def predict(self, tok):
        emb, s, st, en = self.spans(tok)
        scores, ant, _ = self.antecedents(emb, s)
        best = scores.argmax(1)
        link = torch.where(best > 0, ant.gather(1, (best - 1).clamp_min(0)[:, None]).squeeze(1), -1)
        return list(zip(st.tolist(), en.tolist(), link.tolist()))  # HAZARD: host-sync

def train(docs, segments):
    model = CorefModel(**CONFIG["model"]).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=CONFIG["optim"]["lr"])
    step = torch.compile(model, **CONFIG["compile"])
    opt_step = torch.compile(opt.step, **CONFIG["compile"])
    for epoch in range(CONFIG["optim"]["epochs"]):
        for tok, clusters in docs:
            loss = step(tok, clusters)  # HAZARD: dynamic-shape
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
        for tok, clusters in segments:
            loss = step(tok, clusters)  # CLEAN: 512-token segments, one shape
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
        if (epoch + 1) % CONFIG["optim"]["decay_every"] == 0:
            for group in opt.param_groups:
                group["lr"] = group["lr"] * CONFIG["optim"]["gamma"]  # HAZARD: optimizer
    return model, torch.compile(model.predict, **CONFIG["compile"])

if __name__ == "__main__":
    docs = [(torch.randn(n, 768, device="cuda"), torch.randint(0, 6, (n,), device="cuda")) for n in (312, 744, 128, 951)]
    segs = [(torch.randn(512, 768, device="cuda"), torch.randint(0, 6, (512,), device="cuda")) for _ in range(8)]
    model, predict = train(docs, segs)
    clusters = predict(docs[0][0])
