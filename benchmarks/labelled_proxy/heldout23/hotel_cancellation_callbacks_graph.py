"""Hotel booking cancellation model (Antonio et al. hotel-bookings data).

Revenue-management data science: pandas feature prep, then a torch MLP trained by a
small in-house Trainer that captures the whole step and fires callbacks inside it.
"""
import time
import numpy as np
import pandas as pd
import torch
import torch.nn as nn

dev = torch.device("cuda")
df = pd.read_csv("hotel_bookings.csv")
df["arrival"] = pd.to_datetime(df.arrival_date_year.astype(str) + "-" + df.arrival_date_month + "-1")
df["lead_log"] = np.log1p(df.lead_time)
df = pd.get_dummies(df, columns=["hotel", "deposit_type", "customer_type", "market_segment"], dtype=np.float32)
FEATS = [c for c in df.columns if c.startswith(("hotel_", "deposit_", "customer_", "market_"))] + \
        ["lead_log", "adr", "total_of_special_requests", "previous_cancellations", "booking_changes"]
X = df[FEATS].fillna(0).to_numpy(np.float32)
y = df.is_canceled.to_numpy(np.float32)
B = 1024


class GradNormLogger:
    def __init__(self, model):
        self.model, self.hist = model, []

    def on_step_end(self, trainer, loss):
        gn = torch.norm(torch.stack([p.grad.norm() for p in self.model.parameters()]))
        self.hist.append(gn.item())  # HAZARD: host-sync


class WallClock:
    def __init__(self):
        self.stamps = []

    def on_step_end(self, trainer, loss):
        self.stamps.append(time.time())  # HAZARD: host-code


class DeviceLossMeter:
    def __init__(self):
        self.total = torch.zeros((), device=dev)

    def on_step_end(self, trainer, loss):
        self.total += loss.detach()  # CLEAN: device-side accumulation, replayed


class LossMirror:
    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.host = torch.zeros((), pin_memory=True)

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.host.copy_(loss.detach(), non_blocking=True)


class Trainer:
    def __init__(self, model, callbacks):
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)  # CLEAN: capturable AdamW in the graph
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=3e-3, total_steps=20_000)
        self.callbacks = callbacks
        self.xb = torch.zeros(B, X.shape[1], device=dev)
        self.yb = torch.zeros(B, device=dev)
        self.graph = torch.cuda.CUDAGraph()

    def step(self):
        logits = self.model(self.xb).squeeze(-1)
        loss = nn.functional.binary_cross_entropy_with_logits(logits, self.yb)
        loss.backward()
        for cb in self.callbacks:
            cb.on_step_end(self, loss)
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)  # CLEAN: grads keep their captured buffers

    def fit(self, X, y, steps=20_000):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.step()
        Xp, yp = torch.from_numpy(X).pin_memory(), torch.from_numpy(y).pin_memory()
        for it in range(steps):
            idx = torch.randint(0, len(Xp), (B,))
            self.xb.copy_(Xp[idx], non_blocking=True)  # CLEAN: copy_ into the static inputs
            self.yb.copy_(yp[idx], non_blocking=True)
            self.graph.replay()
            self.sched.step()  # HAZARD: optimizer


model = nn.Sequential(nn.Linear(X.shape[1], 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1)).to(dev)
meter = DeviceLossMeter()
Trainer(model, [GradNormLogger(model), WallClock(), meter, LossMirror()]).fit(X, y)
print("mean loss", meter.total.item() / 20_000)
