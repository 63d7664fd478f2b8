"""SWAG (Maddox et al., NeurIPS 2019) on CIFAR-10 with a PreResNet-style net whose
training forward/backward is graphed with torch.cuda.make_graphed_callables."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="SGD/SWA training")
parser.add_argument("--epochs", type=int, default=300)
parser.add_argument("--lr_init", type=float, default=0.1)
parser.add_argument("--swa_start", type=int, default=161)
parser.add_argument("--swa_lr", type=float, default=0.05)
parser.add_argument("--max_num_models", type=int, default=20)
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--drop_channels", type=str, default="", help="ablation: e.g. '2' drops the blue channel")
parser.add_argument("--inplace_set", type=int, default=0)
parser.add_argument("--log_logits", type=int, default=1)
args = parser.parse_args()

class Net(nn.Module):
    def __init__(self, n_cls=10):
        super().__init__()
        self.keep_channels = [c for c in range(3) if str(c) not in args.drop_channels.split(",")]
        self.conv = nn.Sequential(nn.Conv2d(len(self.keep_channels), 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(128, n_cls)

    def forward(self, x):
        x = x[:, self.keep_channels]  # HAZARD: host-sync
        return self.fc(self.conv(x).flatten(1))

def flatten(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

def set_flat_weights(model, flat):
    offset = 0
    for module in model.modules():
        for name, p in list(module.named_parameters(recurse=False)):
            n = p.numel()
            if args.inplace_set:
                p.data.copy_(flat[offset:offset + n].view_as(p))  # CLEAN: copied into the captured parameter storage
            else:
                setattr(module, name, nn.Parameter(flat[offset:offset + n].view_as(p).clone()))  # HAZARD: static-address
            offset += n

class SWAG:
    def __init__(self, model):
        self.mean = torch.zeros_like(flatten(model))
        self.sq_mean = torch.zeros_like(self.mean)
        self.dev, self.n = [], 0

    def collect(self, model):
        w = flatten(model)
        self.mean.mul_(self.n / (self.n + 1)).add_(w / (self.n + 1))  # CLEAN: eager moment update between replays
        self.sq_mean.mul_(self.n / (self.n + 1)).add_(w ** 2 / (self.n + 1))
        self.dev = (self.dev + [w - self.mean])[-args.max_num_models:]
        self.n += 1

    def sample(self, scale=0.5):
        var = torch.clamp(self.sq_mean - self.mean ** 2, 1e-30)
        z1 = torch.randn_like(var)
        z2 = torch.randn(len(self.dev), device=var.device)
        D = torch.stack(self.dev, 1)
        return self.mean + scale ** 0.5 * (var.sqrt() * z1 / 2 ** 0.5 + D @ z2 / (2 * (len(self.dev) - 1)) ** 0.5)

def bn_update(loader, model):
    model.train()
    for x, _ in loader:
        model(x.cuda(non_blocking=True))

def main(loader, test_loader):
    model = Net().cuda()
    logged = []
    if args.log_logits:
        model.register_forward_hook(lambda m, i, o: logged.append(o.detach()))  # HAZARD: api-misuse
    sample = torch.randn(args.batch_size, 3, 32, 32, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        model = torch.cuda.make_graphed_callables(model, (sample,))
    model.register_forward_pre_hook(lambda m, i: None)  # CLEAN: hooks added after graphing are allowed
    opt = torch.optim.SGD(model.parameters(), lr=args.lr_init, momentum=0.9, weight_decay=3e-4)
    swag = SWAG(model)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            opt.zero_grad(); loss.backward(); opt.step()
        if epoch >= args.swa_start:
            swag.collect(model)
    set_flat_weights(model, swag.sample(scale=0.5))
    bn_update(loader, model)
    model.eval()
    with torch.no_grad():
        return [F.softmax(model(x.cuda()), 1) for x, _ in test_loader]  # CLEAN: eval mode runs the original forward, not the graph
