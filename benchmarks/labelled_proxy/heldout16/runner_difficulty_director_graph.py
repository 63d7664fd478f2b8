"""Server-side dynamic difficulty for an endless-runner mobile game.

Every two seconds the game servers forward the last 32 telemetry frames of each
live run (deaths, near misses, coins, swipe reaction time, ...). A small GRU
estimates the player's skill and emits three difficulty knobs: obstacle density,
speed multiplier and power-up rate. One CUDA graph per session bucket, all in one
memory pool, so a shard can serve ~1k concurrent runs per GPU.
"""
import numpy as np
import torch
import torch.nn as nn

N_FEAT = 12
WINDOW = 32
BUCKETS = (64, 256, 1024)
ASSIST_LEVELS = {"off": 0.0, "light": 0.25, "strong": 0.6}


class SkillNet(nn.Module):
    def __init__(self, hidden: int = 96):
        super().__init__()
        self.inp = nn.Linear(N_FEAT, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.knobs = nn.Linear(hidden, 3)

    def forward(self, tel):
        h, _ = self.gru(torch.relu(self.inp(tel)))
        return self.knobs(h[:, -1])


class DifficultyDirector:
    def __init__(self, net: SkillNet, season_curve: np.ndarray, device: str = "cuda"):
        self.dev = torch.device(device)
        self.net = net.to(self.dev).eval()
        self.assist_strength = 0.0                       # accessibility menu, per shard
        self.event_boost = np.zeros(3, np.float32)       # live-ops event, edited from the dashboard
        self.season = torch.as_tensor(season_curve, device=self.dev)  # CLEAN: uploaded once at start-up, before any capture
        self.jitter_gen = torch.Generator(device=self.dev)
        self.jitter_gen.manual_seed(1234)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_tel, self.static_knobs = {}, {}, {}
        for b in BUCKETS:
            self._capture(b)

    def _knobs(self, tel):
        raw = self.net(tel)
        # a little jitter so two players with identical telemetry do not get identical levels
        noise = torch.randn(raw.shape, device=self.dev, generator=self.jitter_gen)  # HAZARD: rng
        boost = torch.from_numpy(self.event_boost).to(self.dev, non_blocking=True)  # HAZARD: pinned-memory
        knobs = torch.sigmoid(raw + 0.05 * noise) * self.season + boost
        knobs = knobs * (1.0 - self.assist_strength)  # HAZARD: python-scalar
        speed = torch.where(knobs[:, 1] < 0.2, 0.2, knobs[:, 1])
        return torch.stack([knobs[:, 0], speed, knobs[:, 2]], dim=1)

    @torch.no_grad()
    def _capture(self, b: int):
        tel = torch.zeros(b, WINDOW, N_FEAT, device=self.dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # CLEAN: warm-up on a forked side stream, joined below
            for _ in range(3):
                self._knobs(tel)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            out = self._knobs(tel)
        self.graphs[b], self.static_tel[b], self.static_knobs[b] = g, tel, out

    def set_assist_mode(self, level: str):
        self.assist_strength = ASSIST_LEVELS[level]

    def start_event(self, boost):
        self.event_boost[:] = boost

    def reset_bucket(self, b: int):
        # a new shard took over these sessions: start again from an empty window
        self.static_tel[b] = torch.zeros(b, WINDOW, N_FEAT, device=self.dev)  # HAZARD: static-address

    @torch.no_grad()
    def step(self, tel_np: np.ndarray) -> np.ndarray:
        n = tel_np.shape[0]
        b = next(k for k in BUCKETS if k >= n)
        tel = torch.from_numpy(tel_np).pin_memory().to(self.dev, non_blocking=True)
        self.static_tel[b][:n].copy_(tel)  # CLEAN: copy_ into the static input
        self.static_tel[b][n:].zero_()
        self.graphs[b].replay()
        return self.static_knobs[b][:n].cpu().numpy()  # CLEAN: read back after replay, outside the capture


def main():
    season = np.linspace(0.9, 1.1, 3, dtype=np.float32)
    director = DifficultyDirector(SkillNet(), season)
    director.set_assist_mode("light")
    director.start_event([0.0, 0.0, 0.15])
    rng = np.random.default_rng(0)
    for tick in range(100):
        tel = rng.standard_normal((200, WINDOW, N_FEAT)).astype(np.float32)
        knobs = director.step(tel)
        if tick == 50:
            director.reset_bucket(256)
    print(knobs.mean(0))


if __name__ == "__main__":
    main()
