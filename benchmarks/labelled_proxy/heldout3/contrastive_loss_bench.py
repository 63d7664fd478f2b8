"""Micro-benchmark of image-text contrastive loss variants under CUDA graph replay.

Each case is a plain function; `time_graphed` warms it up, captures it and times
replays. Results feed the loss-choice table in the training docs.
"""
import functools

import numpy as np
import torch
import torch.nn.functional as F

TOKEN_PRIOR = np.full(64, 1 / 64, dtype=np.float32)  # overwritten with the measured caption-cluster prior


def clip_loss(img, txt, logit_scale):
    img, txt = F.normalize(img, dim=-1), F.normalize(txt, dim=-1)
    logits = logit_scale.exp().clamp(max=100.0) * img @ txt.t()  # CLEAN: clamp stays on the device
    labels = torch.arange(img.shape[0], device=img.device)  # CLEAN: length from the static shape, no host data
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def siglip_loss(img, txt, logit_scale, bias=-10.0):
    logits = logit_scale.exp() * F.normalize(img, dim=-1) @ F.normalize(txt, dim=-1).t() + bias
    n = logits.shape[0]
    target = 2 * torch.eye(n, device=logits.device) - 1
    return -F.logsigmoid(target * logits).sum() / n


def python_clamped_loss(img, txt, logit_scale):
    scale = min(logit_scale.exp().item(), 100.0)  # HAZARD: host-sync
    logits = scale * F.normalize(img, dim=-1) @ F.normalize(txt, dim=-1).t()
    labels = torch.arange(img.shape[0], device=img.device)
    return F.cross_entropy(logits, labels)


def hard_negative_loss(img, txt, logit_scale, margin=0.2):
    sim = F.normalize(img, dim=-1) @ F.normalize(txt, dim=-1).t()
    pos = sim.diagonal()
    off = sim - 4.0 * torch.eye(sim.shape[0], device=sim.device)
    hard = off[off > pos[:, None] - margin]  # HAZARD: dynamic-shape
    return F.relu(margin + hard.mean() - pos.mean())


def debiased_loss(img, txt, logit_scale, tau_plus=0.1):
    prior = torch.from_numpy(TOKEN_PRIOR).cuda()  # HAZARD: pinned-memory
    sim = (F.normalize(img, dim=-1) @ F.normalize(txt, dim=-1).t() * logit_scale.exp()).exp()
    pos = sim.diagonal()
    neg = (sim.sum(-1) - pos) / (sim.shape[0] - 1)
    ng = ((neg - tau_plus * pos) / (1 - tau_plus)).clamp_min(prior.min())
    return -torch.log(pos / (pos + ng * (sim.shape[0] - 1))).mean()


def time_graphed(fn, args, graph, iters=50, warmup=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):  # HAZARD: api-misuse
        out = fn(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        graph.replay()
    end.record()
    torch.cuda.synchronize()  # CLEAN: host sync after the timed replays, outside the capture
    return start.elapsed_time(end) / iters, out.clone()


def sweep(batch_sizes=(256, 1024, 4096), dim=768):
    cases = {
        "clip": clip_loss,
        "siglip": functools.partial(siglip_loss, bias=-10.0),
        "clamped": python_clamped_loss,
        "hardneg": hard_negative_loss,
        "debiased": debiased_loss,
    }
    graph = torch.cuda.CUDAGraph()
    scale = torch.tensor(np.log(1 / 0.07), device="cuda")  # CLEAN: created once before any capture
    rows = []
    for name, fn in cases.items():
        for bs in batch_sizes:
            img = torch.randn(bs, dim, device="cuda", dtype=torch.bfloat16)
            txt = torch.randn(bs, dim, device="cuda", dtype=torch.bfloat16)
            ms, loss = time_graphed(fn, (img, txt, scale), graph)
            rows.append((name, bs, ms, float(loss)))
    return rows
