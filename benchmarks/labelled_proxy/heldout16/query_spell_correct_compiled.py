"""Query spelling correction ("Did you mean ...?") for a site-search service.

Candidates come from a symmetric-delete index (up to 16 per query, padded to 32
characters). A char-CNN scores query/candidate similarity, adds the candidate's
query-log prior and subtracts a locale-specific penalty per edit. Online scoring
is compiled with max-autotune; the nightly evaluation uses a no-cudagraphs twin.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

COMPILE_KW = dict(mode="max-autotune", dynamic=False)
OFFLINE_KW = dict(mode="max-autotune-no-cudagraphs", dynamic=True)
MAXLEN, N_CAND, ALPHABET = 32, 16, 128
LOCALE_PENALTY = {"en": 0.7, "de": 0.5, "fr": 0.6, "tr": 0.4}


def encode(text: str, pad_to: int = 0) -> torch.Tensor:
    codes = [min(ord(c), ALPHABET - 1) for c in text.lower()][:MAXLEN]
    codes += [0] * max(0, pad_to - len(codes))
    return torch.tensor(codes, dtype=torch.long, device="cuda")[None]  # CLEAN: built before the compiled call, not inside it


class CandidateScorer(nn.Module):
    def __init__(self, d: int = 128):
        super().__init__()
        self.emb = nn.Embedding(ALPHABET, 64, padding_idx=0)
        self.conv = nn.Conv1d(64, d, 3, padding=1)
        self.edit_penalty = 0.7

    def enc(self, ids):
        return F.relu(self.conv(self.emb(ids).transpose(1, 2))).amax(-1)

    def forward(self, q, cands, edits, prior):
        eq = F.normalize(self.enc(q), dim=-1)
        ec = F.normalize(self.enc(cands.flatten(0, 1)), dim=-1).view(cands.shape[0], cands.shape[1], -1)
        sim = (ec * eq[:, None]).sum(-1)
        pen = self.edit_penalty  # HAZARD: python-scalar
        return sim + prior - pen * edits


class Speller:
    def __init__(self, scorer: CandidateScorer, candidate_index):
        self.scorer = scorer.cuda().eval()
        self.index = candidate_index
        self.score = torch.compile(self._score, **COMPILE_KW)
        self.score_offline = torch.compile(self._score, **OFFLINE_KW)

    def _score(self, q, cands, edits, prior):
        t0 = time.monotonic()  # HAZARD: host-code
        s = self.scorer(q, cands, edits, prior)
        best = s.argmax(-1).item()  # HAZARD: host-sync
        return s.softmax(-1), best, t0

    @torch.no_grad()
    def correct(self, query: str, locale: str):
        self.scorer.edit_penalty = LOCALE_PENALTY[locale]
        cands, edits, prior, words = self.index.lookup(query)        # (1, N_CAND, MAXLEN), (1, N_CAND) x2
        probs, best, _ = self.score(encode(query), cands, edits, prior)  # HAZARD: dynamic-shape
        return words[best], float(probs[0, best])

    @torch.no_grad()
    def correct_padded(self, query: str, locale: str):
        self.scorer.edit_penalty = LOCALE_PENALTY[locale]
        cands, edits, prior, words = self.index.lookup(query)
        probs, best, _ = self.score(encode(query, pad_to=MAXLEN), cands, edits, prior)  # CLEAN: query padded to MAXLEN
        return words[best], float(probs[0, best])

    @torch.no_grad()
    def nightly_eval(self, labelled):
        hits = 0
        for query, cands, edits, prior, gold in labelled:
            _, best, _ = self.score_offline(encode(query), cands, edits, prior)  # CLEAN: no-cudagraphs twin, any query length
            hits += int(best == gold)
        return hits / max(len(labelled), 1)


class ToyIndex:
    def lookup(self, query):
        words = [query[:i] + query[i + 1:] for i in range(min(len(query), N_CAND))]
        words += [query] * (N_CAND - len(words))
        cands = torch.cat([encode(w, pad_to=MAXLEN) for w in words])[None]
        edits = torch.ones(1, N_CAND, device="cuda")
        return cands, edits, torch.zeros(1, N_CAND, device="cuda"), words


if __name__ == "__main__":
    sp = Speller(CandidateScorer(), ToyIndex())
    for q, loc in [("recieve", "en"), ("strasse", "de"), ("bonjuor", "fr"), ("merhaba", "tr")]:
        print(sp.correct(q, loc), sp.correct_padded(q, loc))
