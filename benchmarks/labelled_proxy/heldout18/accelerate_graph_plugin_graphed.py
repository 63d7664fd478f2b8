"""`GraphedAccelerator`: an accelerate-style `prepare()` that graphs transformer blocks.

The plugin config is a dataclass like the other accelerate plugins. `prepare()` moves
the model to the GPU, optionally attaches activation recorders for the debugging UI,
and wraps every block with torch.cuda.make_graphed_callables so each block's forward
and backward replay as CUDA graphs during fine-tuning.
"""
import random
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class CudaGraphPlugin:
    num_warmup_iters: int = 3
    mixed_precision: str = "fp16"
    record_activations: bool = True
    layerdrop: float = 0.1


class Block(nn.Module):
    def __init__(self, d, heads, layerdrop):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.layerdrop = layerdrop

    def forward(self, x, key_padding_bias):
        if self.training and random.random() < self.layerdrop:  # HAZARD: host-code
            return x
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=key_padding_bias, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class GraphedAccelerator:
    def __init__(self, plugin: CudaGraphPlugin):
        self.plugin = plugin
        self.dtype = torch.float16 if plugin.mixed_precision == "fp16" else torch.bfloat16
        self.activations = {}

    def _recorder(self, idx):
        def hook(module, args, output):
            self.activations[idx] = output.detach()
        return hook

    def prepare(self, model, optimizer, sample_hidden, sample_bias):
        model = model.cuda().train()
        if self.plugin.record_activations:
            for i, blk in enumerate(model.blocks):
                blk.register_forward_hook(self._recorder(i))  # HAZARD: api-misuse
        sample_args = tuple(
            (sample_hidden.detach().clone().requires_grad_(True), sample_bias) for _ in model.blocks
        )
        with torch.autocast("cuda", dtype=self.dtype):  # HAZARD: autocast-cache
            graphed = torch.cuda.make_graphed_callables(
                tuple(model.blocks), sample_args, num_warmup_iters=self.plugin.num_warmup_iters
            )
        model.blocks = nn.ModuleList(graphed)
        model.head.register_forward_hook(self._recorder("head"))  # CLEAN: hook added after graphing, on a module that is not graphed
        return model, optimizer

    def autocast(self):
        return torch.autocast("cuda", dtype=self.dtype, cache_enabled=False)  # CLEAN: cache disabled for graphed replays


def training_loop(model, optimizer, scheduler, loader, accelerator: GraphedAccelerator):
    for step, batch in enumerate(loader):
        ids = batch["input_ids"].cuda(non_blocking=True)
        bias = batch["attn_bias"].cuda(non_blocking=True)
        labels = batch["labels"].cuda(non_blocking=True)
        with accelerator.autocast():
            h = model.embed(ids)
            for blk in model.blocks:
                h = blk(h, key_padding_bias=bias)  # HAZARD: api-misuse
            logits = model.head(h)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        loss.backward()
        optimizer.step()
        scheduler.step()  # CLEAN: eager optimizer, the LR change is seen by the next step
        optimizer.zero_grad(set_to_none=True)
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")  # CLEAN: eager read, no graph is being captured
