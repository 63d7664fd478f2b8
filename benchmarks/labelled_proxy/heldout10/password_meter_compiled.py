"""Password-strength meter backed by a neural guessing model (char LSTM).

-log2 P(password) under the model estimates how many guesses an attacker needs.
The sign-up form calls the meter on every keystroke; a nightly audit scores a
sample of the breach corpus in padded batches. Everything on the GPU path is
compiled with options={"triton.cudagraphs": True}.
"""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("pwmeter")
VOCAB, MAXLEN, BOS, EOS = 98, 34, 1, 2
CG = {"triton.cudagraphs": True}
THRESHOLDS_BITS = torch.tensor([28.0, 36.0, 60.0])


class GuessLM(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 64)
        self.lstm = nn.LSTM(64, d, num_layers=2, batch_first=True)
        self.out = nn.Linear(d, VOCAB)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        return F.log_softmax(self.out(h), -1)


@torch.compile(options=CG)
def sanitize_(ids):
    ids.clamp_(0, VOCAB - 1)  # HAZARD: static-address
    return ids


@torch.compile(options=CG)
def guess_bits(model, ids, lengths):
    logp = model(ids[:, :-1])
    tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    mask = torch.arange(ids.shape[1] - 1, device=ids.device) < (lengths - 1).unsqueeze(1)
    return -(tok * mask).sum(1) / math.log(2)


@torch.compile(options=CG)
def policy_verdict(bits, thresholds):
    weakest = bits.min().item()  # HAZARD: host-sync
    log.info("weakest password in batch: %.1f bits", weakest)  # HAZARD: host-code
    return torch.bucketize(bits, thresholds)


def encode(text):
    return [BOS] + [min(max(ord(c) - 30, 3), VOCAB - 1) for c in text] + [EOS]


def on_keystroke(model, text):
    ids = torch.tensor([encode(text)], device="cuda")
    lengths = torch.tensor([len(text) + 2], device="cuda")
    with torch.no_grad():
        bits = guess_bits(model, sanitize_(ids), lengths)  # HAZARD: dynamic-shape
        return float(bits[0])  # CLEAN: host read in eager code, right after the call


def nightly_audit(model, corpus_ids, corpus_len, batch=4096):
    thresholds = THRESHOLDS_BITS.cuda()  # CLEAN: uploaded once, outside the compiled functions
    verdicts = []
    with torch.no_grad():
        for i in range(0, corpus_ids.shape[0] - batch + 1, batch):
            ids = F.pad(corpus_ids[i:i + batch], (0, MAXLEN - corpus_ids.shape[1]))
            bits = guess_bits(model, ids, corpus_len[i:i + batch])  # CLEAN: padded to MAXLEN, one graph for every batch
            v = policy_verdict(bits.clone(), thresholds)  # CLEAN: output cloned before it goes into another compiled function
            verdicts.append(v.cpu())
    return torch.cat(verdicts)


if __name__ == "__main__":
    model = GuessLM().cuda().eval()
    model.load_state_dict(torch.load("guess_lm_rockyou_hibp.pt"))
    print(on_keystroke(model, "Tr0ub4dor&3"))
    corpus = torch.load("breach_sample_ids.pt")
    print(nightly_audit(model, corpus["ids"].cuda(), corpus["len"].cuda()).bincount(minlength=4))
