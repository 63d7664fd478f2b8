"""Cash-demand forecasting for an ATM fleet (replenishment planning).

N-BEATS (generic stacks) on 56 days of withdrawals per machine, 14-day
horizon. Public holidays and pay days shift demand, so the loss up-weights
those days with a weight that is ramped in over the first epochs. After one
eager epoch the full training step is captured and replayed per batch.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

LOOKBACK, HORIZON, BATCH = 56, 14, 1024


class NBeatsBlock(nn.Module):
    def __init__(self, width=256, p_drop=0.1):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(LOOKBACK, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.theta = nn.Linear(width, LOOKBACK + HORIZON)
        self.p_drop = p_drop

    def forward(self, x):
        h = F.dropout(self.fc(x), self.p_drop, self.training)  # CLEAN: default CUDA generator, capturable
        th = self.theta(h)
        return th[:, :LOOKBACK], th[:, LOOKBACK:]


class NBeats(nn.Module):
    def __init__(self, n_blocks=6):
        super().__init__()
        self.blocks = nn.ModuleList(NBeatsBlock() for _ in range(n_blocks))

    def forward(self, x):
        forecast = torch.zeros(x.shape[0], HORIZON, device=x.device)
        for blk in self.blocks:
            back, fore = blk(x)
            x = x - back
            forecast = forecast + fore
        return forecast


class CashTrainer:
    def __init__(self, model, holiday_calendar, seed=11):
        self.model = model.cuda().train()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=1e-4)
        self.calendar_np = holiday_calendar.astype(np.float32)
        self.seed, self.epoch, self.holiday_w = seed, 0, 0.0
        self.x = torch.zeros(BATCH, LOOKBACK, device="cuda")
        self.y = torch.zeros(BATCH, HORIZON, device="cuda")
        self.doy = torch.zeros(BATCH, HORIZON, dtype=torch.long, device="cuda")

    def _step(self):
        torch.cuda.manual_seed(self.seed + self.epoch)  # HAZARD: rng
        cal = torch.from_numpy(self.calendar_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        hol = cal[self.doy]  # CLEAN: gather with an index tensor already on the GPU
        fore = self.model(self.x)
        base = F.l1_loss(fore, self.y, reduction="none")
        w = self.holiday_w  # HAZARD: python-scalar
        loss = (base * (1.0 + w * hol)).mean()
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            loss = base.nan_to_num(0.0).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clamp-based, no host sync
        self.opt.step()  # HAZARD: optimizer
        return loss.detach()

    def load(self, x, y, doy):
        self.x.copy_(x, non_blocking=True)  # CLEAN: batch copied into the static inputs
        self.y.copy_(y, non_blocking=True)
        self.doy.copy_(doy, non_blocking=True)

    def fit(self, loader, epochs=30):
        for self.epoch in range(epochs):
            self.holiday_w = min(1.0, self.epoch / 10.0) * 3.0
            for x, y, doy in loader:
                self.load(x, y, doy)
                if self.epoch == 0:
                    self.static_loss = self._step()
                    continue
                if not hasattr(self, "graph"):
                    torch.cuda.synchronize()
                    self.graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(self.graph):
                        self.static_loss = self._step()
                self.graph.replay()
            print(f"epoch {self.epoch} holiday_w={self.holiday_w:.2f} loss={float(self.static_loss):.4f}")


if __name__ == "__main__":
    cal = np.zeros(366)
    cal[[0, 120, 358, 359, 365]] = 1.0
    series = torch.rand(BATCH * 40, LOOKBACK + HORIZON) * 5000.0
    doy = torch.randint(0, 366, (BATCH * 40, HORIZON))
    batches = [(series[i:i + BATCH, :LOOKBACK].cuda(), series[i:i + BATCH, LOOKBACK:].cuda(), doy[i:i + BATCH].cuda())
               for i in range(0, series.shape[0], BATCH)]
    CashTrainer(NBeats(), cal).fit(batches)
