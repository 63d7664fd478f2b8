"""Accounts-receivable reconciliation: match incoming bank payments to open invoices.

Payment remittance text + amount features and invoice text + amount features go through
one siamese encoder. Scoring, the contrastive loss and the optimizer step are compiled
with the dynamo "cudagraphs" backend.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class PairEncoder(nn.Module):
    def __init__(self, vocab=20000, d=128):
        super().__init__()
        self.text = nn.EmbeddingBag(vocab, d, mode="mean")
        self.num = nn.Linear(3, d)       # standardised log amount, days since issue, currency match
        self.proj = nn.Linear(2 * d, d)

    def forward(self, tokens, nums):
        return F.normalize(self.proj(torch.cat([self.text(tokens), self.num(nums)], -1)), dim=-1)


class Matcher:
    def __init__(self, enc, amt_mean, amt_std, min_conf=0.35):
        self.enc = enc
        self.amt_mean, self.amt_std = amt_mean, amt_std        # CUDA scalars from the ledger
        self.min_conf = min_conf
        self.opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
        self.score = torch.compile(self._score, backend="cudagraphs")
        self.loss_fn = torch.compile(self._loss, backend="cudagraphs")
        self.opt_step = torch.compile(self.opt.step, backend="cudagraphs")
        self.explain = torch.compile(self._explain)              # default inductor, used by the UI

    def _standardise_(self, nums):
        nums[:, 0].sub_(self.amt_mean).div_(self.amt_std)  # HAZARD: static-address
        return nums

    def _score(self, pay_tok, pay_num, inv_tok, inv_num):
        p = self.enc(pay_tok, self._standardise_(pay_num))
        inv_num = torch.cat([(inv_num[:, :1] - self.amt_mean) / self.amt_std, inv_num[:, 1:]], 1)  # CLEAN: out-of-place standardisation
        s = p @ self.enc(inv_tok, inv_num).T
        if s.amax() < self.min_conf:  # HAZARD: dynamic-control-flow
            s = s / 0.5                 # nothing is close: sharpen so the top-3 still separate
        return s.softmax(-1)

    def _loss(self, pay_tok, pay_num, inv_tok, inv_num):
        p, i = self.enc(pay_tok, pay_num), self.enc(inv_tok, inv_num)
        shift = np.random.randint(1, p.shape[0])  # HAZARD: host-code
        neg = i.roll(shift, 0)
        logits = torch.stack([(p * i).sum(-1), (p * neg).sum(-1)], -1) / 0.05
        return F.cross_entropy(logits, torch.zeros(p.shape[0], dtype=torch.long, device=p.device))

    def _explain(self, probs, invoice_ids):
        top = probs.topk(3, -1)
        return [invoice_ids[j] for j in top.indices[0].tolist()]  # CLEAN: default torch.compile, no CUDA graphs

    def fit(self, loader, epochs=10):
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, factor=0.5, patience=1)
        for epoch in range(epochs):
            total = 0.0
            for batch in loader:
                loss = self.loss_fn(*batch)
                total += loss.item()  # CLEAN: read right away, before backward and the next compiled call
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt_step()
            sched.step(total)  # HAZARD: optimizer
            if epoch == 5:
                for g in self.opt.param_groups:
                    g["weight_decay"] = 1e-4  # HAZARD: optimizer

    @torch.no_grad()
    def match(self, pay_tok, pay_num, inv_tok, inv_num, invoice_ids):
        # payments come in batches of 256; the open-invoice book is a fixed 4096-row buffer (unused rows zero)
        probs = self.score(pay_tok, pay_num, inv_tok, inv_num)
        return self.explain(probs.clone(), invoice_ids)  # CLEAN: cloned right after the call
