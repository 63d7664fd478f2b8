"""Micro-benchmarks of microphone-array beamforming kernels under CUDA graphs.

Cases (delay-and-sum, MVDR with diagonal loading, GCC-PHAT TDOA) are built as
functools.partial objects and handed to small capture helpers. The MVDR graph is
captured once and replayed while the diagonal loading is swept.
"""
import functools
import math
import numpy as np
import torch

FS, N_FFT, M, FRAMES = 16000, 512, 8, 256
MIC_XYZ = np.stack([[0.035 * math.cos(2 * math.pi * m / M), 0.035 * math.sin(2 * math.pi * m / M), 0.0] for m in range(M)]).astype(np.float32)
FREQS = [FS * k / N_FFT for k in range(N_FFT // 2 + 1)]
LOADING = {"mu": 1e-3}


def capture(fn, warmup=5):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream first
        out = fn()
    return g, out


def time_replays(g, iters=200):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: synchronize after the replays, outside any capture
    return start.elapsed_time(end) / iters


def profile_once(fn):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        out = fn()
    g.replay()
    return out


def delay_and_sum(X, doa, freq_list):
    freqs = torch.tensor(freq_list, device=X.device)  # HAZARD: host-sync
    mics = torch.from_numpy(MIC_XYZ).cuda()  # HAZARD: pinned-memory
    tau = mics @ torch.stack([torch.cos(doa), torch.sin(doa), torch.zeros_like(doa)]) / 343.0
    steer = torch.exp(-2j * math.pi * freqs[:, None] * tau[None, :])
    return (steer.conj()[..., None] * X).mean(1)


def mvdr(X, steer):
    R = torch.einsum("fmt,fnt->fmn", X, X.conj()) / X.shape[-1]
    mu = LOADING["mu"]  # HAZARD: python-scalar
    R = R + mu * torch.eye(M, device=X.device, dtype=R.dtype)
    w, info = torch.linalg.solve_ex(R, steer[..., None])  # CLEAN: solve_ex does no host-side error check
    w = w.squeeze(-1) / (steer.conj() * w.squeeze(-1)).sum(-1, keepdim=True)
    return torch.einsum("fm,fmt->ft", w.conj(), X)


def gcc_phat(x1, x2, max_lag=16):
    cc = torch.fft.irfft(torch.fft.rfft(x1) * torch.fft.rfft(x2).conj() / (torch.fft.rfft(x1).abs() + 1e-8), n=x1.shape[-1])
    cc = torch.cat([cc[-max_lag:], cc[:max_lag + 1]])
    lag_idx = cc.argmax(dim=-1)  # CLEAN: stays on the device
    lag = int(cc.argmax()) - max_lag  # HAZARD: host-sync
    return lag_idx, lag / FS


if __name__ == "__main__":
    X = torch.randn(N_FFT // 2 + 1, M, FRAMES, dtype=torch.complex64, device="cuda")
    steer = torch.exp(1j * torch.rand(N_FFT // 2 + 1, M, device="cuda"))
    doa = torch.tensor(0.7, device="cuda")
    sig = torch.randn(2, 16000, device="cuda")
    ref = profile_once(functools.partial(mvdr, X, steer))  # quick first look before the sweep
    cases = {
        "das": functools.partial(delay_and_sum, X, doa, FREQS),
        "gcc_phat": functools.partial(gcc_phat, sig[0], sig[1]),
    }
    for name, fn in cases.items():
        g, _ = capture(fn)
        print(f"{name}: {time_replays(g):.3f} ms")
    g, out = capture(functools.partial(mvdr, X, steer))
    for mu in (1e-4, 1e-3, 1e-2, 1e-1):
        LOADING["mu"] = mu
        ms = time_replays(g, iters=50)
        print(f"mvdr mu={mu:g}: {ms:.3f} ms, output power {out.abs().pow(2).mean().item():.3e}")
