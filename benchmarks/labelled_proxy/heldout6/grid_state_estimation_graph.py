"""Power-system state estimation for a transmission grid (DC model, SCADA + PMU).

A graph network over the bus-branch topology gives an initial guess of the bus voltage
angles; a few weighted-least-squares Gauss-Newton steps refine it. Bad-data detection
uses largest normalised residuals. Estimation runs every SCADA scan (2 s) as a replayed
CUDA graph; bad-data detection is a second graph.
"""
import torch
import torch.nn as nn

N_BUS, N_MEAS, GN_STEPS = 2000, 6000, 3


class AnglePrior(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.inp = nn.Linear(3, d)
        self.mp = nn.ModuleList([nn.Linear(d, d) for _ in range(4)])
        self.out = nn.Linear(d, 1)

    def forward(self, bus_feat, adj_norm):
        h = torch.relu(self.inp(bus_feat))
        for lin in self.mp:
            h = h + torch.relu(lin(adj_norm @ h))
        return self.out(h).squeeze(-1)


class StateEstimator:
    def __init__(self, prior, H, sigma):
        self.prior = prior.eval()
        self.H = H  # (N_MEAS, N_BUS) measurement Jacobian of the DC model
        self.sigma = sigma
        self.static_z = torch.zeros(N_MEAS, device="cuda")
        self.static_feat = torch.zeros(N_BUS, 3, device="cuda")
        self.adj = torch.zeros(N_BUS, N_BUS, device="cuda")
        self.weights = torch.ones(N_MEAS, device="cuda")
        self.side = torch.cuda.Stream()
        self.g_est, self.g_bdd = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()

    def _estimate(self):
        theta = self.prior(self.static_feat, self.adj)
        W = self.weights / self.sigma ** 2
        for _ in range(GN_STEPS):
            r = self.static_z - self.H @ theta
            G = self.H.T @ (W[:, None] * self.H) + 1e-6 * torch.eye(N_BUS, device="cuda")
            d, info = torch.linalg.solve_ex(G, self.H.T @ (W * r))  # CLEAN: solve_ex does no host-side error check
            theta = theta + d
        torch.cuda.synchronize()  # HAZARD: host-sync
        return theta

    def _bad_data(self, theta):
        r = (self.static_z - self.H @ theta) / self.sigma
        bad = torch.nonzero(r.abs() > 3.0, as_tuple=True)[0]  # HAZARD: dynamic-shape
        self.weights.fill_(1.0)
        self.weights[bad] = 0.0
        suspicious = torch.where(r.abs() > 3.0, r, torch.zeros_like(r))  # CLEAN: torch.where keeps shapes static
        return suspicious

    @torch.no_grad()
    def capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._estimate()
        torch.cuda.current_stream().wait_stream(self.side)
        with torch.cuda.graph(self.g_est, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.static_theta = self._estimate()
        with torch.cuda.graph(self.g_bdd, stream=self.side):  # HAZARD: api-misuse
            self.static_resid = self._bad_data(self.static_theta)

    def update_topology(self, adj_norm, H):
        self.adj.copy_(adj_norm)  # CLEAN: in-place update keeps the captured address
        self.H.copy_(H)

    @torch.no_grad()
    def scan(self, z, bus_feat):
        self.static_z.copy_(z)
        self.static_feat.copy_(bus_feat)
        self.g_est.replay()
        self.g_bdd.replay()
        return self.static_theta.clone(), self.static_resid.clone()


if __name__ == "__main__":
    H = (torch.rand(N_MEAS, N_BUS, device="cuda") < 0.002).float() * 10.0
    se = StateEstimator(AnglePrior().cuda(), H, sigma=torch.full((N_MEAS,), 0.01, device="cuda"))
    se.update_topology(torch.eye(N_BUS, device="cuda"), H)
    se.capture()
    for _ in range(5):
        theta, resid = se.scan(torch.randn(N_MEAS, device="cuda") * 0.1, torch.randn(N_BUS, 3, device="cuda"))
        print("max |angle| (rad):", theta.abs().max().item(), "flagged:", (resid != 0).sum().item())
