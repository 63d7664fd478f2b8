"""Next-day realised-volatility forecaster for an equity options desk (HAR + GRU).

The whole training step (forward, blended MSE/QLIKE loss, backward, AdamW) is one CUDA
graph; a new batch is copied into the static tensors before every replay.
"""
import numpy as np
import torch
import torch.nn as nn


class HarGRU(nn.Module):
    def __init__(self, n_feat=7, hidden=64):
        super().__init__()
        self.har = nn.Linear(3, 1)   # daily / weekly / monthly log-RV
        self.rnn = nn.GRU(n_feat, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, har_x, seq):
        h, _ = self.rnn(seq)
        return self.har(har_x).squeeze(-1) + self.out(h[:, -1]).squeeze(-1)


def qlike(pred_log_rv, rv):
    r = rv / pred_log_rv.exp()
    return (r - torch.log(r) - 1).mean()


class VolTrainer:
    def __init__(self, model, overnight_gap, batch=512, seq=22, seed=7, device="cuda"):
        self.model = model.to(device)
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4, capturable=True)
        self.overnight_gap = overnight_gap  # np.float32 [batch]: calendar days since the previous close
        self.qlike_weight = 0.0
        self.boot_gen = torch.Generator(device=device)
        self.boot_gen.manual_seed(seed)
        self.x_har = torch.zeros(batch, 3, device=device)
        self.x_seq = torch.zeros(batch, seq, 7, device=device)
        self.rv = torch.ones(batch, device=device)
        self.graph = None

    def _step(self):
        pred = self.model(self.x_har, self.x_seq)
        gap = torch.as_tensor(self.overnight_gap, device="cuda")  # HAZARD: pinned-memory
        pred = pred + 0.1 * torch.log1p(gap)
        w = torch.randint(0, 2, self.rv.shape, generator=self.boot_gen, device=self.rv.device).float()  # HAZARD: rng
        mse = ((pred - self.rv.log()) ** 2 * w).sum() / w.sum().clamp_min(1.0)
        lam = self.qlike_weight  # HAZARD: python-scalar
        loss = (1 - lam) * mse + lam * qlike(pred, self.rv)
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            return loss.detach()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clip_grad_norm_ stays on the device
        self.opt.step()  # CLEAN: AdamW built with capturable=True
        return loss.detach()

    def _capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader, epochs=30, base_lr=1e-3):
        history = []
        for epoch in range(epochs):
            self.qlike_weight = min(1.0, epoch / 10)  # move from MSE to QLIKE over ten epochs
            for g in self.opt.param_groups:
                g["lr"] = base_lr * 0.5 * (1 + np.cos(np.pi * epoch / epochs))  # HAZARD: optimizer
            for har, seq, rv in loader:
                self.x_har.copy_(har, non_blocking=True)  # CLEAN: copy_ into the static input, outside the capture
                self.x_seq.copy_(seq, non_blocking=True)
                self.rv.copy_(rv, non_blocking=True)
                if self.graph is None:
                    self._capture()
                self.graph.replay()
            history.append(self.static_loss.item())  # CLEAN: read after the replay, outside the capture
        return history
