"""Low-level capture_begin/capture_end for a noise-injection kernel sequence."""
import torch


def build_noise_graph(shape, sigma=0.1, device="cuda"):
    static_in = torch.randn(shape, device=device)
    static_out = torch.empty_like(static_in)

    for _ in range(3):
        static_out.copy_(static_in + sigma * torch.randn_like(static_in))
    torch.cuda.synchronize()  # CLEAN: sync before capture starts

    g = torch.cuda.CUDAGraph()
    g.capture_begin()  # HAZARD: stream
    torch.cuda.manual_seed(1234)  # HAZARD: rng
    cpu_state = torch.get_rng_state()  # CLEAN: CPU generator state, no CUDA generator touched
    noise = torch.randn_like(static_in)
    static_out.copy_(static_in + sigma * noise)
    g.capture_end()
    return g, static_in, static_out, cpu_state


def recapture_scaled(g, static_in, static_out):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g.capture_begin()  # HAZARD: api-misuse
        static_out.copy_(static_in * 2.0)
        g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    return g


def recapture_clean(g, static_in, static_out):
    g.reset()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g.capture_begin()  # CLEAN: graph was reset first and capture runs on a side stream
        static_out.copy_(static_in * 2.0)
        g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    return g


if __name__ == "__main__":
    g, x, y, _ = build_noise_graph((1024, 1024))
    for _ in range(10):
        x.normal_()
        g.replay()
    g = recapture_scaled(g, x, y)
    g.replay()
    print(y.abs().mean().item())
