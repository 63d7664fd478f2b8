"""BiLSTM-CRF-style tagger emissions, captured through small helper context managers."""
import itertools
from contextlib import contextmanager

import torch
import torch.nn as nn

UNK_ID = 1


@contextmanager
def graph_capture(graph, pool=None, device=None):
    device = torch.device(device or "cuda")
    torch.cuda.synchronize(device)  # CLEAN: synchronize before the capture begins
    stream = torch.cuda.Stream(device=device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.device(device), torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
        yield stream
    torch.cuda.current_stream(device).wait_stream(stream)


@contextmanager
def eval_capture(graph, pool=None):
    with torch.no_grad(), torch.cuda.graph(graph, pool=pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield


def offsets_from_lengths(lengths_list, device):
    return torch.tensor([0] + list(itertools.accumulate(lengths_list)), device=device)  # HAZARD: pinned-memory


def check_sorted(lengths):
    if not torch.all(lengths[:-1] >= lengths[1:]):  # HAZARD: dynamic-control-flow
        raise ValueError("lengths must be sorted in descending order")


def word_dropout(tokens, p, gen):
    drop = torch.rand(tokens.shape, device=tokens.device, generator=gen) < p  # HAZARD: rng
    return tokens.masked_fill(drop, UNK_ID)


class Tagger(nn.Module):
    def __init__(self, vocab=30000, emb=128, hidden=256, n_tags=17):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden, n_tags)

    def forward(self, tokens):
        return self.proj(self.rnn(self.emb(tokens))[0])


class TaggerScorer:
    def __init__(self, model: Tagger, batch: int, max_len: int, p_drop: float = 0.1):
        self.model = model
        self.p_drop = p_drop
        self.gen = torch.Generator(device="cuda")
        self.tokens = torch.zeros(batch, max_len, dtype=torch.long, device="cuda")
        self.lengths = torch.full((batch,), max_len, dtype=torch.long, device="cuda")
        self.lengths_list = [max_len] * batch
        self.train_graph = torch.cuda.CUDAGraph()
        self.eval_graph = torch.cuda.CUDAGraph()
        self.pool = torch.cuda.graph_pool_handle()

    def _emissions(self, train: bool):
        check_sorted(self.lengths)
        offsets = offsets_from_lengths(self.lengths_list, self.tokens.device)
        toks = word_dropout(self.tokens, self.p_drop, self.gen) if train else self.tokens  # CLEAN: Python bool flag picks the branch
        return self.model(toks).log_softmax(-1), offsets

    def capture(self, warmup: int = 3):
        for _ in range(warmup):
            self._emissions(train=True)
        with graph_capture(self.train_graph, pool=self.pool):
            self.train_out = self._emissions(train=True)
        with eval_capture(self.eval_graph, pool=self.pool):
            self.eval_out = self._emissions(train=False)

    def resize(self, max_len: int):
        batch = self.tokens.shape[0]
        self.tokens = torch.zeros(batch, max_len, dtype=torch.long, device="cuda")
        self.lengths = torch.full((batch,), max_len, dtype=torch.long, device="cuda")
        self.lengths_list = [max_len] * batch
        with graph_capture(self.train_graph, pool=self.pool):  # HAZARD: api-misuse
            self.train_out = self._emissions(train=True)
