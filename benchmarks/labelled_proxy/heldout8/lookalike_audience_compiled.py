"""Lookalike-audience expansion for an ads platform.

An advertiser uploads a seed list (hashed customer IDs matched to our users);
the user tower embeds the seeds and every active user is scored against them.
Scorers are registered by name and compiled with the cudagraphs backend.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_USERS, N_FEATS, D = 2_000_000, 200, 128
EXPANSION_K = 50_000
SEED_SAMPLE = 256
SCORERS = {}


def register(name, **compile_kw):
    def deco(fn):
        SCORERS[name] = torch.compile(fn, **compile_kw)
        return fn
    return deco


class UserTower(nn.Module):
    def __init__(self, user_table):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(N_FEATS, 512), nn.GELU(), nn.Linear(512, D))
        self.register_buffer("user_table", user_table)          # (N_USERS, D), normalised

    def forward(self, feats):
        return F.normalize(self.mlp(feats), dim=-1)


@register("centroid", backend="cudagraphs")
def centroid_scores(tower, seed_feats):
    seed = F.normalize(tower(seed_feats).mean(0), dim=-1)
    return tower.user_table @ seed


@register("max_sim", backend="cudagraphs")
def max_sim_scores(tower, seed_feats):
    seeds = tower(seed_feats)
    return (tower.user_table @ seeds.T).amax(-1)


@register("select", backend="cudagraphs")
def select(scores, already_targeted, min_sim):
    scores = torch.where(already_targeted, torch.full_like(scores, -1.0), scores)  # CLEAN: exclusion without a mask index
    if (scores > min_sim).sum() < EXPANSION_K:  # HAZARD: dynamic-control-flow
        scores = scores + 0.05
    top = torch.topk(scores, EXPANSION_K)
    return top.indices.tolist()  # HAZARD: host-sync


class LookalikeService:
    def __init__(self, tower):
        self.tower = tower.cuda().eval()
        self.targeted = torch.zeros(N_USERS, dtype=torch.bool, device="cuda")

    def refresh_nightly(self, new_table):
        self.tower.user_table = new_table.cuda()  # HAZARD: static-address

    def patch_rows(self, rows, emb):
        self.tower.user_table.index_copy_(0, rows, emb)  # CLEAN: in-place update keeps the buffer address

    @torch.inference_mode()
    def expand(self, seed_feats, method="centroid", min_sim=0.35):
        scorer = SCORERS[method]
        if method == "centroid":
            scores = scorer(self.tower, seed_feats)  # HAZARD: dynamic-shape
        else:
            pick = torch.randint(0, seed_feats.shape[0], (SEED_SAMPLE,), device="cuda")
            scores = scorer(self.tower, seed_feats[pick])  # CLEAN: seeds resampled to a fixed count
        return SCORERS["select"](scores, self.targeted, min_sim)


if __name__ == "__main__":
    table = F.normalize(torch.randn(N_USERS, D), dim=-1)
    svc = LookalikeService(UserTower(table))
    for n_seeds in (812, 20_000, 3_141):
        seeds = torch.randn(n_seeds, N_FEATS, device="cuda")
        print(len(svc.expand(seeds)), len(svc.expand(seeds, method="max_sim")))
    svc.patch_rows(torch.arange(10, device="cuda"), F.normalize(torch.randn(10, D, device="cuda"), dim=-1))
    svc.refresh_nightly(F.normalize(torch.randn(N_USERS, D), dim=-1))
