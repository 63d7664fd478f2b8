"""Chunked fused linear + cross-entropy for a 256k-vocabulary LM head, graphed.

The autograd Function never materialises the full [tokens, vocab] logits: it walks
token chunks, computes the loss and the input/weight gradients in forward and
returns the stored gradients in backward.  The head module is graphed with
torch.cuda.make_graphed_callables next to the (separately graphed) trunk.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class FusedLinearCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, target, chunk, smoothing, class_weight):
        n = h.shape[0]
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros_like(weight, dtype=torch.float32)
        total = torch.zeros((), device=h.device, dtype=torch.float32)
        valid = target != -100
        n_valid = int(valid.sum())  # HAZARD: host-sync
        safe_t = torch.where(valid, target, torch.zeros_like(target))  # CLEAN: device-side ignore-index
        for s in range(0, n, chunk):
            hc = h[s:s + chunk]
            logits = (hc @ weight.t()).float()
            logp = F.log_softmax(logits, dim=-1)
            tc, vc = safe_t[s:s + chunk], valid[s:s + chunk].float()
            nll = -logp.gather(1, tc[:, None]).squeeze(1) * class_weight[tc]
            smooth = -logp.mean(dim=-1)
            total += ((1 - smoothing) * nll + smoothing * smooth).mul(vc).sum()
            p = logp.exp()
            g = p * smoothing / logits.shape[-1] * -1 + p
            g.scatter_add_(1, tc[:, None], torch.full_like(tc[:, None], -(1 - smoothing), dtype=g.dtype))
            g = g * vc[:, None] / max(n_valid, 1)
            grad_h[s:s + chunk] = (g.to(h.dtype) @ weight)
            grad_w += g.t() @ hc.float()
        torch.cuda.empty_cache()  # HAZARD: memory
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        return total / max(n_valid, 1)

    @staticmethod
    def backward(ctx, gloss):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * gloss, grad_w * gloss, None, None, None, None


class FusedHead(nn.Module):
    def __init__(self, d, vocab, chunk=4096, class_weight=None):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, d, dtype=torch.bfloat16) * d ** -0.5)
        self.chunk = chunk
        self.smoothing = 0.1
        self.class_weight_np = class_weight if class_weight is not None else np.ones(vocab, np.float32)

    def forward(self, h, target):
        cw = torch.as_tensor(self.class_weight_np, device=h.device)  # HAZARD: pinned-memory
        eps = self.smoothing  # HAZARD: python-scalar
        return FusedLinearCE.apply(h, self.weight, target, self.chunk, eps, cw)


def graph_head(d=4096, vocab=256000, tokens=16384):
    head = FusedHead(d, vocab).cuda()
    h = torch.randn(tokens, d, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    t = torch.randint(0, vocab, (tokens,), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cache disabled
        g_head = torch.cuda.make_graphed_callables(head, (h, t))
    return head, g_head


def train(trunk_graphed, loader, steps=10000):
    head, g_head = graph_head()
    opt = torch.optim.AdamW(list(head.parameters()), lr=1e-4)
    for step, (ids, tgt) in zip(range(steps), loader):
        h = trunk_graphed(ids.cuda())
        loss = g_head(h.flatten(0, 1), tgt.cuda().flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step == 2000:
            head.smoothing = 0.0
        if step % 200 == 0:
            print(step, loss.item())  # CLEAN: eager, outside the graphs
