"""Online feature-store transform service (GPU path).

The same transform spec the offline materialisation job uses (log-scale, standardise,
clip, bucketize, hashed categorical ids) is applied to request features on the GPU.
The transform is captured once per batch bucket; statistics and bucket boundaries are
refreshed by the nightly materialisation job without restarting the service.
"""
import numpy as np
import pandas as pd
import torch

BUCKETS = (64, 256, 1024)


class OnlineTransform:
    def __init__(self, spec: dict, stats: pd.DataFrame, n_hash=1 << 20):
        self.n_num = len(spec["numeric"])
        self.log_cols = list(spec["log_scaled"])  # positions inside the numeric block
        self.mu = torch.as_tensor(stats["mean"].to_numpy(np.float32), device="cuda")  # CLEAN: uploaded at start-up, outside the graphs
        self.sigma_np = stats["std"].to_numpy(np.float32).clip(1e-6)
        self.bucket_cols = torch.as_tensor(spec["bucketized"], device="cuda")
        self.boundaries = torch.as_tensor(spec["boundaries"], dtype=torch.float32, device="cuda")
        self.n_hash = n_hash
        self.pool = torch.cuda.graph_pool_handle()
        self.entries = {}

    def _transform(self, num, cat):
        x = num.clone()
        x[:, self.log_cols] = torch.log1p(x[:, self.log_cols].clamp_min(0))  # HAZARD: host-sync
        if torch.isnan(x).any():  # HAZARD: dynamic-control-flow
            x = torch.nan_to_num(x, nan=0.0)
        sigma = torch.from_numpy(self.sigma_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        z = ((x - self.mu) / sigma).clamp(-5.0, 5.0)
        picked = z.index_select(1, self.bucket_cols)  # CLEAN: index_select with a CUDA index tensor
        bucket_ids = torch.bucketize(picked.contiguous(), self.boundaries)
        hashed = (cat * 0x9E3779B1 + 0x7F4A7C15) % self.n_hash
        return z, bucket_ids, hashed

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        for bs in reversed(BUCKETS):
            num = torch.zeros(bs, self.n_num, device="cuda")
            cat = torch.zeros(bs, 8, dtype=torch.long, device="cuda")
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._transform(num, cat)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                outs = self._transform(num, cat)
            self.entries[bs] = (g, num, cat, outs)

    @torch.no_grad()
    def __call__(self, num_cpu: torch.Tensor, cat_cpu: torch.Tensor):
        n = num_cpu.size(0)
        bs = next(b for b in BUCKETS if b >= n)
        g, num, cat, (z, bucket_ids, hashed) = self.entries[bs]
        num.zero_()
        cat.zero_()
        num[:n].copy_(num_cpu, non_blocking=True)
        cat[:n].copy_(cat_cpu, non_blocking=True)
        g.replay()
        return z[:n].clone(), bucket_ids[:n].clone(), hashed[:n].clone()

    # -- nightly refresh from the materialisation job ---------------------------------
    def refresh_stats(self, stats: pd.DataFrame):
        self.mu.copy_(torch.as_tensor(stats["mean"].to_numpy(np.float32)))  # CLEAN: in-place refresh keeps the address
        self.sigma_np = stats["std"].to_numpy(np.float32).clip(1e-6)

    def refresh_boundaries(self, boundaries):
        self.boundaries = torch.as_tensor(boundaries, dtype=torch.float32, device="cuda")  # HAZARD: static-address

    def parity_check(self, offline_df: pd.DataFrame, num_cols, cat_cols, atol=1e-4):
        z, _, _ = self(torch.as_tensor(offline_df[num_cols].to_numpy(np.float32)),
                       torch.as_tensor(offline_df[cat_cols].to_numpy(np.int64)))
        expected = torch.as_tensor(offline_df[[c + "_z" for c in num_cols]].to_numpy(np.float32))
        return bool(torch.allclose(z.cpu(), expected, atol=atol))  # CLEAN: host comparison of a clone, outside the graphs
