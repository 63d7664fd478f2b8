"""What the small GPU experiments share: cgkit's demo model, one CUDA-event timer, one capture.

Import after checking for a GPU (`smoke.require_gpu()`); torch is imported here on first use.
"""

import statistics


def demo_model(width: int = 256, batch: int = 8):
    """(model, input): cgkit's built-in demo, 32 x (Linear(width) + GELU), on the GPU in eval mode."""
    import torch

    layers = [m for _ in range(32) for m in (torch.nn.Linear(width, width), torch.nn.GELU())]
    return torch.nn.Sequential(*layers).cuda().eval(), torch.randn(batch, width, device="cuda")


def time_ms(fn, warmup: int = 10, iters: int = 200, repeats: int = 5) -> float:
    """Median ms per call over `repeats` runs of `iters` calls, timed with CUDA events (as the peer script times)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    return statistics.median(samples)


def captured(fn):
    """`fn` warmed up on a side stream and captured in one torch.cuda.graph; returns the replay."""
    import torch

    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        fn()
    return graph.replay
