"""Hungry Geese (Kaggle 2021) -- submission agent, main.py.

17-plane board encoding (HandyRL-style) + small torus-padded ResNet trained by imitation of
the top leaderboard episodes.  The policy runs as a CUDA graph captured on the first call so
the per-step latency stays far below the 1 s act timeout; hflip TTA on a second stream.
"""
import base64
import io
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, COLS, PLANES = 7, 11, 17
ACTIONS = ["NORTH", "SOUTH", "WEST", "EAST"]
OPPOSITE = {"NORTH": "SOUTH", "SOUTH": "NORTH", "WEST": "EAST", "EAST": "WEST"}
WEIGHTS_B64 = "..."   # state dict pasted in by build_submission.sh

class TorusConv(nn.Module):
    def __init__(self, cin, cout, k=3):
        super().__init__()
        self.pad = k // 2
        self.conv = nn.Conv2d(cin, cout, k)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = torch.cat([x[:, :, :, -self.pad:], x, x[:, :, :, :self.pad]], 3)
        x = torch.cat([x[:, :, -self.pad:], x, x[:, :, :self.pad]], 2)
        return self.bn(self.conv(x))

class GeeseNet(nn.Module):
    def __init__(self, blocks=12, ch=32):
        super().__init__()
        self.stem = TorusConv(PLANES, ch)
        self.blocks = nn.ModuleList([TorusConv(ch, ch) for _ in range(blocks)])
        self.head_p = nn.Linear(ch, 4, bias=False)

    def forward(self, x):
        h = F.relu(self.stem(x))
        for b in self.blocks:
            h = F.relu(h + b(h))
        head = (h * x[:, :1]).view(h.size(0), h.size(1), -1).sum(-1)      # features at my goose head
        return self.head_p(head)

def encode(obs, last_obs):
    b = np.zeros((PLANES, ROWS * COLS), dtype=np.float32)
    for p, goose in enumerate(obs["geese"]):
        rel = (p - obs["index"]) % 4
        for pos in goose[:1]:
            b[0 + rel, pos] = 1
        for pos in goose[-1:]:
            b[4 + rel, pos] = 1
        for pos in goose:
            b[8 + rel, pos] = 1
    if last_obs is not None:
        for p, goose in enumerate(last_obs["geese"]):
            for pos in goose[:1]:
                b[12 + (p - obs["index"]) % 4, pos] = 1
    return b.reshape(1, PLANES, ROWS, COLS)

class Agent:
    def __init__(self):
        self.net = GeeseNet().cuda().eval()
        self.net.load_state_dict(torch.load(io.BytesIO(base64.b64decode(WEIGHTS_B64)), map_location="cuda"))
        self.board = torch.zeros(1, PLANES, ROWS, COLS, device="cuda")
        self.legal = torch.ones(1, 4, device="cuda")
        self.flip_perm = torch.tensor([0, 1, 3, 2], device="cuda")  # CLEAN: index tensor built once at init, not in the graph
        self.food = []
        self.tta_stream = torch.cuda.Stream()
        self.graph = None
        self.last_obs, self.last_action = None, None
        self.t_start = time.time()

    @torch.no_grad()
    def _policy(self):
        x = self.board.clone()
        x[0, 16].view(-1)[self.food] = 1.0  # HAZARD: host-sync
        logits = self.net(x)
        with torch.cuda.stream(self.tta_stream):  # HAZARD: stream
            flipped = self.net(x.flip(3)).index_select(1, self.flip_perm)
        elapsed = time.time() - self.t_start  # HAZARD: host-code
        w = 0.5 if elapsed < 55.0 else 0.0                 # drop TTA when the overage budget gets tight
        logits = (1 - w) * logits + w * flipped
        self.probs = torch.where(self.legal > 0, logits, torch.full_like(logits, -1e9)).softmax(-1)  # CLEAN: illegal move masked on the device

    def __call__(self, obs, config):
        self.board.copy_(torch.from_numpy(encode(obs, self.last_obs)))  # CLEAN: host encoding copied into the static board before the replay
        self.food = list(obs["food"])
        legal = np.ones(4, np.float32)
        if self.last_action is not None:
            legal[ACTIONS.index(OPPOSITE[self.last_action])] = 0
        self.legal.copy_(torch.from_numpy(legal))
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
                self._policy()
        self.graph.replay()
        a = ACTIONS[int(self.probs.argmax())]
        self.last_obs, self.last_action = obs, a
        return a

_agent = None

def agent(obs, config):
    global _agent
    if _agent is None:
        _agent = Agent()
    return _agent(obs, config)
