"""Powder X-ray diffraction phase identification for a high-throughput materials lab.

A 1D CNN classifies which reference phases are present in a pattern. Patterns from the two
diffractometers cover different 2-theta ranges, so one graph is captured per range. Test-time
augmentation shifts the pattern by a few steps to absorb zero-offset errors.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

RANGES = {"bruker_10_80": 3500, "rigaku_5_90": 4250}


class XRDNet(nn.Module):
    def __init__(self, n_phases=420):
        super().__init__()
        blocks, c = [], 1
        for out, k in ((32, 35), (64, 25), (96, 15), (128, 9)):
            blocks += [nn.Conv1d(c, out, k, padding=k // 2), nn.BatchNorm1d(out), nn.ReLU(), nn.MaxPool1d(2)]
            c = out
        self.features = nn.Sequential(*blocks, nn.AdaptiveMaxPool1d(16), nn.Flatten())
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(128 * 16, 512), nn.ReLU(), nn.Linear(512, n_phases))

    def forward(self, x):
        return self.head(self.features(x))


class PhaseIdentifier:
    def __init__(self, model, batch=64, n_tta=4, min_counts=50.0):
        self.model = model.cuda().eval()
        self.batch, self.n_tta, self.min_counts = batch, n_tta, min_counts
        self.tta_gen = torch.Generator(device="cuda").manual_seed(2024)
        self.graph = torch.cuda.CUDAGraph()
        self.io = {}

    def _identify(self, counts):
        x = counts / counts.amax(-1, keepdim=True).clamp_min(1.0)
        if (counts.amax(-1) < self.min_counts).any():  # HAZARD: dynamic-control-flow
            x = torch.sqrt(x)                       # low-count patterns: variance-stabilise
        probs = torch.zeros(x.shape[0], self.model.head[-1].out_features, device=x.device)
        for _ in range(self.n_tta):
            shift = torch.randint(-3, 4, (1,), device=x.device, generator=self.tta_gen)  # HAZARD: rng
            idx = (torch.arange(x.shape[-1], device=x.device) - shift) % x.shape[-1]
            xs = x.index_select(-1, idx)
            probs += torch.sigmoid(self.model(xs[:, None]))
        probs /= self.n_tta
        top_p, top_i = torch.topk(probs, k=3, dim=-1)  # CLEAN: fixed-k topk, static shape
        present = torch.unique(top_i[top_p > 0.5])  # HAZARD: dynamic-shape
        return probs, top_i, present

    @torch.no_grad()
    @torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
    def capture_all(self):
        pool = torch.cuda.graph_pool_handle()
        warm = torch.cuda.Stream()
        for name, n_steps in RANGES.items():
            counts = torch.full((self.batch, n_steps), 100.0, device="cuda")
            warm.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(warm):
                for _ in range(3):
                    self._identify(counts)
            torch.cuda.current_stream().wait_stream(warm)
            with torch.cuda.graph(self.graph, pool=pool):  # HAZARD: api-misuse
                out = self._identify(counts)
            self.io[name] = (counts, out)

    def run(self, instrument, patterns):
        counts, (probs, top_i, _) = self.io[instrument]
        n = patterns.shape[0]
        counts[:n].copy_(patterns)  # CLEAN: copy_ into the static input
        counts[n:].fill_(100.0)
        self.graph.replay()
        return probs[:n].float().clone(), top_i[:n].clone()


def report(sample_ids, probs, names, thr=0.5):
    rows = []
    for sid, p in zip(sample_ids, probs.cpu()):  # CLEAN: host copy after the replay
        hits = torch.nonzero(p > thr).flatten().tolist()
        rows.append((sid, [names[i] for i in hits]))
    return rows


if __name__ == "__main__":
    ident = PhaseIdentifier(XRDNet())
    ident.capture_all()
    names = [f"phase_{i:03d}" for i in range(420)]
    for run in range(20):
        inst = "bruker_10_80" if run % 2 else "rigaku_5_90"
        pats = torch.rand(48, RANGES[inst], device="cuda") * 5000
        probs, _ = ident.run(inst, pats)
        print(report(range(run * 48, run * 48 + 48), probs, names)[:2])
