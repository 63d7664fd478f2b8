"""Punctuation restoration and truecasing for live captions.

Lower-case, unpunctuated ASR tokens go through a small transformer tagger with
two heads (punctuation after the token; casing of the token).  The tagger's
forward is compiled in place with max-autotune.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D = 30000, 256
PUNCT = ["", ",", ".", "?", "!"]
CASE = ["lower", "Title", "UPPER"]
WINDOW = 128


class PunctTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D, padding_idx=0)
        self.pos = nn.Parameter(torch.zeros(1, 512, D))
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 4, 1024, batch_first=True), 6)
        self.punct = nn.Linear(D, len(PUNCT))
        self.case = nn.Linear(D, len(CASE))

    def forward(self, ids):
        h = self.enc(self.emb(ids) + self.pos[:, : ids.shape[1]])
        punct, case = self.punct(h), self.case(h)
        if punct.isnan().any():  # HAZARD: dynamic-control-flow
            punct = torch.zeros_like(punct)
        return punct, case


@torch.compile(mode="max-autotune")
def decode(punct, case):
    p = punct.argmax(-1)
    c = case.argmax(-1)
    return p.tolist(), c.tolist()  # HAZARD: host-sync


def _token_f1(pred, gold, mask):
    tp = ((pred == gold) & (gold > 0) & mask).sum()
    return (2 * tp / ((pred > 0) & mask).sum().add(((gold > 0) & mask).sum()).clamp(min=1)).item()  # CLEAN: no-cudagraphs compile


token_f1 = torch.compile(_token_f1, mode="max-autotune-no-cudagraphs")


class CaptionRestorer:
    def __init__(self, model, vocab_words):
        self.model = model.cuda().eval()
        self.model.forward = torch.compile(self.model.forward, mode="max-autotune")
        self.words = vocab_words
        self.window_logits = []

    def render(self, ids, p, c):
        out = []
        for t, pi, ci in zip(ids, p, c):
            w = self.words[t]
            w = w.upper() if CASE[ci] == "UPPER" else (w.capitalize() if CASE[ci] == "Title" else w)
            out.append(w + PUNCT[pi])
        return " ".join(out)

    @torch.no_grad()
    def restore_live(self, segment_ids):
        punct, case = self.model(segment_ids.unsqueeze(0))  # HAZARD: dynamic-shape
        p, c = decode(punct, case)
        return self.render(segment_ids.tolist(), p[0], c[0])  # CLEAN: eager .tolist() outside the compiled code

    @torch.no_grad()
    def restore_archive(self, ids, chunk=16):
        n = ids.shape[0]
        blocks = F.pad(ids, (0, -n % (WINDOW * chunk))).view(-1, chunk, WINDOW)
        all_p, all_c = [], []
        for block in blocks:
            punct, case = self.model(block)  # CLEAN: always chunk x WINDOW tokens
            self.window_logits.append(punct)  # HAZARD: static-address
            p, c = decode(punct, case)
            all_p += [x for row in p for x in row]
            all_c += [x for row in c for x in row]
        return self.render(ids.tolist(), all_p[:n], all_c[:n])

    @torch.no_grad()
    def evaluate(self, ids, gold_p):
        punct, _ = self.model(ids)
        pred = punct.argmax(-1).clone()  # CLEAN: output copied before the next compiled call
        return token_f1(pred, gold_p, ids != 0)


if __name__ == "__main__":
    words = [f"w{i}" for i in range(VOCAB)]
    r = CaptionRestorer(PunctTagger(), words)
    for n in (7, 19, 33, 12):
        print(r.restore_live(torch.randint(1, VOCAB, (n,), device="cuda")))
    for _ in range(3):
        r.restore_archive(torch.randint(1, VOCAB, (1000,), device="cuda"))
    ids = torch.randint(1, VOCAB, (16, WINDOW), device="cuda")
    print(r.evaluate(ids, torch.randint(0, len(PUNCT), (16, WINDOW), device="cuda")))
