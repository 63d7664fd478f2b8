"""A capture-on-first-call decorator used for small post-processing kernels in a serving stack."""
import functools

import torch

ROPE_CACHE = torch.randn(8192, 64, device="cuda")
SCORE_THRESHOLD = 0.35
CALLS = {"rope": 0}


def cuda_graphed(warmup=3):
    def deco(fn):
        state = {}

        @functools.wraps(fn)
        def wrapper(*args):
            if "graph" not in state:
                static_args = [a.clone() for a in args]
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(warmup):
                        fn(*static_args)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = fn(*static_args)
                state.update(graph=g, args=static_args, out=out)
            for dst, src in zip(state["args"], args):
                dst.copy_(src)  # CLEAN: new values copied into the captured inputs
            state["graph"].replay()
            return state["out"]

        wrapper.reset = state.clear
        return wrapper

    return deco


@cuda_graphed()
def apply_rope(q, pos):
    CALLS["rope"] += 1  # HAZARD: host-code
    freqs = ROPE_CACHE[pos]  # CLEAN: gather with a CUDA index tensor, no host copy
    q1, q2 = q.chunk(2, dim=-1)
    cos, sin = freqs.cos()[..., :32], freqs.sin()[..., :32]
    return torch.cat([q1 * cos - q2 * sin, q1 * sin + q2 * cos], dim=-1)


@cuda_graphed(warmup=2)
def topk_filter(logits, k_per_row):
    kmax = k_per_row.max().item()  # HAZARD: host-sync
    vals, _ = torch.topk(logits, kmax, dim=-1)
    cutoff = vals.gather(-1, (k_per_row - 1).unsqueeze(-1))
    return logits.masked_fill(logits < cutoff, float("-inf"))


@cuda_graphed()
def pad_mask(x, lengths):
    keep = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]
    return x.masked_fill(~keep.unsqueeze(-1), 0.0)  # CLEAN: fixed-shape masking, no boolean indexing


@cuda_graphed()
def compact_hits(scores, boxes):
    keep = scores > SCORE_THRESHOLD  # HAZARD: python-scalar
    return boxes[keep]  # HAZARD: dynamic-shape


def set_threshold(value):
    global SCORE_THRESHOLD
    SCORE_THRESHOLD = value


def postprocess(stream_of_batches):
    rotated = []
    for q, pos, logits, k, scores, boxes in stream_of_batches:
        rotated.append(apply_rope(q, pos))  # HAZARD: static-address
        filtered = topk_filter(logits, k)
        hits = compact_hits(scores, boxes)
        yield filtered.argmax(-1).cpu(), hits.cpu()
        if len(rotated) == 1000:
            set_threshold(0.5)  # tighten after the warm-up traffic
