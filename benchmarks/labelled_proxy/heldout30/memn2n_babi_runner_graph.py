# End-to-end Memory Network (MemN2N) answering bAbI questions. Model code from a 2017 PyTorch port;
# the QA service replays one CUDA graph per memory-size bucket, all in one pool.
import bisect
import torch
import torch.nn as nn
import torch.nn.functional as F


class MemN2N(nn.Module):
    def __init__(self, vocab, d=50, max_mem=50, hops=3):
        super().__init__()
        self.A = nn.ModuleList([nn.Embedding(vocab, d, padding_idx=0) for _ in range(hops + 1)])
        self.TA = nn.Embedding(max_mem, d)
        self.TC = nn.Embedding(max_mem, d)
        self.hops = hops
        self.register_buffer("enc", torch.ones(12, d))
        self.answer_mask = torch.zeros(vocab, device="cuda")

    def forward(self, story, query, mem_pad):
        M = story.size(1)
        t = torch.cuda.LongTensor(list(reversed(range(M))))  # HAZARD: host-sync
        u = (self.A[0](query) * self.enc[: query.size(1)]).sum(1)
        for k in range(self.hops):  # HAZARD: python-scalar
            m = (self.A[k](story) * self.enc[: story.size(2)]).sum(2) + self.TA(t)
            c = (self.A[k + 1](story) * self.enc[: story.size(2)]).sum(2) + self.TC(t)
            scores = torch.bmm(m, u.unsqueeze(2)).squeeze(2).masked_fill(mem_pad, -1e9)  # CLEAN: masked_fill keeps the shape
            p = F.softmax(scores, 1)
            u = u + torch.bmm(p.unsqueeze(1), c).squeeze(1)
        logits = F.linear(u, self.A[-1].weight) + self.answer_mask
        return logits.argmax(1), p


class BabiQAService:
    BUCKETS = (10, 20, 50)

    def __init__(self, model, batch=32, sent_len=12, q_len=12):
        self.model = model.cuda().eval()
        self.batch, self.sent_len, self.q_len = batch, sent_len, q_len
        self.pool = torch.cuda.graph_pool_handle()  # CLEAN: one pool shared by the bucket graphs
        self.graphs = {}
        for mem in sorted(self.BUCKETS, reverse=True):
            self._capture(mem, warmup=True)

    def _capture(self, mem, warmup):
        story = torch.zeros(self.batch, mem, self.sent_len, dtype=torch.long, device="cuda")
        query = torch.zeros(self.batch, self.q_len, dtype=torch.long, device="cuda")
        pad = torch.ones(self.batch, mem, dtype=torch.bool, device="cuda")
        with torch.no_grad():
            if warmup:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        self.model(story, query, pad)
                torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
                ans, attn = self.model(story, query, pad)
        self.graphs[mem] = (g, story, query, pad, ans, attn)

    def set_hops(self, hops):
        self.model.hops = hops

    def set_candidates(self, candidate_ids, vocab):
        mask = torch.full((vocab,), -1e9, device="cuda")
        mask[candidate_ids] = 0.0
        self.model.answer_mask = mask  # HAZARD: static-address

    def answer(self, stories, queries):
        n_mem = stories.size(1)
        i = bisect.bisect_left(self.BUCKETS, n_mem)  # CLEAN: host-side bucket choice before replay
        if i == len(self.BUCKETS):
            self.BUCKETS = self.BUCKETS + (n_mem,)
            self._capture(n_mem, warmup=False)
        mem = self.BUCKETS[i]
        g, story, query, pad, ans, attn = self.graphs[mem]
        story.zero_()
        story[:, :n_mem].copy_(stories)  # CLEAN: copy_ into the bucket's static input
        query.copy_(queries)
        pad.fill_(True)
        pad[:, :n_mem] = False
        g.replay()
        return ans.tolist(), attn[:, :n_mem].clone()  # CLEAN: host read and clone after replay, outside the capture


def serve(service, requests, hops_for_fast_path=1):
    for req in requests:
        if req.get("fast"):
            service.set_hops(hops_for_fast_path)
        yield service.answer(req["story"], req["query"])
