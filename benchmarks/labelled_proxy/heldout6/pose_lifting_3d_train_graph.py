"""2D-to-3D human pose lifting with dilated temporal convolutions (VideoPose3D style).

Receptive field of 243 frames of 17 detected 2D keypoints -> 3D pose of the centre frame.
The whole training step (augmentation, forward, MPJPE + bone-length + joint-offset losses,
backward, capturable AdamW) is captured once and replayed for every batch.
"""
import numpy as np
import torch
import torch.nn as nn

J, RF, BATCH = 17, 243, 1024
PARENTS = [-1, 0, 1, 2, 0, 4, 5, 0, 7, 8, 9, 8, 11, 12, 8, 14, 15]
FLIP_PERM = [0, 4, 5, 6, 1, 2, 3, 7, 8, 9, 10, 14, 15, 16, 11, 12, 13]


class TemporalLifter(nn.Module):
    def __init__(self, ch=512, filters=(3, 3, 3, 3, 3)):
        super().__init__()
        self.expand = nn.Conv1d(J * 2, ch, filters[0])
        layers, dil = [], filters[0]
        for f in filters[1:]:
            layers += [nn.Conv1d(ch, ch, f, dilation=dil), nn.BatchNorm1d(ch), nn.ReLU(), nn.Dropout(0.25)]
            dil *= f
        self.blocks = nn.Sequential(*layers)
        self.out = nn.Conv1d(ch, J * 3, 1)

    def forward(self, kp2d):
        x = self.blocks(torch.relu(self.expand(kp2d.flatten(2).transpose(1, 2))))
        return self.out(x).transpose(1, 2).reshape(kp2d.shape[0], -1, J, 3)


def bone_lengths(p, parent_idx):
    return (p[..., 1:, :] - p.index_select(-2, parent_idx)).norm(dim=-1)


def random_flip(kp2d, flip_idx, gen):
    flip = torch.rand(kp2d.shape[0], 1, 1, 1, device=kp2d.device, generator=gen) < 0.5  # HAZARD: rng
    m = kp2d.index_select(2, flip_idx)
    mirrored = torch.stack([-m[..., 0], m[..., 1]], -1)
    return torch.where(flip, mirrored, kp2d)


class LiftTrainer:
    def __init__(self, model):
        self.model = model.cuda().train()
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4, capturable=True)
        self.kp2d = torch.zeros(BATCH, RF, J, 2, device="cuda")
        self.gt3d = torch.zeros(BATCH, 1, J, 3, device="cuda")
        self.parent_idx = torch.tensor(PARENTS[1:], device="cuda")  # CLEAN: index tensor built once, outside the graph
        self.flip_idx = torch.tensor(FLIP_PERM, device="cuda")
        self.flip_gen = torch.Generator(device="cuda")
        self.w_rel = torch.zeros((), device="cuda")
        self.w_bone = 0.0  # warmed up over the first epochs
        self.epoch, self.best = 0, float("inf")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        sigma = np.random.uniform(0.0, 0.02)  # HAZARD: host-code
        kp = self.kp2d + sigma * torch.randn_like(self.kp2d)  # CLEAN: default-generator CUDA RNG
        kp = random_flip(kp, self.flip_idx, self.flip_gen)
        pred = self.model(kp)
        mpjpe = (pred - self.gt3d).norm(dim=-1).mean()
        w_bone = self.w_bone  # HAZARD: python-scalar
        bone = (bone_lengths(pred, self.parent_idx) - bone_lengths(self.gt3d, self.parent_idx)).abs().mean()
        rel = (pred - self.gt3d).diff(dim=-2).norm(dim=-1).mean()
        loss = mpjpe + w_bone * bone + self.w_rel * rel  # CLEAN: w_rel is a device tensor updated with fill_
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: capturable AdamW inside the graph
        self.best = min(self.best, loss.item())  # HAZARD: host-sync
        self.static_loss = loss.detach()
        return loss

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._step()

    def train_epoch(self, loader):
        for kp2d, gt3d in loader:
            self.kp2d.copy_(kp2d)
            self.gt3d.copy_(gt3d)
            self.graph.replay()
        self.epoch += 1
        self.w_bone = min(1.0, 0.1 * self.epoch)
        self.w_rel.fill_(min(0.5, 0.05 * self.epoch))
        for group in self.opt.param_groups:
            group["lr"] *= 0.95  # HAZARD: optimizer
        return self.static_loss.item()  # CLEAN: read after replay, outside the graph


if __name__ == "__main__":
    trainer = LiftTrainer(TemporalLifter())
    trainer.capture()

    def loader(n=40):
        for _ in range(n):
            yield torch.randn(BATCH, RF, J, 2, device="cuda"), torch.randn(BATCH, 1, J, 3, device="cuda")
    for ep in range(60):
        print(ep, trainer.train_epoch(loader()))
