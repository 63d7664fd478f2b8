"""Item calibration for a national mathematics assessment (2PL item response theory).

Student abilities theta and item discrimination / difficulty are fitted jointly by
maximum a posteriori on the response log. The Gaussian prior on theta starts wide and is
tightened as the calibration settles. Steps are compiled closures built by `build_steps`.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class IRTConfig:
    prior_var: float = 4.0
    lr: float = 0.05
    batch: int = 65536
    epochs: int = 40


class TwoPL(nn.Module):
    def __init__(self, n_students, n_items):
        super().__init__()
        self.theta = nn.Embedding(n_students, 1)
        self.log_a = nn.Embedding(n_items, 1)
        self.b = nn.Embedding(n_items, 1)
        nn.init.zeros_(self.theta.weight), nn.init.zeros_(self.log_a.weight), nn.init.zeros_(self.b.weight)

    def forward(self, student, item):
        a = self.log_a(item).exp().squeeze(-1)
        return a * (self.theta(student).squeeze(-1) - self.b(item).squeeze(-1))


def build_steps(model, opt, cfg):
    @torch.compile(mode="reduce-overhead")
    def loss_step(student, item, correct):
        nll = F.binary_cross_entropy_with_logits(model(student, item), correct)
        prior_var = cfg.prior_var  # HAZARD: python-scalar
        reg = model.theta.weight.pow(2).mean() / (2.0 * prior_var) + 0.5 * model.log_a.weight.pow(2).mean()
        if torch.isnan(nll):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("NaN likelihood: check for empty item columns")
        return nll + reg, nll

    @torch.compile(mode="reduce-overhead")
    def opt_step():
        opt.step()

    return loss_step, opt_step


def calibrate(responses, n_students, n_items, cfg=IRTConfig()):
    model = TwoPL(n_students, n_items).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loss_step, opt_step = build_steps(model, opt, cfg)
    student, item, correct = responses
    n = (student.shape[0] // cfg.batch) * cfg.batch          # drop the ragged tail
    history = []
    for ep in range(cfg.epochs):
        perm = torch.randperm(student.shape[0], device="cuda")[:n].view(-1, cfg.batch)
        for idx in perm:                                        # every batch has cfg.batch rows
            loss, nll = loss_step(student[idx], item[idx], correct[idx])  # CLEAN: fixed batch shape
            history.append(nll.detach().clone())  # CLEAN: cloned before backward and the compiled step
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
        cfg.prior_var = max(1.0, cfg.prior_var * 0.9)
        opt.param_groups[0]["lr"] = cfg.lr * 0.93 ** (ep + 1)  # HAZARD: optimizer
    return model, torch.stack(history)


def item_report(model, names):
    with torch.no_grad():
        a = model.log_a.weight.exp().squeeze(-1).cpu()  # CLEAN: eager read after training
        b = model.b.weight.squeeze(-1).cpu()
    flagged = [(n, round(float(ai), 2), round(float(bi), 2)) for n, ai, bi in zip(names, a, b) if ai < 0.3]
    return flagged


if __name__ == "__main__":
    S, I, R = 200_000, 600, 4_000_000
    responses = (torch.randint(0, S, (R,), device="cuda"), torch.randint(0, I, (R,), device="cuda"),
                 (torch.rand(R, device="cuda") > 0.4).float())
    model, hist = calibrate(responses, S, I)
    print("final nll", hist[-1].item(), item_report(model, [f"M{i:04d}" for i in range(I)])[:5])
