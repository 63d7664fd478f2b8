# BiDAF on SQuAD v1.1 (2018 PyTorch reimplementation: torchtext BucketIterator, EMA of the weights).
# The forward is swapped for a max-autotune compiled one; span decoding is compiled on its own.
import copy
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("bidaf")


class BiDAF(nn.Module):
    def __init__(self, vectors, hid=100):
        super().__init__()
        self.word_emb = nn.Embedding.from_pretrained(vectors, freeze=True)
        self.ctx_lstm = nn.LSTM(vectors.size(1), hid, batch_first=True, bidirectional=True)
        self.att_weight = nn.Linear(6 * hid, 1)
        self.mod_lstm = nn.LSTM(8 * hid, hid, num_layers=2, batch_first=True, bidirectional=True)
        self.p1, self.p2 = nn.Linear(10 * hid, 1), nn.Linear(10 * hid, 1)
        self.end_lstm = nn.LSTM(2 * hid, hid, batch_first=True, bidirectional=True)

    def forward(self, c_ids, q_ids):
        c_mask, q_mask = c_ids != 1, q_ids != 1
        c, _ = self.ctx_lstm(self.word_emb(c_ids))
        q, _ = self.ctx_lstm(self.word_emb(q_ids))
        log.info("context %s question %s", tuple(c.shape), tuple(q.shape))  # HAZARD: host-code
        T, J = c.size(1), q.size(1)
        cq = torch.cat([c.unsqueeze(2).expand(-1, -1, J, -1), q.unsqueeze(1).expand(-1, T, -1, -1)], -1)
        s = self.att_weight(torch.cat([cq, c.unsqueeze(2) * q.unsqueeze(1)], -1)).squeeze(-1)
        s = s.masked_fill(~q_mask.unsqueeze(1), -1e30)  # CLEAN: masked_fill keeps the shape
        c2q = torch.bmm(F.softmax(s, -1), q)
        b = F.softmax(s.max(-1).values.masked_fill(~c_mask, -1e30), -1)
        q2c = torch.bmm(b.unsqueeze(1), c).expand(-1, T, -1)
        g = torch.cat([c, c2q, c * c2q, c * q2c], -1)
        m, _ = self.mod_lstm(g)
        p1 = self.p1(torch.cat([g, m], -1)).squeeze(-1)
        m2, _ = self.end_lstm(m)
        p2 = self.p2(torch.cat([g, m2], -1)).squeeze(-1)
        return p1.masked_fill(~c_mask, -1e30), p2.masked_fill(~c_mask, -1e30)


@torch.compile(mode="reduce-overhead")
def best_span(p1, p2, max_len=15):
    scores = F.log_softmax(p1, -1).unsqueeze(2) + F.log_softmax(p2, -1).unsqueeze(1)
    band = torch.triu(torch.ones_like(scores[0]), 0) - torch.triu(torch.ones_like(scores[0]), max_len)  # CLEAN: fixed-shape band mask
    flat = (scores + band.log()).flatten(1).argmax(-1)
    return (flat // p1.size(1)).tolist(), (flat % p1.size(1)).tolist()  # HAZARD: host-sync


class EMA:
    def __init__(self, model, mu=0.999):
        self.mu = mu
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    def update(self, model):
        for n, p in model.named_parameters():
            if n in self.shadow:
                self.shadow[n].mul_(self.mu).add_(p.detach(), alpha=1 - self.mu)  # CLEAN: eager in-place update of the EMA copies

    def load_into(self, eval_model):
        for n, p in eval_model.named_parameters():
            if n in self.shadow:
                p.data = self.shadow[n].clone()  # HAZARD: static-address


def train(model, train_iter, dev_iter, epochs=12):
    eval_model = copy.deepcopy(model).eval()
    for m in (model, eval_model):
        m.forward = torch.compile(m.forward, mode="max-autotune")
    ema = EMA(model)
    opt = torch.optim.Adadelta([p for p in model.parameters() if p.requires_grad], lr=0.5)
    for epoch in range(epochs):
        model.train()
        for batch in train_iter:
            p1, p2 = model(batch.c_word, batch.q_word)  # HAZARD: dynamic-shape
            loss = F.cross_entropy(p1, batch.s_idx) + F.cross_entropy(p2, batch.e_idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema.update(model)
        ema.load_into(eval_model)
        with torch.no_grad():
            for batch in dev_iter:
                c = F.pad(batch.c_word, (0, 400 - batch.c_word.size(1)), value=1)
                q = F.pad(batch.q_word, (0, 40 - batch.q_word.size(1)), value=1)
                starts, ends = best_span(*eval_model(c, q))  # CLEAN: context and question padded to fixed lengths
