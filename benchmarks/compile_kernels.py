"""Which kernels torch.compile(mode="reduce-overhead") runs for cgkit's demo MLP, vs eager (GPU).

    python benchmarks/compile_kernels.py [WIDTH BATCH]

Prints the GPU time per step of the five costliest kernels of each, from torch.profiler.
"""

import sys
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

if not torch.cuda.is_available():
    sys.exit("compile_kernels.py: needs a CUDA device")
width, batch = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (256, 8)
model = torch.nn.Sequential(*[m for _ in range(32) for m in (torch.nn.Linear(width, width), torch.nn.GELU())]).cuda()
x = torch.randn(batch, width, device="cuda")
compiled = torch.compile(model, mode="reduce-overhead")


def step_compiled():
    torch.compiler.cudagraph_mark_step_begin()
    compiled(x)


for name, fn in (("eager", lambda: model(x)), ("compiled", step_compiled)):
    with torch.no_grad():
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
    times = Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name[:90]] += e.device_time / 10 / 1000
    print(f"{name} (width {width}, batch {batch}): {sum(times.values()):.4f} ms GPU per step")
    for kernel, ms in times.most_common(5):
        print(f"  {ms:.4f} ms  {kernel}")
