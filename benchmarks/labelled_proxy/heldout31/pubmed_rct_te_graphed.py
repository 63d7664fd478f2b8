"""PubMed 200k RCT sequential sentence classification (BACKGROUND/OBJECTIVE/METHODS/RESULTS/CONCLUSIONS).

Sentence encoder: 2 Transformer Engine layers (padding mask) -> mean pool; abstract context:
GRU over the sentence vectors + classifier. The assistant graphed the TE layers with
`te.make_graphed_callables` (mask passed through `sample_kwargs`) and the context module with torch's.
"""
import collections
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HID, TOK, SENTS, ABS = 512, 64, 16, 8  # hidden, tokens per sentence, sentences per abstract, abstracts per batch


class AbstractContext(nn.Module):
    def __init__(self, n_labels=5, sent_drop=0.1, seed=7):
        super().__init__()
        self.gru = nn.GRU(HID, HID // 2, batch_first=True, bidirectional=True)
        self.cls = nn.Linear(2 * HID, n_labels)
        self.sent_drop = sent_drop
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.context_weight = 0.0  # ramped up once the sentence encoder has settled
        self.latency = []
        self.sent_hist = collections.Counter()  # abstract lengths, for the data card

    def forward(self, sent_vecs, n_sent):
        t0 = time.time()  # HAZARD: host-code
        keep = (torch.rand(sent_vecs.shape[:2], device=sent_vecs.device, generator=self.gen) > self.sent_drop)  # HAZARD: rng
        ctx, _ = self.gru(sent_vecs * keep.unsqueeze(-1))
        self.sent_hist.update(n_sent.tolist())  # HAZARD: host-sync
        valid = torch.arange(SENTS, device=n_sent.device)[None] < n_sent[:, None]  # CLEAN: length mask built on device
        w = self.context_weight  # HAZARD: python-scalar
        feats = torch.cat([sent_vecs, w * ctx[..., :HID // 2].repeat(1, 1, 2) + (1 - w) * ctx[..., HID // 2:].repeat(1, 1, 2)], -1)
        self.latency.append(time.time() - t0)
        return self.cls(feats) * valid.unsqueeze(-1)


def build():
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)
    emb = nn.Embedding(30522, HID).cuda()
    enc = [te.TransformerLayer(HID, 4 * HID, 8, hidden_dropout=0.0, attention_dropout=0.0, self_attn_mask_type="padding").cuda() for _ in range(2)]
    ctx = AbstractContext().cuda()
    n = ABS * SENTS
    args = tuple((torch.randn(TOK, n, HID, device="cuda", requires_grad=True),) for _ in enc)
    kwargs = tuple({"attention_mask": torch.zeros(n, 1, 1, TOK, dtype=torch.bool, device="cuda")} for _ in enc)
    g_enc = te.make_graphed_callables(tuple(enc), args, sample_kwargs=kwargs, enabled=True, recipe=recipe)  # CLEAN: mask declared in sample_kwargs
    s_vec = torch.randn(ABS, SENTS, HID, device="cuda", requires_grad=True)
    s_n = torch.full((ABS,), SENTS, device="cuda")
    g_ctx = torch.cuda.make_graphed_callables(ctx, (s_vec, s_n))
    return recipe, emb, enc, ctx, g_enc, g_ctx


def encode(recipe, emb, g_enc, ids, pad):
    h = emb(ids.flatten(0, 1)).transpose(0, 1).contiguous()  # (TOK, ABS*SENTS, HID)
    mask = pad.flatten(0, 1)[:, None, None, :]
    with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under te.autocast with the same recipe
        for layer in g_enc:
            h = layer(h, attention_mask=mask)  # CLEAN: keyword declared in sample_kwargs
    keep = (~pad.flatten(0, 1)).T.unsqueeze(-1).float()
    return ((h * keep).sum(0) / keep.sum(0).clamp_min(1)).view(ABS, SENTS, HID)


def train(loader, val_loader, epochs=3):
    recipe, emb, enc, ctx, g_enc, g_ctx = build()
    params = list(emb.parameters()) + [p for l in enc for p in l.parameters()] + list(ctx.parameters())
    opt = torch.optim.Adam(params, lr=1e-4)
    for epoch in range(epochs):
        ctx.context_weight = min(1.0, 0.5 * epoch)
        for ids, pad, n_sent, y in loader:  # padded to (ABS, SENTS, TOK)
            vecs = encode(recipe, emb, g_enc, ids.cuda(), pad.cuda())
            logits = g_ctx(vecs, n_sent.cuda())
            loss = F.cross_entropy(logits.flatten(0, 1), y.cuda().flatten(), ignore_index=-100)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch} acc {evaluate(recipe, emb, enc, ctx, g_enc, g_ctx, val_loader):.4f}")


@torch.no_grad()
def evaluate(recipe, emb, enc, ctx, g_enc, g_ctx, val_loader):
    ctx.eval()
    hits = total = 0
    for ids, pad, n_sent, y in val_loader:
        logits = g_ctx(encode(recipe, emb, g_enc, ids.cuda(), pad.cuda()), n_sent.cuda())  # CLEAN: context module in eval mode runs eagerly
        m = y.cuda() != -100
        hits += (logits.argmax(-1)[m] == y.cuda()[m]).sum().item()  # CLEAN: mask indexing in eager evaluation
        total += m.sum().item()
    ctx.train()
    return hits / total
