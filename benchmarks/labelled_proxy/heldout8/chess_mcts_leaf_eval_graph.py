"""Batched leaf evaluation for an MCTS chess engine (policy + WDL value net).

Search threads push leaf positions into a queue; the evaluator pads them to a
bucket and replays one CUDA graph per bucket.  All graphs share one pool.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BUCKETS = (8, 32, 128)
N_PLANES, N_MOVES = 112, 1858


class ResTower(nn.Module):
    def __init__(self, ch=128, blocks=10):
        super().__init__()
        self.stem = nn.Conv2d(N_PLANES, ch, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(),
                          nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch))
            for _ in range(blocks))
        self.policy = nn.Sequential(nn.Conv2d(ch, 32, 1), nn.Flatten(), nn.Linear(32 * 64, N_MOVES))
        self.value = nn.Sequential(nn.Conv2d(ch, 8, 1), nn.Flatten(),
                                   nn.Linear(8 * 64, 128), nn.ReLU(), nn.Linear(128, 3))

    def forward(self, planes):
        x = F.relu(self.stem(planes))
        for blk in self.blocks:
            x = F.relu(x + blk(x))
        return self.policy(x), self.value(x)


class LeafEvaluator:
    def __init__(self, net, variant_moves: np.ndarray, noise_seed=7):
        self.net = net.cuda().eval()
        self.variant_np = variant_moves          # bool (N_MOVES,), moves that exist in this variant
        self.contempt = 0.0                      # set by the UCI "Contempt" option
        self.value_scale = 1.0
        self.dirichlet_eps = 0.25
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(noise_seed)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_in, self.static_out = {}, {}, {}

    def set_contempt(self, centipawns):
        self.contempt = centipawns / 100.0

    def _evaluate(self, planes, side_to_move):
        logits, wdl = self.net(planes)
        legal = torch.from_numpy(self.variant_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        logits = logits.masked_fill(~legal, float("-inf"))  # CLEAN: masked_fill keeps a fixed shape
        noise = torch.rand(logits.shape, device="cuda", generator=self.noise_gen)  # HAZARD: rng
        prior = F.softmax(logits, -1) * (1 - self.dirichlet_eps) + self.dirichlet_eps * noise / noise.sum(-1, keepdim=True)
        wdl_weights = torch.tensor([1.0, 0.0, -1.0], device="cuda")  # HAZARD: host-sync
        q = (wdl.softmax(-1) * wdl_weights).sum(-1) * self.value_scale  # CLEAN: value_scale never changes after capture
        q = q - self.contempt * side_to_move  # HAZARD: python-scalar
        return prior, q

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        for b in reversed(BUCKETS):
            planes = torch.zeros(b, N_PLANES, 8, 8, device="cuda")
            stm = torch.ones(b, device="cuda")
            with torch.cuda.stream(side):  # CLEAN: eager warm-up on a side stream, before capture
                for _ in range(3):
                    self._evaluate(planes, stm)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self.static_out[b] = self._evaluate(planes, stm)
            self.graphs[b], self.static_in[b] = g, (planes, stm)

    def evaluate(self, planes, side_to_move):
        n = planes.shape[0]
        b = next((k for k in BUCKETS if k >= n), BUCKETS[-1])
        if n == b:
            self.static_in[b] = (planes, side_to_move)  # HAZARD: static-address
        else:
            static_planes, static_stm = self.static_in[b]
            static_planes[:n].copy_(planes)  # CLEAN: copy into the captured input
            static_stm[:n].copy_(side_to_move)
            static_planes[n:].zero_()
        self.graphs[b].replay()
        prior, q = self.static_out[b]
        return prior[:n].clone(), q[:n].clone()


if __name__ == "__main__":
    variant = np.ones(N_MOVES, dtype=bool)
    ev = LeafEvaluator(ResTower(), variant)
    ev.capture()
    ev.set_contempt(24)
    leaves = torch.randn(32, N_PLANES, 8, 8, device="cuda")
    stm = torch.where(torch.rand(32, device="cuda") > 0.5, 1.0, -1.0)
    p, v = ev.evaluate(leaves, stm)
