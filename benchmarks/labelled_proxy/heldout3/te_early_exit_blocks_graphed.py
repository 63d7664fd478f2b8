"""Early-exit encoder trained with Transformer Engine FP8 blocks and per-block CUDA graphs.

Every block has its own exit classifier; confident exits stop gradient flow to
deeper blocks' inputs (anytime-inference training recipe).
"""
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

exit_stats = defaultdict(list)


class ExitBlock(nn.Module):
    def __init__(self, hidden, ffn, heads, n_classes, threshold=0.9, p_drop_path=0.1):
        super().__init__()
        self.layer = te.TransformerLayer(hidden, ffn, heads, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="padding")
        self.exit_head = te.Linear(hidden, n_classes)
        self.threshold, self.p_drop_path = threshold, p_drop_path
        self.path_gen = torch.Generator(device="cuda")
        self.path_gen.manual_seed(1)
        self.exit_rate = torch.zeros((), device="cuda")

    def forward(self, x, attention_mask):
        keep = torch.empty(1, x.shape[1], 1, device=x.device).bernoulli_(1 - self.p_drop_path, generator=self.path_gen)  # HAZARD: rng
        h = x + keep * (self.layer(x, attention_mask=attention_mask) - x)
        logits = self.exit_head(h[0])
        conf = logits.float().softmax(-1).amax(-1)
        self.exit_rate.copy_((conf > self.threshold).float().mean())  # CLEAN: exit statistic stays on the device
        if conf.min() > self.threshold:  # HAZARD: dynamic-control-flow
            h = h.detach()
        return h, logits


def graph_blocks(blocks, seq, batch, hidden, recipe):
    for i, blk in enumerate(blocks):
        blk.register_forward_hook(lambda m, a, o, i=i: exit_stats[i].append(o[1].detach()))  # HAZARD: api-misuse
    mask = torch.zeros(batch, 1, 1, seq, dtype=torch.bool, device="cuda")
    sample_args = tuple((torch.randn(seq, batch, hidden, device="cuda", requires_grad=True),) for _ in blocks)
    sample_kwargs = tuple({"attention_mask": mask} for _ in blocks)  # CLEAN: TE's make_graphed_callables accepts kwargs
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(
            tuple(blocks), sample_args, sample_kwargs=sample_kwargs, num_warmup_iters=3,
            enabled=True, recipe=recipe, pool=torch.cuda.graph_pool_handle(),
        )
    return graphed, mask


class EarlyExitTrainer:
    def __init__(self, n_blocks=12, hidden=1024, ffn=4096, heads=16, n_classes=1000, seq=256, batch=16):
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)
        blocks = [ExitBlock(hidden, ffn, heads, n_classes).cuda() for _ in range(n_blocks)]
        self.blocks, self.mask = graph_blocks(blocks, seq, batch, hidden, self.recipe)
        params = [p for b in blocks for p in b.parameters()]
        self.opt = torch.optim.AdamW(params, lr=2e-4, fused=True)
        self.exit_weights = torch.linspace(0.3, 1.0, n_blocks, device="cuda")

    def step(self, x, pad_mask, labels):
        self.mask.copy_(pad_mask)  # CLEAN: copy_ into the static mask captured as a kwarg
        loss = 0.0
        with te.autocast(enabled=True, recipe=self.recipe):
            h = x
            for i, blk in enumerate(self.blocks):
                h, logits = blk(h, attention_mask=self.mask)
                loss = loss + self.exit_weights[i] * F.cross_entropy(logits.float(), labels)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()
