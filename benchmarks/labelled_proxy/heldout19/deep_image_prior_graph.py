"""Deep Image Prior -- denoising (Ulyanov, Vedaldi, Lempitsky, CVPR 2018).

Notebook from my course project turned into a script.  3000 tiny Adam steps on a single
image, so the closure is captured once in a CUDA graph and replayed.

    python deep_image_prior_graph.py data/denoising/F16_GT.png
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

sigma = 25
num_iter = 3000
LR = 0.01
reg_noise_std = 1.0 / 30.0
exp_weight = 0.99
show_every = 100


def pil_to_np(path):
    img = Image.open(path).convert("RGB")
    w, h = img.size
    img = img.crop((0, 0, w - w % 32, h - h % 32))
    return np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 255.0


def np_to_torch(a):
    return torch.from_numpy(a)[None]


def psnr(a, b):
    return 10 * np.log10(1.0 / np.mean((a - b) ** 2))


def block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, padding_mode="reflect"),
                         nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, inplace=True))


class SkipNet(nn.Module):
    def __init__(self, cin=32, ch=128, skip=4, depth=4):
        super().__init__()
        self.down = nn.ModuleList([nn.Sequential(block(cin if i == 0 else ch, ch, 2), block(ch, ch)) for i in range(depth)])
        self.skip = nn.ModuleList([block(cin if i == 0 else ch, skip) for i in range(depth)])
        self.up = nn.ModuleList([nn.Sequential(nn.BatchNorm2d(ch + skip), block(ch + skip, ch), block(ch, ch))
                                 for _ in range(depth)])
        self.out = nn.Conv2d(ch, 3, 1)

    def forward(self, x):
        skips = []
        for d, s in zip(self.down, self.skip):
            skips.append(s(x))
            x = d(x)
        for u, s in zip(self.up, reversed(skips)):
            x = F.interpolate(x, size=s.shape[-2:], mode="bilinear", align_corners=False)
            x = u(torch.cat([x, s], 1))
        return torch.sigmoid(self.out(x))


img_np = pil_to_np(sys.argv[1])
img_noisy_np = np.clip(img_np + np.random.normal(scale=sigma / 255.0, size=img_np.shape), 0, 1).astype(np.float32)
C, H, W = img_np.shape

net = SkipNet().cuda()
net_input_saved = (torch.rand(1, 32, H, W) * 0.1).cuda()
noise = net_input_saved.clone()
out_avg = torch.zeros(1, 3, H, W, device="cuda")
optimizer = torch.optim.Adam(net.parameters(), lr=LR, capturable=True)  # CLEAN: capturable=True, Adam state stays on the GPU
psnr_noisy_hist = []


def closure():
    global out_avg
    optimizer.zero_grad(set_to_none=True)
    noise.normal_()  # CLEAN: default CUDA generator, fresh noise on every replay
    net_input = net_input_saved + noise * reg_noise_std
    out = net(net_input)
    img_noisy_torch = np_to_torch(img_noisy_np).cuda()  # HAZARD: pinned-memory
    total_loss = F.mse_loss(out, img_noisy_torch)
    total_loss.backward()
    out_avg = out_avg * exp_weight + out.detach() * (1 - exp_weight)  # HAZARD: static-address
    psnr_noisy_hist.append(psnr(img_noisy_np, out.detach().cpu().numpy()[0]))  # HAZARD: host-sync
    optimizer.step()
    torch.cuda.empty_cache()  # HAZARD: memory
    return out


side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        closure()
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_out = closure()

for i in range(num_iter):
    graph.replay()
    if i % show_every == 0:
        out_np = static_out.detach().cpu().numpy()[0]  # CLEAN: host copy after the replay, outside the graph
        print(f"Iteration {i:05d}  PSNR_noisy {psnr(img_noisy_np, out_np):.2f}  PSNR_gt {psnr(img_np, out_np):.2f}")

final = out_avg.clamp(0, 1).cpu().numpy()[0]
Image.fromarray((final.transpose(1, 2, 0) * 255).astype(np.uint8)).save("dip_denoised.png")
