"""Dairy-herd behaviour classification from neck-collar accelerometers.

10-second windows of 3-axis acceleration at 25 Hz are classified as grazing, ruminating,
walking, resting or drinking; rumination minutes per cow feed the herd-health dashboard.
Training step and optimizer step are compiled with the inductor CUDA-graph option.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
CLASSES = ("grazing", "ruminating", "walking", "resting", "drinking")


class CollarNet(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.register_buffer("axis_bias", torch.zeros(3))          # per-firmware mounting offset
        self.conv = nn.Sequential(
            nn.Conv1d(4, c, 7, padding=3), nn.BatchNorm1d(c), nn.ReLU(),
            nn.Conv1d(c, c, 5, padding=2, stride=2), nn.BatchNorm1d(c), nn.ReLU(),
            nn.Conv1d(c, c, 5, padding=2, stride=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
        )
        self.fc = nn.Linear(c, len(CLASSES))

    def forward(self, acc):                                       # B, 3, 250
        acc = acc - self.axis_bias[None, :, None]
        mag = acc.norm(dim=1, keepdim=True)
        return self.fc(self.conv(torch.cat([acc, mag], dim=1)))


def build_steps(model, opt):
    @torch.compile(options=CG)
    def loss_step(acc, label):
        jitter = np.random.normal(1.0, 0.05)  # HAZARD: host-code
        logits = model(acc * jitter)
        loss = F.cross_entropy(logits, label, label_smoothing=0.05)
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("NaN loss; check collar clipping")
        return loss

    @torch.compile(options=CG)
    def opt_step():
        opt.step()

    return loss_step, opt_step


def train(model, windows, labels, epochs=30, batch=1024):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-3)
    loss_step, opt_step = build_steps(model, opt)
    n = (windows.shape[0] // batch) * batch
    for ep in range(epochs):
        perm = torch.randperm(windows.shape[0], device="cuda")[:n]
        total = 0.0
        for idx in perm.view(-1, batch):
            loss = loss_step(windows[idx], labels[idx])
            total += float(loss)  # CLEAN: host read outside the compiled code, before the next compiled call
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
        if ep in (10, 20):
            for g in opt.param_groups:
                g["lr"] *= 0.3  # HAZARD: optimizer
        print(f"epoch {ep}: {total / (n // batch):.4f}")


def recalibrate(model, firmware_offsets):
    model.axis_bias = torch.as_tensor(firmware_offsets, dtype=torch.float32, device="cuda")  # HAZARD: static-address


def set_mount_offset(model, offsets):
    model.axis_bias.copy_(torch.as_tensor(offsets, dtype=torch.float32))  # CLEAN: in-place update keeps the buffer address


@torch.no_grad()
def rumination_minutes(classify, day_windows):
    mins = []
    for cow_windows in day_windows:                          # 8640 windows per cow-day, fixed
        pred = classify(cow_windows).argmax(-1)
        mins.append((pred == 1).sum() / 6.0)  # CLEAN: reduced to a new tensor before the next call
    return torch.stack(mins)


if __name__ == "__main__":
    model = CollarNet().cuda()
    x = torch.randn(60_000, 3, 250, device="cuda")
    y = torch.randint(0, len(CLASSES), (60_000,), device="cuda")
    train(model, x, y, epochs=25)
    model.eval()
    set_mount_offset(model, [0.0, 0.0, 0.0])
    classify = torch.compile(model, options=CG)
    days = [torch.randn(8640, 3, 250, device="cuda") for _ in range(4)]
    print(rumination_minutes(classify, days))
    recalibrate(model, [0.01, -0.02, 0.98])
    print(rumination_minutes(classify, days))
