"""Rival karts for the single-player Grand Prix mode.

The rivals are driven by a behaviour-cloned policy trained on time-trial ghosts.
The game server batches all rivals of a race and replays one CUDA graph per
grid-size bucket on every physics tick (60 Hz); the buckets share one pool.
"""
import torch
import torch.nn as nn

BUCKETS = (4, 8, 12)
OBS_DIM = 24   # lateral offset, heading error, speed, 16 look-ahead curvature samples, ...
ACT_DIM = 3    # steer, throttle, drift


class GhostPolicy(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(OBS_DIM + 8, hidden), nn.SiLU(),
                                  nn.Linear(hidden, hidden), nn.SiLU())
        self.head = nn.Linear(hidden, ACT_DIM)

    def forward(self, obs, curv):
        a = self.head(self.body(torch.cat([obs, curv], dim=-1)))
        return torch.cat([a[:, :1].tanh(), a[:, 1:2].sigmoid(), a[:, 2:].sigmoid()], dim=-1)


class Difficulty:
    def __init__(self, rubber_band=0.15, max_speed=1.0):
        self.rubber_band = rubber_band   # how hard rivals catch up when they are behind the player
        self.max_speed = max_speed


class RivalRunner:
    def __init__(self, policy, track, difficulty, device="cuda"):
        self.policy = policy.eval().to(device)
        self.track = track               # .curvature: np.float32 [n_seg, 8]; .boost_pads: np.float32 [n_seg]
        self.difficulty = difficulty
        self.device = device
        self.curv_table = torch.from_numpy(track.curvature).to(device)  # CLEAN: uploaded once in __init__, outside any capture
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.bufs = {}, {}
        for b in sorted(BUCKETS, reverse=True):
            self._capture(b)

    def _tick(self, obs, seg, gap):
        curv = self.curv_table[seg]  # CLEAN: gather with a CUDA index tensor
        pads = torch.from_numpy(self.track.boost_pads).to(self.device)  # HAZARD: pinned-memory
        act = self.policy(obs, curv)
        rb = self.difficulty.rubber_band  # HAZARD: python-scalar
        throttle = act[:, 1] * (1.0 + rb * torch.tanh(gap / 50.0)) + 0.1 * pads[seg]
        if (throttle > self.difficulty.max_speed).any():  # HAZARD: dynamic-control-flow
            throttle = throttle.clamp(max=self.difficulty.max_speed)
        off_track = obs[:, 0].abs() > 1.0
        steer = torch.where(off_track, -obs[:, 0].sign(), act[:, 0])  # CLEAN: torch.where keeps the shape, no sync
        return torch.stack([steer, throttle, act[:, 2]], dim=-1)

    @torch.no_grad()
    def _capture(self, b):
        obs = torch.zeros(b, OBS_DIM, device=self.device)
        seg = torch.zeros(b, dtype=torch.long, device=self.device)
        gap = torch.zeros(b, device=self.device)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._tick(obs, seg, gap)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            out = self._tick(obs, seg, gap)
        self.graphs[b] = g
        self.bufs[b] = {"obs": obs, "seg": seg, "gap": gap, "out": out}

    def set_difficulty(self, level):
        self.difficulty.rubber_band = {"easy": 0.30, "normal": 0.15, "hard": 0.0}[level]

    @torch.no_grad()
    def step(self, obs, seg, gap):
        n = obs.shape[0]
        b = next(k for k in sorted(BUCKETS) if k >= n)
        buf = self.bufs[b]
        buf["obs"][:n].copy_(obs)  # CLEAN: copy_ into the static input keeps its address
        buf["seg"][:n].copy_(seg)
        buf["gap"][:n].copy_(gap)
        self.graphs[b].replay()
        return buf["out"][:n].clone()

    @torch.no_grad()
    def respawn_grid(self, obs_full):
        # after a pile-up the whole grid respawns: hand the fresh observation tensor over directly
        b = obs_full.shape[0]
        self.bufs[b]["obs"] = obs_full.contiguous()  # HAZARD: static-address
        self.graphs[b].replay()
        return self.bufs[b]["out"].clone()


def race(runner, sim, laps=3):
    runner.set_difficulty(sim.player_difficulty)
    while sim.lap < laps:
        obs, seg, gap = sim.rival_observations()
        if sim.crashed_all:
            actions = runner.respawn_grid(obs)
        else:
            actions = runner.step(obs, seg, gap)
        sim.apply(actions)
        if sim.player_changed_difficulty:
            runner.set_difficulty(sim.player_difficulty)
