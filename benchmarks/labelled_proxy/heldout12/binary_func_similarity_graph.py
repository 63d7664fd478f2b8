"""Vulnerable-function search for a firmware scanning service.

Disassembled functions (normalised x86-64 / ARM instruction tokens) are
embedded with a SAFE-style self-attentive GRU and matched against an index of
functions with known CVEs. Two test-time views (token masking and operand
swapping) are averaged. Batches of 512 functions per length bucket.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, PAD = 8192, 0
BUCKETS = (64, 150, 250)


class FuncEncoder(nn.Module):
    def __init__(self, emb=100, hidden=128, hops=4, out=256):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, emb, padding_idx=PAD)
        self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.att = nn.Sequential(nn.Linear(2 * hidden, 64), nn.Tanh(), nn.Linear(64, hops))
        self.proj = nn.Linear(2 * hidden * hops, out)

    def forward(self, ins):
        h, _ = self.gru(self.emb(ins))
        a = self.att(h).masked_fill((ins == PAD)[..., None], -1e4).softmax(dim=1)  # CLEAN: padding masked, shape unchanged
        return F.normalize(self.proj(torch.einsum("btk,bth->bkh", a, h).flatten(1)), dim=-1)


class VulnSearch:
    def __init__(self, encoder, vuln_index, batch=512, seed=0):
        self.enc = encoder.cuda().eval()
        self.vuln_index = F.normalize(vuln_index.cuda(), dim=-1)
        self.mask_gen = torch.Generator(device="cuda")
        self.mask_gen.manual_seed(seed)
        self.swap_gen = torch.Generator(device="cuda")
        self.swap_gen.manual_seed(seed + 1)
        self.ins = {L: torch.zeros(batch, L, dtype=torch.long, device="cuda") for L in BUCKETS}
        self.lengths = {L: torch.full((batch,), L, device="cuda") for L in BUCKETS}
        self.graphs, self.out = {}, {}

    def _search(self, ins, lengths):
        max_len = int(lengths.max())  # HAZARD: host-sync
        ins = ins[:, :max_len]
        drop = torch.rand(ins.shape, device="cuda", generator=self.mask_gen) < 0.1  # CLEAN: generator registered with the graph
        swap = torch.rand(ins.shape, device="cuda", generator=self.swap_gen) < 0.05  # HAZARD: rng
        view_a = ins.masked_fill(drop, PAD)
        view_b = torch.where(swap, ins.roll(1, dims=1), ins)
        emb = F.normalize(self.enc(view_a) + self.enc(view_b), dim=-1)
        sims = emb @ self.vuln_index.T
        return sims.topk(5, dim=-1)  # CLEAN: fixed-K shortlist, no data-dependent shape

    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    @torch.no_grad()
    def capture(self):
        pool = torch.cuda.graph_pool_handle()
        for L in sorted(BUCKETS, reverse=True):
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._search(self.ins[L], self.lengths[L])
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            g.register_generator_state(self.mask_gen)
            with torch.cuda.graph(g, pool=pool):
                self.out[L] = self._search(self.ins[L], self.lengths[L])
            self.graphs[L] = g

    def load_index(self, vuln_index):
        # nightly NVD sync adds newly published CVE functions
        self.vuln_index = F.normalize(vuln_index.cuda(), dim=-1)  # HAZARD: static-address

    def query(self, tokens, lengths):
        L = next(b for b in BUCKETS if b >= tokens.shape[1])
        self.ins[L].zero_()
        self.ins[L][:, : tokens.shape[1]].copy_(tokens)  # CLEAN: written into the captured input
        self.lengths[L].copy_(lengths)
        self.graphs[L].replay()
        vals, idx = self.out[L]
        return vals.clone(), idx.clone()


if __name__ == "__main__":
    search = VulnSearch(FuncEncoder(), torch.randn(20000, 256))
    search.capture()
    for night in range(3):
        for _ in range(100):
            toks = torch.randint(1, VOCAB, (512, 120), device="cuda")
            scores, hits = search.query(toks, torch.randint(20, 120, (512,), device="cuda"))
        search.load_index(torch.randn(20000 + 50 * (night + 1), 256))
