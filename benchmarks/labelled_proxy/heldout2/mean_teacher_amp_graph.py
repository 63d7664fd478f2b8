"""Semi-supervised mean-teacher step under fp16 AMP, captured as a single CUDA graph."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MeanTeacher:
    def __init__(self, student: nn.Module, teacher: nn.Module, batch=64, base_decay=0.999, conf=0.9):
        self.student, self.teacher = student.cuda(), teacher.cuda()
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        self.opt = torch.optim.Adam(self.student.parameters(), lr=3e-4, capturable=True)
        self.scaler = torch.amp.GradScaler("cuda")
        self.base_decay, self.conf = base_decay, conf
        self.step = 0
        self.x_l = torch.empty(batch, 3, 32, 32, device="cuda")
        self.y_l = torch.empty(batch, dtype=torch.long, device="cuda")
        self.x_u = torch.empty(batch, 3, 32, 32, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.mix_gen = torch.Generator(device="cuda")
        self.mix_gen.manual_seed(0)

    def _augment(self, x):
        shift = np.random.randint(-4, 5, size=2)  # HAZARD: host-code
        x = torch.roll(x, shifts=(int(shift[0]), int(shift[1])), dims=(2, 3))
        flip = torch.rand(x.shape[0], 1, 1, 1, device=x.device) < 0.5
        x = torch.where(flip, x.flip(3), x)
        perm = torch.randperm(x.shape[0], device=x.device, generator=self.mix_gen)  # HAZARD: rng
        return 0.9 * x + 0.1 * x[perm]

    def _step(self):
        with torch.autocast("cuda", dtype=torch.float16):  # CLEAN: autocast entered inside the captured step
            sup = F.cross_entropy(self.student(self.x_l), self.y_l)
            with torch.no_grad():
                t_prob = self.teacher(self._augment(self.x_u)).softmax(-1)
            conf, pseudo = t_prob.max(-1)
            mask = (conf > self.conf).float()
            self.confident = conf[mask.bool()]  # HAZARD: dynamic-shape
            x_s = self._augment(self.x_u)
            unsup = (F.cross_entropy(self.student(x_s), pseudo, reduction="none") * mask).mean()  # CLEAN: confidence mask multiplies instead of indexing
            loss = sup + unsup
        self.opt.zero_grad(set_to_none=False)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)  # CLEAN: unscale_ does not read on the host
        self.scaler.step(self.opt)  # HAZARD: host-sync
        self.scaler.update()  # CLEAN: scale update stays on the device
        decay = min(self.base_decay, (1 + self.step) / (10 + self.step))  # HAZARD: python-scalar
        with torch.no_grad():
            t_params = list(self.teacher.parameters())
            s_params = list(self.student.parameters())
            torch._foreach_mul_(t_params, decay)
            torch._foreach_add_(t_params, s_params, alpha=1 - decay)
        return loss.detach()

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph, stream=side):
            self.static_loss = self._step()

    def train(self, labelled, unlabelled):
        for i, ((xl, yl), (xu, _)) in enumerate(zip(labelled, unlabelled)):
            self.x_l.copy_(xl, non_blocking=True)
            self.y_l.copy_(yl, non_blocking=True)
            self.x_u.copy_(xu, non_blocking=True)
            if i == 0:
                self.capture()
            self.graph.replay()
            self.step += 1
            if i % 100 == 0:
                print(i, self.static_loss.item(), self.scaler.get_scale())
