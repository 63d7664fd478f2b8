"""12-month customer lifetime value for a fashion e-commerce CRM (zero-inflated lognormal).

A GRU encodes the last 52 weeks of each customer's orders; the ZILN head predicts the
probability of buying again plus the lognormal spend. Encoder and head are graphed with
torch.cuda.make_graphed_callables for the nightly re-fit.
"""
import logging
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("clv")


class TxnEncoder(nn.Module):
    def __init__(self, n_feat=10, d=64, p_hide_recency=0.1):
        super().__init__()
        self.proj = nn.Linear(n_feat, d)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.p_hide_recency = p_hide_recency

    def forward(self, txns):                               # [B, 52, n_feat]
        if self.training and random.random() < self.p_hide_recency:  # HAZARD: host-code
            txns = torch.cat([torch.zeros_like(txns[:, :, :1]), txns[:, :, 1:]], -1)
        h, _ = self.gru(torch.relu(self.proj(txns)))
        return h[:, -1]


class ZILNHead(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.out = nn.Linear(d, 3)

    def forward(self, h):
        o = self.out(h)
        p_buy, mu, sigma = torch.sigmoid(o[:, 0]), o[:, 1], F.softplus(o[:, 2]) + 1e-3
        if (p_buy < 0.01).all():  # HAZARD: dynamic-control-flow
            mu = mu.detach()    # a batch of lapsed customers: do not drag the spend head
        return p_buy, mu, sigma


def ziln_loss(p_buy, mu, sigma, spend):
    buyer = (spend > 0).float()
    z = (torch.log(spend.clamp_min(1e-6)) - mu) / sigma
    return F.binary_cross_entropy(p_buy, buyer) + (buyer * (torch.log(sigma) + 0.5 * z ** 2)).mean()


def enc_shape_log(module, inputs, output):
    log.debug("encoder out %s", tuple(output.shape))


def build(batch=512, weeks=52, device="cuda"):
    enc, head = TxnEncoder().to(device), ZILNHead().to(device)
    enc.register_forward_hook(enc_shape_log)  # HAZARD: api-misuse
    x = torch.randn(batch, weeks, 10, device=device)
    h = torch.randn(batch, 64, device=device, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        g_enc, g_head = torch.cuda.make_graphed_callables((enc, head), ((x,), (h,)))
    g_head.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
    return g_enc, g_head


def nightly_refit(loader, epochs=3, device="cuda"):
    g_enc, g_head = build(device=device)
    params = list(g_enc.parameters()) + list(g_head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-4)
    for epoch in range(epochs):
        for txns, spend in loader:           # drop_last=True keeps the batch at 512
            txns = txns.to(device, non_blocking=True)
            spend = spend.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without its cache
                p_buy, mu, sigma = g_head(g_enc(txns))  # CLEAN: graphed callables called with positional tensors
            loss = ziln_loss(p_buy.float(), mu.float(), sigma.float(), spend)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        log.info("epoch %d done, last loss %.4f", epoch, loss.item())
    return g_enc, g_head
