"""Learning a Lyapunov function and a stabilising controller for an inverted pendulum
(discrete-time condition V(x+) - V(x) <= -alpha V(x)), with a gradient-sign falsifier that
adds counterexamples to the training set after every round.

Assistant-generated speed-up: the risk and the optimizer step go through
torch.compile(backend="cudagraphs").
"""
import torch
import torch.nn as nn

G, L, M, DT = 9.81, 0.5, 0.15, 0.01
RADIUS = 3.0


def pendulum(x, u):
    th, om = x[:, :1], x[:, 1:]
    om_dot = G / L * torch.sin(th) - 0.1 * om / (M * L ** 2) + u / (M * L ** 2)
    return torch.cat([th + DT * om, om + DT * om_dot], 1)


class LyapunovController(nn.Module):
    def __init__(self):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32))
        self.ctrl = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))

    def V(self, x):
        z = self.phi(x) - self.phi(torch.zeros_like(x))
        return (z ** 2).sum(1) + 1e-3 * (x ** 2).sum(1)

    def forward(self, x):
        u = 8.0 * torch.tanh(self.ctrl(x))
        return self.V(x), self.V(pendulum(x, u))


def falsify(model, n=512, iters=30, decay=0.95):
    x = ((torch.rand(n, 2, device="cuda") * 2 - 1) * RADIUS).requires_grad_(True)
    for _ in range(iters):
        v, v1 = model(x)
        (g,) = torch.autograd.grad((v1 - decay * v).sum(), x)
        with torch.no_grad():
            x += 0.05 * g.sign()
            x.clamp_(-RADIUS, RADIUS)
    with torch.no_grad():
        v, v1 = model(x)
        return x.detach()[(v1 - decay * v) > 0]  # CLEAN: eager falsifier, no graph involved


class LyapunovTrainer:
    def __init__(self, model, lr=1e-2):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, factor=0.5, patience=3)
        self.alpha = 0.05
        self.risk = torch.compile(self._risk, backend="cudagraphs")
        self.step = torch.compile(self.opt.step, backend="cudagraphs")
        self.audit = torch.compile(self._risk)

    def _risk(self, x):
        v, v_next = self.model(x)
        margin = self.alpha  # HAZARD: python-scalar
        viol = torch.relu(v_next - (1 - margin) * v)
        frac = (viol > 0).float().mean().item()  # HAZARD: host-sync
        return viol.mean() + torch.relu(-v).mean(), frac

    def fit(self, rounds=50, epochs=200):
        data = (torch.rand(4096, 2, device="cuda") * 2 - 1) * RADIUS
        for r in range(rounds):
            for _ in range(epochs):
                loss, frac = self.risk(data)  # HAZARD: dynamic-shape
                loss_val = loss.item()  # CLEAN: read before backward and before the compiled step
                loss.backward()
                self.step()
                self.opt.zero_grad()
            self.sched.step(loss_val)  # HAZARD: optimizer
            if frac < 0.01:
                self.alpha = min(0.2, self.alpha * 1.5)     # tighten the decrease margin
            cex = falsify(self.model)
            print(f"round {r}: risk {loss_val:.4f}, violations {frac:.3%}, {len(cex)} counterexamples")
            data = torch.cat([data, cex])
        return data

    @torch.no_grad()
    def certify_grid(self, n=400):
        g = torch.linspace(-RADIUS, RADIUS, n, device="cuda")
        grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).view(-1, 2)
        _, frac = self.audit(grid)  # CLEAN: default torch.compile, no CUDA graphs
        return frac


if __name__ == "__main__":
    tr = LyapunovTrainer(LyapunovController())
    tr.fit()
    print("grid violation fraction", tr.certify_grid())
    torch.save(tr.model.state_dict(), "pendulum_lyapunov.pt")
