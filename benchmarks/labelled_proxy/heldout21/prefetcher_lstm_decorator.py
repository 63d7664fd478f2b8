"""Learned memory prefetcher (Hashemi et al. style): an LSTM over the last 32 address
deltas of a load PC predicts the next deltas; evaluated in a trace-driven cache simulator.

The `@cuda_graphed` decorator was written by a coding assistant to cut the per-miss latency
of the model call; it warms up, captures once and replays afterwards.
"""
import functools
from collections import deque

import numpy as np
import torch
import torch.nn as nn

WINDOW, VOCAB, DEGREE, THRESH = 32, 50_000, 4, 0.05
STATS = {"calls": 0}


def cuda_graphed(warmup=3):
    def deco(fn):
        cache = {}

        @functools.wraps(fn)
        def wrapper(*args):
            if "graph" not in cache:
                cache["static"] = [a.clone() for a in args]
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):  # CLEAN: warm-up stream forked and joined
                    for _ in range(warmup):
                        fn(*cache["static"])
                torch.cuda.current_stream().wait_stream(s)
                cache["graph"] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(cache["graph"], stream=torch.cuda.current_stream()):  # HAZARD: stream
                    cache["out"] = fn(*cache["static"])
            for dst, a in zip(cache["static"], args):
                dst.copy_(a)  # CLEAN: arguments copied into the captured inputs
            cache["graph"].replay()
            return cache["out"]
        return wrapper
    return deco


class DeltaLSTM(nn.Module):
    def __init__(self, emb=64, hid=128):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, emb)
        self.lstm = nn.LSTM(emb, hid, batch_first=True)
        self.head = nn.Linear(hid, VOCAB)


MODEL = DeltaLSTM().cuda().eval()
STATE = {"h": torch.zeros(1, 1, 128, device="cuda"), "c": torch.zeros(1, 1, 128, device="cuda")}


@cuda_graphed(warmup=3)
@torch.no_grad()
def predict(ids):
    out, (h, c) = MODEL.lstm(MODEL.emb(ids), (STATE["h"], STATE["c"]))
    probs = torch.softmax(MODEL.head(out[:, -1]), -1)
    conf = float(probs.max())  # HAZARD: host-sync
    top = probs.topk(DEGREE).indices[0].tolist()  # HAZARD: host-sync
    STATS["calls"] += 1  # HAZARD: host-code
    STATE["h"].copy_(h)  # CLEAN: recurrent state written back into the persistent buffer
    STATE["c"].copy_(c)
    return top if conf > THRESH else []


def simulate(trace_path, vocab_path, cache_lines=16384):
    vocab = dict(np.load(vocab_path, allow_pickle=True).item())      # delta -> class id
    inv = {v: k for k, v in vocab.items()}
    addrs = np.fromfile(trace_path, dtype=np.uint64) >> 6            # cache-line addresses
    window = deque([0] * WINDOW, maxlen=WINDOW)
    cache, hits, useful = {}, 0, 0
    for t, (prev, cur) in enumerate(zip(addrs[:-1], addrs[1:])):
        if cur in cache:
            hits += 1
            useful += cache[cur]
        cache[cur] = 0
        window.append(vocab.get(int(cur) - int(prev), 0))
        ids = torch.tensor([list(window)], device="cuda")  # CLEAN: built on the host side, outside the graph
        for cls in predict(ids):
            cache[cur + inv.get(cls, 0)] = 1
        if len(cache) > cache_lines:
            cache.pop(next(iter(cache)))
    return hits / len(addrs), useful, STATS["calls"]


if __name__ == "__main__":
    MODEL.load_state_dict(torch.load("prefetch_lstm_mcf.pt", weights_only=True))
    for trace in ("605.mcf_s-1554B.bin", "623.xalancbmk_s-10B.bin"):
        print(trace, simulate(f"traces/{trace}", "traces/delta_vocab.npy"))
