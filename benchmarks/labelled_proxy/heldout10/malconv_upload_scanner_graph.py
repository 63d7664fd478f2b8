"""MalConv-style static malware scoring for a file-sharing upload scanner.

The first bytes of each PE file go through a byte embedding, a gated 1-D
convolution and a global max-pool; a small head adds normalised PE-header
statistics. Uploads are padded into (batch, length) buckets, one graph each.
"""
import numpy as np
import torch
import torch.nn as nn

BUCKETS = {64: 2 ** 18, 16: 2 ** 20}   # batch -> padded byte length
HDR = 16
PAD = 256


class MalConv(nn.Module):
    def __init__(self, d=8, ch=128, win=512):
        super().__init__()
        self.embed = nn.Embedding(257, d, padding_idx=PAD)
        self.conv = nn.Conv1d(d, ch, win, stride=win)
        self.gate = nn.Conv1d(d, ch, win, stride=win)
        self.head = nn.Sequential(nn.Linear(ch + HDR, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x, hdr):
        e = self.embed(x).transpose(1, 2)
        h = self.conv(e) * torch.sigmoid(self.gate(e))
        pooled, pos = h.max(-1)
        return self.head(torch.cat([pooled, hdr], -1)).squeeze(-1), pooled, pos


class Scanner:
    def __init__(self, model, hdr_mean_np, device="cuda"):
        self.model = model.eval().to(device)
        self.device = device
        self.hdr_mean_np = hdr_mean_np.astype(np.float32)
        self.graphs, self.io = {}, {}
        self.pool = torch.cuda.graph_pool_handle()
        self.top_chunks = []

    def _forward(self, x, hdr):
        mean = torch.from_numpy(self.hdr_mean_np).cuda()  # HAZARD: pinned-memory
        logit, pooled, pos = self.model(x, hdr - mean)
        top = torch.topk(pooled, k=4, dim=-1)  # CLEAN: fixed-k topk, static shape
        chunks = pos.gather(1, top.indices)
        self.top_chunks = chunks[:, 0].tolist()  # HAZARD: host-sync
        return torch.sigmoid(logit), chunks

    def _blank(self, batch, length):
        x = torch.full((batch, length), PAD, dtype=torch.long, device=self.device)
        return x, torch.zeros(batch, HDR, device=self.device)

    @torch.no_grad()
    def capture(self):
        for batch, length in BUCKETS.items():
            x, hdr = self._blank(batch, length)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._forward(x, hdr)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                out = self._forward(x, hdr)
            self.graphs[batch], self.io[batch] = g, (x, hdr, out)

    @torch.no_grad()
    def add_bucket(self, batch, length):
        # ops add a bucket for the archive re-scan (large installers); capture right away
        x, hdr = self._blank(batch, length)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
            out = self._forward(x, hdr)
        self.graphs[batch], self.io[batch] = g, (x, hdr, out)

    def reload_signatures(self, state):
        with torch.no_grad():
            self.model.head[2].weight.copy_(state["head.2.weight"])  # CLEAN: in-place copy keeps the captured address
            self.model.head[2].bias.copy_(state["head.2.bias"])
        # the byte embedding is retrained weekly on new families
        self.model.embed.weight = nn.Parameter(state["embed.weight"].to(self.device))  # HAZARD: static-address

    def scan(self, x, hdr):
        xs, hs, (prob, chunks) = self.io[x.shape[0]]
        xs.copy_(x)
        hs.copy_(hdr)
        self.graphs[x.shape[0]].replay()
        return prob.clone(), chunks.clone()  # CLEAN: outputs cloned before the next replay


if __name__ == "__main__":
    scanner = Scanner(MalConv(), np.load("pe_header_mean.npy"))
    scanner.capture()
    scanner.add_bucket(4, 2 ** 21)
    weekly = torch.load("malconv_weekly.pt", map_location="cpu")
    scanner.reload_signatures(weekly)
