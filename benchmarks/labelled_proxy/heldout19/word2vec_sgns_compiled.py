"""word2vec: skip-gram with negative sampling on text8 -- code from my blog post, PyTorch 2 edition.

(center, context window) batches, 5 negatives per positive drawn from unigram^0.75 on the
GPU, word2vec's randomly reduced window.  The step and the optimizer step are compiled with
mode="reduce-overhead".
"""
import collections
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, WINDOW, NEG, BATCH, EPOCHS, LR0 = 300, 5, 5, 4096, 3, 0.003
model = None
noise = None
running = []


def build_vocab(words, min_count=5):
    counts = collections.Counter(words)
    vocab = [w for w, c in counts.most_common() if c >= min_count]
    freq = np.array([counts[w] for w in vocab], dtype=np.float64)
    return {w: i for i, w in enumerate(vocab)}, freq


def subsample(ids, freq, t=1e-5):
    f = freq[ids] / freq.sum()
    keep = np.random.rand(len(ids)) < (np.sqrt(f / t) + 1) * t / f  # CLEAN: NumPy RNG in the data pipeline, outside compiled code
    return ids[keep]


def batches(ids, batch=BATCH):
    pad = np.pad(ids, WINDOW, constant_values=0)
    order = np.random.permutation(len(ids))
    for s in range(0, len(order), batch):
        c = order[s:s + batch]
        ctx = np.stack([pad[c + WINDOW + o] for o in range(-WINDOW, WINDOW + 1) if o != 0], 1)
        yield torch.from_numpy(ids[c]), torch.from_numpy(ctx)


class SGNS(nn.Module):
    def __init__(self, V):
        super().__init__()
        self.inp = nn.Embedding(V, DIM)
        self.out = nn.Embedding(V, DIM)
        nn.init.uniform_(self.inp.weight, -0.5 / DIM, 0.5 / DIM)
        nn.init.zeros_(self.out.weight)


@torch.compile(mode="reduce-overhead")
def sgns_step(center, ctx):
    w = random.randint(1, WINDOW)  # HAZARD: host-code
    ctx = ctx[:, WINDOW - w:WINDOW + w]
    v = model.inp(center)                                          # B x D
    u_pos = model.out(ctx)                                         # B x 2w x D
    neg_ids = torch.multinomial(noise, ctx.numel() * NEG, replacement=True).view(ctx.shape[0], -1)  # CLEAN: GPU sampling with the default generator
    u_neg = model.out(neg_ids)
    pos = F.logsigmoid(torch.einsum("bd,bkd->bk", v, u_pos)).sum(1)
    neg = F.logsigmoid(-torch.einsum("bd,bkd->bk", v, u_neg)).sum(1)
    loss = -(pos + neg).mean()
    running.append(loss.item())  # HAZARD: host-sync
    return loss


def train(path="text8"):
    global model, noise
    words = open(path).read().split()
    idx, freq = build_vocab(words)
    ids = np.array([idx[w] for w in words if w in idx], dtype=np.int64)
    model = SGNS(len(idx)).cuda()
    noise = torch.from_numpy(freq ** 0.75 / (freq ** 0.75).sum()).float().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=LR0)
    opt_step = torch.compile(opt.step, mode="reduce-overhead")
    total, step = EPOCHS * (len(ids) // BATCH + 1), 0
    for epoch in range(EPOCHS):
        for center, ctx in batches(subsample(ids, freq)):
            loss = sgns_step(center.cuda(non_blocking=True), ctx.cuda(non_blocking=True))  # HAZARD: dynamic-shape
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
            step += 1
            for g in opt.param_groups:
                g["lr"] = LR0 * max(1e-4, 1 - step / total)  # HAZARD: optimizer
        print(f"epoch {epoch}: mean loss {np.mean(running[-1000:]):.4f}")
    return idx


def nearest(idx, word, k=8):
    inv = {i: w for w, i in idx.items()}
    with torch.no_grad():
        W = F.normalize(model.inp.weight, dim=1)
        top = (W @ W[idx[word]]).topk(k + 1).indices[1:].tolist()  # CLEAN: eager similarity query, no compiled code involved
    return [inv[i] for i in top]


if __name__ == "__main__":
    vocab = train()
    for w in ("king", "france", "computer", "einstein"):
        print(w, "->", ", ".join(nearest(vocab, w)))
    np.save("sgns_vectors.npy", model.inp.weight.detach().cpu().numpy())
