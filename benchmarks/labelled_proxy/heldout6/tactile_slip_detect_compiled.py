"""Slip detection from GelSight-style tactile image sequences for a robot gripper.

Eight consecutive tactile frames (difference images against the no-contact reference)
are classified as stable / translational slip / rotational slip by a small 3D CNN.
The training step and the optimizer step are compiled with backend="cudagraphs".
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

T, H, W, BATCH, N_CLS = 8, 120, 160, 32, 3


class SlipNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv3d(3, 32, (3, 5, 5), stride=(1, 2, 2), padding=(1, 2, 2)), nn.BatchNorm3d(32), nn.ReLU(),
            nn.Conv3d(32, 64, 3, stride=(1, 2, 2), padding=1), nn.BatchNorm3d(64), nn.ReLU(),
            nn.Conv3d(64, 128, 3, stride=2, padding=1), nn.BatchNorm3d(128), nn.ReLU(),
            nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(128, N_CLS))

    def forward(self, frames):
        return self.net(frames)


model = SlipNet().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
BASE_LR, WARMUP = 1e-3, 300


@torch.compile(backend="cudagraphs")
def train_step(frames, ref, labels):
    shift = np.random.randint(-4, 5)  # HAZARD: host-code
    x = torch.roll(frames - ref[:, :, None], shift, dims=-1)
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    if loss.isnan():  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    acc = (logits.argmax(1) == labels).float().mean().item()  # HAZARD: host-sync
    return loss, acc


@torch.compile(backend="cudagraphs")
def opt_step():
    opt.step()


@torch.compile  # default inductor for validation
def val_step(frames, ref, labels):
    logits = model(frames - ref[:, :, None])
    return (logits.argmax(1) == labels).float().mean().item()  # CLEAN: default torch.compile, no CUDA graphs


def jitter(frames):
    return frames + 0.01 * torch.randn_like(frames)  # CLEAN: eager, outside the compiled step


def train(loader, val_loader, epochs=30):
    step = 0
    for ep in range(epochs):
        model.train()
        for frames, ref, labels in loader():
            loss, acc = train_step(jitter(frames), ref, labels)  # CLEAN: fixed BATCH x T clips
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
            for g in opt.param_groups:
                g["lr"] = BASE_LR * min(1.0, (step + 1) / WARMUP)  # HAZARD: optimizer
            step += 1
        model.eval()
        with torch.no_grad():
            accs = [val_step(*batch) for batch in val_loader()]
        print(f"epoch {ep}: train acc {acc:.3f} val acc {sum(accs) / len(accs):.3f}")


if __name__ == "__main__":
    def loader(n=50):
        for _ in range(n):
            yield (torch.rand(BATCH, 3, T, H, W, device="cuda"), torch.rand(BATCH, 3, H, W, device="cuda"),
                   torch.randint(0, N_CLS, (BATCH,), device="cuda"))
    train(loader, lambda: loader(5))
