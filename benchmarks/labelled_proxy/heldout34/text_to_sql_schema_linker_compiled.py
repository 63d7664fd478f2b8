"""Text-to-SQL schema linking: question encoder + column scorer, forwards compiled with max-autotune."""
import abc
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("sql")

class MaskingMixin:
    def key_padding(self, ids):
        return ids == 0  # CLEAN: boolean mask kept as a dense tensor
    def count_tokens(self, ids):
        n = int((ids != 0).sum())  # HAZARD: host-sync
        return max(n, 1)

class Encoder(nn.Module, abc.ABC):
    def __init__(self, vocab, d):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.d = d
    @abc.abstractmethod
    def contextualize(self, x, pad):
        ...
    def forward(self, ids):
        x = self.contextualize(self.emb(ids), self.key_padding(ids))
        self.on_encoded(x)
        return x
    def on_encoded(self, x):
        pass

class QuestionEncoder(MaskingMixin, Encoder):
    def __init__(self, vocab=30000, d=256):
        super().__init__(vocab, d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
    def contextualize(self, x, pad):
        q, k, v = self.qkv(x).chunk(3, -1)
        bias = torch.zeros(pad.shape, device=x.device).masked_fill(pad, float("-inf"))[:, None, :]
        return x + self.o(F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    def on_encoded(self, x):
        log.debug("encoded norm %s", x.norm())  # HAZARD: host-code

class ColumnScorer(MaskingMixin, nn.Module):
    def __init__(self, vocab=30000, d=256):
        super().__init__()
        self.col = nn.Embedding(vocab, d, padding_idx=0)
        self.bil = nn.Bilinear(d, d, 1)
    def forward(self, q_states, q_ids, col_ids):
        cols = self.col(col_ids).mean(2)
        n = self.count_tokens(q_ids)
        qv = q_states.sum(1) / n
        return self.bil(qv.unsqueeze(1).expand_as(cols).contiguous(), cols).squeeze(-1)

class Linker:
    QLEN = 64
    def __init__(self):
        self.enc, self.scorer = QuestionEncoder().cuda().eval(), ColumnScorer().cuda().eval()
        self.enc.forward = torch.compile(self.enc.forward, mode="max-autotune")
        self.scorer.forward = torch.compile(self.scorer.forward, mode="max-autotune")
    def _pad(self, ids):
        return F.pad(ids, (0, self.QLEN - ids.shape[-1]))
    @torch.no_grad()
    def link(self, q_ids, col_ids):
        q_ids = self._pad(q_ids)
        states = self.enc(q_ids)
        scores = self.scorer(states, q_ids, col_ids)
        return scores.softmax(-1), states.mean(1)  # HAZARD: static-address
    @torch.no_grad()
    def link_cloned(self, q_ids, col_ids):
        q_ids = self._pad(q_ids)
        states = self.enc(q_ids).clone()  # CLEAN: cloned before the scorer runs
        return self.scorer(states, q_ids, col_ids).softmax(-1).clone(), states.mean(1)
    @torch.no_grad()
    def explain(self, q_ids):
        return self.enc(q_ids).clone()  # HAZARD: dynamic-shape

def annotate(dataset, linker=None):
    linker = linker or Linker()
    rows = []
    for q_ids, col_ids in dataset:
        probs, _ = linker.link_cloned(q_ids.cuda(), col_ids.cuda())
        rows.append(probs.argmax(-1).tolist())  # CLEAN: host read outside compiled code
        rows.append(linker.explain(q_ids.cuda()).norm(dim=-1).tolist())
    return rows
