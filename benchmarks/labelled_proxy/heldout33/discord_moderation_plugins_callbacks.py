"""Moderation bot core: a toxicity classifier captured in a CUDA graph, with "plugins"
(callbacks) that server admins enable. Each plugin's `on_logits` runs inside the captured
forward, so plugins must be enabled before `capture()`.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("modbot")
LABELS = ["ok", "insult", "threat", "spam", "nsfw"]
GUILD = {"strictness": 0.5}


class SlurListPlugin:
    def __init__(self, ids):
        self.ids = ids
        self.boost = torch.tensor([0, 3, 0, 0, 0.0], device="cuda")

    def on_logits(self, logits, tokens):
        hits = tokens[:, self.ids]  # HAZARD: host-sync
        return logits + hits.any(-1, keepdim=True).float() * self.boost


class SpamBurstPlugin:
    def __init__(self):
        self.count = torch.zeros((), device="cuda")
        self.calls = 0
        self.spam_idx = torch.tensor([3], device="cuda")

    def on_logits(self, logits, tokens):
        self.calls += 1  # HAZARD: host-code
        self.count.add_(1)  # CLEAN: device-side counter
        repeats = (tokens[:, 1:] == tokens[:, :-1]).sum(-1, keepdim=True).float()
        return logits.index_add(1, self.spam_idx, repeats / 32)  # CLEAN: CUDA index tensor


class StrictnessPlugin:
    def on_logits(self, logits, tokens):
        bias = GUILD["strictness"]  # HAZARD: python-scalar
        flagged = (logits.softmax(-1)[:, 0] < 0.5).nonzero()  # HAZARD: dynamic-shape
        log.debug("strictness plugin ran")  # CLEAN: plain string logged once inside the capture
        return torch.where(logits > 0, logits * (1 + bias), logits), flagged


class ModCore:
    def __init__(self, plugins, vocab=20000, d=128, L=64):
        self.emb = nn.Embedding(vocab, d).cuda()
        self.head = nn.Linear(d, len(LABELS)).cuda()
        self.plugins = plugins
        self.tokens = torch.zeros(1, L, dtype=torch.long, device="cuda")
        self.graph = None

    @torch.no_grad()
    def _forward(self):
        logits = self.head(self.emb(self.tokens).mean(1))
        for p in self.plugins:
            out = p.on_logits(logits, self.tokens)
            logits = out[0] if isinstance(out, tuple) else out
        return logits.softmax(-1)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._forward()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # CLEAN: warmed up, side-stream capture
            self.probs = self._forward()

    def classify(self, token_ids):
        ids = torch.tensor(token_ids[:64] + [0] * (64 - len(token_ids[:64])))[None]
        self.tokens.copy_(ids)  # CLEAN: copy_ into the static input
        self.graph.replay()
        p = self.probs[0].tolist()
        return max(zip(p, LABELS))[1]


def make_bot_core(guild_settings):
    GUILD.update(guild_settings)
    plugins = [SlurListPlugin([17, 404, 9001]), SpamBurstPlugin(), StrictnessPlugin()]
    core = ModCore(plugins)
    core.capture()
    return core
