"""Creative-fatigue model for frequency capping in a demand-side platform.

P(click | user, creative, n prior exposures) = base CTR x decay[creative]^n.
The per-creative decay is a buffer refit nightly from campaign logs; the rest
is trained online. Model, calibration check and optimizer step are compiled
with backend="cudagraphs".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_CREATIVES, N_USER_FEAT, D = 5000, 20, 32


class FatigueModel(nn.Module):
    def __init__(self, cap: int = 12):
        super().__init__()
        self.creative = nn.Embedding(N_CREATIVES, D)
        self.user = nn.Linear(N_USER_FEAT, D)
        self.register_buffer("decay", torch.full((N_CREATIVES,), 0.85))
        self.cap = cap

    def forward(self, user_x, creative_id, exposures):
        if exposures.max() > self.cap:  # HAZARD: dynamic-control-flow
            exposures = exposures.clamp(max=self.cap)
        base = (self.user(user_x) * self.creative(creative_id)).sum(-1)
        return torch.sigmoid(base) * self.decay[creative_id].pow(exposures.float())


def calibration_gap(p, clicked):
    gap = (p.mean() - clicked.mean()).abs()
    return gap.item()  # HAZARD: host-sync


class FatigueTrainer:
    def __init__(self, base_lr: float = 2e-3):
        self.model = FatigueModel().cuda()
        self.base_lr = base_lr
        self.opt = torch.optim.Adam(self.model.parameters(), lr=base_lr)
        self.fwd = torch.compile(self.model, backend="cudagraphs")
        self.step = torch.compile(self.opt.step, backend="cudagraphs")
        self.gap = torch.compile(calibration_gap, backend="cudagraphs")

    def train_batch(self, user_x, creative_id, exposures, clicked):
        p = self.fwd(user_x, creative_id, exposures)
        loss = F.binary_cross_entropy(p.clamp(1e-6, 1 - 1e-6), clicked)
        gap = self.gap(p.detach(), clicked)
        loss.backward()
        self.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach(), gap

    def warm_restart(self, cycle: int):
        for g in self.opt.param_groups:
            g["lr"] = self.base_lr / (1 + cycle)  # HAZARD: optimizer

    @torch.no_grad()
    def nightly_refit(self, fitted_decay: torch.Tensor):
        self.model.decay = fitted_decay.clamp(0.5, 1.0).cuda()  # HAZARD: static-address

    @torch.no_grad()
    def nightly_refit_inplace(self, fitted_decay: torch.Tensor):
        self.model.decay.copy_(fitted_decay.clamp(0.5, 1.0))  # CLEAN: copy_ keeps the buffer address


def frequency_cap(trainer: FatigueTrainer, user_x, creative_id, exposures, min_ctr: float = 2e-3):
    """Serve-time decision: stop showing a creative once predicted CTR falls below min_ctr."""
    with torch.no_grad():
        p = trainer.fwd(user_x, creative_id, exposures).clone()  # CLEAN: cloned right after the call
    return torch.where(p < min_ctr, torch.zeros_like(p), p)


if __name__ == "__main__":
    tr = FatigueTrainer()
    for cycle in range(3):
        for _ in range(100):
            b = 8192
            batch = (torch.randn(b, N_USER_FEAT, device="cuda"), torch.randint(0, N_CREATIVES, (b,), device="cuda"),
                     torch.randint(0, 30, (b,), device="cuda"), torch.rand(b, device="cuda").lt(0.01).float())
            loss, gap = tr.train_batch(*batch)
        tr.warm_restart(cycle + 1)
        tr.nightly_refit(torch.rand(N_CREATIVES) * 0.5 + 0.5)
    print(loss, gap)
