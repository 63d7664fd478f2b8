"""Market-abuse surveillance: spoofing / layering detection on order-book events.

For every trader x instrument the exchange feed gives the last 200 order
events (price level, size, side, cancel flag, time-to-cancel, book imbalance,
...). A GRU scorer flags sequences that look like layering. Live scoring and
the nightly back-test both run compiled with CUDA graphs.
"""
import time

import torch
import torch.nn as nn

CG = {"triton.cudagraphs": True}
T, N_FEAT = 200, 16


class SpoofScorer(nn.Module):
    def __init__(self, hidden=96):
        super().__init__()
        self.gru = nn.GRU(N_FEAT, hidden, num_layers=2, batch_first=True)
        self.att = nn.Linear(hidden, 1)
        self.out = nn.Sequential(nn.Linear(hidden, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        h, _ = self.gru(x)
        w = self.att(h).softmax(dim=1)
        return self.out((w * h).sum(1)).squeeze(-1)


class Surveillance:
    def __init__(self, model, mu, sd):
        self.model = model.cuda().eval()
        self.mu, self.sd = mu.cuda(), sd.cuda()
        self.score_live = torch.compile(self._score_live, options=CG)
        self.score_backtest = torch.compile(self._score_backtest, options=CG)
        self.peak, self.scored_at, self.pending_review = 0.0, 0.0, False

    def _standardize_(self, feats):
        return feats.sub_(self.mu).div_(self.sd)  # HAZARD: static-address

    def _score_live(self, feats):
        x = self._standardize_(feats)
        s = torch.sigmoid(self.model(x))
        if (s > 0.98).any():  # HAZARD: dynamic-control-flow
            self.pending_review = True
        self.scored_at = time.time()  # HAZARD: host-code
        self.peak = float(s.max())  # HAZARD: host-sync
        return s

    def _score_backtest(self, feats):
        x = (feats - self.mu) / self.sd  # CLEAN: out-of-place standardisation, the input is not mutated
        s = torch.sigmoid(self.model(x))
        return torch.where(s > 0.98, s, torch.zeros_like(s))  # CLEAN: threshold applied on the device


def raise_alerts(scores, accounts, threshold=0.9):
    hits = (scores > threshold).nonzero().flatten().tolist()  # CLEAN: eager, after the compiled call returned
    return [accounts[i] for i in hits]


@torch.no_grad()
def live_loop(surv, feed):
    for window in feed:
        scores = surv.score_live(window["events"]).clone()
        for acct in raise_alerts(scores, window["accounts"]):
            print(f"layering suspected: {acct}")


@torch.no_grad()
def nightly_backtest(surv, days):
    flagged = []
    for day in days:
        s = surv.score_backtest(day)
        flagged.append((s > 0).sum().item())
    return flagged


if __name__ == "__main__":
    surv = Surveillance(SpoofScorer(), torch.zeros(N_FEAT), torch.ones(N_FEAT))

    def feed(n=1000):
        for _ in range(n):
            yield {"events": torch.randn(4096, T, N_FEAT, device="cuda"),
                   "accounts": [f"ACC{i:05d}" for i in range(4096)]}

    live_loop(surv, feed())
    print(nightly_backtest(surv, [torch.randn(4096, T, N_FEAT, device="cuda") for _ in range(20)]))
