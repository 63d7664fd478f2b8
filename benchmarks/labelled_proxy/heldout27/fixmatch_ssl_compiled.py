"""FixMatch (Sohn et al., NeurIPS 2020) on CIFAR-10 with 40 labels, in the style
of the kekmodel PyTorch port; the SSL loss is compiled with reduce-overhead."""
import argparse
from copy import deepcopy
import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="PyTorch FixMatch Training")
parser.add_argument("--batch-size", default=64, type=int)
parser.add_argument("--mu", default=7, type=int, help="coefficient of unlabeled batch size")
parser.add_argument("--lambda-u", default=1, type=float)
parser.add_argument("--T", default=1, type=float, help="pseudo label temperature")
parser.add_argument("--threshold", default=0.95, type=float)
parser.add_argument("--hard-select", default=True, type=bool, help="ablation: keep only confident rows")
parser.add_argument("--ema-decay", default=0.999, type=float)
parser.add_argument("--total-steps", default=2 ** 20, type=int)
args = parser.parse_args()
stats = {}

def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])

def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])

class ModelEMA:
    def __init__(self, model, decay):
        self.ema, self.decay = deepcopy(model).eval(), decay
        for p in self.ema.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        msd, esd = model.state_dict(), self.ema.state_dict()
        for k, ema_v in esd.items():
            ema_v.copy_(ema_v * self.decay + (1. - self.decay) * msd[k].detach())  # CLEAN: EMA runs eagerly after the compiled step

@torch.compile(mode="reduce-overhead")
def fixmatch_loss(model, inputs, targets_x):
    logits = de_interleave(model(inputs), 2 * args.mu + 1)
    logits_x = logits[:args.batch_size]
    logits_u_w, logits_u_s = logits[args.batch_size:].chunk(2)
    Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
    max_probs, targets_u = torch.max(torch.softmax(logits_u_w.detach() / args.T, dim=-1), dim=-1)
    mask = max_probs.ge(args.threshold).float()  # CLEAN: confidence mask kept as a float weight
    if args.hard_select:
        keep = mask.bool()
        Lu = F.cross_entropy(logits_u_s[keep], targets_u[keep])  # HAZARD: dynamic-shape
    else:
        Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()  # CLEAN: device-side weighting, fixed shape
    stats["mask_prob"] = mask.mean().item()  # HAZARD: host-sync
    if Lu > 0:  # HAZARD: dynamic-control-flow
        return Lx + args.lambda_u * Lu, Lx, Lu
    return Lx, Lx, Lu

def train(model, optimizer, scheduler, labeled_iter, unlabeled_iter, test_loader):
    ema_model = ModelEMA(model, args.ema_decay)
    evaluate = torch.compile(ema_model.ema, mode="max-autotune-no-cudagraphs")
    model.train()
    for step in range(args.total_steps):
        inputs_x, targets_x = next(labeled_iter)
        (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)
        inputs = interleave(torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * args.mu + 1).cuda(non_blocking=True)
        loss, Lx, Lu = fixmatch_loss(model, inputs, targets_x.cuda(non_blocking=True))
        loss.backward()
        optimizer.step()
        scheduler.step()  # CLEAN: the optimizer steps eagerly, so an LR change recompiles nothing
        ema_model.update(model)
        model.zero_grad()
        if step % 1024 == 0:
            print(f"step {step} loss {loss.item():.4f} mask {stats.get('mask_prob', 0):.2f}")  # CLEAN: read eagerly after backward
            with torch.no_grad():
                correct = sum((evaluate(x.cuda()).argmax(1) == y.cuda()).sum().item() for x, y in test_loader)  # CLEAN: no-cudagraphs twin; ragged last batch only recompiles
