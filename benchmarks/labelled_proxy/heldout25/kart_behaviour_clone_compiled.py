"""Kart-racer AI drivers cloned from human telemetry (behaviour cloning).

Port of the studio's Keras prototype: `model.compile(optimizer, loss)` /
`model.fit(x, y, callbacks=[ReduceLROnPlateau(...)])` became the small Trainer below.
Input per lap: ray-cast distances, speed, track curvature; outputs steer/throttle/brake.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_RAYS = 15
FEATS = N_RAYS + 4


class DriverNet(nn.Module):
    def __init__(self, n_tracks=24, hidden=128):
        super().__init__()
        self.track_emb = nn.Embedding(n_tracks, 8)
        self.gru = nn.GRU(FEATS + 8, hidden, batch_first=True)
        self.steer = nn.Linear(hidden, 1)
        self.pedals = nn.Linear(hidden, 2)
        self.style_gain = np.linspace(0.8, 1.2, n_tracks).astype(np.float32)

    def forward(self, x, track_id):
        gain = torch.from_numpy(self.style_gain[track_id.tolist()]).to(x.device)  # HAZARD: host-sync
        e = self.track_emb(track_id)[:, None].expand(-1, x.shape[1], -1)
        h, _ = self.gru(torch.cat([x, e], -1))
        steer = torch.tanh(self.steer(h)) * gain[:, None, None]
        return torch.cat([steer, torch.sigmoid(self.pedals(h))], -1)


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.best, self.wait = float("inf"), 0

    def reduce_lr_on_plateau(self, val_loss, patience=3, factor=0.5):
        if val_loss < self.best - 1e-4:
            self.best, self.wait = val_loss, 0
            return
        self.wait += 1
        if self.wait >= patience:
            for g in self.opt.param_groups:
                g["lr"] = max(g["lr"] * factor, 1e-5)  # HAZARD: optimizer
            self.wait = 0

    def fit(self, laps, val_windows, epochs=30):
        for epoch in range(epochs):
            for x, track_id, y in laps:          # one lap per step, laps have different lengths
                pred = self.model(x.cuda(), track_id.cuda())  # HAZARD: dynamic-shape
                loss = F.smooth_l1_loss(pred, y.cuda())
                loss.backward()
                self.opt_step()
                self.opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                val = np.mean([F.smooth_l1_loss(self.model(x.cuda(), t.cuda()), y.cuda()).item()
                               for x, t, y in val_windows])  # fixed 256-frame windows
            self.reduce_lr_on_plateau(val)


class RaceAI:
    def __init__(self, driver, overtake_head):
        self.driver = torch.compile(driver.cuda().eval(), mode="reduce-overhead")
        self.overtake = torch.compile(overtake_head.cuda().eval(), mode="reduce-overhead")
        self.window = torch.zeros(8, 64, FEATS, device="cuda")

    @torch.no_grad()
    def tick(self, obs, track_ids, gaps):
        self.window.copy_(torch.roll(self.window, -1, 1))  # CLEAN: eager in-place update of the fixed-size window
        self.window[:, -1].copy_(obs)
        controls = self.driver(self.window, track_ids)
        ctrl = controls[:, -1].clone()  # CLEAN: cloned right after its own call
        attempt = self.overtake(gaps)
        boost = controls[:, -1, 1] * (attempt[:, 0] > 0.5)  # HAZARD: static-address
        return ctrl, boost


def to_game(ai, obs_np, tracks_np, gaps_np):
    obs = torch.from_numpy(obs_np).pin_memory().cuda(non_blocking=True)  # CLEAN: eager pinned upload before the compiled calls
    ctrl, boost = ai.tick(obs, torch.from_numpy(tracks_np).cuda(), torch.from_numpy(gaps_np).cuda())
    return ctrl.cpu().numpy(), boost.cpu().numpy()


def main(laps, val_windows):
    net = DriverNet().cuda()
    trainer = Trainer(torch.compile(net, mode="reduce-overhead"))
    trainer.fit(laps, val_windows)
    torch.save(net.state_dict(), "driver.pt")
