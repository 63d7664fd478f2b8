"""Web-search second-stage reranker: scorer registry + MMR diversification, both under triton.cudagraphs."""
from dataclasses import dataclass
import torch
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}

@dataclass
class RerankConfig:
    freshness_weight: float = 0.1
    lambda_mmr: float = 0.7
    def blend(self, rel, fresh):
        return rel + self.freshness_weight * fresh  # HAZARD: python-scalar
    def mmr_weight(self):
        return self.lambda_mmr  # CLEAN: fixed at construction, never reassigned

def _l2_normalize_(emb):
    return emb.div_(emb.norm(dim=-1, keepdim=True).clamp_min(1e-6))  # HAZARD: static-address

def _l2_normalize(emb):
    return emb / emb.norm(dim=-1, keepdim=True).clamp_min(1e-6)  # CLEAN: out-of-place twin

def dense_scorer(q, d, q_ids, d_ids):
    return (_l2_normalize(q).unsqueeze(1) * _l2_normalize_(d)).sum(-1)

def lexical_scorer(q, d, q_ids, d_ids):
    hits = (q_ids.unsqueeze(1).unsqueeze(-1) == d_ids.unsqueeze(2)).any(-1)
    pos = hits.nonzero()  # HAZARD: dynamic-shape
    counts = torch.zeros(hits.shape[:2], device=q.device).index_put_((pos[:, 0], pos[:, 1]), torch.ones(len(pos), device=q.device), accumulate=True)
    return counts / q_ids.shape[-1]

def overlap_scorer(q, d, q_ids, d_ids):
    hits = (q_ids.unsqueeze(1).unsqueeze(-1) == d_ids.unsqueeze(2)).any(-1)
    return hits.float().mean(-1)  # CLEAN: dense count, no data-dependent shape

SCORERS = {"dense": dense_scorer, "lexical": lexical_scorer, "overlap": overlap_scorer}

class Pipeline:
    def __init__(self, names, cfg):
        self.names, self.cfg = names, cfg
        self.score = torch.compile(self._score, options=CG)
        self.diversify = torch.compile(self._mmr, options=CG)
    def _score(self, q, d, q_ids, d_ids, fresh):
        rel = sum(SCORERS[n](q, d, q_ids, d_ids) for n in self.names)
        return self.cfg.blend(rel, fresh)
    def _mmr(self, d, rel):
        sim = _l2_normalize(d) @ _l2_normalize(d).transpose(1, 2)
        lam = self.cfg.mmr_weight()
        return lam * rel - (1 - lam) * sim.max(-1).values

class Reranker:
    def __init__(self, pipeline):
        self.p = pipeline
    @torch.no_grad()
    def rerank(self, batch):
        rel = self.p.score(batch["q"], batch["d"], batch["q_ids"], batch["d_ids"], batch["fresh"])
        div = self.p.diversify(batch["d_clean"], rel)
        order = div.argsort(-1, descending=True)
        return order, rel.gather(-1, order)  # HAZARD: static-address
    @torch.no_grad()
    def rerank_safe(self, batch):
        rel = self.p.score(batch["q"], batch["d"], batch["q_ids"], batch["d_ids"], batch["fresh"]).clone()  # CLEAN: cloned before the next compiled call
        order = self.p.diversify(batch["d_clean"], rel).argsort(-1, descending=True)
        return order, rel.gather(-1, order)

def ab_test(traffic, arm):
    cfg = RerankConfig()
    names = ("dense", "lexical") if arm == "B" else ("dense", "overlap")
    ranker = Reranker(Pipeline(names, cfg))
    results = []
    for i, batch in enumerate(traffic):
        batch = {k: v.cuda() for k, v in batch.items()}  # CLEAN: uploads outside the compiled functions
        results.append(ranker.rerank(batch) if i % 2 else ranker.rerank_safe(batch))
        cfg.freshness_weight = 0.1 + 0.01 * (i % 5)
    return results
