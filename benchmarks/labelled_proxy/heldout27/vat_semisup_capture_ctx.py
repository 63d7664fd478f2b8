"""Virtual Adversarial Training (Miyato et al., TPAMI 2018) on SVHN with 1000
labels, VAT loss as in lyakaap/VAT-pytorch; the whole semi-supervised step is
captured through a `captured()` context manager with mixed precision."""
import argparse
import contextlib
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--xi", type=float, default=10.0)
parser.add_argument("--eps", type=float, default=1.0)
parser.add_argument("--ip", type=int, default=1)
parser.add_argument("--alpha", type=float, default=1.0)
parser.add_argument("--rampup_epochs", type=int, default=30)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--epochs", type=int, default=120)
parser.add_argument("--amp", type=bool, default=True)
parser.add_argument("--entmin", type=bool, default=True)
args = parser.parse_args()

@contextlib.contextmanager
def captured(graph, amp=True):
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):  # HAZARD: autocast-cache
        with torch.cuda.graph(graph):
            yield graph

@contextlib.contextmanager
def _disable_tracking_bn_stats(model):
    def switch_attr(m):
        if hasattr(m, "track_running_stats"):
            m.track_running_stats ^= True  # CLEAN: toggled the same way at every captured step
    model.apply(switch_attr)
    yield
    model.apply(switch_attr)

def _l2_normalize(d):
    d_reshaped = d.view(d.shape[0], -1, *(1 for _ in range(d.dim() - 2)))
    return d / (torch.norm(d_reshaped, dim=1, keepdim=True) + 1e-8)

class VATLoss(nn.Module):
    def forward(self, model, x):
        with torch.no_grad():
            pred = F.softmax(model(x), dim=1)
        d = _l2_normalize(torch.rand(x.shape).sub(0.5).to(x.device))  # HAZARD: pinned-memory
        with _disable_tracking_bn_stats(model):
            for _ in range(args.ip):
                d.requires_grad_()
                adv_distance = F.kl_div(F.log_softmax(model(x + args.xi * d), dim=1), pred, reduction="batchmean")
                d = _l2_normalize(torch.autograd.grad(adv_distance, d)[0]).detach()
            return F.kl_div(F.log_softmax(model(x + d * args.eps), dim=1), pred, reduction="batchmean")

class Trainer:
    def __init__(self, model):
        self.model, self.vat = model, VATLoss()
        self.lr = torch.tensor(args.lr, device="cuda")
        self.opt = torch.optim.Adam(model.parameters(), lr=self.lr, capturable=True)  # CLEAN: capturable Adam with a tensor LR
        self.rampup = 0.0

    def step(self, x_l, y_l, x_ul):
        alpha = args.alpha * self.rampup  # HAZARD: python-scalar
        logits_ul = self.model(x_ul)
        loss = F.cross_entropy(self.model(x_l), y_l) + alpha * self.vat(self.model, x_ul)
        if args.entmin:
            p = F.softmax(logits_ul, 1)
            loss = loss - (p * F.log_softmax(logits_ul, 1)).sum(1).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()
        torch.cuda.empty_cache()  # HAZARD: memory
        return loss

    def capture(self, x_l, y_l, x_ul):
        self.static = (x_l.clone(), y_l.clone(), x_ul.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.autocast("cuda", dtype=torch.float16, enabled=args.amp):
            for _ in range(3):
                self.step(*self.static)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with captured(self.graph, amp=args.amp):
            self.static_loss = self.step(*self.static)

    def fit(self, labeled_iter, unlabeled_loader):
        for epoch in range(args.epochs):
            self.rampup = math.exp(-5.0 * (1 - min(epoch / args.rampup_epochs, 1.0)) ** 2)
            if epoch > args.epochs * 0.67:
                self.lr.fill_(args.lr * (args.epochs - epoch) / (args.epochs * 0.33))  # CLEAN: tensor LR decayed in place
            for x_ul, _ in unlabeled_loader:
                x_l, y_l = next(labeled_iter)
                for s, t in zip(self.static, (x_l, y_l, x_ul)):
                    s.copy_(t, non_blocking=True)  # CLEAN: copy_ into the captured inputs
                self.graph.replay()
            print(f"epoch {epoch} loss {self.static_loss.item():.4f}")
