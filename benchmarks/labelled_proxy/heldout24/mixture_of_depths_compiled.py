"""Mixture-of-Depths blocks: a router sends only the top-capacity tokens through each block.

Training compiles the whole model through a project-wide `fast_compile` partial
(max-autotune, CUDA graphs on).  The capacity fraction is annealed from 1.0 to 0.125
over the first epochs.
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

fast_compile = functools.partial(torch.compile, mode="max-autotune", fullgraph=False)
debug_compile = functools.partial(torch.compile, mode="max-autotune-no-cudagraphs")


class MoDBlock(nn.Module):
    def __init__(self, d, heads, capacity_frac=0.125, gather_impl=True):
        super().__init__()
        self.router = nn.Linear(d, 1)
        self.block = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, norm_first=True)
        self.capacity_frac = capacity_frac
        self.gather_impl = gather_impl

    def forward(self, x):
        B, T, D = x.shape
        scores = self.router(x).squeeze(-1)
        frac = self.capacity_frac  # HAZARD: python-scalar
        k = max(1, int(frac * T))
        if self.gather_impl:
            top = scores.topk(k, dim=1).indices.sort(dim=1).values  # CLEAN: fixed-size top-k
            idx = top[..., None].expand(-1, -1, D)
            sel = x.gather(1, idx)
            w = torch.sigmoid(scores.gather(1, top))[..., None]
            out = self.block(sel) * w + sel * (1 - w)
            return x.scatter(1, idx, out)
        keep = scores > scores.median(dim=1, keepdim=True).values
        sel = x[keep]  # CLEAN: only the no-cudagraphs probe model takes this path
        out = x.clone()
        out[keep] = self.block(sel[None]).squeeze(0)
        return out


class MoDModel(nn.Module):
    def __init__(self, vocab=32000, d=1024, heads=16, depth=12, gather_impl=True):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(
            MoDBlock(d, heads, gather_impl=gather_impl) if i % 2 else
            nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, norm_first=True)
            for i in range(depth)
        )
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.emb(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.head(h)


def train_step(model, ids, targets):
    logits = model(ids)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    if torch.isnan(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss, requires_grad=True)
    ppl = torch.exp(loss.detach())
    model.last_ppl = ppl.item()  # HAZARD: host-sync
    return loss


def set_capacity(model, frac):
    for m in model.modules():
        if isinstance(m, MoDBlock):
            m.capacity_frac = frac


def main(loader, steps=20000, anneal=5000):
    model = MoDModel().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    step_fn = fast_compile(functools.partial(train_step, model))
    opt_step = fast_compile(opt.step)
    probe_fn = debug_compile(MoDModel(gather_impl=False).cuda().eval())
    for step, (ids, tgt) in zip(range(steps), loader):
        ids, tgt = ids.cuda(non_blocking=True), tgt.cuda(non_blocking=True)
        loss = step_fn(ids, tgt)
        loss.backward()
        loss_val = loss.detach().clone()  # CLEAN: cloned before the compiled optimizer step
        opt_step()
        opt.zero_grad(set_to_none=True)
        if step < anneal:
            set_capacity(model, max(0.125, 1.0 - step / anneal))
        elif step % 1000 == 0:
            for g in opt.param_groups:
                g["lr"] = 3e-4 * 0.5 ** ((step - anneal) // 5000)  # HAZARD: optimizer
        if step % 1000 == 0:
            with torch.no_grad():
                probe_fn(ids[:1])  # CLEAN: mask-indexed variant under no-cudagraphs compile
            print(step, loss_val.item())  # CLEAN: eager read of a cloned value
    return model
