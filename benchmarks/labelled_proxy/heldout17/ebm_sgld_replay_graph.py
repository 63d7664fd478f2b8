"""Energy-based image model trained with persistent SGLD chains (IGEBM / JEM style).

Negatives come from a replay buffer on the GPU; a few of them are re-initialised from
uniform noise every step. Buffer sampling, the Langevin chain, the contrastive loss and the
Adam update are one captured training step.
"""
import numpy as np
import torch
import torch.nn as nn


class EnergyNet(nn.Module):
    def __init__(self, ch=128):
        super().__init__()
        act = nn.LeakyReLU(0.2)
        self.f = nn.Sequential(
            nn.Conv2d(3, ch, 3, padding=1), act,
            nn.Conv2d(ch, ch, 4, 2, 1), act,
            nn.Conv2d(ch, 2 * ch, 4, 2, 1), act,
            nn.Conv2d(2 * ch, 2 * ch, 4, 2, 1), act,
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * ch, 1))

    def forward(self, x):
        return self.f(x).squeeze(-1)


class SGLDTrainer:
    def __init__(self, model, buffer_size=10000, batch=128, k_steps=20, reinit_prob=0.05):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.0, 0.999), capturable=True)
        self.buffer = torch.rand(buffer_size, 3, 32, 32, device="cuda") * 2 - 1
        self.x_pos = torch.zeros(batch, 3, 32, 32, device="cuda")
        self.idx = torch.zeros(batch, dtype=torch.long, device="cuda")
        self.k_steps, self.reinit_prob = k_steps, reinit_prob
        self.sgld_lr, self.sgld_noise = 1.0, 0.01
        self.stats = {}
        self.graph = torch.cuda.CUDAGraph()

    def _langevin(self, x):
        step = self.sgld_lr  # HAZARD: python-scalar
        for _ in range(self.k_steps):  # CLEAN: chain length fixed at construction
            x = x.detach().requires_grad_(True)
            energy = self.model(x).sum()
            (grad,) = torch.autograd.grad(energy, x)
            x = x - step * grad + self.sgld_noise * torch.randn_like(x)  # CLEAN: default CUDA generator
        return x.detach().clamp(-1.0, 1.0)

    def _step(self):
        self.idx.random_(0, self.buffer.shape[0])
        x_neg = self.buffer.index_select(0, self.idx)  # CLEAN: gather with a CUDA index tensor
        reinit = torch.rand(self.idx.shape[0], device="cuda") < self.reinit_prob
        fresh = torch.rand_like(x_neg) * 2 - 1
        x_neg = torch.where(reinit.view(-1, 1, 1, 1), fresh, x_neg)  # CLEAN: torch.where, shape stays fixed
        x_neg = self._langevin(x_neg)
        self.buffer.index_copy_(0, self.idx, x_neg)
        x_pos = self.x_pos
        if np.random.rand() < 0.5:  # HAZARD: host-code
            x_pos = x_pos.flip(-1)
        e_pos, e_neg = self.model(x_pos), self.model(x_neg)
        loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos.pow(2).mean() + e_neg.pow(2).mean())
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()
        self.stats["fresh_energy"] = e_neg.detach()[reinit].mean()  # HAZARD: dynamic-shape
        return loss.detach()

    def capture(self, warmup=3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
                for _ in range(warmup):
                    self._step()
                with torch.cuda.graph(self.graph, stream=side):
                    self.loss = self._step()
        torch.cuda.current_stream().wait_stream(side)

    def fit(self, loader, epochs):
        self.capture()
        history = []
        for epoch in range(epochs):
            self.sgld_lr = max(0.1, 0.8 ** epoch)
            for x, _ in loader:
                self.x_pos.copy_(x.cuda(non_blocking=True))  # CLEAN: host-to-device copy outside the capture
                self.graph.replay()
            history.append(self.loss.item())
        return history
