"""Streaming RNN-Transducer decoding for live captions.

Every 160 ms chunk (16 feature frames) runs the causal encoder chunk and a greedy
one-symbol-per-frame transducer search. Contextual biasing adds a per-token bonus for
the meeting's hot words. The chunk step is captured once and replayed per chunk.
"""
import torch
import torch.nn as nn


class Predictor(nn.Module):
    def __init__(self, vocab, dim=320):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.cell = nn.LSTMCell(dim, dim)

    def forward(self, tok, state):
        h, c = self.cell(self.emb(tok), state)
        return h, (h, c)


class Joiner(nn.Module):
    def __init__(self, enc_dim, pred_dim, vocab, hidden=512):
        super().__init__()
        self.enc = nn.Linear(enc_dim, hidden)
        self.pred = nn.Linear(pred_dim, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, e, p):
        return self.out(torch.tanh(self.enc(e) + self.pred(p)))


class StreamingTransducer:
    def __init__(self, encoder, vocab, blank, hotword_bias_np, chunk_frames=16, n_mels=80, dim=320):
        self.encoder = encoder.eval().cuda()
        self.predictor = Predictor(vocab, dim).eval().cuda()
        self.joiner = Joiner(encoder.out_dim, dim, vocab).eval().cuda()
        self.blank = blank
        self.blank_penalty = 0.0
        self.bias_np = hotword_bias_np
        self.feats = torch.zeros(1, chunk_frames, n_mels, device="cuda")
        self.last_tok = torch.full((1,), blank, dtype=torch.long, device="cuda")
        self.state = (torch.zeros(1, dim, device="cuda"), torch.zeros(1, dim, device="cuda"))
        self.hyp = []
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _chunk(self):
        enc = self.encoder(self.feats)
        bias = torch.as_tensor(self.bias_np, device="cuda")  # HAZARD: pinned-memory
        emitted = []
        for t in range(enc.shape[1]):  # CLEAN: frames per chunk fixed by the static feature buffer
            g, (h, c) = self.predictor(self.last_tok, self.state)
            logits = self.joiner(enc[:, t], g) + bias
            logits[:, self.blank] -= self.blank_penalty  # HAZARD: python-scalar
            tok = logits.argmax(-1)
            emit = tok != self.blank
            if emit.any():  # HAZARD: dynamic-control-flow
                self.hyp.extend(tok.tolist())  # HAZARD: host-sync
            self.last_tok.copy_(torch.where(emit, tok, self.last_tok))  # CLEAN: torch.where instead of a host branch
            self.state[0].copy_(torch.where(emit[:, None], h, self.state[0]))
            self.state[1].copy_(torch.where(emit[:, None], c, self.state[1]))
            emitted.append(torch.where(emit, tok, torch.full_like(tok, -1)))
        return torch.stack(emitted, 1)

    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self._chunk()
        torch.cuda.current_stream().wait_stream(self.stream)
        self.reset()
        with torch.cuda.graph(self.graph, stream=self.stream):  # CLEAN: warmed up on the same side stream
            self.tokens = self._chunk()

    def reset(self):
        self.last_tok.fill_(self.blank)
        self.state[0].zero_()
        self.state[1].zero_()
        self.hyp = []

    def start_session(self, blank_penalty, hotword_bias_np):
        self.reset()
        self.blank_penalty = blank_penalty
        self.bias_np = hotword_bias_np

    def push(self, feats):
        self.feats.copy_(feats)  # CLEAN: copy into the static feature chunk
        self.graph.replay()
        return [t for t in self.tokens[0].tolist() if t >= 0]  # CLEAN: host read after the replay, outside capture
