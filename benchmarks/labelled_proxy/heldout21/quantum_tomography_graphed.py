"""Neural-network quantum state tomography of a positive state (W state on a 4x5 superconducting
grid) with an autoregressive GRU wavefunction psi(s) = sqrt(p(s)).

Data: computational-basis shots, and shots where one qubit k was read out in the X basis,
whose amplitude is (psi(s|k=0) +- psi(s|k=1)) / sqrt(2). Z shots and both X branches go
through the graphed log-probability network in one call per step.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

N, H, B = 20, 64, 1024


def snake_order(rows, cols):
    return [r * cols + (c if r % 2 == 0 else cols - 1 - c) for r in range(rows) for c in range(cols)]


class ARWavefunction(nn.Module):
    def __init__(self, order, p_readout=0.01, device="cuda"):
        super().__init__()
        self.order = list(order)                          # autoregressive order over the chip layout
        self.p_readout = p_readout
        self.flip_gen = torch.Generator(device=device)
        self.flip_gen.manual_seed(5)
        self.rnn = nn.GRU(2, H, batch_first=True)
        self.out = nn.Linear(H, 2)

    def forward(self, s):                                 # s (rows, N) float 0/1 -> log p(s)
        idx = torch.tensor(self.order, device=s.device)  # HAZARD: host-sync
        s = s.index_select(1, idx)
        if self.training:                                 # noise-aware training: calibrated readout error
            flips = torch.bernoulli(torch.full_like(s, self.p_readout), generator=self.flip_gen)  # HAZARD: rng
            s = torch.remainder(s + flips, 2)
        x = F.one_hot(s.long(), 2).float()  # CLEAN: num_classes given, fixed output shape
        h, _ = self.rnn(torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1))
        logp = torch.log_softmax(self.out(h), -1).gather(-1, s.long()[..., None]).squeeze(-1).sum(1)  # CLEAN: gather with a CUDA index
        if self.training and not torch.isfinite(logp).all():  # HAZARD: dynamic-control-flow
            raise FloatingPointError("non-finite log-probability")
        return logp


def build(device="cuda"):
    wf = ARWavefunction(snake_order(4, 5)).to(device)
    logp_means = []
    wf.register_forward_hook(lambda m, i, o: logp_means.append(o.detach().mean()))  # HAZARD: api-misuse
    sample = torch.randint(0, 2, (3 * B, N), device=device).float()
    g_wf = torch.cuda.make_graphed_callables(wf, (sample,))
    return wf, g_wf


def nll(logp, x_outcome):
    lz, l0, l1 = logp.split(B)
    psi0, psi1 = (0.5 * l0).exp(), (0.5 * l1).exp()
    amp = (psi0 + (1 - 2 * x_outcome) * psi1) / math.sqrt(2)
    return -lz.mean() - torch.log(amp.pow(2) + 1e-12).mean()


def fidelity_w(wf, g_wf, device="cuda"):
    wf.eval()
    basis = (torch.arange(2 ** N, device=device)[:, None] >> torch.arange(N, device=device)) & 1
    with torch.no_grad():
        p = g_wf(basis.float()).exp()  # CLEAN: eval mode, the graphed callable runs the eager forward
    one_hot_rows = basis.sum(1) == 1
    wf.train()
    return (p.sqrt() * one_hot_rows).sum().pow(2) / N


def train(data, steps=5000, device="cuda"):
    wf, g_wf = build(device)
    opt = torch.optim.Adam(wf.parameters(), lr=1e-3)
    for it in range(steps):
        z, xs, site = data.batch(B)                        # (B, N), (B, N), (B,) on the GPU
        s0 = xs.scatter(1, site[:, None], 0.0)
        s1 = xs.scatter(1, site[:, None], 1.0)
        b = xs.gather(1, site[:, None]).squeeze(1)
        logp = g_wf(torch.cat([z, s0, s1]))  # CLEAN: one positional call per step with the captured row count
        loss = nll(logp, b)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        if it % 500 == 0:
            print(f"{it}: nll {loss.item():.4f}  F(W) {fidelity_w(wf, g_wf, device).item():.4f}")
    return wf


if __name__ == "__main__":
    from qst_data import ShotDataset

    model = train(ShotDataset("w_state_4x5_shots.npz", device="cuda"))
    torch.save(model.state_dict(), "w_state_arnqs.pt")
