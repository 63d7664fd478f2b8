"""Monocular depth training: eager ResNet encoder, decoder blocks graphed with make_graphed_callables.

Decoder blocks upsample and fuse encoder skips; the head predicts median-scaled
depth that is compared to sparse LiDAR depth with a scale-invariant loss.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class DecoderBlock(nn.Module):
    def __init__(self, cin, cskip, cout, drop_skip=0.1):
        super().__init__()
        self.drop_skip = drop_skip
        self.conv = nn.Sequential(nn.Conv2d(cin + cskip, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ELU(),
                                  nn.Conv2d(cout, cout, 3, padding=1), nn.ELU())

    def forward(self, x, skip):
        x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)  # CLEAN: target size comes from shape metadata, fixed per capture
        if self.training and random.random() < self.drop_skip:  # HAZARD: host-code
            skip = torch.zeros_like(skip)
        return self.conv(torch.cat([x, skip], 1))


class DepthHead(nn.Module):
    def __init__(self, cin, max_depth=80.0):
        super().__init__()
        self.proj = nn.Conv2d(cin, 1, 3, padding=1)
        self.max_depth = max_depth

    def forward(self, x):
        d = F.softplus(self.proj(x)) + 1e-3
        med = d[d > 1e-2].median()  # HAZARD: dynamic-shape
        return (d / med).clamp(max=self.max_depth)  # CLEAN: max_depth is a constant set at construction


class ActivationStats:
    def __init__(self):
        self.means = []

    def hook(self, module, inputs, output):
        self.means.append(output.detach().float().mean())


def graph_decoder(blocks, head, feat_shapes, stats: ActivationStats):
    for b in blocks:
        b.register_forward_hook(stats.hook)  # HAZARD: api-misuse
    samples, x_shape = [], feat_shapes[0]
    for blk, skip_shape in zip(blocks, feat_shapes[1:]):
        samples.append((torch.randn(x_shape, device="cuda", requires_grad=True),
                        torch.randn(skip_shape, device="cuda", requires_grad=True)))
        x_shape = (skip_shape[0], blk.conv[0].out_channels, *skip_shape[2:])
    samples.append((torch.randn(x_shape, device="cuda", requires_grad=True),))
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        graphed = torch.cuda.make_graphed_callables(tuple(blocks) + (head,), tuple(samples), num_warmup_iters=3)
    graphed[-1].register_forward_hook(stats.hook)  # CLEAN: hook registered after graphing, which is allowed
    return graphed[:-1], graphed[-1]


def si_log_loss(pred, gt, lam=0.85):
    valid = gt > 0
    d = torch.log(pred[valid]) - torch.log(gt[valid])  # CLEAN: boolean mask in the eager loss, outside the graphed callables
    return torch.sqrt((d ** 2).mean() - lam * d.mean() ** 2)


def train_epoch(encoder, gblocks, ghead, loader, opt):
    encoder.train()
    for img, lidar in loader:
        img, lidar = img.cuda(non_blocking=True), lidar.cuda(non_blocking=True)
        feats = encoder(img)
        x = feats[0]
        for gb, skip in zip(gblocks, feats[1:]):
            x = gb(x, skip)
        pred = ghead(x)
        loss = si_log_loss(F.interpolate(pred, size=lidar.shape[-2:]), lidar)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
