"""Batch-bucketed CUDA-graph runner for Llama decode steps (static KV cache).

One graph per batch bucket, captured largest first into a shared pool on a
dedicated stream after eager warm-up. The rotary embedding implements
dynamic-NTK scaling as in the transformers `LlamaDynamicNTKScalingRotaryEmbedding`.
"""
import bisect

import torch
import torch.nn as nn


class DynamicNTKRotary(nn.Module):
    def __init__(self, dim, max_position_embeddings=4096, base=500000.0, scaling_factor=2.0):
        super().__init__()
        self.dim, self.base, self.scaling_factor = dim, base, scaling_factor
        self.max_seq_len_cached = self.original_max = max_position_embeddings
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x, position_ids):
        seq_len = int(position_ids.max()) + 1  # HAZARD: host-sync
        if seq_len > self.max_seq_len_cached:
            base = self.base * ((self.scaling_factor * seq_len / self.original_max) - (self.scaling_factor - 1)) ** (self.dim / (self.dim - 2))
            self.inv_freq = 1.0 / base ** (torch.arange(0, self.dim, 2, device=x.device).float() / self.dim)
            self.max_seq_len_cached = seq_len
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class DecodeGraphRunner:
    def __init__(self, model, cache, buckets=(1, 2, 4, 8, 16, 32), device="cuda"):
        self.model, self.cache, self.device = model.eval(), cache, device
        self.buckets = sorted(buckets)
        cfg = model.config
        self.rotary = DynamicNTKRotary(cfg.hidden_size // cfg.num_attention_heads, cfg.max_position_embeddings).to(device)
        self.pool = torch.cuda.graph_pool_handle()
        self.stream = torch.cuda.Stream()
        self.graphs, self.static = {}, {}
        self.static_temp = torch.ones(1, device=device)
        self.sample_stream = torch.cuda.Stream()
        self.sample_gen = torch.Generator(device=device)
        self.sample_gen.manual_seed(1234)

    def _step(self, ids, pos, slots):
        cos, sin = self.rotary(ids, pos)
        logits = self.model.decode(ids, cos, sin, slots, self.cache)[:, -1].float()
        with torch.cuda.stream(self.sample_stream):  # HAZARD: stream
            probs = torch.softmax(logits / self.static_temp, dim=-1)
        return torch.multinomial(probs, 1, generator=self.sample_gen)  # HAZARD: rng

    @torch.inference_mode()
    @torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        for bs in reversed(self.buckets):
            ids = torch.zeros(bs, 1, dtype=torch.long, device=self.device)
            pos = torch.zeros(bs, 1, dtype=torch.long, device=self.device)
            slots = torch.arange(bs, device=self.device)
            with torch.cuda.stream(self.stream):
                for _ in range(3):
                    self._step(ids, pos, slots)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=self.stream):  # CLEAN: warmed up on the capture stream, shared pool
                out = self._step(ids, pos, slots)
            self.graphs[bs], self.static[bs] = g, {"ids": ids, "pos": pos, "slots": slots, "out": out}
        torch.cuda.current_stream().wait_stream(self.stream)

    @torch.inference_mode()
    def step(self, input_ids, positions, slot_ids):
        n = input_ids.shape[0]
        bs = self.buckets[bisect.bisect_left(self.buckets, n)]
        st = self.static[bs]
        st["ids"][:n].copy_(input_ids)  # CLEAN: copy into the static input
        st["pos"][:n].copy_(positions)
        st["slots"][:n].copy_(slot_ids)
        st["ids"][n:].zero_()
        self.graphs[bs].replay()
        return st["out"][:n].clone()  # CLEAN: cloned before the next replay

    def rebind_cache(self, new_cache):
        self.cache = new_cache  # HAZARD: static-address

    def reset_slots(self, slot_ids):
        for layer in range(len(self.cache.key_cache)):
            self.cache.key_cache[layer].index_fill_(0, slot_ids, 0)  # CLEAN: in-place reset of the captured cache tensors
            self.cache.value_cache[layer].index_fill_(0, slot_ids, 0)


def serve_loop(runner, scheduler):
    runner.capture()
    while True:
        batch = scheduler.next_decode_batch()
        if batch is None:
            break
        runner.static_temp.fill_(batch.temperature)  # CLEAN: temperature written into a static tensor before replay
        nxt = runner.step(batch.input_ids, batch.positions, batch.slot_ids)
        scheduler.commit(batch, nxt.cpu())  # CLEAN: host copy after the replay, outside the capture
