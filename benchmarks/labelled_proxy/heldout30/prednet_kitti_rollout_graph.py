# PredNet next-frame prediction on KITTI clips (2017 PyTorch port of Lotter et al.). The rollout over
# a 10-frame clip is captured once; the demo tool replays it and lets the user pick where to extrapolate.
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class ConvLSTMCell(nn.Module):
    def __init__(self, cin, ch):
        super().__init__()
        self.gates = nn.Conv2d(cin + ch, 4 * ch, 3, padding=1)

    def forward(self, x, h, c):
        i, f, o, g = torch.split(self.gates(torch.cat([x, h], 1)), h.size(1), 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class PredNet(nn.Module):
    def __init__(self, A=(3, 48, 96), R=(48, 96, 192)):
        super().__init__()
        self.A, self.Rc = A, R
        self.cells = nn.ModuleList([ConvLSTMCell(2 * A[l] + (R[l + 1] if l + 1 < len(A) else 0), R[l]) for l in range(len(A))])
        self.Ahat = nn.ModuleList([nn.Conv2d(R[l], A[l], 3, padding=1) for l in range(len(A))])
        self.Aup = nn.ModuleList([nn.Conv2d(2 * A[l], A[l + 1], 3, padding=1) for l in range(len(A) - 1)])
        self.extrap_start = 10
        self.R_prev = None

    def init_state(self, B, H, W):
        z = lambda ch, s: Variable(torch.zeros(B, ch, H // s, W // s).cuda())  # CLEAN: pageable upload in init_state, which runs before the capture
        self.R_prev = [z(self.Rc[l], 2 ** l) for l in range(3)]
        self.C_prev = [z(self.Rc[l], 2 ** l) for l in range(3)]
        self.E_prev = [z(2 * self.A[l], 2 ** l) for l in range(3)]

    def rollout(self, frames):
        R, C, E = self.R_prev, self.C_prev, self.E_prev
        preds, t0 = [], time.time()  # HAZARD: host-code
        frame = frames[:, 0]
        for t in range(frames.size(1)):
            if t >= self.extrap_start:  # HAZARD: python-scalar
                frame = preds[-1]
            else:
                frame = frames[:, t]
            for l in reversed(range(3)):
                inp = E[l] if l == 2 else torch.cat([E[l], F.interpolate(R[l + 1], scale_factor=2)], 1)
                R[l], C[l] = self.cells[l](inp, R[l], C[l])
            a = frame
            for l in range(3):
                ahat = F.relu(self.Ahat[l](R[l]))
                if l == 0:  # CLEAN: branch on the Python layer index, fixed for every replay
                    ahat = torch.clamp(ahat, max=1.0)
                    preds.append(ahat)
                E[l] = torch.cat([F.relu(ahat - a), F.relu(a - ahat)], 1)
                if l < 2:
                    a = F.max_pool2d(self.Aup[l](E[l]), 2)
        self.R_prev, self.C_prev, self.E_prev = R, C, E  # HAZARD: static-address
        torch.cuda.synchronize()  # HAZARD: host-sync
        self.t_start = t0
        return torch.stack(preds, 1)


class ClipPredictor:
    def __init__(self, model, B=4, T=10, H=128, W=160):
        self.model = model.cuda().eval()
        self.frames = torch.zeros(B, T, 3, H, W, device="cuda")
        with torch.no_grad():
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.model.init_state(B, H, W)
                    self.model.rollout(self.frames)
            torch.cuda.current_stream().wait_stream(s)
            self.model.init_state(B, H, W)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = self.model.rollout(self.frames)

    def predict(self, clip, extrapolate_from=None):
        self.model.extrap_start = extrapolate_from or clip.size(1)
        self.frames.copy_(clip)  # CLEAN: copy_ into the static clip buffer
        self.graph.replay()
        return self.out.clone()  # CLEAN: cloned after replay, before the next replay overwrites it
