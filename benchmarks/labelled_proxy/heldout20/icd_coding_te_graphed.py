"""Clinical NLP platform: automated ICD-10-CM coding of discharge summaries (run by the job runner).
Encoder blocks: TE layers graphed with TE make_graphed_callables (FP8, weight casts cached across
micro-batches); the embedding and the label-wise attention head are graphed in a second call.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

SEQ, MB, HID, HEADS, N_CODES = 2048, 4, 768, 12, 8192
FP8_RECIPE = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")


class TokenEmbedding(nn.Module):
    def __init__(self, vocab=50_000, word_drop=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, HID)
        self.pos = nn.Parameter(torch.zeros(SEQ, HID))
        self.word_drop = word_drop
        self.drop_gen = torch.Generator(device="cuda").manual_seed(1729)

    def forward(self, ids):
        keep = torch.bernoulli(torch.full(ids.shape, 1 - self.word_drop, device=ids.device), generator=self.drop_gen)  # HAZARD: rng
        h = (self.tok(ids) + self.pos) * keep.unsqueeze(-1)
        return h.transpose(0, 1).to(torch.bfloat16)  # [S, B, H] for TE


class EncoderBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(HID, 4 * HID, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="padding", params_dtype=torch.bfloat16)

    def forward(self, hidden, attention_mask):
        return self.layer(hidden, attention_mask=attention_mask)


class LabelAttentionHead(nn.Module):
    def __init__(self, billable_codes):
        super().__init__()
        self.billable_codes = list(billable_codes)  # code indices billable for inpatient claims
        self.query = nn.Parameter(torch.randn(N_CODES, HID) * 0.02)
        self.out = nn.Parameter(torch.zeros(N_CODES, HID))

    def forward(self, hidden, pad_mask):
        hidden = hidden.transpose(0, 1).float()  # [B, S, H]
        att = torch.einsum("bsh,ch->bcs", hidden, self.query)
        att = att.masked_fill(pad_mask.unsqueeze(1), float("-inf")).softmax(-1)  # CLEAN: masked_fill, no data-dependent shape
        logits = (torch.einsum("bcs,bsh->bch", att, hidden) * self.out).sum(-1)
        allowed = torch.tensor(self.billable_codes, device=logits.device)  # HAZARD: host-sync
        return logits.index_select(1, allowed)


class IcdCodingModel(nn.Module):
    def __init__(self, billable_codes, n_layers=12):
        super().__init__()
        self.embed = TokenEmbedding()
        self.blocks = nn.ModuleList(EncoderBlock() for _ in range(n_layers))
        self.head = LabelAttentionHead(billable_codes)
        self.act_norms = {}

    def _norm_probe(self, idx):
        def hook(module, args):
            self.act_norms[idx] = args[0].detach().float().norm()
        return hook

    def graph(self, recipe):
        for i, blk in enumerate(self.blocks):
            blk.register_forward_pre_hook(self._norm_probe(i))  # HAZARD: api-misuse
        hs = tuple((torch.randn(SEQ, MB, HID, device="cuda", dtype=torch.bfloat16, requires_grad=True),) for _ in self.blocks)
        masks = tuple({"attention_mask": torch.zeros(MB, 1, 1, SEQ, dtype=torch.bool, device="cuda")} for _ in self.blocks)
        self.g_blocks = te.make_graphed_callables(tuple(self.blocks), hs, sample_kwargs=masks,
                                                  enabled=True, recipe=recipe, cache_quantized_params=True)
        ids = torch.zeros(MB, SEQ, dtype=torch.long, device="cuda")
        hh = torch.randn(SEQ, MB, HID, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        pad = torch.zeros(MB, SEQ, dtype=torch.bool, device="cuda")
        self.g_embed, self.g_head = te.make_graphed_callables((self.embed, self.head), ((ids,), (hh, pad)))

    def forward(self, ids, pad, mb_index):
        h = self.g_embed(ids)
        for blk in self.g_blocks:
            h = blk(h, attention_mask=pad[:, None, None, :], is_first_microbatch=(mb_index == 0))  # CLEAN: declared sample_kwargs key plus is_first_microbatch
        return self.g_head(h, pad)


def train_epoch(model, loader, opt, recipe):
    for micro_batches in loader:
        opt.zero_grad(set_to_none=False)
        for mb_index, (ids, pad, codes) in enumerate(micro_batches):
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast with the capture recipe around the replays
                logits = model(ids, pad, mb_index)
            F.binary_cross_entropy_with_logits(logits, codes).backward()
        opt.step()


@torch.no_grad()
def validate(model, loader, recipe):
    scores = []
    for ids, pad, _ in loader:
        with te.autocast(enabled=True, recipe=recipe):
            h = model.g_embed(ids)
            for blk in model.g_blocks:
                h = blk(h, attention_mask=pad[:, None, None, :])  # HAZARD: api-misuse
            logits = model.g_head(h, pad)
        scores.append(torch.sigmoid(logits).cpu())
    return torch.cat(scores)

