"""GPU hot-row cache in front of a 200M-row embedding table kept in pinned host memory.

The lookup graph maps ids to cache slots with a sorted device key array, gathers hit
rows from the GPU cache and takes miss rows from a pinned staging buffer that the
host prefetcher fills before each replay.  Eviction uses an LRU clock per slot.
"""
import numpy as np
import torch


class HostBackedEmbedding:
    def __init__(self, host_table: torch.Tensor, cache_rows=1 << 20, batch_ids=65536, warm_ids=None):
        assert host_table.is_pinned()
        self.host_table = host_table
        dim = host_table.shape[1]
        self.cache = torch.zeros(cache_rows, dim, dtype=host_table.dtype, device="cuda")
        self.keys = torch.full((cache_rows,), np.iinfo(np.int64).max, dtype=torch.long, device="cuda")
        self.slot_of_key = torch.zeros(cache_rows, dtype=torch.long, device="cuda")
        self.last_used = torch.zeros(cache_rows, dtype=torch.long, device="cuda")
        self.ids = torch.zeros(batch_ids, dtype=torch.long, device="cuda")
        self.miss_stage_host = torch.zeros(batch_ids, dim, dtype=host_table.dtype).pin_memory()
        self.miss_stage = torch.zeros(batch_ids, dim, dtype=host_table.dtype, device="cuda")
        self.warm_ids_np = np.asarray(warm_ids if warm_ids is not None else [], dtype=np.int64)
        self.clock = 0
        self.lookups = 0
        self.graph = torch.cuda.CUDAGraph()
        self.stream = torch.cuda.Stream()

    def _lookup(self):
        pos = torch.searchsorted(self.keys, self.ids).clamp_max(self.keys.numel() - 1)  # CLEAN: device probe
        hit = self.keys[pos] == self.ids
        slots = self.slot_of_key[pos]
        self.miss_stage.copy_(self.miss_stage_host, non_blocking=True)  # CLEAN: pinned staging buffer
        rows = torch.where(hit[:, None], self.cache[slots], self.miss_stage)
        self.last_used.index_fill_(0, slots, self.clock)  # HAZARD: python-scalar
        self.lookups += 1  # HAZARD: host-code
        return rows, hit

    def _lookup_with_warm(self):
        warm = torch.from_numpy(self.warm_ids_np).to("cuda")  # HAZARD: pinned-memory
        self.keys[: warm.numel()].copy_(torch.sort(warm).values)
        rows, hit = self._lookup()
        miss_rows = self.ids[~hit]  # HAZARD: dynamic-shape
        self.miss_count = miss_rows.numel()
        return rows

    @torch.no_grad()
    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self._lookup_with_warm()
        torch.cuda.current_stream().wait_stream(self.stream)
        with torch.cuda.graph(self.graph, stream=self.stream):
            self.out_rows = self._lookup_with_warm()

    @torch.no_grad()
    def prefetch_misses(self, ids_cpu: torch.Tensor, cached_mask_cpu: torch.Tensor):
        miss = ids_cpu[~cached_mask_cpu]  # CLEAN: host-side tensors, outside the graph
        self.miss_stage_host[: miss.numel()].copy_(self.host_table.index_select(0, miss))
        self.ids[: ids_cpu.numel()].copy_(ids_cpu, non_blocking=True)

    @torch.no_grad()
    def __call__(self, ids_cpu, cached_mask_cpu):
        self.prefetch_misses(ids_cpu, cached_mask_cpu)
        self.clock += 1
        self.graph.replay()
        return self.out_rows[: ids_cpu.numel()]

    def evict(self, n: int):
        victims = torch.topk(self.last_used, n, largest=False).indices  # CLEAN: eager, between replays
        self.keys[victims] = np.iinfo(np.int64).max
        self.keys.copy_(torch.sort(self.keys).values)
