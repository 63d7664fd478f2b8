"""Ad exchange (SSP side): traffic shaping of bid requests per DSP endpoint.

A small model predicts each DSP's bid probability for an incoming request; requests under
the endpoint's QPS-adjusted cut-off are not forwarded.  The model is updated online from
bid/no-bid logs; scoring, the update and the optimizer step are all compiled.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("ssp.shaping")
CG_OPTS = dict(options={"triton.cudagraphs": True}, dynamic=False)
AUDIT_OPTS = dict(options={"triton.cudagraphs": False}, dynamic=False)


class BidProbNet(nn.Module):
    def __init__(self, n_feat=96, n_dsp=48, hid=128):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_feat, hid), nn.ReLU(), nn.Linear(hid, n_dsp))

    def forward(self, req):
        return torch.sigmoid(self.body(req))


class TrafficShaper:
    def __init__(self, net, qps_budget, batch=4096):
        self.net = net.cuda()
        self.qps_budget = qps_budget.cuda()  # [n_dsp] forwarded requests per 1k, from the QPS planner
        self.learn_budget = 1e6               # daily spend budget for online learning (micros)
        self.lr = torch.tensor(3e-4, device="cuda")
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr, weight_decay=1e-5, capturable=True)
        self.score = torch.compile(self._score, **CG_OPTS)
        self.audit_score = torch.compile(self._score_audit, **AUDIT_OPTS)
        self.update = torch.compile(self._update, **CG_OPTS)
        self.opt_step = torch.compile(self.opt.step, **CG_OPTS)

    def _cutoff(self, req):
        p = self.net(req)
        return torch.where(p * 1000.0 > self.qps_budget, 1.0, 0.0)  # CLEAN: device-side cut-off, no host branch

    def _score(self, req):
        req.clamp_(-5.0, 5.0)  # HAZARD: static-address
        return self._cutoff(req)

    def _score_audit(self, req):
        return self._cutoff(req.clamp(-5.0, 5.0))  # CLEAN: out-of-place clamp on the audit path

    def _update(self, req, bid, spend):
        p = self.net(req.clamp(-5.0, 5.0))
        loss = F.binary_cross_entropy(p, bid)
        self.learn_budget -= float(spend.sum())  # HAZARD: host-sync
        log.debug("shaper update loss %s", loss.detach())  # HAZARD: host-code
        return loss

    @torch.no_grad()
    def shape(self, req):
        return self.score(req)

    def learn(self, req, bid, spend):
        if self.learn_budget <= 0:
            return
        self.update(req, bid, spend).backward()
        self.opt_step()
        self.opt.zero_grad(set_to_none=False)

    def end_of_day(self, day_of_week: int):
        self.learn_budget = 1e6
        self.lr.fill_(3e-4 * (0.5 if day_of_week >= 5 else 1.0))  # CLEAN: tensor LR updated in place
        self.opt.param_groups[0]["weight_decay"] = 1e-4 if day_of_week >= 5 else 1e-5  # HAZARD: optimizer


def run_exchange(shaper: TrafficShaper, ticks):
    # the request router always hands over full 4096-request micro-batches
    for t in ticks:
        if t["kind"] == "requests":
            yield shaper.shape(t["req"])
        elif t["kind"] == "audit":
            with torch.no_grad():
                yield shaper.audit_score(t["req"])
        elif t["kind"] == "logs":
            shaper.learn(t["req"], t["bid"], t["spend"])
        elif t["kind"] == "eod":
            shaper.end_of_day(t["dow"])
