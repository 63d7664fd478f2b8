"""Clause classification for a contract-review product (CUAD-style labels), FP8 on Transformer Engine.

Embedding, twelve te.TransformerLayer blocks and the classifier head are graphed with
te.make_graphed_callables (TE >= 2.9 keyword names); replays run under te.autocast.
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

CLAUSES = 41
SEQ, BATCH, HID, HEADS, VOCAB, MASK_ID = 512, 16, 768, 12, 50265, 50264


class ClauseEmbedding(nn.Module):
    def __init__(self, mask_p=0.1, seed=17):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HID)
        self.pos = nn.Parameter(torch.zeros(SEQ, 1, HID))
        self.mask_p = mask_p
        self.scale = 0.5
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, ids):                                    # ids [S, B]
        drop = torch.rand(ids.shape, generator=self.gen, device=ids.device) < self.mask_p  # HAZARD: rng
        ids = ids.masked_fill(drop, MASK_ID)  # CLEAN: masked_fill keeps the shape
        return self.tok(ids) * self.scale + self.pos  # HAZARD: python-scalar


class ClauseHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = te.LayerNorm(HID)
        self.out = nn.Linear(HID, CLAUSES)

    def forward(self, x):
        return self.out(self.norm(x[0]))                        # [CLS] position


def check_layout(module, args):
    assert args[0].shape[0] == SEQ, "expected [seq, batch, hidden]"


def build(n_layers=12):
    embed, head = ClauseEmbedding().cuda(), ClauseHead().cuda()
    layers = [te.TransformerLayer(HID, 4 * HID, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="padding").cuda() for _ in range(n_layers)]
    for layer in layers:
        layer.register_forward_pre_hook(check_layout)  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    ids = torch.randint(0, VOCAB, (SEQ, BATCH), device="cuda")
    x = torch.randn(SEQ, BATCH, HID, device="cuda", requires_grad=True)
    mask = torch.zeros(BATCH, 1, 1, SEQ, dtype=torch.bool, device="cuda")
    modules = (embed, *layers, head)
    sample_args = ((ids,),) + tuple((x,) for _ in layers) + ((x,),)
    sample_kwargs = ({},) + tuple({"attention_mask": mask} for _ in layers) + ({},)
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(modules, sample_args, sample_kwargs=sample_kwargs,
                                            enabled=True, recipe=recipe, cache_quantized_params=False)
    return graphed, recipe


def train(loader, epochs=4):
    graphed, recipe = build()
    g_embed, *g_layers, g_head = graphed
    params = [p for m in graphed for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01)
    for epoch in range(epochs):
        g_embed.scale = min(1.0, 0.5 + 0.25 * epoch)            # warm the token-embedding scale up to 1
        for ids, pad_mask, labels in loader:
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under te.autocast with the capture recipe
                x = g_embed(ids)
                for blk in g_layers:
                    x = blk(x, attention_mask=pad_mask)  # CLEAN: keyword declared in sample_kwargs
                logits = g_head(x)
            loss = nn.functional.binary_cross_entropy_with_logits(logits.float(), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return graphed
