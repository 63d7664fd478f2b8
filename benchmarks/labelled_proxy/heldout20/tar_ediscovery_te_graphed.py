"""e-Discovery: technology-assisted review (TAR 2.0, continuous active learning) relevance model.
After every review round the model is refitted on all coded documents and the corpus re-ranked;
encoder, pooler and head are graphed once per matter with Transformer Engine.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

SEQ, BATCH, HID = 512, 32, 1024


class DocEncoder(nn.Module):
    def __init__(self, vocab=64_000, n_layers=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, HID)
        self.layers = nn.ModuleList(
            te.TransformerLayer(HID, 4 * HID, 16, hidden_dropout=0.0, attention_dropout=0.0,
                                self_attn_mask_type="padding") for _ in range(n_layers))

    def forward(self, ids, attention_mask):
        h = self.emb(ids).transpose(0, 1)
        for layer in self.layers:
            h = layer(h, attention_mask=attention_mask)
        return h


class MaskedMeanPooler(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(HID, HID)

    def forward(self, h, tok_mask):
        longest = int(tok_mask.sum(1).max())  # HAZARD: host-sync
        h, m = h[:longest], tok_mask[:, :longest].t().unsqueeze(-1)
        return torch.tanh(self.proj((h * m).sum(0) / m.sum(0).clamp_min(1.0)))


class RelevanceHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(HID, 1)
        self.recall_boost, self.last_call = 0.0, 0.0  # boost: set by the case team; last_call: liveness probe

    def forward(self, pooled):
        self.last_call = time.perf_counter()  # HAZARD: host-code
        boost = self.recall_boost  # HAZARD: python-scalar
        return self.fc(pooled).squeeze(-1) + boost


class TarModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.pooler, self.head = DocEncoder(), MaskedMeanPooler(), RelevanceHead()

    def graph(self, recipe):
        ids, amask = torch.zeros(BATCH, SEQ, dtype=torch.long, device="cuda"), torch.zeros(BATCH, 1, 1, SEQ, dtype=torch.bool, device="cuda")
        h, tok = torch.randn(SEQ, BATCH, HID, device="cuda", requires_grad=True), torch.ones(BATCH, SEQ, device="cuda")
        p = torch.randn(BATCH, HID, device="cuda", requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            self.encoder, self.pooler, self.head = te.make_graphed_callables(
                (self.encoder, self.pooler, self.head), ((ids,), (h, tok), (p,)),
                sample_kwargs=({"attention_mask": amask}, {}, {}),
                enabled=True, recipe=recipe, cache_quantized_params=False)

    def forward(self, ids, tok_mask):
        amask = (tok_mask == 0)[:, None, None, :]
        return self.head(self.pooler(self.encoder(ids, attention_mask=amask), tok_mask))


class ReviewRoundTrainer:
    def __init__(self, model: TarModel, recipe):
        self.model, self.recipe = model, recipe
        self.opt = torch.optim.AdamW(model.parameters(), lr=2e-5)

    def apply_round_settings(self, settings: dict):
        self.model.head.recall_boost = float(settings.get("recall_boost", 0.0))

    def refit(self, coded_loader, epochs=2):
        self.model.train()
        for _ in range(epochs):
            for ids, tok_mask, label in coded_loader:
                with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: TE autocast around the replays
                    logit = self.model(ids, tok_mask)
                loss = F.binary_cross_entropy_with_logits(logit, label)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()

    @torch.no_grad()
    def rerank(self, corpus_loader, k=500):
        scores = []
        for ids, tok_mask in corpus_loader:
            with te.autocast(enabled=True, recipe=self.recipe):
                scores.append(self.model(ids, tok_mask).float().clone())  # CLEAN: cloned before the next replay
        return torch.cat(scores).topk(k).indices.cpu()  # CLEAN: ranking read after the replays


def run_matter(coded_loader, corpus_loader, rounds):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32, amax_compute_algo="max")
    model = TarModel().cuda()
    model.graph(recipe)
    trainer = ReviewRoundTrainer(model, recipe)
    for settings in rounds:
        trainer.apply_round_settings(settings)
        trainer.refit(coded_loader)
        yield trainer.rerank(corpus_loader)
