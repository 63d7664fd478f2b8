"""Ride-hailing demand forecaster per city zone: compiled model, loss and optimizer steps (reduce-overhead)."""
import logging
import torch
import torch.nn as nn

log = logging.getLogger("demand")

class ZoneForecaster(nn.Module):
    def __init__(self, n_zones=512, d=128, horizon=12):
        super().__init__()
        self.zone = nn.Embedding(n_zones, d)
        self.temporal = nn.GRU(4, d, batch_first=True)
        self.head = nn.Linear(2 * d, horizon)
    def forward(self, zone_id, history):
        h, _ = self.temporal(history)
        return self.head(torch.cat([h[:, -1], self.zone(zone_id)], -1))

class MetricHooks:
    def __init__(self):
        self.hooks = [self._log_scale]
    def fire(self, pred, target):
        for h in self.hooks:
            h(pred, target)
    @staticmethod
    def _log_scale(pred, target):
        log.info("pred/target scale %s", pred.mean() / target.mean().clamp_min(1e-3))  # HAZARD: host-code

class PoissonLoss:
    def __init__(self, hooks):
        self.hooks = hooks
    def __call__(self, pred, target):
        rate = torch.nn.functional.softplus(pred)
        loss = (rate - target * torch.log(rate + 1e-6)).mean()
        self.hooks.fire(rate, target)
        return self._guard(loss)
    @staticmethod
    def _guard(loss):
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            return torch.zeros_like(loss)
        return loss

class DecayStrategy:
    def __init__(self, opt):
        self.opt = opt
    def after_epoch(self, epoch):
        for g in self.opt.param_groups:
            g["weight_decay"] = 1e-4 if epoch < 5 else 1e-2  # HAZARD: optimizer

class Trainer:
    def __init__(self, model, loss):
        self.model = torch.compile(model.cuda(), mode="reduce-overhead")
        body = [p for n, p in model.named_parameters() if not n.startswith("zone")]
        self.lr = torch.tensor(1e-3, device="cuda")
        self.opt = torch.optim.AdamW(body, lr=self.lr, weight_decay=1e-4, capturable=True)  # CLEAN: tensor LR, capturable
        self.emb_opt = torch.optim.SGD(model.zone.parameters(), lr=0.05)
        self.loss = torch.compile(loss.__call__, mode="reduce-overhead")
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.emb_step = torch.compile(self.emb_opt.step, mode="reduce-overhead")
        self.callbacks = [DecayStrategy(self.opt), self]
    def step(self, zone_id, history, target):
        loss = self.loss(self.model(zone_id, history), target)
        value = loss.detach().clone()  # CLEAN: loss cloned before backward and the compiled steps
        loss.backward()
        self.opt_step()
        self.emb_step()
        self.opt.zero_grad(set_to_none=True)
        self.emb_opt.zero_grad(set_to_none=True)
        return value
    def after_epoch(self, epoch):
        self.lr.fill_(1e-3 * 0.9 ** epoch)  # CLEAN: tensor LR updated in place
        for g in self.emb_opt.param_groups:
            g["lr"] = 0.05 * 0.9 ** epoch  # HAZARD: optimizer

def fit(loader, epochs=10):
    trainer = Trainer(ZoneForecaster(), PoissonLoss(MetricHooks()))
    for epoch in range(epochs):
        total = torch.zeros((), device="cuda")
        for zone_id, history, target in loader:
            total += trainer.step(zone_id.cuda(), history.cuda(), target.cuda())
        for cb in trainer.callbacks:
            cb.after_epoch(epoch)
        log.info("epoch %d loss %.4f", epoch, total.item())  # CLEAN: logging outside compiled code
