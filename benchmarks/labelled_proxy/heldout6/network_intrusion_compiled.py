"""Network intrusion detection on bidirectional flow records (CIC-IDS-2017 features).

Flow exporters emit ~80 statistics per flow (durations, packet-length moments, flag
counts, inter-arrival times). A residual MLP classifies each flow as benign or one
of 14 attack families. The classifier is swapped for a compiled version at start-up:
`global classify; classify = torch.compile(classify, mode="reduce-overhead")`.
"""
import time
import torch
import torch.nn as nn

N_FEAT, N_CLS, WINDOW = 78, 15, 4096
STATS = {"alerts": 0, "windows": 0}


class FlowNet(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.register_buffer("mu", torch.zeros(N_FEAT))
        self.register_buffer("sigma", torch.ones(N_FEAT))
        self.inp = nn.Linear(N_FEAT, d)
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU()) for _ in range(3)])
        self.out = nn.Linear(d, N_CLS)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        return self.out(h)


def classify(model, flows):
    t0 = time.perf_counter()  # HAZARD: host-code
    x = torch.nan_to_num(flows, nan=0.0, posinf=0.0, neginf=0.0)  # CLEAN: out-of-place sanitising
    x = (torch.log1p(x.clamp_min(0)) - model.mu) / model.sigma
    probs = model(x).softmax(-1)
    n_alerts = (probs[:, 0] < 0.5).sum().item()  # HAZARD: host-sync
    STATS["alerts"] += n_alerts
    STATS["t_start"] = t0
    return probs


@torch.compile(mode="reduce-overhead")
def clip_heavy_hitters_(flows, caps):
    flows.clamp_(max=caps)  # HAZARD: static-address
    return flows


def fit_scaler(model, train_flows):
    x = torch.log1p(torch.nan_to_num(train_flows).clamp_min(0))
    model.mu.copy_(x.mean(0))  # CLEAN: in-place refit keeps the buffer addresses
    model.sigma.copy_(x.std(0).clamp_min(1e-3))


def main(model, capture_source, caps):
    global classify
    classify = torch.compile(classify, mode="reduce-overhead")
    buf = torch.zeros(WINDOW, N_FEAT, device="cuda")
    with torch.no_grad():
        for flows in capture_source:  # flows seen in the last second, any count
            t_call = time.perf_counter()  # CLEAN: host timing around the call, outside the compiled function
            labels = classify(model, flows).argmax(-1).cpu()  # HAZARD: dynamic-shape
            n = min(flows.shape[0], WINDOW)
            buf.zero_()
            buf[:n].copy_(flows[:n])
            clip_heavy_hitters_(buf, caps)
            padded = classify(model, buf)[:n].clone()  # CLEAN: padded to WINDOW rows and cloned
            STATS["windows"] += 1
            STATS["latency_ms"] = (time.perf_counter() - t_call) * 1e3
            yield labels, padded.argmax(-1).cpu()


if __name__ == "__main__":
    net = FlowNet().cuda().eval()
    fit_scaler(net, torch.rand(100_000, N_FEAT, device="cuda") * 1e4)
    source = (torch.rand(int(n), N_FEAT, device="cuda") * 1e4 for n in torch.randint(500, 4000, (30,)))
    caps = torch.full((N_FEAT,), 1e6, device="cuda")
    for labels, labels_padded in main(net, source, caps):
        pass
    print(STATS)
