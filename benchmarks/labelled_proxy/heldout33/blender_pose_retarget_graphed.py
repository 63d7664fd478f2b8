"""Blender add-on backend: learns a retargeting MLP from the user's keyframed rig while
they animate ("Train on selection" button), then applies it to mocap clips.

The training step of the encoder/decoder is graphed with torch.cuda.make_graphed_callables.
"""
import numpy as np
import torch
import torch.nn as nn

N_SRC, N_DST, D = 24 * 3, 52 * 3, 256
STATUS = {"epoch": 0, "loss": 0.0, "grad_norms": []}


class PoseEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_SRC, D), nn.SiLU(), nn.Linear(D, D))

    def forward(self, pose):
        jitter = np.random.normal(0, 0.01)  # HAZARD: host-code
        return self.net(pose + jitter)


class RigDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.SiLU(), nn.Linear(D, N_DST))

    def forward(self, z, bone_scale):
        return self.net(z) * bone_scale


class RetargetTrainer:
    def __init__(self, batch=64):
        self.enc = PoseEncoder().cuda()
        self.dec = RigDecoder().cuda()
        self.dec.register_forward_hook(lambda m, i, o: None)  # HAZARD: api-misuse
        params = list(self.enc.parameters()) + list(self.dec.parameters())
        self.opt = torch.optim.AdamW(params, lr=3e-4)
        x = torch.randn(batch, N_SRC, device="cuda", requires_grad=False)
        z = torch.randn(batch, D, device="cuda", requires_grad=True)
        scale = torch.ones(batch, N_DST, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            self.enc, self.dec = torch.cuda.make_graphed_callables((self.enc, self.dec), ((x,), (z, scale)))
        self.enc.register_forward_hook(lambda m, i, o: STATUS.update(last_shape=tuple(o.shape)))  # CLEAN: hook added after graphing
        self.batch = batch

    def train_step(self, src, dst, scale):
        z = self.enc(src)
        pred = self.dec(z, bone_scale=scale)  # HAZARD: api-misuse
        loss = torch.nn.functional.mse_loss(pred, dst)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer step outside the graphs
        return loss.detach()

    def fit(self, src_all, dst_all, scale, epochs=20):
        n = src_all.shape[0] // self.batch * self.batch
        for ep in range(epochs):
            perm = torch.randperm(n, device="cuda")  # CLEAN: eager, outside the graphs
            total = torch.zeros((), device="cuda")
            for i in range(0, n, self.batch):
                idx = perm[i:i + self.batch]
                total += self.train_step(src_all[idx], dst_all[idx], scale)
            STATUS["epoch"] = ep
            STATUS["loss"] = total.item() / (n // self.batch)  # CLEAN: eager host read for the UI panel

    @torch.no_grad()
    def apply(self, clip):
        self.enc.eval()
        self.dec.eval()
        z = self.enc(clip)  # CLEAN: eval mode runs the original forward
        out = self.dec.net(z)
        self.enc.train()
        self.dec.train()
        return out.view(-1, 52, 3).cpu().numpy()


def train_on_selection(src_np, dst_np):
    src = torch.from_numpy(src_np.astype(np.float32)).cuda()
    dst = torch.from_numpy(dst_np.astype(np.float32)).cuda()
    trainer = RetargetTrainer()
    trainer.fit(src, dst, torch.ones(trainer.batch, N_DST, device="cuda"))
    return trainer
