"""Capture utility used by a denoiser benchmark: callers hand in closures."""
import torch

SCALE = 1.0


def capture(fn, *static_inputs, amp=False, warmup=3, pool=None):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn(*static_inputs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):  # HAZARD: autocast-cache
        with torch.cuda.graph(g, pool=pool, stream=s):
            out = fn(*static_inputs)
    return g, out


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


fast_rmsnorm = torch.compile(rmsnorm)


def main(steps=100):
    global SCALE
    x = torch.randn(32, 4096, device="cuda")
    w = torch.ones(4096, device="cuda")

    def denoise(inp):
        y = fast_rmsnorm(inp, w)  # HAZARD: api-misuse
        return y * SCALE  # HAZARD: python-scalar

    def residual(inp):
        return inp + 0.1 * rmsnorm(inp, w)  # CLEAN: 0.1 is a literal constant

    g1, out1 = capture(denoise, x, amp=True, warmup=0)
    g2, out2 = capture(residual, out1, pool=g1.pool())
    history = []
    for i in range(steps):
        SCALE = 1.0 - i / steps
        x.normal_()
        g1.replay()
        g2.replay()
        history.append(out2)  # HAZARD: static-address
    return torch.stack(history).mean(0)
