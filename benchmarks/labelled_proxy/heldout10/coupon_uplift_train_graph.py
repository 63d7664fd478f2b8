"""Uplift model for a re-engagement coupon campaign (DragonNet-style).

Shared trunk, two outcome heads (treated / control) and a propensity head,
trained on logged data from a randomised campaign. The full training step
(feature dropout, three losses, backward, Adam) is captured once per run and
replayed over every batch of every epoch.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

B, D = 4096, 96


class DragonNet(nn.Module):
    def __init__(self, d=200):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(D, d), nn.ELU(), nn.Linear(d, d), nn.ELU())
        self.y0 = nn.Sequential(nn.Linear(d, 100), nn.ELU(), nn.Linear(100, 1))
        self.y1 = nn.Sequential(nn.Linear(d, 100), nn.ELU(), nn.Linear(100, 1))
        self.e = nn.Linear(d, 1)

    def forward(self, x):
        z = self.trunk(x)
        return self.y0(z).squeeze(-1), self.y1(z).squeeze(-1), self.e(z).squeeze(-1)


class UpliftTrainer:
    def __init__(self, model, epochs, device="cuda", seed=7):
        self.model = model.to(device)
        self.seed, self.epoch = seed, 0
        self.alpha = 1.0  # propensity-loss weight, annealed per epoch
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, capturable=True)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs)
        self.x = torch.zeros(B, D, device=device)
        self.t = torch.zeros(B, device=device)
        self.y = torch.zeros(B, device=device)
        self.beta = torch.ones((), device=device)  # targeted-regularisation weight
        self.metric_stream = torch.cuda.Stream()
        self.stats = torch.zeros(2, device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        torch.cuda.manual_seed(self.seed + self.epoch)  # HAZARD: rng
        keep = torch.bernoulli(torch.full_like(self.x, 0.9))  # CLEAN: default CUDA generator, capturable
        y0, y1, e = self.model(self.x * keep / 0.9)
        y_hat = torch.where(self.t > 0, y1, y0)
        loss_y = F.binary_cross_entropy_with_logits(y_hat, self.y)
        loss_e = F.binary_cross_entropy_with_logits(e, self.t)
        alpha = self.alpha  # HAZARD: python-scalar
        loss = loss_y + alpha * loss_e + 1e-3 * self.beta * (y1 - y0).pow(2).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: Adam built with capturable=True
        with torch.cuda.stream(self.metric_stream):  # HAZARD: stream
            uplift = (torch.sigmoid(y1) - torch.sigmoid(y0)).mean()
            self.stats.mul_(0.99).add_(0.01 * torch.stack([uplift.detach(), loss.detach()]))
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader, epochs):
        first = next(iter(loader))
        for dst, src in zip((self.x, self.t, self.y), first):
            dst.copy_(src)
        self.capture()
        for self.epoch in range(epochs):
            for x, t, y in loader:
                self.x.copy_(x)
                self.t.copy_(t)
                self.y.copy_(y)
                self.graph.replay()
            self.alpha = max(0.1, 1.0 - 0.1 * self.epoch)
            self.beta.fill_(min(1.0, 0.2 * (self.epoch + 1)))  # CLEAN: device scalar updated in place, read by the graph
            self.sched.step()  # HAZARD: optimizer
            print(f"epoch {self.epoch}: loss {self.static_loss.item():.4f} uplift {self.stats[0].item():.4f}")


if __name__ == "__main__":
    data = torch.load("coupon_rct_2024q2.pt")
    loader = torch.utils.data.DataLoader(data, batch_size=B, shuffle=True, drop_last=True, pin_memory=True)
    UpliftTrainer(DragonNet(), epochs=30).fit(loader, epochs=30)
