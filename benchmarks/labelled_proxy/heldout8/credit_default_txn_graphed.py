"""Probability-of-default model for a consumer lender.

Each applicant is a padded sequence of 256 card transactions (MCC, amount,
hour, channel) plus a vector of bureau attributes.  The transaction encoder and
the scoring head are graphed with torch.cuda.make_graphed_callables for the
nightly re-fit.
"""
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

SEQ, N_MCC, D = 256, 1024, 128
BUREAU_COLS = [0, 3, 4, 7, 11, 12, 19]      # columns the risk team signed off on


class TxnEncoder(nn.Module):
    def __init__(self, p_mcc_drop=0.1):
        super().__init__()
        self.mcc = nn.Embedding(N_MCC, D)
        self.amount = nn.Linear(2, D)
        self.layer = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 4, 4 * D, batch_first=True), 2)
        self.p_mcc_drop = p_mcc_drop

    def forward(self, mcc, amt, pad):
        if self.training and random.random() < self.p_mcc_drop:  # HAZARD: host-code
            mcc = torch.zeros_like(mcc)
        x = self.mcc(mcc) + self.amount(torch.stack([torch.log1p(amt.abs()), amt.sign()], -1))
        x = torch.where(pad.unsqueeze(-1), torch.zeros_like(x), x)  # CLEAN: masking with torch.where, fixed shape
        h = self.layer(x)
        w = (~pad).float().unsqueeze(-1)
        return (h * w).sum(1) / w.sum(1).clamp(min=1.0)


class PDHead(nn.Module):
    def __init__(self, n_bureau=24):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(D + len(BUREAU_COLS), 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, z, bureau):
        b = bureau[:, BUREAU_COLS]  # HAZARD: host-sync
        return self.mlp(torch.cat([z, b], -1)).squeeze(-1)


class AttnProbe:
    def __init__(self):
        self.norms = []

    def __call__(self, module, inp, out):
        self.norms.append(out.detach().norm(dim=-1).mean())


def build(batch=512):
    enc, head = TxnEncoder().cuda(), PDHead().cuda()
    probe = AttnProbe()
    enc.register_forward_hook(probe)  # HAZARD: api-misuse
    mcc = torch.randint(0, N_MCC, (batch, SEQ), device="cuda")
    amt = torch.randn(batch, SEQ, device="cuda")
    pad = torch.zeros(batch, SEQ, dtype=torch.bool, device="cuda")
    z = torch.randn(batch, D, device="cuda", requires_grad=True)
    bureau = torch.randn(batch, 24, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        enc_g, head_g = torch.cuda.make_graphed_callables(
            (enc, head), ((mcc, amt, pad), (z, bureau)))
    return enc_g, head_g, probe


def fit(loader, epochs=3):
    enc, head, probe = build()
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=2e-4)
    drift = []
    head.register_forward_hook(lambda m, i, o: drift.append(o.detach().mean()))  # CLEAN: hook added after graphing
    for _ in range(epochs):
        for mcc, amt, pad, bureau, y in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cache disabled around replays
                logit = head(enc(mcc, amt, pad), bureau)  # CLEAN: graphed callables called positionally
                loss = F.binary_cross_entropy_with_logits(logit.float(), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()  # CLEAN: eager optimizer step, outside the graphed callables
            opt.zero_grad(set_to_none=True)
    return enc, head, drift


if __name__ == "__main__":
    B = 512
    data = [(torch.randint(0, N_MCC, (B, SEQ), device="cuda"), torch.randn(B, SEQ, device="cuda"),
             torch.rand(B, SEQ, device="cuda") > 0.8, torch.randn(B, 24, device="cuda"),
             torch.randint(0, 2, (B,), device="cuda").float()) for _ in range(20)]
    fit(data)
