"""Settlement-fail prediction for a custodian's post-trade operations desk.

For every pending trade (T+1 settlement) the model estimates the probability
that it fails to settle, from numeric trade features, the security and the
counterparty. Encoder and head are graphed together with torch
make_graphed_callables; the optimizer runs eagerly.
"""
from datetime import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F

N_NUM, N_SEC, N_CPTY, D = 24, 4096, 2048, 64


class TradeEncoder(nn.Module):
    def __init__(self, p_drop: float = 0.15):
        super().__init__()
        self.sec = nn.Embedding(N_SEC, D)
        self.cpty = nn.Embedding(N_CPTY, D)
        self.num = nn.Linear(N_NUM, D)
        self.late_bias = nn.Parameter(torch.zeros(D))
        self.crowd_w = nn.Parameter(torch.zeros(D))
        self.p_drop = p_drop
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(31)

    def forward(self, num, sec_id, cpty_id):
        # drop the counterparty signal for a random subset so new counterparties still score well
        p_keep = torch.full((num.shape[0], 1), 1 - self.p_drop, device=num.device)
        keep = torch.bernoulli(p_keep, generator=self.drop_gen)  # HAZARD: rng
        x = self.num(num) + self.sec(sec_id) + keep * self.cpty(cpty_id)
        crowd = torch.bincount(cpty_id, minlength=N_CPTY)[cpty_id].float()  # HAZARD: host-sync
        cutoff = 1.0 if datetime.now().hour >= 15 else 0.0  # HAZARD: host-code
        x = x + cutoff * self.late_bias + torch.log1p(crowd)[:, None] * self.crowd_w
        return F.dropout(F.gelu(x), 0.1, self.training)  # CLEAN: dropout draws from the default CUDA generator


class FailHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(D, 64), nn.GELU(), nn.Linear(64, 1))

    def forward(self, h):
        return self.mlp(h).squeeze(-1)


grad_norms = []


def grad_probe(module, grad_in, grad_out):
    grad_norms.append(grad_out[0].detach().norm())


def audit_inputs(module, inputs, output):
    grad_norms.append(output.detach().abs().mean())


def build(batch: int = 1024):
    encoder, head = TradeEncoder().cuda(), FailHead().cuda()
    head.register_full_backward_hook(grad_probe)  # HAZARD: api-misuse
    num = torch.randn(batch, N_NUM, device="cuda")
    sec = torch.randint(0, N_SEC, (batch,), device="cuda")
    cpty = torch.randint(0, N_CPTY, (batch,), device="cuda")
    h0 = torch.randn(batch, D, device="cuda", requires_grad=True)
    g_enc, g_head = torch.cuda.make_graphed_callables((encoder, head), ((num, sec, cpty), (h0,)))
    encoder.register_forward_hook(audit_inputs)  # CLEAN: hook registered after graphing
    return encoder, head, g_enc, g_head


def train(loader, epochs: int = 4):
    encoder, head, g_enc, g_head = build()
    opt = torch.optim.AdamW(list(encoder.parameters()) + list(head.parameters()), lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
    pos_weight = torch.tensor(12.0, device="cuda")          # fails are rare
    for epoch in range(epochs):
        for num, sec, cpty, failed in loader:
            logits = g_head(g_enc(num, sec, cpty))
            loss = F.binary_cross_entropy_with_logits(logits, failed, pos_weight=pos_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()  # CLEAN: the optimizer runs eagerly, outside the graphed callables
    return encoder, head


if __name__ == "__main__":
    b = 1024
    data = [(torch.randn(b, N_NUM, device="cuda"), torch.randint(0, N_SEC, (b,), device="cuda"),
             torch.randint(0, N_CPTY, (b,), device="cuda"), (torch.rand(b, device="cuda") < 0.03).float())
            for _ in range(16)]
    train(data)
