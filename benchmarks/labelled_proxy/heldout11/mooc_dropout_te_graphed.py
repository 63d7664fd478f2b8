"""Weekly dropout-risk scoring for a MOOC platform.

Each learner is a sequence of 64 daily activity vectors (videos, quizzes, forum posts, ...).
An activity embedding, four Transformer Engine layers and a risk head are graphed once in
eval mode with FP8 weight caching; the nightly batch job and the live advisor dashboard both
replay the graphs.
"""
import time

import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

D, DAYS, B, N_FEAT = 256, 64, 512, 24


class ActivityEmbed(nn.Module):
    def __init__(self, holiday_weeks=(0, 7)):
        super().__init__()
        self.proj = nn.Linear(N_FEAT, D)
        self.week_emb = nn.Embedding(10, D)
        self.holiday_weeks = list(holiday_weeks)
        self.course_start = time.time() - 14 * 86400

    def forward(self, acts):                                         # (B, DAYS, N_FEAT)
        age_days = (time.time() - self.course_start) / 86400.0  # HAZARD: host-code
        weeks = (torch.arange(DAYS, device=acts.device) + int(age_days) - DAYS).clamp_min(0) // 7
        hol = torch.tensor(self.holiday_weeks, device=acts.device)  # HAZARD: host-sync
        w = torch.where(torch.isin(weeks, hol), 0.5, 1.0)
        x = self.proj(torch.log1p(acts)) * w[None, :, None] + self.week_emb(weeks.clamp_max(9))
        return x.transpose(0, 1).contiguous()                          # (DAYS, B, D)


class RiskHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 1)

    def forward(self, x):
        p = torch.sigmoid(self.fc(x[-7:].mean(0))).squeeze(-1)
        if p.mean() > 0.9:  # HAZARD: dynamic-control-flow
            p = p * 0.9                                               # dashboard saturates otherwise
        return p


def build():
    embed, head = ActivityEmbed().cuda(), RiskHead().cuda()
    layers = [te.TransformerLayer(D, 4 * D, 8, hidden_dropout=0.0, attention_dropout=0.0).cuda() for _ in range(4)]
    modules = (embed, *layers, head)
    for m in modules:
        m.eval()
    recipe = DelayedScaling(amax_history_len=8)
    acts = torch.rand(B, DAYS, N_FEAT, device="cuda")
    h = torch.randn(DAYS, B, D, device="cuda")
    args = ((acts,),) + tuple((h,) for _ in layers) + ((h,),)
    graphed = te.make_graphed_callables(modules, args, enabled=True, recipe=recipe, cache_quantized_params=True)
    head.register_forward_hook(lambda m, a, out: None)  # CLEAN: hook added after graphing
    return graphed, recipe


@torch.no_grad()
def nightly_scores(graphed, recipe, batches):
    g_embed, *g_layers, g_head = graphed
    out = []
    for i, acts in enumerate(batches):
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replays inside te.autocast with the capture recipe
            x = g_embed(acts, is_first_microbatch=(i == 0))  # CLEAN: is_first_microbatch passed on every replay
            for layer in g_layers:
                x = layer(x, is_first_microbatch=(i == 0))
            out.append(g_head(x, is_first_microbatch=(i == 0)).clone())
    return torch.cat(out)


@torch.no_grad()
def advisor_view(graphed, recipe, acts):
    g_embed, *g_layers, g_head = graphed
    with te.autocast(enabled=True, recipe=recipe):
        x = g_embed(acts, is_first_microbatch=False)
        for layer in g_layers:
            x = layer(x)  # HAZARD: api-misuse
        return g_head(x, is_first_microbatch=False).cpu()


if __name__ == "__main__":
    graphed, recipe = build()
    scores = nightly_scores(graphed, recipe, [torch.rand(B, DAYS, N_FEAT, device="cuda") for _ in range(12)])
    live = advisor_view(graphed, recipe, torch.rand(B, DAYS, N_FEAT, device="cuda"))
