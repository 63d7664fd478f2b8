"""CFRNet / TARNet (Shalit, Johansson & Sontag, ICML 2017) on IHDP: a shared
representation with a linear-MMD imbalance penalty and two outcome heads,
graphed together with torch.cuda.make_graphed_callables."""
import argparse
import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--p_alpha", type=float, default=1.0, help="imbalance weight (0 = TARNet)")
parser.add_argument("--n_in", type=int, default=3)
parser.add_argument("--n_out", type=int, default=3)
parser.add_argument("--dim_in", type=int, default=200)
parser.add_argument("--dim_out", type=int, default=100)
parser.add_argument("--normalization", type=str, default="divide")
parser.add_argument("--batch_size", type=int, default=100)
parser.add_argument("--lrate", type=float, default=1e-3)
parser.add_argument("--iterations", type=int, default=3000)
parser.add_argument("--save_rep", type=int, default=1)
parser.add_argument("--amp", type=int, default=1)
args = parser.parse_args()

def mmd2_lin(X, t, p):
    it, ic = torch.where(t > 0)[0], torch.where(t < 1)[0]  # HAZARD: dynamic-shape
    mean_control, mean_treated = X[ic].mean(0), X[it].mean(0)
    return torch.sum((2.0 * p * mean_treated - 2.0 * (1.0 - p) * mean_control) ** 2)

class RepNet(nn.Module):
    def __init__(self, d):
        super().__init__()
        layers, dim = [], d
        for _ in range(args.n_in):
            layers += [nn.Linear(dim, args.dim_in), nn.ELU()]
            dim = args.dim_in
        self.mlp = nn.Sequential(*layers)

    def forward(self, x, t):
        phi = self.mlp(x)
        if args.normalization == "divide":
            phi = phi / torch.sqrt(torch.clamp((phi ** 2).sum(1, keepdim=True), min=1e-10))
        p_t = t.float().mean().item()  # HAZARD: host-sync
        return phi, mmd2_lin(phi, t, p_t)

class OutcomeHeads(nn.Module):
    def __init__(self):
        super().__init__()
        def head():
            return nn.Sequential(nn.Linear(args.dim_in, args.dim_out), nn.ELU(), nn.Linear(args.dim_out, args.dim_out), nn.ELU(), nn.Linear(args.dim_out, 1))
        self.h0, self.h1 = head(), head()

    def forward(self, phi, t):
        return torch.where(t > 0, self.h1(phi), self.h0(phi))  # CLEAN: factual outcome selected on the device

def load_ihdp(path, i_exp):
    d = np.load(path)
    x, t, yf = d["x"][:, :, i_exp], d["t"][:, i_exp:i_exp + 1], d["yf"][:, i_exp:i_exp + 1]
    return [torch.from_numpy(a).float().cuda() for a in (x, t, yf)]  # CLEAN: uploaded once, before graphing

def train(path, i_exp=0):
    x, t, yf = load_ihdp(path, i_exp)
    p_treated = float(t.mean())  # CLEAN: treated fraction read once on the host, outside the graphs
    rep, heads = RepNet(x.size(1)).cuda(), OutcomeHeads().cuda()
    reps = []
    if args.save_rep:
        rep.register_forward_hook(lambda m, i, o: reps.append(o[0].detach()))  # HAZARD: api-misuse
    B = args.batch_size
    sample_rep = (torch.randn(B, x.size(1), device="cuda"), torch.ones(B, 1, device="cuda"))
    sample_heads = (torch.randn(B, args.dim_in, device="cuda", requires_grad=True), torch.ones(B, 1, device="cuda"))
    with torch.autocast("cuda", dtype=torch.float16, enabled=bool(args.amp)):  # HAZARD: autocast-cache
        g_rep, g_heads = torch.cuda.make_graphed_callables((rep, heads), (sample_rep, sample_heads))
    opt = torch.optim.Adam(list(rep.parameters()) + list(heads.parameters()), lr=args.lrate, weight_decay=1e-4)
    for it in range(args.iterations):
        idx = torch.randint(0, x.size(0), (B,), device="cuda")
        xb, tb, yb = x[idx], t[idx], yf[idx]
        phi, imb = g_rep(xb, tb)
        y_hat = g_heads(phi, tb)
        w = tb / (2 * p_treated) + (1 - tb) / (2 * (1 - p_treated))
        loss = (w * (yb - y_hat) ** 2).mean() + args.p_alpha * imb
        opt.zero_grad(); loss.backward(); opt.step()
        if it % 100 == 0:
            print(f"it {it} obj {loss.item():.4f}")  # CLEAN: eager read after the backward
