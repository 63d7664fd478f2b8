"""Minimal Gaussian splatting trainer: isotropic Gaussians, dense PyTorch rasterizer for small images.

The whole optimisation step (render, loss, backward, capturable Adam) is replayed from one CUDA graph.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

C0, C1 = 0.28209479, 0.48860251


def sh_color(sh, dirs, degree):
    col = C0 * sh[:, 0]
    if degree > 0:
        x, y, z = dirs.unbind(-1)
        col = col - C1 * y[:, None] * sh[:, 1] + C1 * z[:, None] * sh[:, 2] - C1 * x[:, None] * sh[:, 3]
    return (col + 0.5).clamp(min=0)


def render(means, log_scale, opac, sh, view, K, H, W, degree, bg):
    cam = means @ view[:3, :3].t() + view[:3, 3]
    z = cam[:, 2:3].clamp(min=0.1)
    uv = cam[:, :2] / z * K.diagonal()[:2] + K[:2, 2]
    sigma = torch.exp(log_scale) * K[0, 0] / z
    ys, xs = torch.meshgrid(torch.arange(H, device=means.device), torch.arange(W, device=means.device), indexing="ij")
    pix = torch.stack([xs, ys], -1).reshape(-1, 2).float()
    d2 = ((pix[None] - uv[:, None]) ** 2).sum(-1) / sigma ** 2
    alpha = (torch.sigmoid(opac) * torch.exp(-0.5 * d2)).clamp(max=0.99)
    order = z.squeeze(-1).argsort()
    alpha = alpha[order]  # CLEAN: gather with a device index tensor, shape unchanged
    T = torch.cumprod(torch.cat([torch.ones_like(alpha[:1]), 1 - alpha[:-1]], 0), 0)
    cam_center = -view[:3, :3].t() @ view[:3, 3]
    rgb = sh_color(sh[order], F.normalize(means[order] - cam_center, dim=-1), degree)
    w = T * alpha
    img = (w[..., None] * rgb[:, None]).sum(0) + (1 - w.sum(0))[..., None] * bg
    return img.view(H, W, 3)


class SplatTrainer:
    def __init__(self, n=20_000, H=128, W=128, device="cuda"):
        self.means = nn.Parameter(torch.randn(n, 3, device=device))
        self.log_scale = nn.Parameter(torch.full((n, 1), -3.0, device=device))
        self.opac = nn.Parameter(torch.zeros(n, 1, device=device))
        self.sh = nn.Parameter(torch.zeros(n, 4, 3, device=device))
        self.opt = torch.optim.Adam([{"params": [self.means], "lr": 1.6e-4}, {"params": [self.log_scale], "lr": 5e-3},
                                     {"params": [self.opac], "lr": 5e-2}, {"params": [self.sh], "lr": 2.5e-3}],
                                    eps=1e-15, capturable=True)
        self.H, self.W = H, W
        self.active_sh_degree = 0
        self.lambda_l1 = 0.8
        self.bg = torch.zeros(3, device=device)
        self.static_gt = torch.zeros(H, W, 3, device=device)
        self.static_view = torch.eye(4, device=device)
        self.K = torch.tensor([[100.0, 0, W / 2], [0, 100.0, H / 2], [0, 0, 1]], device=device)
        self.grad_accum = torch.zeros(n, device=device)
        self.exposure_np = np.ones(3, dtype=np.float32)  # per-image colour gain from the appearance table

    def step(self):
        sh_degree = self.active_sh_degree  # HAZARD: python-scalar
        exposure = torch.from_numpy(self.exposure_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        img = render(self.means, self.log_scale, self.opac, self.sh, self.static_view, self.K,
                     self.H, self.W, sh_degree, self.bg) * exposure
        l1 = (img - self.static_gt).abs().mean()
        loss = self.lambda_l1 * l1 + (1 - self.lambda_l1) * F.mse_loss(img, self.static_gt)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.grad_accum += self.means.grad.norm(dim=-1)  # CLEAN: densification statistics accumulated on the device
        self.opt.step()  # CLEAN: Adam with capturable=True
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.loss = self.step()

    def train(self, views, iters=30_000):
        self.capture()
        for it in range(iters):
            img_np, view_np, exp_np = views[it % len(views)]
            self.static_gt.copy_(torch.from_numpy(img_np))
            self.static_view.copy_(torch.from_numpy(view_np))
            self.exposure_np[:] = exp_np
            self.graph.replay()
            self.opt.param_groups[0]["lr"] = 1.6e-4 * 0.01 ** (it / iters)  # HAZARD: optimizer
            if it % 1000 == 999:
                self.active_sh_degree = min(self.active_sh_degree + 1, 1)
            if it % 3000 == 2999:
                self.reset_opacity()

    @torch.no_grad()
    def reset_opacity(self):
        self.opac = nn.Parameter(torch.full_like(self.opac, -4.6))  # HAZARD: static-address
