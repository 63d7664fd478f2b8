"""Learned index (two-stage RMI) for the read path of a key-value store.

Keys are 64-bit hashes mapped to float64 in [0, 1). The root model picks a leaf,
the leaf's linear model predicts a position in the sorted key array, and a
bounded local search (+-err of that leaf) finds the slot. Point lookups arrive
in batches of 8192 from the front-end; the lookup kernel chain is one graph.
"""
import numpy as np
import torch


class RMIIndex:
    def __init__(self, keys_sorted: np.ndarray, n_leaves: int = 4096, batch: int = 8192, device: str = "cuda"):
        self.dev = torch.device(device)
        self.keys = torch.as_tensor(keys_sorted, device=self.dev)  # CLEAN: uploaded before any capture
        self.n = self.keys.numel()                 # fixed capacity, padded with +inf
        self.n_leaves = n_leaves
        params, err = self._fit_leaves(self.keys)
        self.leaf_params = params
        self.err_bounds = err
        self.hot_key_cache = np.zeros(256, np.float64)   # refreshed by the cache-admission thread
        self.static_q = torch.zeros(batch, dtype=torch.float64, device=self.dev)
        self.graph = torch.cuda.CUDAGraph()
        self._capture()

    def _fit_leaves(self, keys):
        finite = torch.isfinite(keys)
        keys = torch.where(finite, keys, 1.0)
        pos = torch.arange(keys.numel(), device=self.dev, dtype=torch.float64)
        leaf = (keys * self.n_leaves).long().clamp_(0, self.n_leaves - 1)
        z = torch.zeros(self.n_leaves, dtype=torch.float64, device=self.dev)
        cnt = z.index_add(0, leaf, finite.double()).clamp_min(1)
        sx, sy = z.index_add(0, leaf, keys), z.index_add(0, leaf, pos)
        sxx, sxy = z.index_add(0, leaf, keys * keys), z.index_add(0, leaf, keys * pos)
        var = (sxx / cnt - (sx / cnt) ** 2).clamp_min(1e-18)
        slope = (sxy / cnt - sx * sy / cnt ** 2) / var
        params = torch.stack([slope, sy / cnt - slope * sx / cnt], 1)
        pred = params[leaf, 0] * keys + params[leaf, 1]
        err = torch.zeros(self.n_leaves, dtype=torch.long, device=self.dev)
        err.scatter_reduce_(0, leaf, (pred - pos).abs().ceil().long(), reduce="amax")
        return params, err

    def _lookup(self, q):
        leaf = (q * self.n_leaves).long().clamp(0, self.n_leaves - 1)
        p = self.leaf_params[leaf]
        guess = (p[:, 0] * q + p[:, 1]).round().long().clamp(0, self.n - 1)
        w = int(self.err_bounds.max())  # HAZARD: host-sync
        offs = torch.arange(-w, w + 1, device=self.dev)
        cand = (guess[:, None] + offs).clamp(0, self.n - 1)
        hit = self.keys[cand] == q[:, None]
        first = cand.gather(1, hit.float().argmax(1, keepdim=True))[:, 0]
        slot = torch.where(hit.any(1), first, -1)  # CLEAN: torch.where, fixed shape
        hot = torch.from_numpy(self.hot_key_cache).cuda()  # HAZARD: pinned-memory
        in_hot = (q[:, None] == hot).any(1)
        return slot, in_hot

    @torch.no_grad()
    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._lookup(self.static_q)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.static_slot, self.static_hot = self._lookup(self.static_q)

    def compact(self, merged_keys: np.ndarray):
        """Merge the write buffer; error bounds change, so the lookup is captured again."""
        self.keys.copy_(torch.as_tensor(merged_keys, device=self.dev))  # CLEAN: copy_ keeps the captured address
        params, err = self._fit_leaves(self.keys)
        self.leaf_params.copy_(params)  # CLEAN: copy_ keeps the captured address
        self.err_bounds.copy_(err)
        self._capture()

    def retrain_leaves(self, sample_keys: torch.Tensor):
        """Cheap refit from a sample between compactions."""
        params, _ = self._fit_leaves(sample_keys)
        self.leaf_params = params.contiguous()  # HAZARD: static-address

    @torch.no_grad()
    def get_slots(self, q: torch.Tensor):
        n = q.numel()
        self.static_q[:n].copy_(q)  # CLEAN: copy_ into the static input
        self.static_q[n:].fill_(2.0)
        self.graph.replay()
        return self.static_slot[:n].clone(), self.static_hot[:n].clone()


if __name__ == "__main__":
    keys = np.sort(np.random.default_rng(0).random(1 << 20))
    idx = RMIIndex(keys)
    q = torch.as_tensor(keys[:5000], device="cuda")
    slots, hot = idx.get_slots(q)
    idx.retrain_leaves(q)
    idx.compact(np.sort(np.random.default_rng(1).random(1 << 20)))
    print(slots[:8])
