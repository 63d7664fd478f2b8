"""Compare compile modes for a detection post-processing head."""
import time

import torch

MODES = {
    "eager": None,
    "inductor": {},
    "inductor-no-cg": {"mode": "max-autotune-no-cudagraphs"},
    "cudagraphs": {"backend": "cudagraphs"},
    "reduce-overhead": {"mode": "reduce-overhead"},
}


def apply_deltas(deltas, anchors, clip=4.135):
    wh = anchors[..., 2:] - anchors[..., :2]
    assert (wh > 0).all(), "degenerate anchors"  # HAZARD: dynamic-control-flow
    ctr = anchors[..., :2] + 0.5 * wh
    d_xy, d_wh = deltas[..., :2], deltas[..., 2:].clamp(max=clip)
    pred_ctr = ctr + d_xy * wh
    pred_wh = wh * d_wh.exp()
    return torch.cat([pred_ctr - 0.5 * pred_wh, pred_ctr + 0.5 * pred_wh], dim=-1)


def decode_boxes(deltas, anchors, scores, score_thresh: float = 0.05, topk: int = 1000):
    boxes = apply_deltas(deltas, anchors)
    top_scores, top_idx = scores.topk(topk, dim=-1)
    top_boxes = boxes.gather(1, top_idx.unsqueeze(-1).expand(-1, -1, 4))
    keep = top_scores > score_thresh  # CLEAN: elementwise comparison against a constant threshold, still a fixed-shape tensor
    kept = top_boxes[keep]  # HAZARD: dynamic-shape
    counts = keep.sum(-1).tolist()  # HAZARD: host-sync
    return kept.split(counts)


def decode_boxes_padded(deltas, anchors, scores, score_thresh: float = 0.05, topk: int = 1000):
    boxes = apply_deltas(deltas, anchors)
    top_scores, top_idx = scores.topk(topk, dim=-1)
    top_boxes = boxes.gather(1, top_idx.unsqueeze(-1).expand(-1, -1, 4))
    keep = top_scores > score_thresh
    return top_boxes * keep.unsqueeze(-1), keep.sum(-1)


def count_detections(scores, thresh: float = 0.5):
    return int((scores > thresh).sum())  # CLEAN: this function is only compiled in default mode, without CUDA graphs


count_detections_fast = torch.compile(count_detections)


def bench(fn, args, iters=50):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()  # CLEAN: synchronize in the harness, outside the compiled function
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3


if __name__ == "__main__":
    N, A = 8, 20000
    args = (torch.randn(N, A, 4, device="cuda"), torch.rand(N, A, 4, device="cuda").cumsum(-1),
            torch.rand(N, A, device="cuda"))
    for name, kwargs in MODES.items():
        for impl in (decode_boxes, decode_boxes_padded):
            fn = impl if kwargs is None else torch.compile(impl, **kwargs)
            torch._dynamo.reset()
            print(f"{name:16s} {impl.__name__:20s} {bench(fn, args):.3f} ms")
    print("detections:", count_detections_fast(args[2]))
