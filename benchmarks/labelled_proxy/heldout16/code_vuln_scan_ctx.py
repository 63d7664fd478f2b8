"""Vulnerability scanning of pushed code for a code-hosting service.

Each pushed file is tokenised (1024 tokens, 16 files per batch). A token-level
CNN/GRU model predicts per-token "sink" relevance and per-file CWE logits; the
scan report highlights tokens next to dangerous sinks (exec, strcpy, eval, ...).
The scan is captured once through a small context-manager helper.
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, N_CWE, L, B = 50000, 40, 1024, 16
SINK_TOKEN_IDS = [1187, 2210, 3391, 4410, 5002, 7781]


@contextlib.contextmanager
def graph_capture(warmup_fn, n_warmup: int = 3):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # CLEAN: warm-up on a forked side stream, joined below
        for _ in range(n_warmup):
            warmup_fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield g


class VulnModel(nn.Module):
    def __init__(self, d: int = 256):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.conv = nn.Conv1d(d, d, 5, padding=2)
        self.gru = nn.GRU(d, d // 2, batch_first=True, bidirectional=True)
        self.tok_head = nn.Linear(d, 1)
        self.cwe_head = nn.Linear(d, N_CWE)

    def forward(self, tok):
        x = F.gelu(self.conv(self.emb(tok).transpose(1, 2))).transpose(1, 2)
        h, _ = self.gru(x)
        return self.cwe_head(h.max(1).values), self.tok_head(h).squeeze(-1)


class VulnScanner:
    def __init__(self, model: VulnModel, cwe_ids):
        self.model = model.cuda().eval()
        self.cwe_ids = list(cwe_ids)                 # CWE classes enabled by the org's policy
        self.sink_vocab = torch.tensor(SINK_TOKEN_IDS, device="cuda")  # CLEAN: built once in __init__, before the capture
        self.static_tok = torch.zeros(B, L, dtype=torch.long, device="cuda")
        with torch.no_grad(), graph_capture(lambda: self._scan(self.static_tok)) as g:
            self.out = self._scan(self.static_tok)
        self.graph = g

    def _scan(self, tok):
        cwe_logits, tok_logits = self.model(tok)
        enabled = torch.tensor(self.cwe_ids, device=tok.device)  # HAZARD: host-sync
        cwe = cwe_logits.index_select(1, enabled).sigmoid()
        is_sink = (tok[..., None] == self.sink_vocab).any(-1)
        sinks = torch.nonzero(is_sink)  # HAZARD: dynamic-shape
        sink_score = tok_logits[sinks[:, 0], sinks[:, 1]].sigmoid()
        file_risk = torch.zeros(tok.shape[0], device=tok.device).index_add_(0, sinks[:, 0], sink_score)
        top_tok = tok_logits.topk(8, dim=1).indices  # CLEAN: fixed k, no data-dependent shape
        torch.cuda.empty_cache()  # HAZARD: memory
        return cwe, file_risk, top_tok

    @torch.no_grad()
    def scan_push(self, files_tok: torch.Tensor):
        n = files_tok.shape[0]
        self.static_tok.zero_()
        self.static_tok[:n, : files_tok.shape[1]].copy_(files_tok)  # CLEAN: copy_ into the static input
        self.graph.replay()
        cwe, risk, top = (t[:n].clone() for t in self.out)
        return cwe, risk, top


def severity_labels(cwe_probs: torch.Tensor, cwe_ids):
    onehot = F.one_hot(cwe_probs.argmax(-1), num_classes=len(cwe_ids))  # CLEAN: one_hot with num_classes, outside the graph
    return onehot.float()


if __name__ == "__main__":
    scanner = VulnScanner(VulnModel(), cwe_ids=[20, 22, 78, 79, 89, 94, 119, 787])
    push = torch.randint(0, VOCAB, (5, 700), device="cuda")
    cwe, risk, top = scanner.scan_push(push)
    print(severity_labels(cwe, scanner.cwe_ids).sum(0), risk)
