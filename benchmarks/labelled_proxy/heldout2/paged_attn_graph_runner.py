"""Graph runner with a pluggable attention backend, loosely following an SGLang-style layout."""
import bisect
import gc

import torch
import torch.nn as nn


class TritonLikeAttnBackend:
    def __init__(self, max_bs, device="cuda"):
        self.cu_seqlens = torch.zeros(max_bs + 1, dtype=torch.int32, device=device)
        self.max_len_buf = torch.zeros((), dtype=torch.int32, device=device)
        self.req_slots = torch.zeros(max_bs, dtype=torch.int32, device=device)
        self.host_req_slots = [0] * max_bs

    def init_forward_metadata(self, bs, seq_lens):
        req_host = torch.tensor(self.host_req_slots[:bs], dtype=torch.int32, pin_memory=True)  # HAZARD: pinned-memory
        self.req_slots[:bs].copy_(req_host, non_blocking=True)
        torch.cumsum(seq_lens[:bs], 0, out=self.cu_seqlens[1 : bs + 1])  # CLEAN: device cumsum into a persistent buffer
        self.max_len_buf.copy_(seq_lens[:bs].max())  # CLEAN: max kept on the device

    def forward(self, q, k_pool, v_pool, bs):
        max_len = int(self.max_len_buf)  # HAZARD: host-sync
        k = k_pool[:max_len].unsqueeze(0).expand(bs, -1, -1)
        v = v_pool[:max_len].unsqueeze(0).expand(bs, -1, -1)
        att = torch.softmax(q.unsqueeze(1) @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        return (att @ v).squeeze(1)


class TinyModel(nn.Module):
    def __init__(self, attn, vocab=32000, dim=512, pool_size=65536):
        super().__init__()
        self.attn = attn
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.lm_head = nn.Linear(dim, vocab)
        self.register_buffer("k_pool", torch.zeros(pool_size, dim))
        self.register_buffer("v_pool", torch.zeros(pool_size, dim))

    def forward(self, input_ids, out_cache_loc, bs):
        q, k, v = self.qkv(self.embed(input_ids)).chunk(3, dim=-1)
        self.k_pool.index_copy_(0, out_cache_loc, k)
        self.v_pool.index_copy_(0, out_cache_loc, v)
        return self.lm_head(self.attn.forward(q, self.k_pool, self.v_pool, bs))


class CudaGraphRunner:
    def __init__(self, model, capture_bs=(1, 2, 4, 8, 16, 32)):
        self.model = model
        self.capture_bs = sorted(capture_bs)
        max_bs = self.capture_bs[-1]
        self.input_ids = torch.zeros(max_bs, dtype=torch.long, device="cuda")
        self.seq_lens = torch.ones(max_bs, dtype=torch.int32, device="cuda")
        self.out_cache_loc = torch.zeros(max_bs, dtype=torch.long, device="cuda")
        self.graphs, self.outputs = {}, {}

    def capture(self):
        gc.collect()
        gc.freeze()
        pool = None
        for bs in reversed(self.capture_bs):
            g, out = self.capture_one(bs, pool)
            pool = g.pool() if pool is None else pool
            self.graphs[bs], self.outputs[bs] = g, out
        gc.unfreeze()

    def capture_one(self, bs, pool):
        def run_once():
            self.model.attn.init_forward_metadata(bs, self.seq_lens)
            return self.model(self.input_ids[:bs], self.out_cache_loc[:bs], bs)

        for _ in range(2):
            torch.cuda.synchronize()  # CLEAN: synchronize during warm-up, before capture starts
            run_once()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
            out = run_once()
        return g, out

    def replay(self, input_ids, seq_lens, out_cache_loc, req_slots):
        raw_bs = input_ids.shape[0]
        bs = self.capture_bs[bisect.bisect_left(self.capture_bs, raw_bs)]
        if bs != raw_bs:
            self.seq_lens.fill_(1)  # CLEAN: padding lanes reset before replay
        self.input_ids[:raw_bs].copy_(input_ids)
        self.seq_lens[:raw_bs].copy_(seq_lens)
        self.model.attn.host_req_slots[:raw_bs] = req_slots
        self.out_cache_loc = out_cache_loc  # HAZARD: static-address
        self.graphs[bs].replay()
        return self.outputs[bs][:raw_bs]
