"""Per-user fine-tuning of a smartwatch gesture recogniser (double pinch, wrist flicks, shake).

The companion app uploads a few labelled IMU windows per user; the cloud service
fine-tunes the model for that user. The model is graphed with
torch.cuda.make_graphed_callables because the per-user loops are tiny and launch-bound.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

GESTURES = ("none", "double_pinch", "flick_in", "flick_out", "shake", "clench")


class GestureNet(nn.Module):
    def __init__(self, calib_gain, n_cls=len(GESTURES)):
        super().__init__()
        self.calib_gain = calib_gain            # np.float32 [6]: factory IMU calibration of this watch model
        self.conv = nn.Sequential(nn.Conv1d(6, 32, 5, padding=2), nn.ReLU(),
                                  nn.Conv1d(32, 64, 5, padding=2), nn.ReLU())
        self.classifier = nn.Linear(64, n_cls)

    def forward(self, imu, lengths):            # imu [B, 6, T] accel + gyro, lengths [B]
        gain = torch.from_numpy(self.calib_gain).cuda()  # HAZARD: pinned-memory
        x = imu * gain[None, :, None]
        x = x[:, :, : int(lengths.max())]  # HAZARD: host-sync
        return self.classifier(self.conv(x).amax(-1))


def grad_monitor(module, grad_in, grad_out):
    if not torch.isfinite(grad_out[0]).all():
        raise FloatingPointError("non-finite gradient in gesture net")


def graph_model(model, B=32, T=200):
    model = model.cuda().train()
    model.register_full_backward_hook(grad_monitor)  # HAZARD: api-misuse
    sample = (torch.randn(B, 6, T, device="cuda"), torch.full((B,), T, device="cuda"))
    return torch.cuda.make_graphed_callables(model, sample)


def fine_tune(model, windows, labels, lengths, steps=200, B=32):
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    for step in range(steps):
        idx = torch.randint(0, len(windows), (B,))
        xb = windows[idx].cuda(non_blocking=True)  # CLEAN: host-to-device copy outside the graphed callable
        yb, lb = labels[idx].cuda(non_blocking=True), lengths[idx].cuda(non_blocking=True)
        loss = F.cross_entropy(model(xb, lb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model


def switch_user(model, head_state):
    # the service keeps one graphed model per watch model and swaps the per-user head in
    model.classifier.weight = nn.Parameter(head_state["weight"].cuda())  # HAZARD: static-address
    with torch.no_grad():
        model.classifier.bias.copy_(head_state["bias"])  # CLEAN: in-place copy keeps the address


@torch.no_grad()
def validate(model, xv, lv, yv):
    model.eval()
    acc = (model(xv, lv).argmax(-1) == yv).float().mean().item()  # CLEAN: eval mode differs from capture, so the eager forward runs
    model.train()
    return acc


if __name__ == "__main__":
    calib = np.array([1.02, 0.98, 1.01, 0.0175, 0.0175, 0.0175], dtype=np.float32)
    model = graph_model(GestureNet(calib))
    for user in torch.load("pending_users.pt"):
        switch_user(model, user["head"])
        fine_tune(model, user["x"], user["y"], user["len"])
        print(user["id"], validate(model, user["xv"], user["lv"], user["yv"]))
