"""Line-art colourisation with colour hints (PaintsChainer port) for the comic studio.

Originally Chainer (`chainer.training.StandardUpdater`, `F.concat`, `cuda.to_gpu`); the
U-Net generator is now graphed with torch's make_graphed_callables for training (the
discriminator stays eager). Artists' colour hints are randomly dropped.
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def to_gpu(x):                                   # chainer.cuda.to_gpu habit
    return torch.from_numpy(np.asarray(x, dtype=np.float32)).cuda()


class UNetGen(nn.Module):
    def __init__(self, ch=32, hint_drop=0.3):
        super().__init__()
        self.hint_drop = hint_drop
        self.e = nn.ModuleList([nn.Conv2d(4 + 1, ch, 3, 1, 1), nn.Conv2d(ch, 2 * ch, 4, 2, 1),
                                nn.Conv2d(2 * ch, 4 * ch, 4, 2, 1)])
        self.d = nn.ModuleList([nn.ConvTranspose2d(4 * ch, 2 * ch, 4, 2, 1),
                                nn.ConvTranspose2d(4 * ch, ch, 4, 2, 1), nn.Conv2d(2 * ch, 3, 3, 1, 1)])

    def forward(self, line, hint):
        if random.random() < self.hint_drop:  # HAZARD: host-code
            hint = torch.zeros_like(hint)
        keep = (torch.rand_like(hint[:, :1]) > 0.5).float()  # CLEAN: default-generator CUDA RNG is captured
        x, skips = torch.cat([line, hint * keep], 1), []
        for conv in self.e:
            x = F.leaky_relu(conv(x), 0.2)
            skips.append(x)
        for i, conv in enumerate(self.d):
            x = conv(x if i == 0 else torch.cat([x, skips[-1 - i]], 1))
            x = torch.tanh(x) if i == len(self.d) - 1 else F.relu(x)
        return x


class Disc(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(4, ch, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(ch, 2 * ch, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(2 * ch, 1, 3, 1, 1))

    def forward(self, line, rgb):
        return self.net(torch.cat([line, rgb], 1))


class Updater:
    def __init__(self, gen, dis, batch=8, size=256):
        self.gen, self.dis = gen.cuda(), dis.cuda()
        self.feat_norms = []
        self.gen.register_forward_hook(lambda m, i, o: self.feat_norms.append(o.detach()))  # HAZARD: api-misuse
        line = torch.randn(batch, 1, size, size, device="cuda")
        hint = torch.randn(batch, 4, size, size, device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.g_graphed = torch.cuda.make_graphed_callables(self.gen, (line, hint))
        self.gen.register_forward_pre_hook(lambda m, args: None)  # CLEAN: hook added after graphing is allowed
        self.opt_g = torch.optim.Adam(self.gen.parameters(), 2e-4, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.dis.parameters(), 2e-4, betas=(0.5, 0.999))

    def update(self, batch):
        line, hint, real = (to_gpu(b) for b in batch)  # CLEAN: eager uploads before the graphed calls
        fake = self.g_graphed(line, hint=hint)  # HAZARD: api-misuse
        d_fake = self.dis(line, fake)
        loss_g = F.softplus(-d_fake).mean() + 10.0 * F.l1_loss(fake, real)
        self.opt_g.zero_grad()
        loss_g.backward()
        self.opt_g.step()  # CLEAN: eager optimizer step, outside the graphs
        d_real = self.dis(line, real)
        d_fake = self.dis(line, fake.detach())
        loss_d = F.softplus(-d_real).mean() + F.softplus(d_fake).mean()
        self.opt_d.zero_grad()
        loss_d.backward()
        self.opt_d.step()
        return {"loss_gen": loss_g.item(), "loss_dis": loss_d.item()}
