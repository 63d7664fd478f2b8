"""DeepLog-style anomaly detection on parsed service logs.

Each service has its own LSTM over log-key sequences (Drain templates). A
window is anomalous when the next key is not among the model's top-g
predictions. The SOC pipeline scores a fixed batch of windows per service
every second, so each service's scoring pass is captured once and replayed.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_KEYS, PAD, WINDOW, BATCH, TOP_G = 512, 512, 10, 256, 9


class DeepLog(nn.Module):
    def __init__(self, emb=64, hidden=128):
        super().__init__()
        self.emb = nn.Embedding(N_KEYS + 1, emb, padding_idx=PAD)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, N_KEYS)

    def forward(self, seq):
        h, _ = self.lstm(self.emb(seq))
        return self.out(h[:, -1])


class ServiceMonitor:
    def __init__(self, models):
        self.models = {svc: m.cuda().eval() for svc, m in models.items()}
        self.seq = {svc: torch.full((BATCH, WINDOW), PAD, dtype=torch.long, device="cuda") for svc in models}
        self.nxt = {svc: torch.zeros(BATCH, dtype=torch.long, device="cuda") for svc in models}
        self.graph = torch.cuda.CUDAGraph()
        self.out = {}
        self.windows_scored = 0
        self.last_peak = 0.0

    def _score(self, svc):
        seq, nxt = self.seq[svc], self.nxt[svc]
        logits = self.models[svc](seq)
        topk = logits.topk(TOP_G, dim=-1).indices
        hit = (topk == nxt[:, None]).any(-1)  # CLEAN: fixed-shape membership test on the device
        nll = F.cross_entropy(logits, nxt.clamp(max=N_KEYS - 1), reduction="none")
        surprise = nll.masked_fill(nxt == PAD, 0.0)  # CLEAN: masked_fill instead of dropping padded rows
        diversity = torch.unique(seq).numel()  # HAZARD: dynamic-shape
        self.windows_scored += seq.shape[0]  # HAZARD: host-code
        self.last_peak = surprise.max().item()  # HAZARD: host-sync
        return (~hit).float(), surprise / max(diversity, 1)

    def capture_all(self):
        with torch.no_grad():
            for svc in self.models:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        self._score(svc)
                torch.cuda.current_stream().wait_stream(side)
                with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
                    self.out[svc] = self._score(svc)

    def score(self, svc, windows, next_keys):
        self.seq[svc].copy_(windows)  # CLEAN: copied into the captured input
        self.nxt[svc].copy_(next_keys)
        self.graph.replay()
        flags, surprise = self.out[svc]
        return flags.clone(), surprise.clone()


def to_alerts(svc, flags, surprise, threshold=0.3):
    idx = flags.nonzero().flatten()  # CLEAN: eager, after the replay
    rate = flags.mean().item()
    if rate > threshold:
        return [{"service": svc, "window": int(i), "surprise": float(surprise[i])} for i in idx[:50]]
    return []


if __name__ == "__main__":
    services = ["auth", "payments", "search"]
    mon = ServiceMonitor({s: DeepLog() for s in services})
    mon.capture_all()
    for tick in range(600):
        for s in services:
            win = torch.randint(0, N_KEYS, (BATCH, WINDOW), device="cuda")
            nk = torch.randint(0, N_KEYS, (BATCH,), device="cuda")
            alerts = to_alerts(s, *mon.score(s, win, nk))
            if alerts:
                print(f"{s}: {len(alerts)} anomalous windows")
