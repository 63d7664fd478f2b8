"""DINO self-distillation (multi-crop, EMA teacher); the whole iteration is one CUDA graph."""
import argparse
import contextlib
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser("DINO", add_help=True)
parser.add_argument("--warmup_teacher_temp", type=float, default=0.04)
parser.add_argument("--teacher_temp", type=float, default=0.07)
parser.add_argument("--warmup_teacher_temp_epochs", type=int, default=30)
parser.add_argument("--momentum_teacher", type=float, default=0.996)
parser.add_argument("--lr", type=float, default=5e-4)
parser.add_argument("--epochs", type=int, default=100)
parser.add_argument("--overlap_teacher", type=bool, default=True, help="teacher fwd on its own stream")
args = parser.parse_args()

def cosine_scheduler(base, final, epochs, niter_per_ep, warmup_epochs=0):
    warmup = np.linspace(0, base, warmup_epochs * niter_per_ep)
    iters = np.arange(epochs * niter_per_ep - len(warmup))
    return np.concatenate((warmup, final + 0.5 * (base - final) * (1 + np.cos(np.pi * iters / len(iters)))))

def clip_gradients(model, clip):
    for p in model.parameters():
        clip_coef = clip / (p.grad.data.norm(2) + 1e-6)
        if clip_coef < 1:  # HAZARD: dynamic-control-flow
            p.grad.data.mul_(clip_coef)

class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, x):
        idx_crops = torch.cumsum(torch.unique_consecutive(torch.tensor([inp.shape[-1] for inp in x]), return_counts=True)[1], 0)  # CLEAN: CPU-only bookkeeping tensor, never sent to the GPU
        start, output = 0, []
        for end in idx_crops.tolist():
            output.append(self.backbone(torch.cat(x[start:end])))
            start = end
        return self.head(torch.cat(output))

class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, center_momentum=0.9):
        super().__init__()
        self.ncrops, self.center_momentum, self.epoch = ncrops, center_momentum, 0
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((
            np.linspace(args.warmup_teacher_temp, args.teacher_temp, args.warmup_teacher_temp_epochs),
            np.ones(args.epochs - args.warmup_teacher_temp_epochs) * args.teacher_temp))

    def forward(self, student_output, teacher_output):
        student_out = (student_output / 0.1).chunk(self.ncrops)
        temp = self.teacher_temp_schedule[self.epoch]  # HAZARD: python-scalar
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1).detach().chunk(2)
        total, n = 0.0, 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v != iq:
                    total = total + torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1).mean()
                    n += 1
        self.center.mul_(self.center_momentum).add_(teacher_output.mean(0, keepdim=True) * (1 - self.center_momentum))  # CLEAN: buffer updated in place with a constant momentum
        return total / n

class DINOTrainer:
    def __init__(self, student, teacher, loss_fn, niter_per_ep):
        self.student, self.teacher, self.loss_fn = student, teacher, loss_fn
        self.opt = torch.optim.AdamW(student.parameters(), lr=args.lr, capturable=True)  # CLEAN: capturable AdamW keeps its step on the device
        self.lr_schedule = cosine_scheduler(args.lr, 1e-6, args.epochs, niter_per_ep, warmup_epochs=10)
        self.momentum_schedule = cosine_scheduler(args.momentum_teacher, 1.0, args.epochs, niter_per_ep)
        self.mom = torch.full((), args.momentum_teacher, device="cuda")
        self.teacher_stream = torch.cuda.Stream()

    def step(self, gcrops, lcrops):
        with (torch.cuda.stream(self.teacher_stream) if args.overlap_teacher else contextlib.nullcontext()):  # HAZARD: stream
            t_out = self.teacher([gcrops])
        loss = self.loss_fn(self.student([gcrops, lcrops]), t_out)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        clip_gradients(self.student, 3.0)
        self.opt.step()
        for ps, pt in zip(self.student.parameters(), self.teacher.parameters()):
            pt.mul_(self.mom).add_((1 - self.mom) * ps.detach())  # CLEAN: momentum is a device tensor refreshed with fill_
        self.last_loss = loss.item()  # HAZARD: host-sync
        return loss

    def capture(self, gcrops, lcrops):
        self.static_g, self.static_l = gcrops.clone(), lcrops.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.step(self.static_g, self.static_l)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self.step(self.static_g, self.static_l)

def train(trainer, loader):
    for epoch in range(args.epochs):
        trainer.loss_fn.epoch = epoch
        for i, (gcrops, lcrops) in enumerate(loader):
            it = epoch * len(loader) + i
            for pg in trainer.opt.param_groups:
                pg["lr"] = trainer.lr_schedule[it]  # HAZARD: optimizer
            trainer.mom.fill_(trainer.momentum_schedule[it])  # CLEAN: in-place fill of a captured device tensor
            trainer.static_g.copy_(gcrops, non_blocking=True)  # CLEAN: copy_ into the static input
            trainer.static_l.copy_(lcrops, non_blocking=True)
            trainer.graph.replay()
        print(f"epoch {epoch} loss {trainer.static_loss.item():.4f}")  # CLEAN: host read after the replay, outside the graph
