"""Fitting a neural rate law to batch-reactor concentration data (A -> B -> C).

Chemical-engineering group script.  The whole training step (RK4 integration of the
ODE with the network inside, MSE to the measured profiles, backward, Adam step) is
captured once and replayed for every epoch.  Globals mirror the old COMMON block.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn

DEV = "cuda"
N_T = 120
DT = 0.5            # minutes
SUBSTEPS = 4
step_count = 0

df = pd.read_csv("reactor_runs.csv")          # run, t, T_K, cA, cB, cC
runs = sorted(df.run.unique())
C_obs_np = np.stack([df[df.run == r][["cA", "cB", "cC"]].to_numpy(np.float32) for r in runs])
T_np = np.stack([df[df.run == r]["T_K"].to_numpy(np.float32) for r in runs])
C_obs = torch.from_numpy(C_obs_np).to(DEV)     # (R, N_T, 3)
C0 = C_obs[:, 0, :].clone()


class RateNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))

    def forward(self, c, T):
        k = torch.nn.functional.softplus(self.net(torch.cat([c, (T[:, None] - 350.0) / 50.0], 1)))
        r1 = k[:, 0] * c[:, 0]
        r2 = k[:, 1] * c[:, 1]
        return torch.stack([-r1, r1 - r2, r2], 1)


model = RateNet().to(DEV)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_acc = torch.zeros((), device=DEV)
diag_stream = torch.cuda.Stream()
mass_err = torch.zeros((), device=DEV)


def integrate(T_profile):
    c = C0
    out = [c]
    h = DT / SUBSTEPS
    for n in range(N_T - 1):
        Tn = T_profile[:, n]
        for _ in range(SUBSTEPS):
            k1 = model(c, Tn)
            k2 = model(c + 0.5 * h * k1, Tn)
            k3 = model(c + 0.5 * h * k2, Tn)
            k4 = model(c + h * k3, Tn)
            c = c + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(c)
    return torch.stack(out, 1)


def train_step():
    global step_count
    T_profile = torch.tensor(T_np).cuda()  # HAZARD: pinned-memory
    C_pred = integrate(T_profile)
    loss = ((C_pred - C_obs) ** 2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # CLEAN: capturable after warm-up
    opt.step()  # HAZARD: optimizer
    opt.zero_grad(set_to_none=False)  # CLEAN: grads keep their captured buffers
    loss_acc.add_(loss.detach())  # CLEAN: device-side accumulation
    with torch.cuda.stream(diag_stream):  # HAZARD: stream
        mass_err.copy_((C_pred.sum(-1) - C0.sum(-1)[:, None]).abs().max())
    step_count += 1  # HAZARD: host-code


s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        train_step()
torch.cuda.current_stream().wait_stream(s)

g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=False)
with torch.cuda.graph(g):
    train_step()

for epoch in range(2000):
    g.replay()
    if epoch % 100 == 0:
        print(epoch, step_count, loss_acc.item() / (epoch + 1))  # CLEAN: read after replay
torch.save(model.state_dict(), "ratenet.pt")
