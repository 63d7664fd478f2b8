"""SAM (Foret et al.) on CIFAR-10, davda54/sam style; the two-pass step is one CUDA graph."""
import argparse
import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--adaptive", default=True, type=bool, help="ASAM")
parser.add_argument("--rho", default=2.0, type=float)
parser.add_argument("--learning_rate", default=0.1, type=float)
parser.add_argument("--epochs", default=200, type=int)
parser.add_argument("--cutout", default=True, type=bool)
parser.add_argument("--bf16", default=True, type=bool)
args = parser.parse_args()

def smooth_crossentropy(pred, gold, smoothing=0.1):
    one_hot = torch.full_like(pred, fill_value=smoothing / (pred.size(1) - 1))
    one_hot.scatter_(dim=1, index=gold.unsqueeze(1), value=1.0 - smoothing)
    return F.kl_div(input=F.log_softmax(pred, dim=1), target=one_hot, reduction="none").sum(-1)

class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        super().__init__(params, dict(rho=rho, adaptive=adaptive, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)  # CLEAN: rho is fixed for the whole run
            for p in group["params"]:
                self.state[p]["old_p"] = p.data.clone()
                p.add_((torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p))
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                p.data = self.state[p]["old_p"]  # HAZARD: static-address
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    def _grad_norm(self):
        dev = self.param_groups[0]["params"][0].device
        return torch.norm(torch.stack([((torch.abs(p) if g["adaptive"] else 1.0) * p.grad).norm(p=2).to(dev)  # CLEAN: same-device .to() is a no-op
                                       for g in self.param_groups for p in g["params"] if p.grad is not None]), p=2)

class StepLR:
    def __init__(self, optimizer, learning_rate, total_epochs):
        self.optimizer, self.total_epochs, self.base = optimizer, total_epochs, learning_rate
    def __call__(self, epoch):
        lr = self.base * (0.2 ** sum(epoch >= f * self.total_epochs for f in (0.3, 0.6, 0.8)))
        for param_group in self.optimizer.param_groups:
            param_group["lr"] = lr  # HAZARD: optimizer

class GpuCutout:
    def __init__(self, size=16, seed=42):
        self.size, self.gen = size, torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
    def __call__(self, x):
        b, _, h, w = x.shape
        c = torch.randint(0, h, (2, b, 1, 1), device=x.device, generator=self.gen)  # HAZARD: rng
        ys, xs = torch.arange(h, device=x.device).view(1, h, 1), torch.arange(w, device=x.device).view(1, 1, w)
        m = ((ys - c[0]).abs() < self.size // 2) & ((xs - c[1]).abs() < self.size // 2)
        return x.masked_fill(m.unsqueeze(1), 0.0)  # CLEAN: fixed-shape masked_fill, no mask indexing

def sam_step(model, optimizer, cutout, log, x, y):
    x = cutout(x) if args.cutout else x
    predictions = model(x)
    loss = smooth_crossentropy(predictions, y, smoothing=0.1)
    loss.mean().backward()
    optimizer.first_step(zero_grad=True)
    smooth_crossentropy(model(x), y, smoothing=0.1).mean().backward()
    optimizer.second_step(zero_grad=True)
    with torch.no_grad():
        log(loss.cpu(), (torch.argmax(predictions.data, 1) == y).cpu())  # HAZARD: host-sync
    return loss

def capture_sam_step(model, optimizer, cutout, log, static_x, static_y):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):  # HAZARD: autocast-cache
        with torch.cuda.stream(side):
            for _ in range(3):
                sam_step(model, optimizer, cutout, log, static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(g):
            static_loss = sam_step(model, optimizer, cutout, log, static_x, static_y)
    return g, static_loss

def train(model, loader, test_loader, log):
    optimizer = SAM(model.parameters(), torch.optim.SGD, rho=args.rho, adaptive=args.adaptive,
                    lr=args.learning_rate, momentum=0.9, weight_decay=5e-4)
    scheduler = StepLR(optimizer, args.learning_rate, args.epochs)
    static_x, static_y = (t.cuda() for t in next(iter(loader)))
    graph, static_loss = capture_sam_step(model, optimizer, GpuCutout(), log, static_x, static_y)
    for epoch in range(args.epochs):
        for inputs, targets in loader:
            static_x.copy_(inputs, non_blocking=True)  # CLEAN: copy_ into the captured input
            static_y.copy_(targets, non_blocking=True)
            graph.replay()
        scheduler(epoch)
        model.eval()
        with torch.no_grad():
            acc = sum((model(x.cuda()).argmax(1) == y.cuda()).sum().item() for x, y in test_loader)  # CLEAN: eager evaluation outside the graph
        model.train()
