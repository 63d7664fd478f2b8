"""Gray-Scott reaction-diffusion with a small CNN that labels the pattern class.

Written by a chemist coming from MATLAB: parameters in a module-level dict, explicit
Euler in a loop, one CUDA graph per 'frame' of 50 integration steps.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PARAMS = {"Du": 0.16, "Dv": 0.08, "F": 0.035, "k": 0.060, "dt": 1.0}
N = 256
STEPS_PER_FRAME = 50
dev = torch.device("cuda:0")

lap_k = torch.tensor([[0.05, 0.2, 0.05], [0.2, -1.0, 0.2], [0.05, 0.2, 0.05]],
                     device=dev).view(1, 1, 3, 3)

noise_gen = torch.Generator(device=dev)
noise_gen.manual_seed(7)


class PatternNet(nn.Module):
    """spots / stripes / labyrinth / uniform"""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(
            nn.Conv2d(2, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 5, stride=2, padding=2), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4))

    def forward(self, uv):
        return self.f(uv)


clf = PatternNet().to(dev).eval()
clf.load_state_dict(torch.load("pattern_net.pt", map_location=dev))

U = torch.ones(1, 1, N, N, device=dev)
V = torch.zeros(1, 1, N, N, device=dev)
U[..., 118:138, 118:138] = 0.5
V[..., 118:138, 118:138] = 0.25
frame_logits = torch.zeros(1, 4, device=dev)


def lap(a):
    return F.conv2d(F.pad(a, (1, 1, 1, 1), mode="circular"), lap_k)  # CLEAN: fixed-shape conv


def frame():
    global U
    u, v = U, V
    for _ in range(STEPS_PER_FRAME):
        uvv = u * v * v
        du = PARAMS["Du"] * lap(u) - uvv + PARAMS["F"] * (1 - u)
        dv = PARAMS["Dv"] * lap(v) + uvv - (PARAMS["F"] + PARAMS["k"]) * v
        u = u + PARAMS["dt"] * du
        v = v + PARAMS["dt"] * dv
    jitter = np.random.normal(0.0, 1e-3)  # HAZARD: host-code
    v = v + jitter
    v = v + 1e-4 * torch.randn(v.shape, device=dev, generator=noise_gen)  # HAZARD: rng
    u = u + 1e-4 * torch.randn(u.shape, device=dev)  # CLEAN: default CUDA generator is captured
    U = u.clamp(0, 1)  # HAZARD: static-address
    V.copy_(v.clamp(0, 1))  # CLEAN: copy_ into the state tensor keeps its address
    frame_logits.copy_(clf(torch.cat([U, V], 1)))


g = torch.cuda.CUDAGraph()
with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
    ws = torch.cuda.Stream()
    ws.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(ws), torch.no_grad():
        for _ in range(3):
            frame()
    torch.cuda.current_stream().wait_stream(ws)
    with torch.no_grad(), torch.cuda.graph(g, stream=torch.cuda.current_stream()):  # HAZARD: stream
        frame()


def run_frames(n_frames=400, tag="run"):
    hist = []
    for i in range(n_frames):
        g.replay()
        if i % 50 == 0:
            hist.append(int(frame_logits.argmax()))  # CLEAN: host read after a replay
    np.save(f"gs_{tag}_F{PARAMS['F']:.3f}.npy", V.squeeze().cpu().numpy())
    return hist


if __name__ == "__main__":
    classes = run_frames(400, tag="spots")
    print(classes)
