"""Unsupervised deformable registration of 2-D MRI slices (VoxelMorph-style).

The registration net and an auxiliary segmentation head are compiled with
max-autotune and handed to the trainer; the loss mixes NCC, smoothness and Dice.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("reg")


def conv_block(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(o, o, 3, padding=1), nn.LeakyReLU(0.2))


def jacobian_det(flow):
    dx = flow[:, :, :, 1:] - flow[:, :, :, :-1]
    dy = flow[:, :, 1:, :] - flow[:, :, :-1, :]
    return (1 + dx[:, 0, :-1]) * (1 + dy[:, 1, :, :-1]) - dx[:, 1, :-1] * dy[:, 0, :, :-1]


class RegNet(nn.Module):
    def __init__(self, size=(192, 160), ch=32, max_disp=0.3):
        super().__init__()
        self.enc1, self.enc2 = conv_block(2, ch), conv_block(ch, 2 * ch)
        self.dec = conv_block(3 * ch, ch)
        self.flow = nn.Conv2d(ch, 2, 3, padding=1)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, size[0]), torch.linspace(-1, 1, size[1]), indexing="ij")
        self.register_buffer("base_grid", torch.stack([xs, ys], -1)[None])
        self.max_disp = max_disp
        self.last_folds = 0

    def forward(self, moving, fixed):
        e1 = self.enc1(torch.cat([moving, fixed], 1))
        e2 = self.enc2(F.avg_pool2d(e1, 2))
        d = self.dec(torch.cat([e1, F.interpolate(e2, size=e1.shape[-2:])], 1))  # CLEAN: target size from shape metadata, no device read
        flow = self.flow(d)
        if flow.abs().amax() > self.max_disp:  # HAZARD: dynamic-control-flow
            flow = flow.clamp(-self.max_disp, self.max_disp)
        warped = F.grid_sample(moving, self.base_grid + flow.permute(0, 2, 3, 1), align_corners=True)
        self.last_folds = (jacobian_det(flow) <= 0).sum().item()  # HAZARD: host-sync
        log.debug("regnet forward on %s", tuple(moving.shape))  # HAZARD: host-code
        return warped, flow


class SegHead(nn.Module):
    def __init__(self, n_labels=5, ch=32):
        super().__init__()
        self.body, self.out = conv_block(1, ch), nn.Conv2d(ch, n_labels, 1)

    def forward(self, x):
        return self.out(self.body(x))


def ncc_loss(a, b, eps=1e-5):
    a, b = a - a.mean((2, 3), keepdim=True), b - b.mean((2, 3), keepdim=True)
    return 1 - (a * b).mean((2, 3)) / (a.std((2, 3)) * b.std((2, 3)) + eps)


class RegTrainer:
    def __init__(self, model, seg_head, params, lr=1e-4, lam=1.0, total_steps=50_000):
        self.model, self.seg = model, seg_head
        self.opt = torch.optim.Adam(params, lr=lr)
        self.lam, self.lr, self.total_steps = lam, lr, total_steps

    def step(self, it, moving, fixed, fixed_onehot):
        warped, flow = self.model(moving, fixed)
        seg = self.seg(warped)
        sim = ncc_loss(warped, fixed).mean()  # CLEAN: training step, the backward is pending so the earlier output is still valid
        smooth = (flow[:, :, 1:] - flow[:, :, :-1]).pow(2).mean() + (flow[..., 1:] - flow[..., :-1]).pow(2).mean()
        probs = seg.softmax(1)
        dice = 1 - (2 * (probs * fixed_onehot).sum((2, 3)) + 1) / (probs.sum((2, 3)) + fixed_onehot.sum((2, 3)) + 1)
        loss = sim + self.lam * smooth + 0.5 * dice.mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        for group in self.opt.param_groups:
            group["lr"] = self.lr * (1 - it / self.total_steps) ** 0.9  # CLEAN: eager optimizer, neither compiled nor captured
        return loss.detach()


def build(size=(192, 160)):
    net, seg = RegNet(size).cuda(), SegHead().cuda()
    model = torch.compile(net, mode="max-autotune")
    seg_head = torch.compile(seg, mode="max-autotune")
    return RegTrainer(model, seg_head, list(net.parameters()) + list(seg.parameters()))
