"""Queue-length estimation at signalised intersections from loop-detector
occupancy and signal timing, feeding an adaptive signal controller. The model is
compiled once and handed to a trainer that compiles its loss and optimizer step
with the same keyword set.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

COMPILE_KW = dict(mode="max-autotune", dynamic=False)
N_DET, HIST = 16, 30  # detectors per intersection, cycles of history


class QueueNet(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.gru = nn.GRU(N_DET + 2, d, batch_first=True)
        self.head = nn.Linear(d, 4)  # queue (vehicles) per approach
        self.register_buffer("occ_scale", torch.ones(N_DET))

    def forward(self, occ, green_split, cycle_s):
        x = torch.cat([occ / self.occ_scale, green_split, cycle_s / 120.0], -1)
        h, _ = self.gru(x)
        return F.relu(self.head(h[:, -1]))


class Trainer:
    def __init__(self, compiled_model, raw_model, lr=2e-3, wd=1e-4):
        self.model = compiled_model
        self.opt = torch.optim.AdamW(raw_model.parameters(), lr=lr, weight_decay=wd)
        self.loss = torch.compile(self._loss, **COMPILE_KW)
        self.step = torch.compile(self.opt.step, **COMPILE_KW)

    def _loss(self, occ, split, cycle, q_true):
        stuck = np.random.randint(N_DET)  # HAZARD: host-code
        occ = occ.clone()
        occ[..., stuck] = 1.0  # simulate a stuck-on loop
        q = self.model(occ, split, cycle)
        loss = F.smooth_l1_loss(q, q_true)
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            loss = torch.zeros_like(loss)
        return loss

    def fit(self, loader, epochs=20):
        for epoch in range(epochs):
            if epoch == 5:
                for g in self.opt.param_groups:
                    g["weight_decay"] = 0.0  # HAZARD: optimizer
            for occ, split, cycle, q_true in loader:
                loss = self.loss(occ, split, cycle, q_true)
                val = loss.detach().clone()  # CLEAN: cloned before backward and the compiled step
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.step()
            print(f"epoch {epoch:2d}  smooth-L1 {val.item():.3f}")


def recalibrate(model, new_scale):
    """Maintenance crew replaced loops: new per-detector occupancy scale."""
    model.occ_scale = new_scale.cuda()  # HAZARD: static-address


def recalibrate_inplace(model, new_scale):
    model.occ_scale.copy_(new_scale)  # CLEAN: in-place, the buffer keeps its address


def synthetic_loader(n, B=64):
    batches = []
    for _ in range(n):
        occ = np.clip(np.random.beta(2, 5, (B, HIST, N_DET)), 0, 1).astype(np.float32)  # CLEAN: eager NumPy, outside compiled code
        split = np.random.uniform(0.3, 0.7, (B, HIST, 1)).astype(np.float32)
        cycle = np.full((B, HIST, 1), 90.0, np.float32)
        q = (occ.mean(-1)[:, -1:] * 40 * np.ones((1, 4))).astype(np.float32)
        batches.append(tuple(torch.from_numpy(a).cuda() for a in (occ, split, cycle, q)))
    return batches


if __name__ == "__main__":
    raw = QueueNet().cuda()
    model = torch.compile(raw, **COMPILE_KW)
    Trainer(model, raw).fit(synthetic_loader(40))
    occ, split, cycle, _ = synthetic_loader(1)[0]
    with torch.no_grad():
        before = model(occ, split, cycle).clone()
        recalibrate_inplace(raw, torch.full((N_DET,), 1.1, device="cuda"))
        recalibrate(raw, torch.rand(N_DET) * 0.4 + 0.8)
        after = model(occ, split, cycle).clone()
    print("mean queue change:", (after - before).mean().item())
