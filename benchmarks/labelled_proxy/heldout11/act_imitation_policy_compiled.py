"""Action-chunking transformer (ACT-style) policy for a bimanual kitting cell.

The policy predicts a chunk of 50 future joint targets from two wrist cameras and the joint
state; chunks are blended by temporal ensembling. The deployed subclass compiles its chunk
predictor in the constructor; robot-bus messages are dispatched by name with getattr.
"""
import random

import torch
import torch.nn as nn

CHUNK, DOF = 50, 14


class ACTPolicy(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.cam = nn.Sequential(nn.Conv2d(3, 32, 5, 4, 2), nn.ReLU(), nn.Conv2d(32, d, 5, 4, 2), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(4), nn.Flatten(2))
        self.state = nn.Linear(DOF, d)
        self.query = nn.Parameter(torch.randn(CHUNK, d) * 0.02)
        self.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 8, 4 * d, batch_first=True), 3)
        self.head = nn.Linear(d, DOF)

    def forward(self, img_l, img_r, qpos):
        mem = torch.cat([self.cam(img_l), self.cam(img_r)], 2).transpose(1, 2)       # (B, 32, d)
        mem = torch.cat([mem, self.state(qpos)[:, None]], 1)
        q = self.query.expand(qpos.shape[0], -1, -1)
        return self.head(self.dec(q, mem))                                  # (B, CHUNK, DOF)


class ChunkController:
    def __init__(self, policy, ensemble_k=0.01):
        self.policy = policy.cuda().eval()
        self.ensemble_k = ensemble_k
        self.history = []

    def _infer(self, img_l, img_r, qpos):
        chunk = self.policy(img_l, img_r, qpos)
        k = self.ensemble_k  # HAZARD: python-scalar
        w = torch.exp(-k * torch.arange(CHUNK, device=chunk.device, dtype=chunk.dtype))
        if (chunk[:, 0, -2:] > 0.5).all():  # HAZARD: dynamic-control-flow
            chunk = chunk.clone()
            chunk[:, :, -2:] = 1.0                                          # both grippers closed: hold them
        if random.random() < 0.05:  # HAZARD: host-code
            chunk = chunk + 0.01 * torch.randn_like(chunk)                  # DAgger-style exploration
        return chunk, w / w.sum()

    @torch.no_grad()
    def on_observation(self, img_l, img_r, qpos):
        chunk, w = self._infer(img_l, img_r, qpos)
        self.history.append(chunk)  # HAZARD: static-address
        return self._blend(w)

    def _blend(self, w):
        self.history = self.history[-CHUNK:]
        n = len(self.history)
        preds = torch.stack([c[0, n - 1 - i] for i, c in enumerate(self.history)])
        return (w[:n, None] * preds).sum(0) / w[:n].sum()

    def on_set_smoothing(self, k):
        self.ensemble_k = k

    def dispatch(self, msg):
        return getattr(self, "on_" + msg["type"])(*msg["args"])


class DeployedController(ChunkController):
    def __init__(self, policy, ensemble_k=0.01):
        super().__init__(policy, ensemble_k)
        self._infer = torch.compile(self._infer, mode="reduce-overhead")


class CheckedController(DeployedController):
    @torch.no_grad()
    def on_observation(self, img_l, img_r, qpos):
        chunk, w = self._infer(img_l, img_r, qpos)
        self.history.append(chunk.clone())  # CLEAN: chunk cloned before the next compiled call overwrites it
        return self._blend(w.clone())  # CLEAN: ensemble weights cloned as soon as they are returned


def replay_log(policy, obs):
    ctl = ChunkController(policy)
    return [ctl.dispatch({"type": "observation", "args": o}) for o in obs]  # CLEAN: eager controller, nothing compiled


if __name__ == "__main__":
    ctl = DeployedController(ACTPolicy())
    cam = lambda: torch.rand(1, 3, 240, 320, device="cuda")
    for t in range(600):                                                   # 50 Hz control loop
        target = ctl.dispatch({"type": "observation", "args": (cam(), cam(), torch.zeros(1, DOF, device="cuda"))})
        if t == 300:
            ctl.dispatch({"type": "set_smoothing", "args": (0.05,)})       # operator asks for smoother motion
