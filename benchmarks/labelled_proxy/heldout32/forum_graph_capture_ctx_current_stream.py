# Forum: I copied a graph_capture() helper from an inference engine into our
# hot-spot scorer. Warm-up runs on its own stream as recommended, but capture
# fails with "operation not permitted when stream is capturing" and even after
# commenting lines out one by one I can't get a clean capture.
import contextlib
import logging

import torch
import torch.nn as nn

log = logging.getLogger("scorer")


@contextlib.contextmanager
def graph_capture(graph, pool=None):
    stream = torch.cuda.current_stream()
    with torch.cuda.graph(graph, pool=pool, stream=stream):  # HAZARD: stream
        yield graph


def warmup(fn, *args, iters=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())  # CLEAN: warm-up stream forked from the caller
    with torch.cuda.stream(s):
        for _ in range(iters):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)


class SpotScorer:
    def __init__(self):
        self.net = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 8, 1)).cuda().eval()
        self.anchor_cpu = torch.linspace(0.0, 1.0, 8).view(1, 8, 1, 1)
        self.n_hits = torch.zeros((), dtype=torch.long, device="cuda")

    @torch.no_grad()
    def run(self, feats):
        log.info("scorer: running body")  # CLEAN: plain string, logged once at capture
        heat = torch.sigmoid(self.net(feats))
        torch.cuda.empty_cache()  # HAZARD: memory
        anchors = self.anchor_cpu.to(feats.device)  # HAZARD: pinned-memory
        hits = torch.nonzero(heat > 0.5)  # HAZARD: dynamic-shape
        self.n_hits.fill_(hits.shape[0])
        return heat * anchors


scorer = SpotScorer()
static_feats = torch.randn(8, 64, 64, 48, device="cuda")
warmup(scorer.run, static_feats)

g = torch.cuda.CUDAGraph()
with graph_capture(g):
    static_out = scorer.run(static_feats)

for i in range(3):
    static_feats.copy_(torch.randn_like(static_feats))  # CLEAN: copy_ into the captured input
    g.replay()
    print(i, static_out.mean().item(), scorer.n_hits.item())  # CLEAN: host reads after the replay
