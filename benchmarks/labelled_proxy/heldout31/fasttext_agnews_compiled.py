"""fastText-style AG News classifier (word + hashed bigram embeddings, mean pooling, linear).

The assistant added `rcompile = functools.partial(torch.compile, mode="reduce-overhead")`
and compiled the loss and the SGD step ("the model is tiny, launch overhead dominates").
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

rcompile = functools.partial(torch.compile, mode="reduce-overhead")
PAD, UNK, VOCAB, BUCKETS, DIM = 0, 1, 100_000, 2_000_000, 64


class FastText(nn.Module):
    def __init__(self, n_classes=4):
        super().__init__()
        self.emb = nn.Embedding(VOCAB + BUCKETS, DIM, padding_idx=PAD)
        self.fc = nn.Linear(DIM, n_classes)
        self.oov_seen = 0

    def bigrams(self, tok):
        h = (tok[:, :-1] * 116_049_371 + tok[:, 1:]) % BUCKETS + VOCAB  # CLEAN: bigram hashing on the device
        valid = (tok[:, :-1] != PAD) & (tok[:, 1:] != PAD)
        return torch.where(valid, h, torch.zeros_like(h))

    def forward(self, tok):
        if self.training and (tok != PAD).sum(1).eq(0).any():  # HAZARD: dynamic-control-flow
            raise ValueError("empty document in batch")
        self.oov_seen += int((tok == UNK).sum())  # HAZARD: host-sync
        ids = torch.cat([tok, self.bigrams(tok)], 1)
        mask = (ids != PAD).unsqueeze(-1).float()
        pooled = (self.emb(ids) * mask).sum(1) / mask.sum(1).clamp_min(1)  # CLEAN: masked mean instead of mask indexing
        return self.fc(pooled)


model = FastText().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.5)


@rcompile
def train_loss(tok, y):
    return F.cross_entropy(model(tok), y)


@rcompile
def sgd_step():
    opt.step()


@torch.compile  # default compile for the evaluation pass
def predict(tok):
    return model(tok).argmax(1)


def collate(batch, pad_to=None):
    L = pad_to or max(len(t) for t, _ in batch)
    tok = torch.full((len(batch), L), PAD, dtype=torch.long)
    for i, (t, _) in enumerate(batch):
        tok[i, : min(L, len(t))] = torch.as_tensor(t[:L])
    return tok, torch.tensor([y for _, y in batch])


def train(train_set, test_set, epochs=5, bs=256, lr0=0.5):
    total = epochs * (len(train_set) // bs)
    step = 0
    for epoch in range(epochs):
        model.train()
        for i in range(0, len(train_set) - bs + 1, bs):
            tok, y = collate(train_set[i:i + bs])  # padded to the longest document in the batch
            loss = train_loss(tok.cuda(non_blocking=True), y.cuda(non_blocking=True))  # HAZARD: dynamic-shape
            if step % 500 == 0:
                print(f"step {step} loss {loss.item():.4f}")  # CLEAN: read before backward and the compiled step
            loss.backward()
            for g in opt.param_groups:
                g["lr"] = lr0 * (1 - step / total)  # HAZARD: optimizer
            sgd_step()
            opt.zero_grad(set_to_none=True)
            step += 1
        model.eval()
        with torch.no_grad():
            hits = 0
            for i in range(0, len(test_set), bs):
                tok, y = collate(test_set[i:i + bs])
                hits += (predict(tok.cuda()) == y.cuda()).sum().item()  # CLEAN: default compile, no CUDA graphs
        print(f"epoch {epoch} test acc {hits / len(test_set):.4f} oov {model.oov_seen}")


def train_bucketed(train_set, bs=256):
    model.train()
    for i in range(0, len(train_set) - bs + 1, bs):
        tok, y = collate(train_set[i:i + bs], pad_to=512)
        loss = train_loss(tok.cuda(), y.cuda())  # CLEAN: every batch padded to 512 tokens
        loss.backward()
        sgd_step()
        opt.zero_grad(set_to_none=True)
