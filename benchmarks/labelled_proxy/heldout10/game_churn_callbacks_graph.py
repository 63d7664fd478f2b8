"""Churn prediction for a mobile puzzle game (no session in the next 7 days).

Input: 14 days of daily activity features per player (sessions, levels beaten,
boosters bought, ads watched, ...). The trainer captures the whole training step
(forward, loss, backward, clip, AdamW) in one CUDA graph and fires callbacks
from inside the step, so the callbacks are recorded with it.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, FEAT = 2048, 14, 20


class ChurnNet(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.gru = nn.GRU(FEAT, d, batch_first=True)
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.out(h[:, -1]).squeeze(-1)


class Callback:
    def on_step_begin(self, trainer): ...
    def on_step_end(self, trainer, loss, logits): ...


class FeatureDropout(Callback):
    def __init__(self, p=0.1, seed=0):
        self.p = p
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def on_step_begin(self, trainer):
        mask = torch.rand(trainer.x.shape, device=trainer.x.device, generator=self.gen) > self.p  # HAZARD: rng
        trainer.x_in.copy_(trainer.x * mask)


class EMACallback(Callback):
    def __init__(self, model, decay=0.999):
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay

    def on_step_end(self, trainer, loss, logits):
        for s, p in zip(self.shadow, trainer.model.parameters()):
            s.lerp_(p.detach(), 1 - self.decay)  # CLEAN: in-place device EMA, replayed every step


class SegmentLogger(Callback):
    """Loss per spend segment (minnows / dolphins / whales) for the live-ops dashboard."""

    def __init__(self):
        self.rows, self.players_seen = [], 0

    def on_step_end(self, trainer, loss, logits):
        per_player = F.binary_cross_entropy_with_logits(logits, trainer.y, reduction="none")
        per_seg = torch.zeros(3, device=logits.device).scatter_add_(0, trainer.segment, per_player)
        self.rows.append(per_seg.tolist())  # HAZARD: host-sync
        self.players_seen += B  # HAZARD: host-code


class Trainer:
    def __init__(self, model, callbacks, device="cuda"):
        self.model = model.to(device)
        self.callbacks = callbacks
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01)
        self.x = torch.zeros(B, T, FEAT, device=device)
        self.x_in = torch.zeros_like(self.x)
        self.y = torch.zeros(B, device=device)
        self.segment = torch.zeros(B, dtype=torch.long, device=device)
        self.step_count = torch.zeros((), dtype=torch.long, device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        for cb in self.callbacks:
            cb.on_step_begin(self)
        logits = self.model(self.x_in)
        loss = F.binary_cross_entropy_with_logits(logits, self.y)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: no host sync without error_if_nonfinite
        self.opt.step()  # HAZARD: optimizer
        self.step_count += 1  # CLEAN: device-side counter, replayed with the graph
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach(), logits.detach())
        return loss.detach()

    def fit(self, loader):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()
        for x, y, seg in loader:
            self.x.copy_(x)
            self.y.copy_(y)
            self.segment.copy_(seg)
            self.graph.replay()


if __name__ == "__main__":
    model = ChurnNet().cuda()
    data = torch.utils.data.DataLoader(torch.load("puzzle_churn_cohorts.pt"), batch_size=B, drop_last=True)
    Trainer(model, [FeatureDropout(0.1), EMACallback(model), SegmentLogger()]).fit(data)
