"""PEFT-style LoRA fine-tuning of a Mistral-7B-like decoder with graphed blocks.

LoRA is injected into q/v projections of every decoder block; the blocks are then
graphed with torch.cuda.make_graphed_callables (one shared pool). The optimizer
steps eagerly over the LoRA parameters only.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LoraInjectedLinear(nn.Module):
    def __init__(self, base, r=16, alpha=32, dropout=0.05, use_rslora=False):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.r, self.alpha, self.dropout = r, alpha, dropout
        self.scaling = alpha / (math.sqrt(r) if use_rslora else r)
        self.drop_gen = torch.Generator(device="cuda")

    def forward(self, x):
        keep = torch.bernoulli(torch.full_like(x, 1 - self.dropout), generator=self.drop_gen)  # HAZARD: rng
        xd = x * keep / (1 - self.dropout)
        return self.base(x) + F.linear(F.linear(xd, self.lora_A), self.lora_B) * self.scaling  # HAZARD: python-scalar


def inject_lora(model, targets=("q_proj", "v_proj"), **kw):
    for block in model.model.layers:
        for name in targets:
            setattr(block.self_attn, name, LoraInjectedLinear(getattr(block.self_attn, name), **kw))
    return model


def set_rslora(model, enabled):
    for m in model.modules():
        if isinstance(m, LoraInjectedLinear):
            m.scaling = m.alpha / (math.sqrt(m.r) if enabled else m.r)


class GraphedLoraTrainer:
    def __init__(self, model, seq_len=2048, micro_batch=2, lr=2e-4, device="cuda"):
        self.model = inject_lora(model).to(device).train()
        self.device = device
        hidden = model.config.hidden_size
        self.grad_norms = {}
        for i, block in enumerate(self.model.model.layers):
            block.register_full_backward_hook(lambda m, gi, go, i=i: self.grad_norms.__setitem__(i, go[0].norm()))  # HAZARD: api-misuse
        sample = torch.randn(micro_batch, seq_len, hidden, device=device, dtype=torch.bfloat16, requires_grad=True)
        blocks = tuple(self.model.model.layers)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            graphed = torch.cuda.make_graphed_callables(blocks, tuple((sample,) for _ in blocks),
                                                        num_warmup_iters=3, pool=torch.cuda.graph_pool_handle())
        self.model.model.layers = nn.ModuleList(graphed)
        self.model.model.layers[0].register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
        params = [p for n, p in self.model.named_parameters() if "lora_" in n]
        self.opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)

    def forward_blocks(self, h):
        for block in self.model.model.layers:
            h = block(h)  # CLEAN: graphed block called with one positional tensor
        return h

    def train_step(self, batch):
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cache disabled around the graphed replays
            h = self.model.model.embed_tokens(batch["input_ids"].to(self.device))
            h = self.forward_blocks(h)
            logits = self.model.lm_head(self.model.model.norm(h)).float()
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), batch["labels"].to(self.device)[:, 1:].flatten())
        loss.backward()
        self.opt.step()  # CLEAN: optimizer steps eagerly, outside the graphs
        self.opt.zero_grad(set_to_none=True)
        return loss.item()  # CLEAN: eager read after backward, outside the graphs

    def switch_scaling(self, rslora):
        set_rslora(self.model, rslora)

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        total = 0.0
        for batch in loader:
            h = self.model.model.embed_tokens(batch["input_ids"].to(self.device))
            h = self.forward_blocks(h)  # CLEAN: eval mode runs the blocks' original forwards
            total += F.cross_entropy(self.model.lm_head(self.model.model.norm(h))[:, :-1].flatten(0, 1).float(),
                                     batch["labels"].to(self.device)[:, 1:].flatten()).item()
        self.model.train()
        return total / len(loader)
