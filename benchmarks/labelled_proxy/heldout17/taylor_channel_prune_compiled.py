"""Iterative structured pruning with first-order Taylor channel importance (Molchanov et al.)
followed by knowledge-distillation fine-tuning from the unpruned teacher.

`PruneTrainer` is eager; `CompiledPruneTrainer` compiles its phase methods in the
constructor and the loop dispatches phases by name with getattr.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PruneTrainer:
    def __init__(self, student, teacher, base_lr=0.01, ratio=0.1, kd_weight=0.5, tau=4.0):
        self.student, self.teacher = student.cuda(), teacher.cuda().eval()
        self.gates = {n: m for n, m in self.student.named_modules() if isinstance(m, nn.BatchNorm2d)}
        self.importance = {n: torch.zeros(m.num_features, device="cuda") for n, m in self.gates.items()}
        self.opt = torch.optim.SGD(self.student.parameters(), lr=base_lr, momentum=0.9, weight_decay=1e-4)
        self.base_lr, self.ratio, self.tau = base_lr, ratio, tau
        self.kd_weight = kd_weight  # CLEAN: set once at construction, never changed
        self.history = []

    def score_loss(self, x, y):
        return F.cross_entropy(self.student(x), y)

    def finetune_loss(self, x, y):
        with torch.no_grad():
            t = self.teacher(x)
        s = self.student(x)
        kd = F.kl_div(F.log_softmax(s / self.tau, -1), F.softmax(t / self.tau, -1), reduction="batchmean")
        return F.cross_entropy(s, y) + self.kd_weight * self.tau ** 2 * kd

    def opt_step(self):
        self.opt.step()

    def score_step(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        self.score_loss(x, y).backward()
        with torch.no_grad():
            for n, bn in self.gates.items():
                self.importance[n].add_((bn.weight * bn.weight.grad).abs())  # CLEAN: eager accumulation on the device

    def finetune_step(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        loss = self.finetune_loss(x, y)
        self.history.append(loss.item())  # CLEAN: read before backward and before the compiled step
        loss.backward()
        self.opt_step()

    def rank_channels(self, imp):
        if imp.sum() == 0:  # HAZARD: dynamic-control-flow
            return []
        alive = imp[imp > 0]  # HAZARD: dynamic-shape
        cutoff = alive.quantile(self.ratio)
        return (imp <= cutoff).tolist()  # HAZARD: host-sync

    def prune_round(self):
        with torch.no_grad():
            for n, bn in self.gates.items():
                drop = torch.tensor(self.rank_channels(self.importance[n]), dtype=torch.bool, device="cuda")
                if drop.numel():
                    bn.weight.masked_fill_(drop, 0.0)
                    bn.bias.masked_fill_(drop, 0.0)
                self.importance[n].zero_()

    def run(self, phase, loader):
        step = getattr(self, f"{phase}_step")
        for x, y in loader:
            step(x.cuda(non_blocking=True), y.cuda(non_blocking=True))


class CompiledPruneTrainer(PruneTrainer):
    def __init__(self, *args, mode="reduce-overhead", **kw):
        super().__init__(*args, **kw)
        self.finetune_loss = torch.compile(self.finetune_loss, mode=mode)
        self.opt_step = torch.compile(self.opt_step, mode=mode)
        self.rank_channels = torch.compile(self.rank_channels, mode=mode)


def prune_and_finetune(trainer, calib_loader, train_loader, rounds=5, epochs_per_round=2):
    for r in range(rounds):
        trainer.run("score", calib_loader)
        trainer.prune_round()
        for group in trainer.opt.param_groups:
            group["lr"] = trainer.base_lr  # HAZARD: optimizer
        for epoch in range(epochs_per_round):
            trainer.run("finetune", train_loader)
        print(f"round {r}: last KD loss {trainer.history[-1]:.4f}")
