# Forum: "Sharing one mempool across batch-size buckets (vLLM style) -- earlier
# results change after later requests, and temperature is ignored"
#
# Buckets are captured largest-first into one graph_pool_handle(), requests are
# padded up to the next bucket. A late batch size (1) is captured on demand.
import torch
import torch.nn as nn

VOCAB, D, MAX_BS = 32000, 512, 8


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(4096, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids, pos):
        h = self.emb(ids) + self.pos(pos)
        return self.head(h + self.mlp(h))


class BucketRunner:
    def __init__(self, model, buckets=(2, 4, 8)):
        self.model, self.buckets = model, sorted(buckets)
        self.pool = torch.cuda.graph_pool_handle()  # CLEAN: one pool, graphs never replay concurrently
        self.stream = torch.cuda.Stream()
        self.static_ids = torch.zeros(MAX_BS, dtype=torch.long, device="cuda")
        self.static_pos = torch.zeros(MAX_BS, dtype=torch.long, device="cuda")
        self.graphs, self.outs = {}, {}
        self.temperature = 1.0
        for bs in reversed(self.buckets):
            self.capture(bs)

    @torch.no_grad()
    def _step(self, bs):
        logits = self.model(self.static_ids[:bs], self.static_pos[:bs])
        temp = self.temperature  # HAZARD: python-scalar
        return torch.softmax(logits / temp, dim=-1)

    def capture(self, bs, warmup=True):
        if warmup:
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                for _ in range(2):
                    self._step(bs)
            torch.cuda.current_stream().wait_stream(self.stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool, stream=self.stream):  # HAZARD: api-misuse
            self.outs[bs] = self._step(bs)
            torch.cuda.empty_cache()  # HAZARD: memory
        self.graphs[bs] = g

    def run(self, ids, pos, temperature=1.0):
        n = ids.shape[0]
        if n not in self.graphs and n < self.buckets[0]:
            self.buckets.insert(0, n)
            self.capture(n, warmup=False)  # "the kernels already ran for the other sizes"
        bs = next(b for b in self.buckets if b >= n)
        self.temperature = temperature
        self.static_ids[:n].copy_(ids)  # CLEAN: copy into the static input
        self.static_pos[:n].copy_(pos)
        self.static_ids[n:bs].zero_()  # CLEAN: clear the padding lanes
        self.graphs[bs].replay()
        return self.outs[bs][:n]


runner = BucketRunner(TinyLM().cuda().eval())
history, safe = [], []
for n, temp in [(3, 0.7), (8, 1.0), (1, 1.3), (5, 0.2)]:
    ids = torch.randint(0, VOCAB, (n,), device="cuda")
    pos = torch.full((n,), 17, device="cuda")
    probs = runner.run(ids, pos, temperature=temp)
    history.append(probs)  # HAZARD: static-address
    safe.append(probs.clone())  # CLEAN: cloned before the next replay
for h, s in zip(history, safe):
    print(h.shape, (h - s).abs().max().item())
