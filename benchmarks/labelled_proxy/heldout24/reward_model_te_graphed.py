"""Reward-model scoring service for RLHF rollouts, FP8 Transformer Engine layers graphed.

The PPO/GRPO learners send padded (batch, seq) rollouts; the reward model scores the
last non-pad token.  The TE layers and the value head are graphed once with TE's
make_graphed_callables and replayed under te.autocast.
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HIDDEN, FFN, HEADS, LAYERS = 2048, 8192, 16, 12
BATCH, SEQ = 32, 1024


class RewardHead(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = te.LayerNorm(d)
        self.proj = te.Linear(d, 1)
        self.length_penalty = 0.0
        self.noise_gen = torch.Generator(device="cuda")

    def forward(self, h, last_idx):
        pooled = h.gather(0, last_idx.view(1, -1, 1).expand(1, -1, h.shape[-1])).squeeze(0)
        r = self.proj(self.norm(pooled)).squeeze(-1)
        pen = self.length_penalty  # HAZARD: python-scalar
        r = r - pen * last_idx.float() / SEQ
        jitter = torch.randn(r.shape, device=r.device, generator=self.noise_gen)  # HAZARD: rng
        return r + 1e-4 * jitter


def build_layers():
    return [
        te.TransformerLayer(HIDDEN, FFN, HEADS, self_attn_mask_type="padding", params_dtype=torch.bfloat16).cuda().eval()
        for _ in range(LAYERS)
    ]


class RewardService:
    def __init__(self):
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)
        self.layers = build_layers()
        self.head = RewardHead(HIDDEN).cuda().eval()
        self.emb = nn.Embedding(128256, HIDDEN, dtype=torch.bfloat16).cuda()
        self.act_log = {}
        for i, layer in enumerate(self.layers[:2]):
            layer.register_forward_pre_hook(lambda m, a, i=i: self.act_log.setdefault(i, a[0].shape))  # HAZARD: api-misuse
        x = torch.randn(SEQ, BATCH, HIDDEN, dtype=torch.bfloat16, device="cuda")
        mask = torch.zeros(BATCH, 1, 1, SEQ, dtype=torch.bool, device="cuda")
        last = torch.zeros(BATCH, dtype=torch.long, device="cuda")
        modules = tuple(self.layers) + (self.head,)
        sample_args = tuple((x,) for _ in self.layers) + ((x, last),)
        sample_kwargs = tuple({"attention_mask": mask} for _ in self.layers) + ({},)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            graphed = te.make_graphed_callables(
                modules, sample_args, sample_kwargs=sample_kwargs,
                enabled=True, recipe=self.recipe, cache_quantized_params=False,
            )
        self.g_layers, self.g_head = list(graphed[:-1]), graphed[-1]
        self.head.register_forward_hook(lambda m, a, out: None)  # CLEAN: hook added after graphing

    @torch.no_grad()
    def score(self, ids: torch.Tensor, lengths: torch.Tensor):
        ids = ids.cuda(non_blocking=True)  # CLEAN: eager copy before the replays
        h = self.emb(ids).transpose(0, 1).contiguous()
        pad = torch.arange(SEQ, device="cuda")[None, :] >= lengths.cuda()[:, None]
        mask = pad[:, None, None, :]
        with te.autocast(enabled=True, recipe=self.recipe):
            for layer in self.g_layers:
                h = layer(h, attention_mask=mask)  # CLEAN: keyword declared in sample_kwargs
            rewards = self.g_head(h, lengths.cuda() - 1)
        return rewards.float().cpu()  # CLEAN: host read after the replays

    def anneal(self, step):
        self.head.length_penalty = min(0.2, step * 1e-4)
