"""Sentence-level tone of earnings-call transcripts on Transformer Engine.

Six TE TransformerLayers wrapped in small blocks are graphed with TE's
make_graphed_callables (FP8 delayed scaling, quantized weights cached across
micro-batches) for the weekly fine-tune on newly published calls. Padding masks
are keyword arguments declared through sample_kwargs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

SEQ, B, D, HEADS, LAYERS, VOCAB = 128, 32, 768, 12, 6, 30522
RECIPE = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")


class ToneBlock(nn.Module):
    def __init__(self, idx):
        super().__init__()
        self.layer = te.TransformerLayer(D, 4 * D, HEADS, self_attn_mask_type="padding",
                                         hidden_dropout=0.1, attention_dropout=0.1,
                                         params_dtype=torch.bfloat16)
        self.idx = idx
        self.res_scale = 0.1  # warmed up towards 1.0 by the trainer
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(97 + idx)

    def forward(self, x, attention_mask=None):
        if torch.isinf(x).any():  # HAZARD: dynamic-control-flow
            x = torch.nan_to_num(x, posinf=1e4, neginf=-1e4)
        if self.idx == 0:  # CLEAN: branch on a Python int fixed at construction, same on every replay
            noise = torch.randn(x.shape, device=x.device, dtype=x.dtype, generator=self.noise_gen)  # HAZARD: rng
            x = x + 1e-3 * noise
        scale = self.res_scale  # HAZARD: python-scalar
        return x + scale * (self.layer(x, attention_mask=attention_mask) - x)


def build_graphed(blocks, device="cuda"):
    xs = [torch.randn(SEQ, B, D, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in blocks]
    mask = torch.zeros(B, 1, 1, SEQ, dtype=torch.bool, device=device)
    return te.make_graphed_callables(
        tuple(blocks),
        tuple((x,) for x in xs),
        sample_kwargs=tuple({"attention_mask": mask} for _ in blocks),
        enabled=True,
        recipe=RECIPE,
        cache_quantized_params=True,
    )


def probe(module, inputs, output):
    module.act_rms = output.detach().float().pow(2).mean().sqrt()


def finetune(loader, steps=2000, device="cuda"):
    emb = nn.Embedding(VOCAB, D).to(device, torch.bfloat16)
    blocks = [ToneBlock(i).to(device) for i in range(LAYERS)]
    graphed = build_graphed(blocks)
    blocks[-1].register_forward_hook(probe)  # CLEAN: hook registered after graphing
    head = nn.Linear(D, 3).to(device, torch.bfloat16)
    params = [*emb.parameters(), *head.parameters(), *(p for b in blocks for p in b.parameters())]
    opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01)
    for step, (ids, pad_mask, label) in zip(range(steps), loader):
        x = emb(ids).transpose(0, 1).contiguous()
        with te.autocast(enabled=True, recipe=RECIPE):  # CLEAN: replays run inside te.autocast with the capture recipe
            for blk in graphed:
                x = blk(x, attention_mask=pad_mask)  # HAZARD: api-misuse
        logits = head(x[0])
        loss = F.cross_entropy(logits.float(), label)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        for b in blocks:
            b.res_scale = min(1.0, 0.1 + step / 1000)
    return emb, blocks, head


if __name__ == "__main__":
    calls = torch.load("earnings_calls_tokenized.pt")
    loader = torch.utils.data.DataLoader(calls, batch_size=B, shuffle=True, drop_last=True)
    finetune(loader)
