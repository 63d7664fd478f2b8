"""Small-variant caller on read pileups: CNN stem + Transformer Engine trunk (FP8).

The stem and genotype head are graphed with torch.cuda.make_graphed_callables, the TE
TransformerLayers with transformer_engine.pytorch.make_graphed_callables.

    python variant_caller_te_graphed.py train --shards shards/*.npz --steps 20000
    python variant_caller_te_graphed.py call --ckpt caller.pt --shards test/*.npz --out calls.vcf
"""
import argparse
import glob
import gzip
import logging
import os
import random
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

log = logging.getLogger("caller")

GENOTYPES = ["hom_ref", "het", "hom_alt"]
PILEUP_CHANNELS = ["base", "qual", "mapq", "strand", "supports", "diff_ref"]


@dataclass
class CallerConfig:
    reads: int = 96
    width: int = 224
    channels: int = len(PILEUP_CHANNELS)
    hidden: int = 256
    ffn: int = 1024
    heads: int = 8
    layers: int = 6
    micro_batch: int = 32
    accum: int = 4
    lr: float = 3e-4
    steps: int = 20000
    mq_scale: float = 1.0 / 60.0
    min_gq: int = 20


def parse_args():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--shards", default="shards/*.npz")
    t.add_argument("--steps", type=int, default=20000)
    t.add_argument("--profile-layers", action="store_true")
    t.add_argument("--ckpt", default="caller.pt")
    c = sub.add_parser("call")
    c.add_argument("--ckpt", default="caller.pt")
    c.add_argument("--shards", default="test/*.npz")
    c.add_argument("--out", default="calls.vcf.gz")
    return p.parse_args()


# ----------------------------------------------------------------------------- data

def load_shards(pattern, cfg):
    for path in sorted(glob.glob(pattern)):
        z = np.load(path)
        yield path, z["pileup"].astype(np.float32), z["label"].astype(np.int64), z["pos"], z["chrom"]


def micro_batches(pattern, cfg, shuffle=True):
    while True:
        for _, pile, lab, _, _ in load_shards(pattern, cfg):
            order = np.random.permutation(len(lab)) if shuffle else np.arange(len(lab))  # CLEAN: NumPy RNG in the loader
            for s in range(0, len(order) - cfg.micro_batch + 1, cfg.micro_batch):
                j = order[s:s + cfg.micro_batch]
                yield torch.from_numpy(pile[j]).pin_memory(), torch.from_numpy(lab[j]).pin_memory()
        if not shuffle:
            return


# ----------------------------------------------------------------------------- model

class PileupStem(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.conv1 = nn.Conv2d(cfg.channels, 64, 3, padding=1)
        self.conv2 = nn.Conv2d(64, 128, 3, padding=1)
        self.proj = nn.Linear(128, cfg.hidden)
        self.mq_scale = cfg.mq_scale
        self.qual_lut_np = (1.0 - 10.0 ** (-np.arange(64) / 10.0)).astype(np.float32)
        self.qgen = torch.Generator(device="cuda")
        self.qgen.manual_seed(99)
        self.calls = 0

    def forward(self, pile):
        # pile: (B, C, R, W)
        if pile.max() > 60:  # HAZARD: dynamic-control-flow
            pile = pile.clamp(max=60)
        lut = torch.from_numpy(self.qual_lut_np).cuda()  # HAZARD: pinned-memory
        qual = lut[pile[:, 1].long().clamp(0, 63)]
        mapq = pile[:, 2] * self.mq_scale  # HAZARD: python-scalar
        cov = int((pile[:, 0] != 0).sum())  # HAZARD: host-sync
        jitter = torch.randn(qual.shape, device=pile.device, generator=self.qgen) * 0.01  # HAZARD: rng
        self.calls += 1  # HAZARD: host-code
        supports = pile[:, 4] * (pile.shape[2] * pile.shape[3] / max(cov, 1))
        x = torch.stack([pile[:, 0], qual + jitter, mapq, pile[:, 3], supports, pile[:, 5]], 1)
        h = F.gelu(self.conv1(x))
        h = F.gelu(self.conv2(h))
        h = h.mean(2)  # pool over reads -> (B, 128, W)
        return self.proj(h.transpose(1, 2)).transpose(0, 1).contiguous()  # (W, B, H) for TE sbhd


class GenotypeHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.hidden)
        self.fc = nn.Linear(cfg.hidden, 3 + 4)  # genotype + 4 indel classes
        self.allowed = [0, 1, 2]
        self.center = cfg.width // 2

    def forward(self, h):
        c = self.norm(h[self.center - 2:self.center + 3]).mean(0)  # CLEAN: constant Python slice bounds
        logits = self.fc(c)
        return logits[:, self.allowed]  # HAZARD: host-sync


class LayerProfiler:
    def __init__(self):
        self.t = {}

    def install(self, layers):
        for i, layer in enumerate(layers):
            layer.register_forward_pre_hook(self._pre(i))  # HAZARD: api-misuse

    def install_after(self, graphed):
        return [g.register_forward_pre_hook(self._pre(i)) for i, g in enumerate(graphed) if isinstance(g, nn.Module)]  # CLEAN: hooks added after graphing

    def _pre(self, i):
        def hook(mod, args):
            self.t[i] = time.perf_counter()
        return hook


def build_model(cfg, dev):
    stem = PileupStem(cfg).to(dev)
    layers = [te.TransformerLayer(cfg.hidden, cfg.ffn, cfg.heads, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="no_mask", params_dtype=torch.bfloat16).to(dev)
              for _ in range(cfg.layers)]
    head = GenotypeHead(cfg).to(dev)
    return stem, layers, head


def graph_model(cfg, dev, stem, layers, head, recipe, profiler=None):
    sp = torch.zeros(cfg.micro_batch, cfg.channels, cfg.reads, cfg.width, device=dev)
    stem_g = torch.cuda.make_graphed_callables(stem, (sp,))
    if profiler is not None:
        profiler.install(layers)
    sh = torch.randn(cfg.width, cfg.micro_batch, cfg.hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        layers_g = te.make_graphed_callables(
            tuple(layers), tuple((sh,) for _ in layers),
            enabled=True, recipe=recipe, cache_quantized_params=True)
    sx = torch.randn(cfg.width, cfg.micro_batch, cfg.hidden, device=dev, requires_grad=True)
    head_g = torch.cuda.make_graphed_callables(head, (sx,))
    return stem_g, list(layers_g), head_g


def forward(stem_g, layers_g, head_g, pile, recipe, first):
    h = stem_g(pile).to(torch.bfloat16)
    with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast around replays, as TE requires
        for blk in layers_g:
            h = blk(h, is_first_microbatch=first)  # CLEAN: flag passed on every replay
    return head_g(h.float())


# ----------------------------------------------------------------------------- training

def train(args):
    cfg = CallerConfig(steps=args.steps)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    random.seed(0)
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    stem, layers, head = build_model(cfg, dev)
    profiler = LayerProfiler() if args.profile_layers else None
    stem_g, layers_g, head_g = graph_model(cfg, dev, stem, layers, head, recipe, profiler)
    params = list(stem.parameters()) + [p for l in layers for p in l.parameters()] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 1000))
    data = micro_batches(args.shards, cfg)
    t0 = time.time()  # CLEAN: wall clock in the driver loop
    hist = []
    for step in range(cfg.steps):
        stem.mq_scale = cfg.mq_scale * (1.0 + 0.5 * min(step / 5000, 1.0))
        opt.zero_grad(set_to_none=True)
        for micro in range(cfg.accum):
            pile, lab = next(data)
            pile = pile.to(dev, non_blocking=True)  # CLEAN: pinned batch uploaded before the replay
            lab = lab.to(dev, non_blocking=True)
            logits = forward(stem_g, layers_g, head_g, pile, recipe, first=(micro == 0))
            loss = F.cross_entropy(logits[:, :3], lab) / cfg.accum
            loss.backward()
            hist.append(loss.detach())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()  # CLEAN: eager optimizer, LR changes take effect
        if step % 200 == 0:
            mean_loss = torch.stack(hist).mean().item() * cfg.accum  # CLEAN: host read in the driver loop
            hist.clear()
            print(f"step {step:6d} loss {mean_loss:.4f} lr {sched.get_last_lr()[0]:.2e} "
                  f"{(time.time() - t0) / (step + 1) * 1e3:.1f} ms/step")
        if step % 5000 == 4999:
            evaluate_shard(args.shards, cfg, dev, stem_g, layers_g, head_g, recipe)
            torch.save({"stem": stem.state_dict(), "layers": [l.state_dict() for l in layers],
                        "head": head.state_dict(), "step": step}, args.ckpt)


@torch.no_grad()
def evaluate_shard(pattern, cfg, dev, stem_g, layers_g, head_g, recipe, limit=50):
    correct, total = 0, 0
    for i, (pile, lab) in enumerate(micro_batches(pattern, cfg, shuffle=False)):
        if i >= limit:
            break
        h = stem_g(pile.to(dev)).to(torch.bfloat16)
        with te.autocast(enabled=True, recipe=recipe):
            for blk in layers_g:
                h = blk(h)  # HAZARD: api-misuse
        pred = head_g(h.float())[:, :3].argmax(-1).cpu()  # CLEAN: host copy after the replays
        correct += int((pred == lab).sum())
        total += len(lab)
    log.info("held-out accuracy %.4f on %d sites", correct / max(total, 1), total)


# ----------------------------------------------------------------------------- calling (eager inference)

def phred(p):
    return int(min(99, -10.0 * np.log10(max(1.0 - p, 1e-10))))


@torch.no_grad()
def call(args):
    cfg = CallerConfig()
    dev = torch.device("cuda")
    blob = torch.load(args.ckpt, map_location="cpu")
    stem, layers, head = build_model(cfg, dev)
    stem.load_state_dict(blob["stem"])
    for l, sd in zip(layers, blob["layers"]):
        l.load_state_dict(sd)
    head.load_state_dict(blob["head"])
    for m in [stem, head, *layers]:
        m.eval()
    n_written = 0
    with gzip.open(args.out, "wt") as vcf:
        vcf.write("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tSAMPLE\n")
        for path, pile, _, pos, chrom in load_shards(args.shards, cfg):
            for s in range(0, len(pos), cfg.micro_batch):
                x = torch.from_numpy(pile[s:s + cfg.micro_batch]).to(dev)  # CLEAN: eager inference upload, no capture
                h = stem(x).to(torch.bfloat16)
                for l in layers:
                    h = l(h)
                probs = head(h.float())[:, :3].softmax(-1).cpu().numpy()  # CLEAN: eager calling path
                for k, pr in enumerate(probs):
                    gt = int(pr.argmax())
                    gq = phred(float(pr[gt]))
                    if gt == 0 or gq < cfg.min_gq:
                        continue
                    geno = "0/1" if gt == 1 else "1/1"
                    vcf.write(f"{chrom[s + k]}\t{pos[s + k]}\t.\tN\t<ALT>\t{gq}\tPASS\t.\tGT:GQ\t{geno}:{gq}\n")
                    n_written += 1
            log.info("%s done, %d calls so far", os.path.basename(path), n_written)
    print(f"wrote {n_written} variant calls to {args.out}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    a = parse_args()
    if a.cmd == "train":
        train(a)
    else:
        call(a)
