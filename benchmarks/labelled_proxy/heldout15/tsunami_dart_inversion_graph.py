"""Near-field tsunami source inversion from DART bottom-pressure records.

A learned prior gives a first slip estimate on the unit sources along the trench,
then a fixed number of projected-gradient steps fit the precomputed Green's
functions. One CUDA graph per buoy-count bucket, all in one pool, largest first.
"""
import numpy as np
import torch
import torch.nn as nn

BUCKETS = (48, 32, 16)   # active buoys
N_UNIT = 220             # unit sources along the trench
N_T = 360                # 15 s samples, 90 minutes


class SlipPrior(nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(N_T, width), nn.GELU(), nn.Linear(width, width))
        self.dec = nn.Linear(width, N_UNIT)

    def forward(self, obs, mask):
        h = self.enc(obs * mask.unsqueeze(-1)).sum(0) / mask.sum().clamp_min(1.0)
        return torch.relu(self.dec(h))


class InversionRunner:
    def __init__(self, prior, green, tide_model, device="cuda"):
        self.dev = torch.device(device)
        self.prior = prior.to(self.dev).eval()
        self.green = torch.from_numpy(green).to(self.dev)  # CLEAN: catalogue uploaded once in __init__, before any capture
        self.tide_model = tide_model          # buoy ids -> predicted tide, np.ndarray [n, N_T]
        self.tide_np = {b: np.zeros((b, N_T), np.float32) for b in BUCKETS}
        self.n_iter = 25
        self.lr = 0.05
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.obs, self.mask, self.ids, self.out = {}, {}, {}, {}, {}

    def set_latency_budget(self, budget_ms):
        # the warning centre shortens the fit when the first arrivals are close
        self.n_iter = 8 if budget_ms < 40 else 25

    def _invert(self, b):
        obs, mask = self.obs[b], self.mask[b]
        G = self.green.index_select(0, self.ids[b])  # CLEAN: CUDA index tensor of fixed length per bucket
        tide = torch.from_numpy(self.tide_np[b]).to(self.dev, non_blocking=True)  # HAZARD: pinned-memory
        d = (obs - tide) * mask.unsqueeze(-1)
        slip = self.prior(d, mask)
        for _ in range(self.n_iter):  # HAZARD: python-scalar
            pred = torch.einsum("u,but->bt", slip, G) * mask.unsqueeze(-1)
            grad = torch.einsum("bt,but->u", pred - d, G)
            slip = (slip - self.lr * grad).clamp_min(0.0)
        if slip.max() > 40.0:  # HAZARD: dynamic-control-flow
            slip = slip * (40.0 / slip.max())
        self.out[b].copy_(slip)

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        for b in BUCKETS:
            self.obs[b] = torch.zeros(b, N_T, device=self.dev)
            self.mask[b] = torch.zeros(b, device=self.dev)
            self.ids[b] = torch.zeros(b, dtype=torch.long, device=self.dev)
            self.out[b] = torch.zeros(N_UNIT, device=self.dev)
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._invert(b)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self._invert(b)
            self.graphs[b] = g

    @torch.no_grad()
    def invert(self, records, buoy_ids):
        n = len(buoy_ids)
        b = next(k for k in sorted(BUCKETS) if k >= n)
        padded = np.zeros((b, N_T), np.float32)
        padded[:n] = records
        self.obs[b] = torch.from_numpy(padded).to(self.dev)  # HAZARD: static-address
        self.mask[b].zero_()
        self.mask[b][:n] = 1.0
        self.tide_np[b][:n] = self.tide_model(buoy_ids)
        self.ids[b][:n].copy_(torch.as_tensor(buoy_ids, device=self.dev))  # CLEAN: host list copied into the static index outside the capture
        self.graphs[b].replay()
        return self.out[b].cpu().numpy()  # CLEAN: host read after the replay


if __name__ == "__main__":
    green = np.random.rand(64, N_UNIT, N_T).astype(np.float32) * 1e-2
    runner = InversionRunner(SlipPrior(), green, lambda ids: np.zeros((len(ids), N_T), np.float32))
    runner.capture()
    slip = runner.invert(np.random.randn(21, N_T).astype(np.float32), list(range(21)))
    runner.set_latency_budget(30)
    print("max slip [m]", float(slip.max()))
