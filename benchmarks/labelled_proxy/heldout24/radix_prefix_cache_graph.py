"""Prefix-cache reuse for a multi-turn assistant: radix tree on the host, KV blocks on the GPU.

The attention-over-cached-prefix step is captured once per block-table width.  Host
code resolves the longest cached prefix and writes the block ids into a static
device block table before replay.
"""
import torch
import torch.nn.functional as F

BLOCK = 16


class RadixNode:
    __slots__ = ("children", "block_id")

    def __init__(self, block_id=-1):
        self.children = {}
        self.block_id = block_id


class PrefixCache:
    def __init__(self, n_blocks=4096, heads=16, head_dim=128, max_table=64):
        self.k_pool = torch.zeros(n_blocks, BLOCK, heads, head_dim, dtype=torch.float16, device="cuda")
        self.v_pool = torch.zeros_like(self.k_pool)
        self.root = RadixNode()
        self.block_table = torch.zeros(max_table, dtype=torch.long, device="cuda")
        self.q = torch.zeros(1, heads, 1, head_dim, dtype=torch.float16, device="cuda")
        self.last_tokens = torch.zeros(BLOCK, dtype=torch.long, device="cuda")
        self.n_cached = 0
        self.cache_hits = 0
        self.graphs = {}
        self.pool = torch.cuda.graph_pool_handle()

    def match(self, token_ids):
        node, blocks = self.root, []
        for i in range(0, len(token_ids) - BLOCK + 1, BLOCK):
            key = tuple(token_ids[i:i + BLOCK])
            if key not in node.children:
                break
            node = node.children[key]
            blocks.append(node.block_id)
        return blocks

    def _attend(self, width):
        table = self.block_table[:width]
        k = self.k_pool.index_select(0, table)  # CLEAN: gather with a device block table
        v = self.v_pool.index_select(0, table)
        n = self.n_cached  # HAZARD: python-scalar
        k = k.flatten(0, 1)[: n * BLOCK].permute(1, 0, 2)[None]
        v = v.flatten(0, 1)[: n * BLOCK].permute(1, 0, 2)[None]
        return F.scaled_dot_product_attention(self.q, k, v)

    def _attend_with_refresh(self, width):
        recent = self.last_tokens.tolist()  # HAZARD: host-sync
        extra = self.match(recent)
        self.cache_hits += len(extra) > 0  # HAZARD: host-code
        if width >= 32:
            torch.cuda.empty_cache()  # HAZARD: memory
        return self._attend(width)

    @torch.no_grad()
    def capture(self, widths=(8, 16, 32, 64)):
        s = torch.cuda.Stream()
        for w in sorted(widths, reverse=True):
            self.n_cached = w
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self._attend_with_refresh(w)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=s):
                out = self._attend_with_refresh(w)
            self.graphs[w] = (g, out)

    @torch.no_grad()
    def attend_prefix(self, token_ids, q):
        blocks = self.match(token_ids)
        width = next(w for w in sorted(self.graphs) if w >= len(blocks))
        ids = torch.tensor(blocks + [0] * (width - len(blocks)), dtype=torch.long)  # CLEAN: built on the host, outside capture
        self.block_table[:width].copy_(ids, non_blocking=True)
        self.n_cached = len(blocks)
        self.q.copy_(q)  # CLEAN: static query updated in place
        g, out = self.graphs[width]
        g.replay()
        return out.clone()  # CLEAN: cloned before another replay
