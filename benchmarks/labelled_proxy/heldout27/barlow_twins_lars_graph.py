"""Barlow Twins (Zbontar et al. 2021) with the paper's LARS; the training step is one CUDA graph."""
import argparse
import math
import torch
import torch.nn as nn
import torchvision

parser = argparse.ArgumentParser(description="Barlow Twins Training")
parser.add_argument("--epochs", default=1000, type=int)
parser.add_argument("--batch-size", default=2048, type=int)
parser.add_argument("--learning-rate-weights", default=0.2, type=float)
parser.add_argument("--learning-rate-biases", default=0.0048, type=float)
parser.add_argument("--weight-decay", default=1e-6, type=float)
parser.add_argument("--lambd", default=0.0051, type=float)
parser.add_argument("--projector", default="8192-8192-8192", type=str)
args = parser.parse_args()

def off_diagonal(x):
    n, m = x.shape
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

class BarlowTwins(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torchvision.models.resnet50(zero_init_residual=True)
        self.backbone.fc = nn.Identity()
        sizes = [2048] + list(map(int, args.projector.split("-")))
        layers = []
        for i in range(len(sizes) - 2):
            layers += [nn.Linear(sizes[i], sizes[i + 1], bias=False), nn.BatchNorm1d(sizes[i + 1]), nn.ReLU(inplace=True)]
        self.projector = nn.Sequential(*layers, nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)
        self.side = torch.cuda.Stream()

    def forward(self, y1, y2):
        with torch.cuda.stream(self.side):  # HAZARD: stream
            z2 = self.projector(self.backbone(y2))
        z1 = self.projector(self.backbone(y1))
        c = self.bn(z1).T @ self.bn(z2) / args.batch_size
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        return on_diag + args.lambd * off_diagonal(c).pow_(2).sum()

class LARS(torch.optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                dp = p.grad
                if p.ndim != 1:  # CLEAN: exclusion decided by tensor rank, a static Python fact
                    dp = dp.add(p, alpha=g["weight_decay"])
                    param_norm, update_norm = torch.norm(p), torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0., torch.where(update_norm > 0, (g["eta"] * param_norm / update_norm), one), one)  # CLEAN: trust ratio selected on the device
                    dp = dp.mul(q)
                state = self.state[p]
                if "mu" not in state:
                    state["mu"] = torch.zeros_like(p)
                state["mu"].mul_(g["momentum"]).add_(dp)
                p.add_(state["mu"], alpha=-g["lr"])

def adjust_learning_rate(optimizer, loader, step):
    max_steps, warmup_steps = args.epochs * len(loader), 10 * len(loader)
    base_lr = args.batch_size / 256
    if step < warmup_steps:
        lr = base_lr * step / warmup_steps
    else:
        q = 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / (max_steps - warmup_steps)))
        lr = base_lr * (q + 0.001 * (1 - q))
    for group, scale in zip(optimizer.param_groups, (args.learning_rate_weights, args.learning_rate_biases)):
        group["lr"] = lr * scale  # HAZARD: optimizer

class Step:
    def __init__(self, model, optimizer):
        self.model, self.optimizer, self.losses = model, optimizer, []

    def __call__(self, y1, y2):
        self.optimizer.zero_grad(set_to_none=False)
        loss = self.model(y1, y2)
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("loss is nan")
        loss.backward()
        self.optimizer.step()
        self.losses.append(loss.item())  # HAZARD: host-sync
        return loss

def main(loader):
    model = BarlowTwins().cuda()
    optimizer = LARS([{"params": [p for p in model.parameters() if p.ndim != 1]}, {"params": [p for p in model.parameters() if p.ndim == 1]}], lr=0, weight_decay=args.weight_decay)
    step_fn = Step(model, optimizer)
    (y1, y2), _ = next(iter(loader))
    static_y1, static_y2 = y1.cuda(non_blocking=True), y2.cuda(non_blocking=True)  # CLEAN: upload before capture, outside the graph
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step_fn(static_y1, static_y2)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step_fn(static_y1, static_y2)
    for epoch in range(args.epochs):
        for step, ((y1, y2), _) in enumerate(loader, start=epoch * len(loader)):
            adjust_learning_rate(optimizer, loader, step)
            static_y1.copy_(y1, non_blocking=True); static_y2.copy_(y2, non_blocking=True)  # CLEAN: copy_ into the captured inputs
            graph.replay()
