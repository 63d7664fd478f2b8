"""Noise2Void (Krull et al., CVPR 2019) self-supervised denoising of microscopy
patches; the blind-spot training step is captured in one CUDA graph."""
import argparse
import random
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--patch_size", type=int, default=64)
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--perc_pix", type=float, default=0.198)
parser.add_argument("--lr", type=float, default=4e-4)
parser.add_argument("--epochs", type=int, default=200)
parser.add_argument("--masked_mean", type=int, default=0, help="ablation: weighted mean instead of selecting pixels")
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()

class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

class UNet(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.d1, self.d2, self.mid = conv_block(1, c), conv_block(c, 2 * c), conv_block(2 * c, 2 * c)
        self.u2, self.u1, self.out = conv_block(4 * c, c), conv_block(2 * c, c), nn.Conv2d(c, 1, 1)

    def forward(self, x):
        e1 = self.d1(x)
        e2 = self.d2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.u2(torch.cat([F.interpolate(m, scale_factor=2.0), e2], 1))
        return x + self.out(self.u1(torch.cat([F.interpolate(d2, scale_factor=2.0), e1], 1)))

class N2VMasker:
    def __init__(self):
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(args.seed)

    def __call__(self, patches):
        b, _, h, w = patches.shape
        mask = torch.rand(b, 1, h, w, device=patches.device, generator=self.gen) < args.perc_pix / 100.0  # HAZARD: rng
        shift = random.choice([-2, -1, 1, 2])  # HAZARD: host-code
        neigh = torch.roll(patches, shifts=(shift, shift), dims=(2, 3))
        return torch.where(mask, neigh, patches), mask  # CLEAN: device-side blind-spot replacement

def n2v_loss(pred, target, mask):
    if args.masked_mean:
        return ((pred - target) ** 2 * mask).sum() / mask.sum().clamp(min=1)  # CLEAN: weighted mean, no boolean indexing
    return F.mse_loss(pred[mask], target[mask])  # HAZARD: dynamic-shape

class N2VTrainer:
    def __init__(self, model, data_mean, data_std):
        self.model, self.masker = model, N2VMasker()
        self.mean, self.std = np.float32(data_mean), np.float32(data_std)
        self.opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        self.meter = AverageMeter()

    def step(self, raw):
        x = (raw - torch.tensor(self.mean).cuda()) / torch.tensor(self.std).cuda()  # HAZARD: pinned-memory
        inp, mask = self.masker(x)
        loss = n2v_loss(self.model(inp), x, mask)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        return loss

    def capture(self, static_raw):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.step(static_raw)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self.step(static_raw)

def train(trainer, patches):
    static_raw = patches[:args.batch_size].cuda()
    trainer.capture(static_raw)
    for epoch in range(args.epochs):
        perm = torch.randperm(patches.size(0))
        for i in range(0, patches.size(0) - args.batch_size + 1, args.batch_size):
            static_raw.copy_(patches[perm[i:i + args.batch_size]])  # CLEAN: copy_ into the captured input
            trainer.graph.replay()
            trainer.meter.update(trainer.static_loss.item())  # CLEAN: host read after the replay
