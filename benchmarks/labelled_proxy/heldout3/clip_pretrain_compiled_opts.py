"""Image-text contrastive pre-training with compiled forward, loss and optimizer step.

Compile settings come from the experiment config as keyword dicts; the learnable
temperature is replaced by an annealed schedule in this ablation.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

COMPILE_OPTS = {"mode": "max-autotune", "fullgraph": False, "dynamic": False}
EVAL_OPTS = {"mode": "max-autotune-no-cudagraphs"}


class DualEncoder(nn.Module):
    def __init__(self, visual, text, vis_dim=1024, txt_dim=768, embed=512):
        super().__init__()
        self.visual, self.text = visual, text
        self.img_proj = nn.Linear(vis_dim, embed, bias=False)
        self.txt_proj = nn.Linear(txt_dim, embed, bias=False)
        self.temperature = 0.07
        self.fwd_started = 0.0

    def forward(self, images, tokens):
        t0 = time.time()  # HAZARD: host-code
        img = F.normalize(self.img_proj(self.visual(images)), dim=-1)
        txt = F.normalize(self.txt_proj(self.text(tokens)), dim=-1)
        logits = img @ txt.t() / self.temperature  # HAZARD: python-scalar
        self.fwd_started = t0
        return logits


def clip_loss(logits):
    labels = torch.arange(logits.shape[0], device=logits.device)  # CLEAN: length from the static batch shape
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def retrieval_top1(logits):
    hits = logits.argmax(-1) == torch.arange(logits.shape[0], device=logits.device)
    return hits.float().mean().item()  # CLEAN: compiled with max-autotune-no-cudagraphs


class CLIPTrainer:
    def __init__(self, model, lr=5e-4, total_steps=100_000, warmup=2000):
        self.model = model.cuda()
        self.fwd = torch.compile(self.model, **COMPILE_OPTS)
        self.loss_fn = torch.compile(clip_loss, **COMPILE_OPTS)
        self.top1 = torch.compile(retrieval_top1, **EVAL_OPTS)
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.2, betas=(0.9, 0.98))
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=lr, total_steps=total_steps,
                                                         pct_start=warmup / total_steps)
        self.opt_step = torch.compile(self.opt.step, **COMPILE_OPTS)
        self.total_steps = total_steps
        self.losses = []

    def step(self, i, images, tokens):
        self.model.temperature = max(0.01, 0.07 * (1 - i / self.total_steps))
        logits = self.fwd(images, tokens)
        loss = self.loss_fn(logits)
        loss.backward()
        self.opt_step()
        self.opt.zero_grad(set_to_none=True)
        self.sched.step()  # HAZARD: optimizer
        self.losses.append(loss.detach())  # HAZARD: static-address
        if i % 200 == 0:
            acc = self.top1(logits.detach())
            print(f"step {i} loss {loss.item():.4f} top1 {acc:.3f}")  # CLEAN: eager logging between compiled calls
        return loss

    def fit(self, loader):
        for i, (images, tokens) in enumerate(loader):
            self.step(i, images.cuda(non_blocking=True), tokens.cuda(non_blocking=True))
