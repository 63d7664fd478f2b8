# Adapted from the 1.10 prototype discussion (raw capture_begin()/capture_end()
# around a plain callable). On 2.11 it either refuses to capture or, when it
# does capture, my call counter and timing stats never move and the output
# normalisation is frozen at the capture-time peak.
import time

import torch


class Normalizer:
    def __init__(self, n):
        self.calls = 0
        self.last_ms = 0.0
        self.w = torch.randn(n, device="cuda")

    def __call__(self, x):
        t0 = time.perf_counter()  # HAZARD: host-code
        self.calls += 1  # HAZARD: host-code
        y = x * 2 + self.w
        peak = float(y.abs().max())  # HAZARD: host-sync
        y = y / (peak + 1e-6)
        self.last_ms = 1e3 * t0
        return y


f = Normalizer(1000)
static_input = torch.zeros(1000, device="cuda")

for _ in range(3):  # warm-up, eagerly
    static_output = f(static_input)
torch.cuda.synchronize()  # CLEAN: synchronize before capture_begin, nothing is capturing yet

g = torch.cuda.CUDAGraph()
g.capture_begin()  # HAZARD: stream
static_output = f(static_input)
g.capture_end()

for i in range(5):
    static_input.copy_(torch.full_like(static_input, float(i)))  # CLEAN: float() of a Python int
    g.replay()
    print(i, "calls:", f.calls, "out:", static_output[:3].tolist())  # CLEAN: host read after the replay

# what I expected, eagerly
print("eager:", f(static_input)[:3].tolist(), "calls:", f.calls)  # CLEAN: eager call and host read, no capture
