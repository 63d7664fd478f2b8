"""Sequence tagger (BiLSTM-CRF) served through small capture context managers."""
import contextlib

import torch
import torch.nn as nn


@contextlib.contextmanager
def graph_capture(graph, stream, pool=None):
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):  # CLEAN: explicit side stream, thread-local capture mode
        yield graph
    torch.cuda.current_stream().wait_stream(stream)


@contextlib.contextmanager
def warmed(fn, stream, n=3):
    with torch.cuda.stream(stream):
        for _ in range(n):
            fn()
    yield fn


class BiLSTMCRF(nn.Module):
    def __init__(self, vocab=30000, dim=256, n_tags=17):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim // 2, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(dim, n_tags)
        self.trans = nn.Parameter(torch.randn(n_tags, n_tags))
        self.gen = torch.Generator(device="cuda")
        self.n_tagged = 0

    def viterbi(self, emissions, mask):
        B, T, K = emissions.shape
        self.n_tagged += B  # HAZARD: host-code
        score = emissions[:, 0]
        history = []
        for t in range(1, T):
            nxt = score[:, :, None] + self.trans[None] + emissions[:, t, None, :]
            best, idx = nxt.max(1)
            score = torch.where(mask[:, t, None], best, score)
            history.append(idx)
        tags = [score.argmax(-1)]
        for idx in reversed(history):
            tags.append(idx.gather(1, tags[-1][:, None]).squeeze(1))
        paths = torch.stack(tags[::-1], dim=1)
        if not torch.cuda.is_current_stream_capturing():
            assert (paths >= 0).all()  # CLEAN: debug check skipped while capturing
        lengths = mask.sum(1)
        return [paths[b, : int(lengths[b])] for b in range(B)]  # HAZARD: host-sync

    def forward(self, tokens, mask):
        h, _ = self.lstm(self.emb(tokens))
        state = self.gen.clone_state()  # HAZARD: rng
        h = h + 0.01 * torch.randn(h.shape, device=h.device, generator=state) * self.training
        return self.viterbi(self.proj(h), mask)


class TaggerService:
    def __init__(self, model, batch=32, max_len=128):
        self.model = model.cuda().eval()
        self.tokens = torch.zeros(batch, max_len, dtype=torch.long, device="cuda")
        self.mask = torch.zeros(batch, max_len, dtype=torch.bool, device="cuda")
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    @torch.inference_mode()
    def build(self):
        run = lambda: self.model(self.tokens, self.mask)
        with warmed(run, self.stream), graph_capture(self.graph, self.stream):
            self.out = run()

    def tag(self, tokens, mask):
        self.tokens.copy_(tokens)
        self.mask.copy_(mask)
        self.graph.replay()
        return [p.tolist() for p in self.out]  # CLEAN: host read after replay
