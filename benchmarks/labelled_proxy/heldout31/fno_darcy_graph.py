"""FNO-2d on Darcy flow (85x85, relative-L2 loss), FNO-repo style. The assistant added `--cuda-graph`,
which captures forward + backward + Adam step once and replays it per batch."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F


class UnitGaussianNormalizer:
    def __init__(self, x, eps=1e-5):
        self.mean = x.mean(0)  # stays on the CPU (the loader is CPU-side)
        self.std = x.std(0)
        self.eps = eps

    def encode(self, x):
        return (x - self.mean) / (self.std + self.eps)

    def decode(self, x):
        return x * (self.std + self.eps).to(x.device) + self.mean.to(x.device)  # HAZARD: pinned-memory


class SpectralConv2d(nn.Module):
    def __init__(self, cin, cout, m1, m2):
        super().__init__()
        scale = 1 / (cin * cout)
        self.m1, self.m2 = m1, m2
        self.w1 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))
        self.w2 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))

    def forward(self, x):
        b, _, h, w = x.shape
        x_ft = torch.fft.rfft2(x)  # CLEAN: cuFFT is capturable after warm-up
        out = torch.zeros(b, self.w1.shape[1], h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        out[:, :, :self.m1, :self.m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :self.m1, :self.m2], self.w1)
        out[:, :, -self.m1:, :self.m2] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -self.m1:, :self.m2], self.w2)
        return torch.fft.irfft2(out, s=(h, w))


class FNO2d(nn.Module):
    def __init__(self, modes=12, width=32):
        super().__init__()
        self.lift = nn.Linear(3, width)
        self.spec = nn.ModuleList(SpectralConv2d(width, width, modes, modes) for _ in range(4))
        self.pw = nn.ModuleList(nn.Conv2d(width, width, 1) for _ in range(4))
        self.proj = nn.Sequential(nn.Linear(width, 128), nn.GELU(), nn.Linear(128, 1))

    def forward(self, a, grid):
        x = self.lift(torch.cat([a, grid], dim=-1)).permute(0, 3, 1, 2)
        for i, (sc, pw) in enumerate(zip(self.spec, self.pw)):
            x = sc(x) + pw(x)
            x = F.gelu(x) if i < 3 else x
        return self.proj(x.permute(0, 2, 3, 1)).squeeze(-1)


def rel_l2(pred, y):
    return ((pred - y).flatten(1).norm(dim=1) / y.flatten(1).norm(dim=1)).mean()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cuda-graph", action="store_true")
    args = p.parse_args()
    data = torch.load("darcy_r85.pt")
    a_tr, u_tr = data["coeff"][:1000].unsqueeze(-1), data["sol"][:1000]
    a_norm, u_norm = UnitGaussianNormalizer(a_tr), UnitGaussianNormalizer(u_tr)
    a_tr = a_norm.encode(a_tr)
    gx, gy = torch.meshgrid(torch.linspace(0, 1, 85), torch.linspace(0, 1, 85), indexing="ij")
    grid = torch.stack([gx, gy], -1).expand(20, 85, 85, 2).cuda()  # CLEAN: built once, before any capture
    model = FNO2d().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4, capturable=args.cuda_graph)  # CLEAN: capturable when graphed
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
    static_a = torch.zeros(20, 85, 85, 1, device="cuda")
    static_u = torch.zeros(20, 85, 85, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        pred = u_norm.decode(model(static_a, grid))
        loss = rel_l2(pred, static_u)
        if not torch.isfinite(loss):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("loss blew up")
        loss.backward()
        opt.step()
        return loss

    if args.cuda_graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        g.capture_begin()  # HAZARD: stream
        static_loss = step()
        g.capture_end()

    for ep in range(500):
        perm = torch.randperm(1000)
        for i in range(0, 1000, 20):
            idx = perm[i:i + 20]
            static_a.copy_(a_tr[idx].cuda(non_blocking=True))  # CLEAN: copy_ into the static input, outside capture
            static_u.copy_(u_tr[idx].cuda(non_blocking=True))
            if args.cuda_graph:
                g.replay()
            else:
                static_loss = step()
        sched.step()  # HAZARD: optimizer
        if ep % 50 == 0:
            print(ep, float(static_loss))  # CLEAN: host read between replays
