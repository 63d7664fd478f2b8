"""IMPALA learner: V-trace off-policy targets plus the actor-critic loss.

Actors push fixed-length unrolls (T+1 frames, B trajectories) into a queue; the learner
copies each unroll into static buffers and replays one captured update.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AtariNet(nn.Module):
    def __init__(self, n_actions, in_ch=4):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_ch, 32, 8, 4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
        self.fc = nn.Linear(3136, 512)
        self.policy = nn.Linear(512, n_actions)
        self.baseline = nn.Linear(512, 1)

    def forward(self, frames):
        h = F.relu(self.fc(self.conv(frames.float() / 255.0)))
        return self.policy(h), self.baseline(h).squeeze(-1)


def vtrace(log_rhos, discounts, rewards, values, bootstrap, rho_bar=1.0, c_bar=1.0):
    rhos = log_rhos.exp()
    clipped_rhos = torch.clamp(rhos, max=rho_bar)  # CLEAN: clamp with a constant bound, no host read
    cs = torch.clamp(rhos, max=c_bar)
    values_tp1 = torch.cat([values[1:], bootstrap.unsqueeze(0)], 0)
    deltas = clipped_rhos * (rewards + discounts * values_tp1 - values)
    acc = torch.zeros_like(bootstrap)
    out = []
    for t in reversed(range(deltas.shape[0])):  # CLEAN: unroll length fixed by the static buffers
        acc = deltas[t] + discounts[t] * cs[t] * acc
        out.append(acc)
    vs = torch.stack(out[::-1]) + values
    vs_tp1 = torch.cat([vs[1:], bootstrap.unsqueeze(0)], 0)
    pg_adv = clipped_rhos * (rewards + discounts * vs_tp1 - values)
    return vs, pg_adv


class ImpalaLearner:
    def __init__(self, model, T=80, B=32, n_actions=18, lr=6e-4, entropy_cost=0.01):
        self.model = model.cuda()
        self.opt = torch.optim.RMSprop(model.parameters(), lr=lr, alpha=0.99, eps=0.01)
        self.entropy_cost = entropy_cost
        self.static = {
            "frames": torch.zeros(T + 1, B, 4, 84, 84, dtype=torch.uint8, device="cuda"),
            "action": torch.zeros(T, B, dtype=torch.long, device="cuda"),
            "behaviour_logp": torch.zeros(T, B, device="cuda"),
            "reward": torch.zeros(T, B, device="cuda"),
            "done": torch.zeros(T, B, dtype=torch.bool, device="cuda"),
        }
        self.updates = 0
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        s = self.static
        T, B = s["action"].shape
        logits, values = self.model(s["frames"].flatten(0, 1))
        logits, values = logits.view(T + 1, B, -1), values.view(T + 1, B)
        bootstrap = values[-1].detach()
        logits, values = logits[:-1], values[:-1]
        logp = F.log_softmax(logits, -1)
        act_logp = logp.gather(-1, s["action"].unsqueeze(-1)).squeeze(-1)  # CLEAN: gather with a CUDA index tensor
        log_rhos = act_logp.detach() - s["behaviour_logp"]
        if (log_rhos > 4.0).any():  # HAZARD: dynamic-control-flow
            log_rhos = log_rhos.clamp(max=4.0)
        discounts = (~s["done"]).float() * 0.99
        vs, pg_adv = vtrace(log_rhos, discounts, s["reward"].clamp(-1, 1), values.detach(), bootstrap)
        pg_loss = -(act_logp * pg_adv).sum()
        baseline_loss = 0.5 * (vs - values).pow(2).sum()
        entropy_loss = (logp.exp() * logp).sum()
        loss = pg_loss + 0.5 * baseline_loss + self.entropy_cost * entropy_loss
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 40.0)  # CLEAN: total norm stays on the device
        self.opt.step()  # HAZARD: optimizer
        self.updates += 1  # HAZARD: host-code
        return loss.detach()

    def build(self, warmup=3):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            for _ in range(warmup):
                self._step()
            torch.cuda.synchronize()  # CLEAN: sync before the capture begins
            self.graph.capture_begin()  # HAZARD: stream
            self.loss = self._step()
            self.graph.capture_end()

    def learn(self, unroll):
        for k, v in unroll.items():
            self.static[k].copy_(v, non_blocking=True)  # CLEAN: copy into the static unroll buffers
        self.graph.replay()
        if self.updates % 100 == 0:
            self.checkpoint(f"learner_{self.updates:07d}.pt")
        return float(self.loss)  # CLEAN: host read after the replay, outside capture

    def checkpoint(self, path):
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(), "updates": self.updates}, path)
