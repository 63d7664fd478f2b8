"""CS231n Assignment 3 - NetworkVisualization: class model visualization (SqueezeNet).

My extension for the extra-credit part: one gradient-ascent iteration is captured with
CUDAGraph.capture_begin/capture_end and then replayed, ~4x faster for 1000 iterations.
"""
import random

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
import torchvision

SQUEEZENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
SQUEEZENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def deprocess(img):
    x = img[0].cpu().numpy().transpose(1, 2, 0)  # CLEAN: host copy, only called between replays
    x = x * SQUEEZENET_STD + SQUEEZENET_MEAN
    return np.clip(x, 0, 1)


def gaussian_kernel(sigma=0.5, size=5):
    ax = torch.arange(size, dtype=torch.float32) - size // 2
    k = torch.exp(-ax ** 2 / (2 * sigma ** 2))
    k = k[:, None] * k[None, :]
    return (k / k.sum()).expand(3, 1, size, size).contiguous()


class ClassVisualizer:
    def __init__(self, model, target_y, l2_reg=1e-3, learning_rate=25, blur_every=10, max_jitter=16):
        self.model = model
        self.target_y = target_y                    # an int, or a list of classes to blend
        self.l2_reg, self.lr = l2_reg, learning_rate
        self.blur_every, self.max_jitter = blur_every, max_jitter
        self.blur_k = gaussian_kernel().cuda()
        self.img = torch.randn(1, 3, 224, 224, device="cuda").mul_(1.0).requires_grad_()
        self.t = 0
        self.graph = None

    def _iteration(self):
        ox, oy = random.randint(0, self.max_jitter), random.randint(0, self.max_jitter)  # HAZARD: host-code
        img = self.img
        img.data.copy_(torch.roll(img.data, shifts=(ox, oy), dims=(2, 3)))
        scores = self.model(img)
        target_score = scores[0, self.target_y].sum() - self.l2_reg * img.norm() ** 2  # HAZARD: host-sync
        target_score.backward()
        img.data += self.lr * img.grad / img.grad.norm()
        img.grad.zero_()
        img.data.copy_(torch.roll(img.data, shifts=(-ox, -oy), dims=(2, 3)))
        for c in range(3):
            lo = float(-SQUEEZENET_MEAN[c] / SQUEEZENET_STD[c])  # CLEAN: float() of NumPy constants, not of a tensor
            hi = float((1.0 - SQUEEZENET_MEAN[c]) / SQUEEZENET_STD[c])
            img.data[:, c].clamp_(min=lo, max=hi)
        if self.t % self.blur_every == 0:  # HAZARD: python-scalar
            img.data.copy_(F.conv2d(img.data, self.blur_k, padding=2, groups=3))  # CLEAN: blur as a depthwise conv on the GPU (the notebook used scipy on .cpu())

    def capture(self):
        for _ in range(3):                          # warm-up: cudnn autotune, img.grad allocation
            self._iteration()
        torch.cuda.synchronize()  # CLEAN: synchronize before capture_begin, not inside the capture
        self.graph = torch.cuda.CUDAGraph()
        self.graph.capture_begin()  # HAZARD: stream
        self._iteration()
        self.graph.capture_end()

    def run(self, num_iterations=1000, show_every=250):
        for t in range(num_iterations):
            self.t = t
            if self.graph is None:
                self.capture()
            else:
                self.graph.replay()
            if t % show_every == 0 or t == num_iterations - 1:
                plt.imshow(deprocess(self.img.data.clone()))
                plt.title(f"iteration {t + 1}")
                plt.axis("off")
                plt.savefig(f"classvis_{t:04d}.png")
        return deprocess(self.img.data)


if __name__ == "__main__":
    model = torchvision.models.squeezenet1_1(weights="IMAGENET1K_V1").cuda().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    viz = ClassVisualizer(model, target_y=[76, 130])      # tarantula + flamingo blend
    out = viz.run(num_iterations=1000)
    plt.imsave("classvis_final.png", out)
