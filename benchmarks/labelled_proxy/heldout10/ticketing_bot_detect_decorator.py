"""Bot detection for a ticketing site's checkout flow.

Each session's recent clickstream (64 events: inter-event gap, event type,
pointer speed, scroll delta, viewport, ...) is encoded by a GRU; sessions that
score above the challenge threshold get a CAPTCHA. The scoring method is
captured on its first call by a decorator and replayed afterwards.
"""
import functools

import torch
import torch.nn as nn

EVENTS, FEAT, B = 64, 12, 1024


def cuda_graphed(warmup=3):
    def deco(method):
        @functools.wraps(method)
        def wrapper(self, *inputs):
            state = self.__dict__.setdefault("_graph_state", {})
            if "graph" not in state:
                static = [x.clone() for x in inputs]
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):  # CLEAN: warm-up stream forked and joined outside the capture
                    for _ in range(warmup):
                        method(self, *static)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = method(self, *static)
                state.update(graph=g, static=static, out=out)
            for dst, src in zip(state["static"], inputs):
                dst.copy_(src)
            state["graph"].replay()
            return state["out"]
        return wrapper
    return deco


class ClickstreamGRU(nn.Module):
    def __init__(self, d=96):
        super().__init__()
        self.gru = nn.GRU(FEAT, d, num_layers=2, batch_first=True)
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.out(h[:, -1]).squeeze(-1)


class BotDetector:
    def __init__(self, model, device="cuda"):
        self.model = model.eval().to(device)
        self.device = device
        self.challenge_threshold = 0.85  # tuned live by the trust & safety on-call
        self.sample_gen = torch.Generator(device=device)
        self.sample_gen.manual_seed(3)
        self.audit_stream = torch.cuda.Stream()
        self.audit_buf = torch.zeros(B, device=device)
        self.challenges = torch.zeros((), dtype=torch.long, device=device)
        self.mean_score = 0.0

    @torch.no_grad()
    @cuda_graphed(warmup=3)
    def score(self, events):
        # drop a random 25% of events: cheap robustness to lost beacons
        keep = torch.rand(events.shape[:2], device=self.device, generator=self.sample_gen) < 0.75  # HAZARD: rng
        p = torch.sigmoid(self.model(events * keep.unsqueeze(-1)))
        thr = self.challenge_threshold  # HAZARD: python-scalar
        challenge = p > thr
        self.challenges.add_(challenge.sum())  # CLEAN: device-side counter, no host read
        if p.max() > 0.999:  # HAZARD: dynamic-control-flow
            challenge = challenge | (p > 0.5)
        with torch.cuda.stream(self.audit_stream):  # HAZARD: stream
            self.audit_buf.copy_(p)
        self.mean_score = float(p.mean())  # HAZARD: host-sync
        return p, challenge


def on_call_override(detector, new_threshold):
    detector.challenge_threshold = new_threshold  # e.g. raised during a drop of stadium tickets


def checkout_gate(detector, sessions):
    p, challenge = detector.score(sessions.events)
    return [sid for sid, c in zip(sessions.ids, challenge.cpu().tolist()) if c]  # CLEAN: host read after the replay, outside the graph


if __name__ == "__main__":
    net = ClickstreamGRU()
    net.load_state_dict(torch.load("clickstream_gru.pt", map_location="cpu"))
    det = BotDetector(net)
    warm = torch.zeros(B, EVENTS, FEAT, device="cuda")
    det.score(warm)
    on_call_override(det, 0.9)
