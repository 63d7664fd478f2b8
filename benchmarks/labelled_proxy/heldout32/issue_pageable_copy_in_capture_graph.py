# torch 2.11 now raises
#   "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless
#    the CPU tensor is pinned. Please use tensor.pin_memory() ..."
# where 2.9 captured silently (and, as pytorch#171894 / #172156 explain, replayed
# garbage). My preprocessing + stats code below. forward_v1 is what we shipped,
# forward_v2 is what I ended up with after the maintainers' comments.
import numpy as np
import torch
import torch.nn as nn

dev = torch.device("cuda")
mean_np = np.array([0.485, 0.456, 0.406], dtype=np.float32)
std_list = [0.229, 0.224, 0.225]
net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 1)).to(dev).eval()
class_bias = torch.linspace(-1.0, 1.0, 8)  # ordinary (pageable) CPU tensor


def forward_v1(x):
    mean = torch.from_numpy(mean_np).to(dev, non_blocking=True)  # HAZARD: pinned-memory
    std = torch.tensor(std_list).cuda()  # HAZARD: pinned-memory
    y = net((x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1))
    y = y + class_bias.to(dev).view(1, -1, 1, 1)  # HAZARD: pinned-memory
    stats = y.mean((0, 2, 3)).cpu()  # HAZARD: host-sync
    return y, stats


# v2: constants uploaded once, per-call bias staged through pinned memory
mean_gpu = torch.from_numpy(mean_np).to(dev).view(1, 3, 1, 1)  # CLEAN: uploaded once, before any capture
std_gpu = torch.tensor(std_list, device=dev).view(1, 3, 1, 1)  # CLEAN: built outside the captured region
pinned_bias = class_bias.clone().pin_memory()
static_bias = torch.empty(8, device=dev)
stats_gpu = torch.empty(8, device=dev)


def forward_v2(x):
    static_bias.copy_(pinned_bias, non_blocking=True)  # CLEAN: H2D copy from pinned memory is recorded
    y = net((x - mean_gpu) / std_gpu) + static_bias.view(1, -1, 1, 1)
    stats_gpu.copy_(y.mean((0, 2, 3)))  # CLEAN: stats stay on the device
    return y


def capture(fn, x):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g, capture_error_mode="thread_local"):
        out = fn(x)
    return g, out


static_x = torch.rand(4, 3, 224, 224, device=dev)
try:
    capture(forward_v1, static_x)
except RuntimeError as e:
    print("v1:", str(e).splitlines()[0])

g, out = capture(forward_v2, static_x)
for i in range(3):
    static_x.copy_(torch.rand(4, 3, 224, 224, device=dev))
    pinned_bias.mul_(0.5)  # new calibration lands in the pinned buffer
    g.replay()
    print(i, out.abs().mean().item(), stats_gpu.cpu().numpy().round(3))
