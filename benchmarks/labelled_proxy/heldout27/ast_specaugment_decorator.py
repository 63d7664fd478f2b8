"""AST (Gong, Chung & Glass, Interspeech 2021) fine-tuning on ESC-50 with
SpecAugment as in the reference dataloader, moved onto the GPU; the training step
is wrapped in a capture-on-first-call `@cuda_graphed` decorator."""
import argparse
import functools
import random
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--n_class", type=int, default=50)
parser.add_argument("--freqm", type=int, default=24)
parser.add_argument("--timem", type=int, default=96)
parser.add_argument("--mixup", type=float, default=0.0)
parser.add_argument("--lr", type=float, default=1e-5)
parser.add_argument("--batch_size", type=int, default=48)
parser.add_argument("--target_length", type=int, default=512)
parser.add_argument("--weighted_classes", type=str, default="0,7,19,33", help="classes with an extra loss weight")
args = parser.parse_args()
WEIGHTED = [int(c) for c in args.weighted_classes.split(",")]

def cuda_graphed(warmup=3):
    def deco(fn):
        state = {}

        @functools.wraps(fn)
        def wrapper(*tensors):
            if "graph" not in state:
                statics = [t.clone() for t in tensors]
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(warmup):
                        fn(*statics)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=torch.cuda.current_stream()):  # HAZARD: stream
                    out = fn(*statics)
                state.update(graph=g, statics=statics, out=out)
            for s, t in zip(state["statics"], tensors):
                s.copy_(t)  # CLEAN: copy_ into the captured inputs
            state["graph"].replay()
            return state["out"]
        return wrapper
    return deco

def spec_augment(fbank):
    fbank = torch.roll(fbank, np.random.randint(-10, 10), 1)  # HAZARD: host-code
    f, f0 = random.randint(0, args.freqm), random.randint(0, fbank.size(2) - args.freqm)  # HAZARD: host-code
    fbank[:, :, f0:f0 + f] = 0
    t_len = torch.randint(0, args.timem + 1, (fbank.size(0), 1), device=fbank.device)  # CLEAN: time-mask width drawn on the device
    t0 = (torch.rand(fbank.size(0), 1, device=fbank.device) * (fbank.size(1) - t_len)).long()
    tt = torch.arange(fbank.size(1), device=fbank.device)
    return fbank.masked_fill(((tt >= t0) & (tt < t0 + t_len)).unsqueeze(-1), 0.0)

class ASTModel(nn.Module):
    def __init__(self, dim=768, depth=12):
        super().__init__()
        self.patch = nn.Conv2d(1, dim, 16, stride=10)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU()) for _ in range(depth)])
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, args.n_class))

    def forward(self, x):
        x = self.patch(x.unsqueeze(1).transpose(2, 3)).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.size(0), -1, -1), x], 1)
        for blk in self.blocks:
            x = x + blk(x)
        return self.mlp_head(x[:, 0])

model = ASTModel().cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-7, betas=(0.95, 0.999), capturable=True)  # CLEAN: capturable Adam in the captured step
class_weight = torch.ones(args.n_class, device="cuda")

@cuda_graphed(warmup=3)
def train_step(fbank, labels):
    logits = model(spec_augment((fbank + 4.2677393) / (4.5689974 * 2)))
    w = torch.ones_like(class_weight)
    w[WEIGHTED] = 2.0  # HAZARD: host-sync
    loss = F.binary_cross_entropy_with_logits(logits, labels, weight=w * class_weight)
    optimizer.zero_grad(set_to_none=False)
    loss.backward()
    optimizer.step()
    return loss

def mixup_collate(batch):
    fb, lab = map(torch.stack, zip(*batch))
    if args.mixup > 0 and random.random() < args.mixup:
        lam = np.random.beta(10, 10)  # CLEAN: mixup weight drawn in the CPU data loader
        perm = torch.randperm(fb.size(0))
        fb, lab = lam * fb + (1 - lam) * fb[perm], lam * lab + (1 - lam) * lab[perm]
    return fb, lab

def train(loader, epochs=25):
    for epoch in range(epochs):
        for fbank, labels in loader:
            loss = train_step(fbank.cuda(non_blocking=True), labels.cuda(non_blocking=True))
        print(epoch, loss.item())
