"""Session-based next-item recommendation (GRU4Rec) served with session-parallel slots.

Each of 512 slots holds one live shopping session; every tick the latest clicked
item of each slot is fed through a GRU cell and the next-item scores are blended with
a popularity prior and a trending boost. One tick for all slots is a captured graph.
"""
import numpy as np
import torch
import torch.nn as nn

N_ITEMS, EMB, HID, SLOTS, TOPK = 60_000, 128, 256, 512, 20


class GRU4Rec(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(N_ITEMS, EMB)
        self.cell = nn.GRUCell(EMB, HID)
        self.out = nn.Linear(HID, N_ITEMS)
        self.h0 = nn.Parameter(torch.zeros(HID))


class SessionServer:
    def __init__(self, model, pop_counts, blocked_items):
        self.model = model.eval()
        self.pop_log = torch.log1p(torch.from_numpy(pop_counts).float()).cuda()  # CLEAN: uploaded once in __init__
        self.trending = np.zeros(N_ITEMS, dtype=np.float32)  # refreshed every few minutes
        self.blocked_items = blocked_items  # Python list of recalled / out-of-stock item ids
        self.hidden = torch.zeros(SLOTS, HID, device="cuda")
        self.static_items = torch.zeros(SLOTS, dtype=torch.long, device="cuda")
        self.static_reset = torch.zeros(SLOTS, dtype=torch.bool, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _tick(self):
        m = self.model
        ended = self.static_reset.nonzero(as_tuple=True)[0]  # HAZARD: dynamic-shape
        h = self.hidden.index_copy(0, ended, m.h0.expand(ended.numel(), -1))
        h_new = m.cell(m.emb(self.static_items), h)
        scores = m.out(h_new).log_softmax(-1) + 0.1 * self.pop_log
        boost = torch.from_numpy(self.trending).cuda()  # HAZARD: pinned-memory
        scores = scores + boost
        scores[:, self.blocked_items] = float("-inf")  # HAZARD: host-sync
        scores[:, 0] = float("-inf")  # CLEAN: integer index on the padding item, no host copy
        self.hidden = h_new  # HAZARD: static-address
        return scores.topk(TOPK, dim=-1)

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._tick()
        torch.cuda.current_stream().wait_stream(s)
        self.hidden.zero_()
        with torch.cuda.graph(self.graph):
            self.top_scores, self.top_items = self._tick()

    @torch.no_grad()
    def tick(self, items, session_started):
        self.static_items.copy_(items)  # CLEAN: copy_ into the static input
        self.static_reset.copy_(session_started)
        self.graph.replay()
        return self.top_items.clone()

    def refresh_trending(self, counts_last_hour):
        self.trending[:] = np.log1p(counts_last_hour) * 0.05


@torch.no_grad()
def recall_at_k(server, sessions):
    hits, total = 0, 0
    for items, started, next_items in sessions:
        recs = server.tick(items, started)
        match = (recs == next_items[:, None]).any(-1)
        hits += torch.nonzero(match).numel()  # CLEAN: eager evaluation outside the graph
        total += len(next_items)
    return hits / max(total, 1)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    server = SessionServer(GRU4Rec().cuda(), rng.integers(0, 5000, N_ITEMS), blocked_items=[17, 4242, 31337])
    server.capture()
    sessions = [(torch.randint(1, N_ITEMS, (SLOTS,), device="cuda"), torch.rand(SLOTS, device="cuda") < 0.05,
                 torch.randint(1, N_ITEMS, (SLOTS,), device="cuda")) for _ in range(100)]
    server.refresh_trending(rng.integers(0, 50, N_ITEMS))
    print("recall@20:", recall_at_k(server, sessions))
