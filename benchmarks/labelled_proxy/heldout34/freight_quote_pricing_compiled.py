"""Spot freight quote pricing (lane, weight, lead time): training with triton.cudagraphs-compiled loss and steps."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}

class Surcharges:
    def __init__(self):
        self.fuel_pct = 0.12
        self.register = {"fuel": self.fuel, "peak": self.peak}
    def fuel(self, base, feats):
        return base * (1.0 + self.fuel_pct)  # HAZARD: python-scalar
    def peak(self, base, feats):
        return base * (1.0 + 0.2 * feats[:, 3:4])  # CLEAN: surcharge from an input column
    def apply(self, names, base, feats):
        for n in names:
            base = self.register[n](base, feats)
        return base

class QuoteNet(nn.Module):
    def __init__(self, n_lanes=4000, d=64):
        super().__init__()
        self.lane = nn.Embedding(n_lanes, d)
        self.mlp = nn.Sequential(nn.Linear(d + 4, 128), nn.ReLU(), nn.Linear(128, 1))
    def forward(self, lane, feats):
        return F.softplus(self.mlp(torch.cat([self.lane(lane), feats], -1)))

class QuoteLoss:
    def __init__(self, surcharges, names):
        self.s, self.names = surcharges, names
    def __call__(self, model, lane, feats, accepted_price):
        price = self.s.apply(self.names, model(lane, feats), feats)
        loss = F.huber_loss(price.squeeze(-1), accepted_price)
        return self._clip(loss)
    @staticmethod
    def _clip(loss):
        if loss > 1e4:  # HAZARD: dynamic-control-flow
            loss = loss * 1e-2
        return loss

class Monitor:
    def __init__(self):
        self.worst = torch.zeros((), device="cuda")
    def observe(self, loss):
        self.worst = torch.maximum(self.worst, loss.detach())  # CLEAN: device-side running max
    def flush(self):
        return self.worst.item()  # CLEAN: read once per epoch, outside compiled code

class Trainer:
    def __init__(self, model, loss_obj):
        self.model = model.cuda()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.loss = torch.compile(loss_obj.__call__, options=CG)
        self.opt_step = torch.compile(self.opt.step, options=CG)
        self.monitor = Monitor()
    def step(self, lane, feats, price):
        loss = self.loss(self.model, lane, feats, price)
        self.monitor.observe(loss)
        loss.backward()
        self.opt_step()
        self.opt.zero_grad(set_to_none=True)
    def eval_mape(self, lane, feats, price):
        with torch.no_grad():
            p = self.model(lane, feats).squeeze(-1)
        return ((p - price).abs() / price).mean().item()  # CLEAN: eager model, host read outside compiled code

class Schedule:
    def __init__(self, trainer):
        self.opt = trainer.opt
    def on_epoch(self, epoch):
        for g in self.opt.param_groups:
            g["lr"] = 0.05 * (0.5 ** (epoch // 3))  # HAZARD: optimizer
            g["momentum"] = 0.9 if epoch < 5 else 0.95  # HAZARD: optimizer

def fit(loader, val, surcharges, epochs=12):
    tr = Trainer(QuoteNet(), QuoteLoss(surcharges, ["fuel", "peak"]))
    sched = Schedule(tr)
    for epoch in range(epochs):
        for lane, feats, price in loader:
            tr.step(lane.cuda(), feats.cuda(), price.cuda())
        sched.on_epoch(epoch)
        surcharges.fuel_pct = 0.12 + 0.01 * (epoch % 4)
        print(epoch, tr.monitor.flush(), tr.eval_mape(*(t.cuda() for t in val)))  # CLEAN: logging outside compiled code
