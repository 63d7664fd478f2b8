"""Speaker diarization front end: ECAPA-lite segment embeddings + cohort statistics for AS-norm.

Segments are embedded in CUDA graphs, one per bucket of segments per call, sharing one pool.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ECAPALite(nn.Module):
    def __init__(self, n_mels=80, c=512, emb=192):
        super().__init__()
        self.frontend = nn.Sequential(nn.Conv1d(n_mels, c, 5, padding=2), nn.ReLU(), nn.BatchNorm1d(c))
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Conv1d(c, c, 3, padding=d, dilation=d), nn.ReLU(), nn.BatchNorm1d(c))
                                      for d in (2, 3, 4)])
        self.att = nn.Sequential(nn.Conv1d(c, 128, 1), nn.Tanh(), nn.Conv1d(128, c, 1))
        self.fc = nn.Linear(2 * c, emb)

    def forward(self, feats, vad):  # feats (B, n_mels, T), vad (B, T) in {0, 1}
        x = self.blocks(self.frontend(feats))
        if not vad.any():  # HAZARD: dynamic-control-flow
            return x.new_zeros(x.shape[0], self.fc.out_features)
        w = self.att(x).masked_fill(vad[:, None] < 0.5, -1e4).softmax(-1)  # CLEAN: masked_fill keeps the shapes fixed
        mu = (x * w).sum(-1)
        sd = ((x ** 2 * w).sum(-1) - mu ** 2).clamp(min=1e-5).sqrt()
        return F.normalize(self.fc(torch.cat([mu, sd], 1)), dim=-1)


class CohortStats(nn.Module):
    def __init__(self, cohort_cpu, top_k=200):
        super().__init__()
        self.cohort_cpu = cohort_cpu  # (N, emb) float32 tensor loaded with torch.load
        self.top_k = top_k

    def forward(self, emb):
        cohort = self.cohort_cpu.to("cuda")  # HAZARD: pinned-memory
        top = (emb @ cohort.t()).topk(self.top_k, dim=-1).values
        return top.mean(-1), top.std(-1)


class DiarizationRunner:
    BUCKETS = (64, 32, 16, 8)  # segments per call, captured largest first

    def __init__(self, encoder, cohort, n_mels=80, frames=150):
        self.encoder, self.cohort = encoder.cuda().eval(), cohort.cuda().eval()
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_feats, self.static_vad, self.outputs = {}, {}, {}, {}
        self.shape = (n_mels, frames)

    @torch.no_grad()
    def capture_all(self):
        graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        for b in self.BUCKETS:
            feats = torch.zeros(b, *self.shape, device="cuda")
            vad = torch.ones(b, self.shape[1], device="cuda")
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.cohort(self.encoder(feats, vad))
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(graph, pool=self.pool, stream=s):  # HAZARD: api-misuse
                emb = self.encoder(feats, vad)
                stats = self.cohort(emb)
            self.graphs[b] = graph
            self.static_feats[b], self.static_vad[b], self.outputs[b] = feats, vad, (emb, stats)

    @torch.no_grad()
    def embed(self, feats, vad):
        n = feats.shape[0]
        b = min(k for k in self.BUCKETS if k >= n)
        self.static_feats[b] = F.pad(feats, (0, 0, 0, 0, 0, b - n))  # HAZARD: static-address
        self.static_vad[b][:n].copy_(vad)  # CLEAN: copy_ into the static VAD buffer
        self.static_vad[b][n:].zero_()
        self.graphs[b].replay()
        emb, (mu, sd) = self.outputs[b]
        return emb[:n].clone(), mu[:n].clone(), sd[:n].clone()  # CLEAN: outputs cloned before the next replay


def cluster(emb, threshold=0.6):
    sim = emb @ emb.t()
    labels = torch.full((emb.shape[0],), -1, dtype=torch.long)
    sim_cpu = sim.cpu()
    nxt = 0
    for i in range(emb.shape[0]):
        if labels[i] >= 0:
            continue
        members = (sim_cpu[i] > threshold) & (labels < 0)
        labels[members] = nxt
        nxt += 1
    return labels


if __name__ == "__main__":
    runner = DiarizationRunner(ECAPALite(), CohortStats(torch.randn(5000, 192)))
    runner.capture_all()
    e, mu, sd = runner.embed(torch.randn(27, 80, 150, device="cuda"), torch.ones(27, 150, device="cuda"))
    print(cluster(e))
