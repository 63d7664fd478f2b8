"""Diffusion Policy (CNN variant) for a 7-DoF arm: DDIM denoising of a 16-step action chunk.

The policy server ran at ~9 Hz; the assistant captured the whole denoising loop
("one graph replay per control tick instead of ~200 kernel launches per step").
"""
import warnings

import numpy as np
import torch
import torch.nn as nn


class FiLMBlock(nn.Module):
    def __init__(self, cin, cout, cond_dim):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(cin, cout, 5, padding=2), nn.GroupNorm(8, cout), nn.Mish())
        self.film = nn.Linear(cond_dim, 2 * cout)

    def forward(self, x, cond):
        scale, bias = self.film(cond).unsqueeze(-1).chunk(2, dim=1)
        return self.conv(x) * (1 + scale) + bias


class CondUnet1D(nn.Module):
    def __init__(self, act_dim=7, obs_dim=512 + 9, hidden=256):
        super().__init__()
        self.t_emb = nn.Sequential(nn.Linear(1, 128), nn.Mish(), nn.Linear(128, 128))
        cond = obs_dim + 128
        self.blocks = nn.ModuleList([FiLMBlock(act_dim, hidden, cond), FiLMBlock(hidden, hidden, cond), FiLMBlock(hidden, hidden, cond)])
        self.out = nn.Conv1d(hidden, act_dim, 1)

    def forward(self, x, t, obs_cond):
        cond = torch.cat([obs_cond, self.t_emb(t.view(-1, 1).float() / 100)], dim=-1)
        h = x.transpose(1, 2)
        for blk in self.blocks:
            h = blk(h, cond)
        return self.out(h).transpose(1, 2)


class GraphedPolicy:
    def __init__(self, obs_encoder, unet, stats, horizon=16, act_dim=7, n_train=100, n_infer=16, seed=0):
        self.enc, self.unet = obs_encoder.eval(), unet.eval()
        self.stats = stats  # dict of numpy arrays from the dataset normaliser
        betas = torch.linspace(1e-4, 0.02, n_train, device="cuda")
        self.alpha_bar = torch.cumprod(1 - betas, 0)  # CLEAN: schedule table built on the device
        self.set_inference_steps(n_infer, n_train)
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.s_img = torch.zeros(1, 2, 3, 96, 96, device="cuda")
        self.s_state = torch.zeros(1, 9, device="cuda")
        self.shape = (1, horizon, act_dim)
        self.graph = None

    def set_inference_steps(self, n, n_train=100):
        self.timesteps = list(range(n_train - 1, -1, -n_train // n))  # "fast mode" switches to 8 steps

    def set_fast_mode(self, on: bool):
        self.set_inference_steps(8 if on else 16)  # called by the operator UI while the robot runs

    @torch.no_grad()
    def _denoise(self):
        cond = torch.cat([self.enc(self.s_img.flatten(0, 1)).view(1, -1)[:, :512], self.s_state], -1)
        x = torch.randn(self.shape, device="cuda", generator=self.gen)  # HAZARD: rng
        ts = self.timesteps  # HAZARD: python-scalar
        for i, t in enumerate(ts):
            t_prev = ts[i + 1] if i + 1 < len(ts) else -1
            eps = self.unet(x, torch.full((1,), t, device="cuda"), cond)
            ab, ab_prev = self.alpha_bar[t], (self.alpha_bar[t_prev] if t_prev >= 0 else torch.ones((), device="cuda"))
            x0 = (x - (1 - ab).sqrt() * eps) / ab.sqrt()
            x = ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps
        if (x.abs() > 1.5).any():  # HAZARD: dynamic-control-flow
            warnings.warn("action chunk outside the normalised range")
        x = x.clamp(-1, 1)  # CLEAN: clamp instead of a host-side check
        lo, hi = (torch.as_tensor(self.stats[k], device="cuda") for k in ("action_min", "action_max"))  # HAZARD: pinned-memory
        return (x + 1) / 2 * (hi - lo) + lo

    def capture(self):
        for _ in range(3):
            self._denoise()  # warm-up
        torch.cuda.synchronize()  # CLEAN: sync before capture, outside the graph
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.s_action = self._denoise()

    def act(self, images: np.ndarray, state: np.ndarray):
        if self.graph is None:
            self.capture()
        self.s_img.copy_(torch.from_numpy(images).pin_memory(), non_blocking=True)  # CLEAN: pinned copy into the static input
        self.s_state.copy_(torch.from_numpy(state).pin_memory(), non_blocking=True)
        self.graph.replay()
        return self.s_action[0, :8].cpu().numpy()  # CLEAN: host read after replay
