"""Blockwise (online-softmax) attention for 32k-token contexts, split over two streams.

Heads are split in two halves; each half walks the KV blocks on its own stream with
a running max / running sum, so the two halves overlap.  The attention layer's
forward is captured per sequence bucket for the long-context retriever encoder.
"""
import torch


class BlockwiseAttention:
    def __init__(self, heads=16, head_dim=128, block=2048, max_len=32768):
        self.heads, self.head_dim, self.block = heads, head_dim, block
        self.scale = head_dim ** -0.5
        self.s_lo = torch.cuda.Stream()
        self.s_hi = torch.cuda.Stream()
        self.max_len = max_len
        self.kv_len = torch.full((1,), max_len, dtype=torch.long, device="cuda")
        self.positions = torch.arange(max_len, device="cuda")

    def _half(self, q, k, v, out, n_blocks):
        m = torch.full(q.shape[:-1], float("-inf"), device=q.device)
        l = torch.zeros(q.shape[:-1], device=q.device)
        acc = torch.zeros_like(q, dtype=torch.float32)
        for b in range(n_blocks):
            sl = slice(b * self.block, (b + 1) * self.block)
            s = (q @ k[..., sl, :].transpose(-1, -2)).float() * self.scale
            valid = self.positions[sl] < self.kv_len
            s = torch.where(valid, s, torch.full_like(s, float("-inf")))  # CLEAN: device-side padding mask
            m_new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - m_new[..., None])
            corr = torch.exp(m - m_new)
            l = l * corr + p.sum(-1)
            acc = acc * corr[..., None] + p @ v[..., sl, :].float()
            m = m_new
        out.copy_((acc / l[..., None]).to(out.dtype))

    def forward(self, q, k, v):
        out = torch.empty_like(q)
        h = self.heads // 2
        n_blocks = int(self.kv_len.max() + self.block - 1) // self.block  # HAZARD: host-sync
        main = torch.cuda.current_stream()
        self.s_lo.wait_stream(main)
        self.s_hi.wait_stream(main)
        with torch.cuda.stream(self.s_lo):  # CLEAN: forked above and joined below
            self._half(q[:, :h], k[:, :h], v[:, :h], out[:, :h], n_blocks)
        with torch.cuda.stream(self.s_hi):  # HAZARD: stream
            self._half(q[:, h:], k[:, h:], v[:, h:], out[:, h:], n_blocks)
        main.wait_stream(self.s_lo)
        assert torch.isfinite(out).all(), "non-finite attention output"  # HAZARD: host-sync
        return out


class LongContextEncoderRunner:
    def __init__(self, attn: BlockwiseAttention, buckets=(8192, 16384, 32768), batch=2):
        self.attn = attn
        self.graphs, self.io = {}, {}
        self.buckets = buckets
        self.batch = batch

    @torch.no_grad()
    def capture(self):
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        for L in sorted(self.buckets, reverse=True):
            shape = (self.batch, self.attn.heads, L, self.attn.head_dim)
            q, k, v = (torch.zeros(shape, dtype=torch.bfloat16, device="cuda") for _ in range(3))
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self.attn.forward(q, k, v)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=side):
                out = self.attn.forward(q, k, v)
            self.graphs[L], self.io[L] = g, (q, k, v, out)

    @torch.no_grad()
    def run(self, q, k, v, true_len: int):
        L = min(b for b in self.buckets if b >= q.shape[2])
        sq, sk, sv, out = self.io[L]
        for dst, src in ((sq, q), (sk, k), (sv, v)):
            dst.zero_()
            dst[:, :, : src.shape[2]].copy_(src)  # CLEAN: copy into the static inputs
        self.attn.kv_len.fill_(true_len)  # CLEAN: device scalar updated in place
        self.graphs[L].replay()
        return out[:, :, : q.shape[2]].clone()
