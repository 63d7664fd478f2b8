"""Latency benchmarks for the server-side next-word model of a mobile keyboard.

Each case is a functools.partial handed to a graph benchmark helper; a quick
"first look" helper checks that a new candidate model can be captured at all.
"""
import functools

import numpy as np
import torch
import torch.nn as nn

VOCAB, CTX, B = 20_000, 16, 64


class TinyTransformerLM(nn.Module):
    def __init__(self, d=384, layers=4):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(1, CTX, d))
        self.tf = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 6, 4 * d, batch_first=True), layers)
        self.out = nn.Linear(d, VOCAB)

    def forward(self, ids):
        mask = nn.Transformer.generate_square_subsequent_mask(CTX, device=ids.device)
        return self.out(self.tf(self.emb(ids) + self.pos, mask=mask, is_causal=True)[:, -1])


def bench_graphed(fn, iters=200, warmup=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # CLEAN: the case was warmed up just above
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def first_look(fn):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # HAZARD: api-misuse
        fn()
    g.replay()
    torch.cuda.synchronize()
    return True


def plain_case(model, ctx):
    return torch.topk(model(ctx), 3, dim=-1)  # CLEAN: fixed-k suggestion strip


def personalised_dev_case(model, ctx, boost, recent):
    logits = model(ctx) + boost
    logits.index_add_(1, recent, torch.full((logits.shape[0], recent.numel()), 0.5, device="cuda"))
    return torch.topk(logits, 3, dim=-1)


def personalised_case(model, ctx, user_dict: np.ndarray, recent_ids):
    boost = torch.from_numpy(user_dict).cuda()  # HAZARD: pinned-memory
    recent = torch.tensor(recent_ids, device="cuda")  # HAZARD: host-sync
    return personalised_dev_case(model, ctx, boost, recent)


def filtered_case(model, ctx, banned, filter_stream):
    logits = model(ctx)
    with torch.cuda.stream(filter_stream):  # HAZARD: stream
        logits = logits.masked_fill(banned, float("-inf"))
    return torch.topk(logits, 3, dim=-1)


@torch.no_grad()
def main():
    ctx = torch.randint(0, VOCAB, (B, CTX), device="cuda")
    small, tfm = TinyTransformerLM(d=256, layers=2).cuda().eval(), TinyTransformerLM().cuda().eval()
    user_dict = np.zeros(VOCAB, dtype=np.float32)
    user_dict[[17, 902, 4411]] = 2.0
    boost_dev = torch.from_numpy(user_dict).pin_memory().cuda(non_blocking=True)
    recent_dev = torch.tensor([5, 77, 1203], device="cuda")  # CLEAN: built once before benchmarking, outside any capture
    banned = torch.zeros(VOCAB, dtype=torch.bool, device="cuda")
    banned[1000:1040] = True
    cases = {
        "small": functools.partial(plain_case, small, ctx),
        "transformer": functools.partial(plain_case, tfm, ctx),
        "personalised": functools.partial(personalised_case, tfm, ctx, user_dict, [5, 77, 1203]),
        "personalised_dev": functools.partial(personalised_dev_case, tfm, ctx, boost_dev, recent_dev),
        "filtered": functools.partial(filtered_case, tfm, ctx, banned, torch.cuda.Stream()),
    }
    for name, fn in cases.items():
        print(f"{name:>14}: {bench_graphed(fn):.3f} ms")
    candidate = TinyTransformerLM(d=256, layers=6).cuda().eval().half()
    print("fp16 candidate graphable:", first_look(functools.partial(plain_case, candidate, ctx)))


if __name__ == "__main__":
    main()
