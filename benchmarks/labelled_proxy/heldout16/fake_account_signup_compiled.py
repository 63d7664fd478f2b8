"""Fake-account screening at sign-up for a social app.

64 features per sign-up (device, IP reputation, email age, form-fill timings,
...). The real-time screen scores the sign-ups of the last 200 ms and sends
suspicious ones to a review queue; the nightly job re-scores the whole day.
Screens are registered by name and compiled according to their class options.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("signup.risk")
N_FEAT, BUCKET = 64, 256
SCREENS = {}


def register(name):
    def deco(cls):
        SCREENS[name] = cls
        return cls
    return deco


class SignupNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mu", torch.zeros(N_FEAT))
        self.register_buffer("sd", torch.ones(N_FEAT))
        self.mlp = nn.Sequential(nn.Linear(N_FEAT, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, feats):
        x = (feats - self.mu) / self.sd  # CLEAN: out-of-place standardisation, the input is not mutated
        return torch.sigmoid(self.mlp(x)).squeeze(-1)


class Screen:
    compile_kwargs = {}

    def __init__(self, net: SignupNet, review_thr: float = 0.8):
        self.net = torch.compile(net.cuda().eval(), **self.compile_kwargs)
        self.triage = torch.compile(self._triage, **self.compile_kwargs)
        self.review_thr = review_thr

    def _triage(self, scores, asn_risk):
        scores.mul_(1 + asn_risk)  # HAZARD: static-address
        sus = scores[scores > self.review_thr]  # HAZARD: dynamic-shape
        log.warning("sign-up burst, peak risk %s", scores.max())  # HAZARD: host-code
        return scores, sus

    def run(self, stage, *args):
        return getattr(self, f"_{stage}_stage")(*args)


@register("realtime")
class RealtimeScreen(Screen):
    compile_kwargs = {"mode": "reduce-overhead"}

    @torch.no_grad()
    def _score_stage(self, feats):
        return self.net(feats).clone()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def _score_padded_stage(self, feats):
        n = feats.shape[0]
        padded = torch.zeros(BUCKET, N_FEAT, device=feats.device)
        padded[:n] = feats
        return self.net(padded)[:n].clone()  # CLEAN: padded to a fixed bucket, cloned

    @torch.no_grad()
    def _review_stage(self, scores, asn_risk):
        n = scores.shape[0]
        s_pad = torch.zeros(BUCKET, device=scores.device)
        r_pad = torch.zeros(BUCKET, device=scores.device)
        s_pad[:n], r_pad[:n] = scores, asn_risk
        s, sus = self.triage(s_pad, r_pad)  # CLEAN: fixed-size padded inputs
        return s[:n].clone(), sus.clone()


@register("nightly")
class NightlyScreen(Screen):
    compile_kwargs = {"mode": "max-autotune-no-cudagraphs", "dynamic": True}

    @torch.no_grad()
    def _score_stage(self, day_feats):
        out = []
        for chunk in day_feats.split(10_000):
            out.append(self.net(chunk))  # CLEAN: no-cudagraphs twin, variable chunk sizes are fine
        return torch.cat(out)


def make_screen(kind: str):
    return SCREENS[kind](SignupNet())


def serve(screen, request_batches):
    queue = []
    for feats, asn_risk in request_batches:             # 1..200 sign-ups per 200 ms window
        scores = screen.run("score", feats)
        s, sus = screen.run("review", scores, asn_risk)
        queue.extend(sus.tolist())  # CLEAN: host read of a cloned result, outside the compiled code
    return queue


if __name__ == "__main__":
    rt = make_screen("realtime")
    reqs = [(torch.randn(n, N_FEAT, device="cuda"), torch.rand(n, device="cuda")) for n in (17, 90, 3, 140)]
    print(len(serve(rt, reqs)))
    print(make_screen("nightly").run("score", torch.randn(50_000, N_FEAT, device="cuda")).shape)
