"""DGA detection on a recursive resolver's query stream.

Each queried domain (second-level label, up to 63 chars, plus its TLD) is
classified as benign or one of the known DGA families by a char-CNN + BiGRU.
The resolver batches queries into fixed buckets; each bucket has a graph that
is captured under fp16 autocast.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

MAXLEN = 64
FAMILIES = ["benign", "conficker", "cryptolocker", "necurs", "ramnit", "suppobox", "matsnu", "pykspa"]
WORDLIST_FAMILIES = [5, 6]  # dictionary-based DGAs are over-confident; damp them


class DGANet(nn.Module):
    def __init__(self, vocab=40, d=48, h=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.conv = nn.Conv1d(d, h, 3, padding=1)
        self.gru = nn.GRU(h, h, batch_first=True, bidirectional=True)
        self.tld = nn.Embedding(1024, 16)
        self.out = nn.Linear(2 * h + 16, len(FAMILIES))

    def forward(self, chars, tld):
        x = F.relu(self.conv(self.emb(chars).transpose(1, 2))).transpose(1, 2)
        h, _ = self.gru(x)
        return self.out(torch.cat([h.max(1).values, self.tld(tld)], -1))


class ResolverFilter:
    def __init__(self, net, buckets=(256, 1024), device="cuda"):
        self.net = net.eval().to(device)
        self.device = device
        self.buckets = sorted(buckets)
        self.benign_idx = torch.tensor([0], device=device)  # CLEAN: built once at start-up, outside any graph
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.io = {}, {}

    def _classify(self, chars, tld):
        logits = self.net(chars, tld)
        logits[:, WORDLIST_FAMILIES] -= 0.5  # HAZARD: host-sync
        probs = torch.softmax(logits.float(), -1)
        benign = probs.index_select(1, self.benign_idx).squeeze(1)  # CLEAN: index_select with a CUDA index tensor
        seen_tlds = torch.unique(tld)  # HAZARD: dynamic-shape
        probs = probs.masked_fill((chars[:, :1] == 0), 0.0)  # CLEAN: masked_fill, shape unchanged
        return probs, benign, seen_tlds

    @torch.no_grad()
    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    def capture(self):
        for b in reversed(self.buckets):
            chars = torch.zeros(b, MAXLEN, dtype=torch.long, device=self.device)
            tld = torch.zeros(b, dtype=torch.long, device=self.device)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._classify(chars, tld)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                torch.cuda.empty_cache()  # HAZARD: memory
                out = self._classify(chars, tld)
            self.graphs[b], self.io[b] = g, (chars, tld, out)

    def classify(self, chars, tld):
        n = chars.shape[0]
        b = next(k for k in self.buckets if k >= n)
        c, t, (probs, benign, _) = self.io[b]
        c.zero_()
        c[:n].copy_(chars)
        t.zero_()
        t[:n].copy_(tld)
        self.graphs[b].replay()
        return probs[:n].clone(), benign[:n].clone()


def block_list(filter_, batch, threshold=0.95):
    probs, benign = filter_.classify(batch.chars, batch.tld)
    family = probs.argmax(-1)
    suspicious = (benign < 1 - threshold).cpu()
    return [(q, FAMILIES[f]) for q, f, s in zip(batch.names, family.tolist(), suspicious.tolist()) if s]


if __name__ == "__main__":
    net = DGANet()
    net.load_state_dict(torch.load("dga_charcnn_gru.pt", map_location="cpu"))
    flt = ResolverFilter(net)
    flt.capture()
