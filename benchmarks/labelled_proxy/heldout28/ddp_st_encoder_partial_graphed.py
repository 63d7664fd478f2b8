"""Speech-translation encoder trained with DDP over 4 nodes. The conformer-style blocks are
graphed with torch.cuda.make_graphed_callables *before* DDP wraps the model (partial capture,
as the CUDA notes suggest); the decoder stays eager."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class ConvBlock(nn.Module):
    def __init__(self, d=512, k=31, drop_path=0.0):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.pw1, self.pw2 = nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
        self.ff = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
        self.drop_path = drop_path

    def forward(self, x):
        if x.abs().max() > 1e4:  # HAZARD: dynamic-control-flow
            x = x / x.abs().max()
        h = F.glu(self.pw1(self.ln(x)), dim=-1)
        h = self.pw2(F.silu(self.dw(h.transpose(1, 2)).transpose(1, 2)))
        p = self.drop_path  # HAZARD: python-scalar
        keep = (torch.rand(x.shape[0], 1, 1, device=x.device) >= p).to(x.dtype) / (1 - p)  # CLEAN: default CUDA generator, captured RNG is replay-safe
        x = x + h * keep
        return x + 0.5 * self.ff(x)


class STModel(nn.Module):
    def __init__(self, n_blocks=12, d=512, vocab=10000):
        super().__init__()
        self.sub = nn.Sequential(nn.Conv1d(80, d, 3, 2, 1), nn.GELU(), nn.Conv1d(d, d, 3, 2, 1))
        self.blocks = nn.ModuleList(ConvBlock(d) for _ in range(n_blocks))
        self.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 8, batch_first=True), 6)
        self.emb, self.out = nn.Embedding(vocab, d), nn.Linear(d, vocab)

    def forward(self, feats, prev_tokens):
        x = self.sub(feats.transpose(1, 2)).transpose(1, 2)
        for blk in self.blocks:
            x = blk(x)  # CLEAN: positional call, as the graphed callable requires
        return self.out(self.dec(self.emb(prev_tokens), x))


def probe(module, inp, out):
    module.last_rms = out.pow(2).mean().sqrt().detach()


def build(local_rank, batch=16, frames=3000, d=512):
    model = STModel().cuda()
    for blk in model.blocks:
        blk.register_forward_hook(probe)  # HAZARD: api-misuse
    samples = tuple((torch.randn(batch, frames // 4, d, device="cuda", requires_grad=True),) for _ in model.blocks)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = torch.cuda.make_graphed_callables(tuple(model.blocks), samples)
    model.blocks = nn.ModuleList(graphed)
    model.dec.register_forward_pre_hook(lambda m, a: None)  # CLEAN: hook on the eager decoder, after graphing
    return DDP(model, device_ids=[local_rank])  # CLEAN: graphed before the DDP wrap (partial capture recipe)


def train(model, loader, opt, epochs, n_blocks=12):
    for ep in range(epochs):
        for blk in model.module.blocks:
            blk.drop_path = 0.1 * ep / max(epochs - 1, 1)
        for feats, prev, tgt in loader:
            logits = model(feats.cuda(non_blocking=True), prev.cuda(non_blocking=True))
            loss = F.cross_entropy(logits.flatten(0, 1), tgt.cuda(non_blocking=True).flatten(), ignore_index=0)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if dist.get_rank() == 0:
            print(f"epoch {ep} last loss {loss.item():.3f}")  # CLEAN: eager host read, no region


if __name__ == "__main__":
    dist.init_process_group("nccl")
    lr = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(lr)
    m = build(lr)
