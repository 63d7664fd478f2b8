"""Portrait relighting ("Studio light") for a camera app, fine-tuned on light-stage pairs.

The net takes a portrait and 9 second-order spherical-harmonics coefficients of
the target light and predicts a shading layer; an ambient term keeps shadows
from going fully black. The relighting net is graphed with torch
make_graphed_callables for the fine-tuning run.
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# SH basis evaluated on a 16x32 environment grid, loaded from the app assets at start-up
SH_BASIS_NP = np.zeros((9, 16 * 32), np.float32)


class RelightNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU())
        self.light = nn.Linear(9, 64)
        self.dec = nn.Sequential(nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 3, 4, 2, 1))
        self.register_buffer("sh_flip", torch.tensor([1., 1., 1., -1., -1., 1., 1., -1., 1.]))
        self.ambient = 0.3                        # annealed during fine-tuning

    def forward(self, img, sh):
        if random.random() < 0.5:  # HAZARD: host-code
            img, sh = img.flip(-1), sh * self.sh_flip        # mirror augmentation
        basis = torch.from_numpy(SH_BASIS_NP).cuda()  # HAZARD: pinned-memory
        env = F.relu(sh @ basis)
        f = self.enc(img) * (1 + self.light(sh))[:, :, None, None]
        shade = torch.sigmoid(self.dec(f))
        amb = self.ambient  # HAZARD: python-scalar
        return img * (amb + shade) + 0.01 * env.mean(1)[:, None, None, None]


def finetune(pairs, epochs: int = 5, batch: int = 16):
    net = RelightNet().cuda()
    img0 = torch.rand(batch, 3, 256, 256, device="cuda")
    sh0 = torch.rand(batch, 9, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast cache disabled around graphing
        g_net = torch.cuda.make_graphed_callables(net, (img0, sh0))
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    for epoch in range(epochs):
        net.ambient = max(0.05, 0.3 - 0.05 * epoch)
        for img, sh, target in pairs:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = g_net(img, sh=sh)  # HAZARD: api-misuse
            loss = F.l1_loss(out.float(), target) + 0.1 * F.mse_loss(out.float().mean((2, 3)), target.mean((2, 3)))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()  # CLEAN: optimizer and scheduler run eagerly, outside the graphed callable
    net.eval()
    with torch.no_grad():
        preview = g_net(img0, sh0)  # CLEAN: eval mode runs the eager forward, positional args
    return net, preview


def studio_presets():
    key = np.array([0.8, 0.3, 0.6, 0.1, 0, 0, 0, 0, 0], np.float32)
    rim = np.array([0.5, -0.4, 0.1, -0.6, 0.1, 0, 0, 0, 0], np.float32)
    return {"key": torch.from_numpy(key).cuda(), "rim": torch.from_numpy(rim).cuda()}  # CLEAN: preset upload outside any graph


if __name__ == "__main__":
    SH_BASIS_NP[:] = np.random.default_rng(0).standard_normal(SH_BASIS_NP.shape)
    presets = studio_presets()
    data = [(torch.rand(16, 3, 256, 256, device="cuda"), presets["key"].expand(16, 9).contiguous(),
             torch.rand(16, 3, 256, 256, device="cuda")) for _ in range(8)]
    finetune(data)
