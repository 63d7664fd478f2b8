"""Gaze estimation for an online exam proctoring tool (webcam, 15 fps).

A small CNN regresses gaze yaw/pitch from a 64x64 eye-region crop; sustained off-screen gaze
is flagged for a human proctor to review. Per-frame functions use max-autotune decorators;
per-student calibration runs once with default compilation.
"""
import torch
import torch.nn as nn

SCREEN_YAW, SCREEN_PITCH = 0.45, 0.30                                     # rad, half-extent of the screen


class GazeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                               nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                               nn.Linear(128, 2))

    def forward(self, eyes):
        return torch.tanh(self.f(eyes)) * 1.2


@torch.compile(mode="max-autotune")
def normalize_(frames, mean, std):
    return frames.div_(255.0).sub_(mean).div_(std)  # HAZARD: static-address


@torch.compile(mode="max-autotune")
def gaze(model, eyes, offset):
    g = model(eyes) - offset
    off = (g[:, 0].abs() > SCREEN_YAW) | (g[:, 1].abs() > SCREEN_PITCH)
    return g, off.float()


@torch.compile(mode="max-autotune")
def session_report(off_history):
    frac = off_history.mean(0)
    print("off-screen fraction per student", frac)  # HAZARD: host-code
    return (frac > 0.2).nonzero().squeeze(-1).tolist()  # HAZARD: host-sync


def normalized(frames, mean, std):
    return (frames / 255.0 - mean) / std  # CLEAN: out-of-place normalisation, the input is not mutated


@torch.compile
def calibrate(model, eyes, targets):
    return (model(eyes) - targets).mean(0)  # CLEAN: default torch.compile, no CUDA graphs


class ProctorSession:
    def __init__(self, model, n_students=32):
        self.model = model.cuda().eval()
        self.mean = torch.tensor([0.45, 0.40, 0.38], device="cuda").view(1, 3, 1, 1)
        self.std = torch.tensor([0.25, 0.24, 0.24], device="cuda").view(1, 3, 1, 1)
        self.offset = torch.zeros(n_students, 2, device="cuda")
        self.gaze_hist, self.off_hist = [], []

    @torch.no_grad()
    def calibrate_all(self, eyes, dots):
        self.offset.copy_(calibrate(self.model, normalized(eyes, self.mean, self.std), dots))

    @torch.no_grad()
    def on_frame(self, eyes_u8):
        eyes = normalize_(eyes_u8.float(), self.mean, self.std)
        g, off = gaze(self.model, eyes, self.offset)
        self.gaze_hist.append(g)  # HAZARD: static-address
        self.off_hist.append(off.clone())  # CLEAN: flags cloned before the next compiled call
        return off

    @torch.no_grad()
    def close(self):
        yaw_trace = torch.stack(self.gaze_hist)[..., 0].cpu()            # attached to the review ticket
        return session_report(torch.stack(self.off_hist)), yaw_trace


if __name__ == "__main__":
    sess = ProctorSession(GazeNet())
    sess.calibrate_all(torch.rand(32, 3, 64, 64, device="cuda") * 255, torch.zeros(32, 2, device="cuda"))
    for _ in range(15 * 60):
        sess.on_frame(torch.randint(0, 256, (32, 3, 64, 64), dtype=torch.uint8, device="cuda"))
    flagged, trace = sess.close()
