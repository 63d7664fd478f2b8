"""Lobby quality scoring for a 5v5 ranked queue.

Every matchmaking tick each region proposes a fixed number of candidate lobbies
(10 players each). A rating network predicts the team-A win probability and a
per-player "fun" score; lobby quality combines balance, ping spread and party
fairness. Each region's scoring step is captured and replayed on every tick.
"""
import torch
import torch.nn as nn

PLAYERS = 10
FEAT = 24
CANDIDATES = 512


class RatingNet(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(FEAT, d), nn.SiLU(), nn.Linear(d, d))
        self.win = nn.Linear(2 * d, 1)
        self.fun = nn.Linear(d, 1)

    def forward(self, x):  # (B, 10, FEAT)
        h = self.mlp(x)
        team_a, team_b = h[:, :5].mean(1), h[:, 5:].mean(1)
        p_win = torch.sigmoid(self.win(torch.cat([team_a, team_b], -1))).squeeze(-1)
        return p_win, self.fun(h).squeeze(-1)


class LobbyScorer:
    def __init__(self, model, regions, party_sizes, device="cuda"):
        self.model = model.eval().to(device)
        self.device = device
        self.regions = regions
        self.party_sizes = party_sizes  # python list: party size per lobby slot
        self.graph = torch.cuda.CUDAGraph()
        self.pool = torch.cuda.graph_pool_handle()
        self.inputs, self.outputs = {}, {}
        self.telemetry = torch.cuda.Stream()
        self.fun_ema = torch.zeros(PLAYERS, device=device)

    def _quality(self, x, ping):
        p_win, fun = self.model(x)
        balance = 1.0 - (p_win - 0.5).abs() * 2.0
        party = torch.tensor(self.party_sizes, device=self.device, dtype=torch.float32)  # HAZARD: host-sync
        party_gap = (x[:, :5, 0] * party[:5]).sum(1) - (x[:, 5:, 0] * party[5:]).sum(1)
        spread = ping.max(1).values - ping.min(1).values
        q = balance - 0.01 * spread - 0.1 * party_gap.abs() + 0.05 * fun.mean(1)
        q = q.masked_fill(ping.max(1).values > 180.0, -1e4)  # CLEAN: masked_fill keeps the shape, no sync
        with torch.cuda.stream(self.telemetry):  # HAZARD: stream
            self.fun_ema.mul_(0.99).add_(0.01 * fun.mean(0))
        good = q[q > 0.6]  # HAZARD: dynamic-shape
        best_q, best_idx = torch.topk(q, k=16)  # CLEAN: fixed k, static output shape
        return best_q, best_idx, good.numel()

    def _warmup(self, x, ping):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():  # CLEAN: warm-up stream forked and joined, no capture running
            for _ in range(3):
                self._quality(x, ping)
        torch.cuda.current_stream().wait_stream(s)

    def capture(self):
        for region in self.regions:
            x = torch.zeros(CANDIDATES, PLAYERS, FEAT, device=self.device)
            ping = torch.full((CANDIDATES, PLAYERS), 40.0, device=self.device)
            self._warmup(x, ping)
            with torch.no_grad(), torch.cuda.graph(self.graph, pool=self.pool):  # HAZARD: api-misuse
                self.outputs[region] = self._quality(x, ping)
            self.inputs[region] = (x, ping)

    def tick(self, region, feats, pings):
        x, ping = self.inputs[region]
        x.copy_(feats)
        ping.copy_(pings)
        self.graph.replay()
        best_q, best_idx, _ = self.outputs[region]
        keep = best_idx[best_q > 0.0]  # CLEAN: mask indexing on the host side of the replay, eager
        return keep.cpu().tolist()


def matchmaking_loop(scorer, queue):
    while True:
        for region in scorer.regions:
            feats, pings = queue.candidates(region, CANDIDATES)
            lobbies = scorer.tick(region, feats, pings)
            queue.start_matches(region, lobbies)


if __name__ == "__main__":
    net = RatingNet().cuda()
    net.load_state_dict(torch.load("rating_net.pt", map_location="cuda"))
    scorer = LobbyScorer(net, ["euw", "na", "sea"], [1, 1, 2, 2, 1, 1, 3, 3, 3, 1])
    scorer.capture()
