"""Display-ad creative ranking: feature transforms from a dispatch table, captured per slot count."""
import numpy as np
import torch
import torch.nn as nn

def _ctr_prior(x, ctx):
    return torch.log1p(x * 100.0)  # CLEAN: device math only

def _size_bucket(x, ctx):
    bounds = torch.tensor([300.0, 600.0, 970.0], device=x.device)  # HAZARD: host-sync
    return torch.bucketize(x, bounds).float()

def _brand_safety(x, ctx):
    return x * ctx["safety"]

TRANSFORMS = {"ctr_prior": _ctr_prior, "size_bucket": _size_bucket, "brand_safety": _brand_safety}

class HostPriors:
    def __init__(self, n_adv=1000):
        self.table = np.full(n_adv, 0.01, dtype=np.float32)
    def lookup(self, adv_ids):
        return torch.as_tensor(self.table, device="cuda")[adv_ids]  # HAZARD: pinned-memory

class Ranker(nn.Module):
    def __init__(self, names, priors, n_adv=1000, d=64):
        super().__init__()
        self.names, self.priors = names, priors
        self.adv = nn.Embedding(n_adv, d)
        self.mlp = nn.Sequential(nn.Linear(d + len(names) + 1, d), nn.ReLU(), nn.Linear(d, 1))
    def forward(self, feats, adv_ids, ctx):
        self._count()
        cols = [TRANSFORMS[n](feats[..., i], ctx) for i, n in enumerate(self.names)]
        x = torch.cat([self.adv(adv_ids), torch.stack(cols, -1), self.priors.lookup(adv_ids).unsqueeze(-1)], -1)
        return self._diversity(self.mlp(x).squeeze(-1))
    def _count(self):
        self.served = getattr(self, "served", 0) + 1  # HAZARD: host-code
    def _diversity(self, s):
        if s.std() < 1e-3:  # HAZARD: dynamic-control-flow
            s = s + 1e-3 * torch.arange(s.shape[-1], device=s.device)
        return s

class SlotGraphs:
    def __init__(self, model, slots=(4, 8, 16)):
        self.model = model.cuda().eval()
        self.ctx = {"safety": torch.ones(1, device="cuda")}
        self.state = {k: {"feats": torch.zeros(k, 3, device="cuda"),
                          "adv": torch.zeros(k, dtype=torch.long, device="cuda")} for k in slots}
        self.pool = torch.cuda.graph_pool_handle()
    @torch.no_grad()
    def capture(self):
        for k, st in self.state.items():
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.model(st["feats"], st["adv"], self.ctx)
            torch.cuda.current_stream().wait_stream(s)
            st["g"] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(st["g"], pool=self.pool):  # CLEAN: warmed per slot count, one pool
                st["out"] = self.model(st["feats"], st["adv"], self.ctx)
    def rank(self, feats, adv):
        st = self.state[feats.shape[0]]
        st["feats"].copy_(feats)  # CLEAN: copy_ into static inputs
        st["adv"].copy_(adv)
        st["g"].replay()
        return st["out"].argsort(descending=True)
    def set_safety(self, level):
        self.ctx["safety"].fill_(level)  # CLEAN: in-place update of the captured context tensor
    def reload_embeddings(self, weight):
        self.model.adv.weight = nn.Parameter(weight.cuda())  # HAZARD: static-address

def serve(requests, nightly_weights):
    graphs = SlotGraphs(Ranker(["ctr_prior", "size_bucket", "brand_safety"], HostPriors()))
    graphs.capture()
    out = [graphs.rank(f.cuda(), a.cuda()) for f, a in requests]
    graphs.reload_embeddings(nightly_weights)
    return out
