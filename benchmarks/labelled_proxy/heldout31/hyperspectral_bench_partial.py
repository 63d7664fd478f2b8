"""HybridSN (3-D + 2-D CNN) on Indian Pines: latency of variants. Asked for "CUDA-graph numbers for
every variant", the assistant wrote `bench_graph`, `bench_amp` and a table of `functools.partial` cases."""
import functools
import numpy as np
import torch
import torch.nn as nn


class HybridSN(nn.Module):
    def __init__(self, bands=30, n_classes=16, patch=25):
        super().__init__()
        self.c3d = nn.Sequential(
            nn.Conv3d(1, 8, (7, 3, 3)), nn.ReLU(), nn.Conv3d(8, 16, (5, 3, 3)), nn.ReLU(), nn.Conv3d(16, 32, (3, 3, 3)), nn.ReLU()
        )
        d = bands - 12
        self.c2d = nn.Sequential(nn.Conv2d(32 * d, 64, 3), nn.ReLU())
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(64 * (patch - 8) ** 2, 256), nn.ReLU(), nn.Dropout(0.4), nn.Linear(256, n_classes))

    def forward(self, x):  # x: (B, 1, bands, P, P)
        h = self.c3d(x)
        return self.fc(self.c2d(h.flatten(1, 2)))


def bench_graph(fn, iters=100, warmup=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # CLEAN: forked and joined warm-up stream
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    torch.cuda.synchronize()  # CLEAN: sync after capture, outside the graph
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    for _ in range(iters):
        g.replay()
    t1.record()
    torch.cuda.synchronize()
    return t0.elapsed_time(t1) / iters, out


def bench_amp(fn, iters=100):
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        return bench_graph(fn, iters)


def case_fp32(model, x):
    return model(x)


def case_fp16_inside(model, x):
    with torch.autocast("cuda", dtype=torch.float16):  # CLEAN: autocast entered inside the captured function
        return model(x)


def case_pca_on_gpu(model, raw, pca_np):
    # raw: (B, 200, P, P) full spectrum -> 30 PCA bands on the GPU
    W = torch.from_numpy(pca_np).cuda()  # HAZARD: pinned-memory
    x = torch.einsum("bkhw,kc->bchw", raw, W)
    return model(x.unsqueeze(1))


def case_argmax_map(model, x):
    return model(x).argmax(1).cpu()  # HAZARD: host-sync


def case_labelled_only(model, x, gt):
    return model(x)[gt > 0]  # HAZARD: dynamic-shape


def case_two_streams(model, x, side):
    a = model(x[: x.shape[0] // 2])
    with torch.cuda.stream(side):  # HAZARD: stream
        b = model(x[x.shape[0] // 2 :])
    return torch.cat([a, b])


def case_masked_logits(model, x, gt):
    return model(x).masked_fill((gt == 0).unsqueeze(1), 0.0)  # CLEAN: masked_fill keeps the shape


@torch.no_grad()
def main():
    model = HybridSN().cuda().eval()
    x = torch.randn(256, 1, 30, 25, 25, device="cuda")
    raw = torch.randn(256, 200, 25, 25, device="cuda")
    gt = torch.randint(0, 17, (256,), device="cuda")
    pca_np = np.random.randn(200, 30).astype(np.float32)
    W_dev = torch.from_numpy(pca_np).cuda()  # CLEAN: uploaded once, outside any capture
    cases = {
        "fp32": functools.partial(case_fp32, model, x),
        "fp16_inside": functools.partial(case_fp16_inside, model, x),
        "pca_gpu": functools.partial(case_pca_on_gpu, model, raw, pca_np),
        "pca_preuploaded": functools.partial(lambda m, r, w: m(torch.einsum("bkhw,kc->bchw", r, w).unsqueeze(1)), model, raw, W_dev),
        "argmax_map": functools.partial(case_argmax_map, model, x),
        "labelled_only": functools.partial(case_labelled_only, model, x, gt),
        "masked_logits": functools.partial(case_masked_logits, model, x, gt),
        "two_streams": functools.partial(case_two_streams, model, x, torch.cuda.Stream()),
    }
    for name, fn in cases.items():
        ms, _ = bench_graph(fn)
        print(f"{name:16s} {ms:.3f} ms/iter")
    ms, _ = bench_amp(cases["fp32"])
    print(f"{'fp32+outer amp':16s} {ms:.3f} ms/iter")


if __name__ == "__main__":
    main()
