"""3D dose prediction for head-and-neck radiotherapy planning (OpenKBP-style).

Input: CT plus PTV / OAR masks on a 128^3 grid; output: the predicted dose. The loss is a
voxel MAE plus a DVH-style penalty on the PTV. The full training step is captured once.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def block(cin, cout):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.InstanceNorm3d(cout), nn.LeakyReLU(0.1))


class DoseUNet(nn.Module):
    def __init__(self, n_structs=10, c=16):
        super().__init__()
        self.e1, self.e2, self.e3 = block(1 + n_structs, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.d2, self.d1 = block(6 * c, 2 * c), block(3 * c, c)
        self.out = nn.Conv3d(c, 1, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(F.max_pool3d(a, 2))
        c = self.e3(F.max_pool3d(b, 2))
        b = self.d2(torch.cat([F.interpolate(c, scale_factor=2.0), b], 1))
        a = self.d1(torch.cat([F.interpolate(b, scale_factor=2.0), a], 1))
        return F.softplus(self.out(a)).squeeze(1)


class DoseTrainer:
    def __init__(self, batch=2, grid=128, n_structs=10, rx_gy=70.0):
        self.model = DoseUNet(n_structs).cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=1e-4)
        self.rx_gy = rx_gy
        self.ct = torch.zeros(batch, 1, grid, grid, grid, device="cuda")
        self.masks = torch.zeros(batch, n_structs, grid, grid, grid, device="cuda")
        self.dose = torch.zeros(batch, grid, grid, grid, device="cuda")
        self.static_loss = torch.zeros((), device="cuda")

    def _step(self):
        ct, masks = self.ct, self.masks
        if np.random.rand() < 0.5:  # HAZARD: host-code
            ct, masks, target = ct.flip(-1), masks.flip(-1), self.dose.flip(-1)
        else:
            target = self.dose
        pred = self.model(torch.cat([ct, masks], dim=1)) * self.rx_gy  # CLEAN: constant prescription, never changed after capture
        body = masks[:, 0]
        mae = ((pred - target).abs() * body).sum() / body.sum().clamp_min(1.0)  # CLEAN: masked mean by multiplication, static shape
        ptv = masks[:, 1] > 0.5
        d_ptv = pred[ptv]  # HAZARD: dynamic-shape
        under = F.relu(0.95 * self.rx_gy - d_ptv).mean()
        loss = mae + 0.1 * under
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clip_grad_norm_ does not sync
        self.opt.step()  # HAZARD: optimizer
        self.static_loss.copy_(loss.detach())

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._step()

    def train(self, loader, epochs=100):
        self.capture()
        for ep in range(epochs):
            total = 0.0
            for ct, masks, dose in loader:
                self.ct.copy_(ct, non_blocking=True)  # CLEAN: copy_ into the static input
                self.masks.copy_(masks, non_blocking=True)
                self.dose.copy_(dose, non_blocking=True)
                self.graph.replay()
                total += self.static_loss.item()  # CLEAN: host read after the replay
            print(f"epoch {ep}: loss {total / max(len(loader), 1):.3f}")


if __name__ == "__main__":
    fake = [(torch.randn(2, 1, 128, 128, 128).pin_memory(),
             (torch.rand(2, 10, 128, 128, 128) > 0.9).float().pin_memory(),
             torch.rand(2, 128, 128, 128).pin_memory() * 70) for _ in range(4)]
    DoseTrainer().train(fake, epochs=2)
