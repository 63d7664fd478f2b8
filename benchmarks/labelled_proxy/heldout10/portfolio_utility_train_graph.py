"""End-to-end portfolio construction: features -> weights, trained on realised returns.

The network maps cross-sectional asset features to long-only weights; the loss is
the negative mean-variance utility of next-month portfolio returns, a turnover cost
against the previous weights and a covariance shrunk towards a factor-model target.
The whole training step (forward, backward, clip, optimizer) is captured once.
"""
import numpy as np
import torch
import torch.nn as nn

N_ASSETS, N_FEAT, N_DATES = 500, 32, 64


class WeightNet(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(N_FEAT, d), nn.GELU(), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))

    def forward(self, feats):  # (D, N, F) -> (D, N)
        return torch.softmax(self.body(feats).squeeze(-1), dim=-1)


class PortfolioTrainer:
    def __init__(self, model, target_cov_np, device="cuda"):
        self.model = model.to(device)
        self.device = device
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=1e-4)
        self.risk_aversion = 5.0
        self.target_cov_np = target_cov_np.astype(np.float32)  # factor-model covariance, refreshed monthly
        self.cost_bps = torch.full((), 10.0, device=device)
        self.feats = torch.zeros(N_DATES, N_ASSETS, N_FEAT, device=device)
        self.fwd_ret = torch.zeros(N_DATES, N_ASSETS, device=device)
        self.prev_w = torch.full((N_DATES, N_ASSETS), 1.0 / N_ASSETS, device=device)
        self.last_turnover = 0.0
        self.graph = torch.cuda.CUDAGraph()
        self.static_loss = None

    def set_risk_profile(self, profile):
        self.risk_aversion = {"conservative": 10.0, "balanced": 5.0, "aggressive": 2.0}[profile]

    def _loss(self):
        w = self.model(self.feats)
        port = (w * self.fwd_ret).sum(-1)
        centred = self.fwd_ret - self.fwd_ret.mean(0, keepdim=True)
        sample_cov = centred.T @ centred / (N_DATES - 1)
        target = torch.from_numpy(self.target_cov_np).to(self.device, non_blocking=True)  # HAZARD: pinned-memory
        cov = 0.7 * sample_cov + 0.3 * target
        var = torch.einsum("dn,nm,dm->d", w, cov, w)
        gamma = self.risk_aversion  # HAZARD: python-scalar
        turnover = (w - self.prev_w).abs().sum(-1)
        self.last_turnover = float(turnover.mean())  # HAZARD: host-sync
        cost = self.cost_bps * 1e-4 * turnover  # CLEAN: cost rate is a device tensor, updated in place between replays
        return -(port - 0.5 * gamma * var - cost).mean()

    def _step(self):
        self.opt.zero_grad(set_to_none=False)
        loss = self._loss()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clip_grad_norm_ without error_if_nonfinite has no host sync
        self.opt.step()  # HAZARD: optimizer
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(self.graph):
                self.static_loss = self._step()

    def fit(self, loader, epochs):
        self.capture()
        for epoch in range(epochs):
            if epoch == 10:
                self.set_risk_profile("conservative")
            for feats, fwd_ret, prev_w in loader:
                self.feats.copy_(feats)
                self.fwd_ret.copy_(fwd_ret)
                self.prev_w.copy_(prev_w)  # CLEAN: copy_ into the captured input
                self.graph.replay()
            self.cost_bps.fill_(10.0 + 0.5 * epoch)
            print(f"epoch {epoch} utility loss {self.static_loss.item():.5f}")  # CLEAN: host read after the replays, outside the graph


if __name__ == "__main__":
    target = np.load("barra_cov_500.npy")
    trainer = PortfolioTrainer(WeightNet(), target)
    loader = torch.load("monthly_panels.pt")
    trainer.fit(loader, epochs=40)
