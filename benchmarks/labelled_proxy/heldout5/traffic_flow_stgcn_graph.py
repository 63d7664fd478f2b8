"""STGCN traffic-speed forecaster (METR-LA style, 207 loop detectors) served with a CUDA graph.

build() captures with capture_begin/capture_end on a side stream; forecast() replays.
"""
import numpy as np
import torch
import torch.nn as nn


def scaled_laplacian(adj):
    dinv = adj.sum(-1).clamp(min=1e-6).pow(-0.5)
    return torch.eye(adj.shape[0], device=adj.device) - dinv[:, None] * adj * dinv[None]


class STConvBlock(nn.Module):
    def __init__(self, c_in, c_hid, c_out, K=3):
        super().__init__()
        self.t1 = nn.Conv2d(c_in, 2 * c_hid, (1, 3), padding=(0, 1))
        self.theta = nn.Parameter(torch.randn(K, c_hid, c_hid) * 0.1)
        self.t2 = nn.Conv2d(c_hid, c_out, (1, 3), padding=(0, 1))
        self.norm = nn.LayerNorm(c_out)
        self.K = K

    def forward(self, x, L):  # x: (B, C, N, T)
        p, q = self.t1(x).chunk(2, 1)
        x = p * torch.sigmoid(q)
        Tx = [x, torch.einsum("nm,bcmt->bcnt", L, x)]
        for _ in range(2, self.K):  # CLEAN: Chebyshev order fixed at construction
            Tx.append(2 * torch.einsum("nm,bcmt->bcnt", L, Tx[-1]) - Tx[-2])
        x = torch.relu(sum(torch.einsum("bcnt,cd->bdnt", t, th) for t, th in zip(Tx, self.theta)))
        return self.norm(self.t2(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class STGCN(nn.Module):
    def __init__(self, n_nodes=207, hist=12, horizon=12, sensor_subset=None):
        super().__init__()
        self.blocks = nn.ModuleList([STConvBlock(2, 64, 64), STConvBlock(64, 64, 64)])
        self.out = nn.Conv2d(64, horizon, (1, hist))
        self.sensor_subset = sensor_subset or list(range(n_nodes))
        self.adj = torch.eye(n_nodes)

    def forward(self, x):  # (B, 2, N, T): speed and time-of-day
        if (x[:, 0] == 0).float().mean() > 0.3:  # HAZARD: dynamic-control-flow
            x = torch.cat([x[:, :1].clamp(min=x[:, :1].mean()), x[:, 1:]], 1)
        L = scaled_laplacian(self.adj[self.sensor_subset][:, self.sensor_subset])  # HAZARD: host-sync
        for blk in self.blocks:
            x = blk(x, L)
        return self.out(x).squeeze(-1)  # (B, horizon, N)


class Forecaster:
    def __init__(self, model, batch=64, n_nodes=207, hist=12):
        self.model = model.cuda().eval()
        self.model.adj = self.model.adj.cuda()
        self.x = torch.zeros(batch, 2, n_nodes, hist, device="cuda")
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    def build(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self.model(self.x)
            self.graph.capture_begin()  # CLEAN: capture_begin inside the side-stream context
            self.y = self.model(self.x)
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.stream)

    def refresh_weights(self, adj_np):
        self.model.adj.copy_(torch.from_numpy(adj_np))  # CLEAN: adjacency updated in place, same address

    def reload_graph(self, adj_np):
        self.model.adj = torch.from_numpy(adj_np).float().cuda()  # HAZARD: static-address

    @torch.no_grad()
    def forecast(self, x):
        self.x.copy_(x)
        self.graph.replay()
        return self.y.float().clone()


if __name__ == "__main__":
    adj = np.load("metr_la_adj.npy").astype(np.float32)
    fc = Forecaster(STGCN())
    fc.refresh_weights(adj)
    fc.build()
    print(fc.forecast(torch.randn(64, 2, 207, 12, device="cuda")).shape)
    fc.reload_graph(adj * (adj > 0.1))
