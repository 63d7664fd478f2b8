"""MSCN learned cardinality estimation (Kipf et al. 2019) behind a PostgreSQL planner hook.

Training pads every set (tables, joins, predicates) to fixed maxima. The planner hook
batches the sub-plans of one query and pads them only to the longest lists in that call.
Both entry points are compiled with CUDA graphs and dynamic=False.
"""
import torch
import torch.nn as nn

MAX_T, MAX_J, MAX_P = 8, 8, 12
CARD_CAP = 1e12
CG = {"triton.cudagraphs": True}


class SetConv(nn.Module):
    def __init__(self, d_in, d=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_in, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU())

    def forward(self, x, mask):
        h = self.mlp(x) * mask[..., None]
        return h.sum(1) / mask.sum(1, keepdim=True).clamp_min(1.0)  # CLEAN: masked mean, no boolean indexing


class MSCN(nn.Module):
    def __init__(self, d_table, d_join, d_pred, d=256):
        super().__init__()
        self.t, self.j, self.p = SetConv(d_table, d), SetConv(d_join, d), SetConv(d_pred, d)
        self.out = nn.Sequential(nn.Linear(3 * d, d), nn.ReLU(), nn.Linear(d, 1), nn.Sigmoid())

    def forward(self, t, tm, j, jm, p, pm):
        return self.out(torch.cat([self.t(t, tm), self.j(j, jm), self.p(p, pm)], -1)).squeeze(-1)


@torch.compile(options=CG, dynamic=False)
def estimate(model, batch, log_min: float, log_max: float):
    y = model(*batch)
    if torch.isnan(y).any():  # HAZARD: dynamic-control-flow
        raise RuntimeError("MSCN produced NaN; check the predicate value normalisation")
    return torch.exp(y * (log_max - log_min) + log_min).clamp(max=CARD_CAP)


@torch.compile(options=CG, dynamic=False)
def qerror_loss(model, batch, target, log_min: float, log_max: float):
    est = torch.exp(model(*batch) * (log_max - log_min) + log_min)
    true = torch.exp(target * (log_max - log_min) + log_min)
    q = torch.maximum(est / true, true / est)
    print(f"batch mean q-error {q.mean()}")  # HAZARD: host-code
    return q.mean()


class CardinalityService:
    def __init__(self, model, featurizer, log_min, log_max):
        self.model = model.cuda().eval()
        self.featurizer = featurizer
        self.log_min, self.log_max = log_min, log_max
        self.cache = []

    @torch.no_grad()
    def on_planner_call(self, subplans):
        longest = max(len(s.predicates) for s in subplans)
        batch = self.featurizer(subplans, max_t=MAX_T, max_j=MAX_J, max_p=longest)   # 6 CUDA tensors
        card = estimate(self.model, batch, self.log_min, self.log_max)  # HAZARD: dynamic-shape
        self.cache.append(card)  # HAZARD: static-address
        return card.cpu().tolist()  # CLEAN: host copy taken right after the compiled call


def train(model, loader, log_min, log_max, epochs=100):
    model.cuda().train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for ep in range(epochs):
        for batch, target in loader:            # sets padded to MAX_T/MAX_J/MAX_P, batch 1024, drop_last=True
            loss = qerror_loss(model, batch, target, log_min, log_max)  # CLEAN: fixed padding and batch size, one graph
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {ep}")
    return model


if __name__ == "__main__":
    from mscn_data import Featurizer, load_imdb_workload

    feat = Featurizer.from_schema("imdb_schema.json", sample_bitmaps="imdb_samples_1000.npz")
    loader, log_min, log_max = load_imdb_workload("train_100k.csv", feat, batch=1024)
    model = train(MSCN(feat.d_table, feat.d_join, feat.d_pred), loader, log_min, log_max)
    svc = CardinalityService(model, feat, log_min, log_max)
    from pg_hook import serve
    serve(svc.on_planner_call, socket="/tmp/mscn.sock")
