"""Homework 2 (deep generative models course): PixelCNN on binarized MNIST -- sampling.

Sampling needs 784 sequential forward passes, so one "sample the current pixel" step is
captured in a CUDA graph and replayed 784 times per batch.  The current pixel is selected
with a one-hot device mask that is rewritten between replays.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.utils as vutils


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super().__init__(*args, **kwargs)
        kh, kw = self.weight.shape[-2:]
        mask = torch.ones_like(self.weight)
        mask[:, :, kh // 2, kw // 2 + (mask_type == "B"):] = 0
        mask[:, :, kh // 2 + 1:] = 0
        self.register_buffer("mask", mask)

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, padding=self.padding)


class PixelCNN(nn.Module):
    def __init__(self, ch=64, n_layers=7):
        super().__init__()
        layers = [MaskedConv2d("A", 1, ch, 7, padding=3), nn.BatchNorm2d(ch), nn.ReLU(True)]
        for _ in range(n_layers):
            layers += [MaskedConv2d("B", ch, ch, 7, padding=3), nn.BatchNorm2d(ch), nn.ReLU(True)]
        layers += [nn.Conv2d(ch, 1, 1)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class GraphSampler:
    def __init__(self, model, batch=64, temperature=1.0, seed=0):
        self.model = model.eval()
        self.x = torch.zeros(batch, 1, 28, 28, device="cuda")
        self.pos = torch.zeros(1, 1, 28, 28, device="cuda")
        self.temperature = temperature
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
        self.graph = torch.cuda.CUDAGraph()
        self._capture()

    def set_temperature(self, t):
        self.temperature = t

    @torch.no_grad()
    def _step(self):
        logits = self.model(self.x)
        t = self.temperature  # HAZARD: python-scalar
        probs = torch.sigmoid(logits.float() / t)
        draw = torch.bernoulli(probs, generator=self.gen)  # HAZARD: rng
        self.x.copy_(torch.where(self.pos.bool(), draw, self.x))  # CLEAN: the pixel is picked by a device one-hot mask, not by Python ints

    def _capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(self.graph):
                self._step()

    def sample(self):
        self.x.zero_()  # CLEAN: in-place reset of the static canvas
        for i in range(28):
            for j in range(28):
                self.pos.zero_()
                self.pos[..., i, j] = 1.0
                self.graph.replay()
        return self.x


@torch.no_grad()
def eager_sample(model, n=16, temperature=1.0):
    """Reference sampler used to sanity-check the graph version."""
    x = torch.zeros(n, 1, 28, 28, device="cuda")
    for i in range(28):
        for j in range(28):
            p = torch.sigmoid(model(x)[:, :, i, j] / temperature)
            x[:, :, i, j] = torch.bernoulli(p)  # CLEAN: eager reference sampler, no graph involved
    return x


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="pixelcnn_mnist.pt")
    ap.add_argument("--n_batches", type=int, default=4)
    args = ap.parse_args()
    model = PixelCNN().cuda()
    model.load_state_dict(torch.load(args.ckpt))
    sampler = GraphSampler(model, batch=64)
    grids = []
    for temp in (1.0, 0.9, 0.8):
        sampler.set_temperature(temp)
        for _ in range(args.n_batches):
            grids.append(sampler.sample())  # HAZARD: static-address
    vutils.save_image(torch.cat(grids), "pixelcnn_samples.png", nrow=16)
    vutils.save_image(eager_sample(model), "pixelcnn_eager.png", nrow=4)
