"""Transliteration backend for a phone keyboard: romanised Hindi -> Devanagari.

Character-level encoder-decoder with additive attention. The keyboard sends the
current romanised word (padded to 24 chars) for up to 32 users at a time; the
decoder's initial state also sees the state left by the previous word of the
same session, so "mera naam" and "naam" alone can be written differently.
"""
import torch
import torch.nn as nn

SRC_V, TGT_V, MAX_SRC, MAX_TGT, D = 64, 128, 24, 28, 256
PAD, BOS, EOS = 0, 1, 2


class Translit(nn.Module):
    def __init__(self, d=D):
        super().__init__()
        self.src_emb = nn.Embedding(SRC_V, d, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(TGT_V, d, padding_idx=PAD)
        self.enc = nn.GRU(d, d // 2, batch_first=True, bidirectional=True)
        self.ctx = nn.Linear(d, d)
        self.cell = nn.GRUCell(2 * d, d)
        self.attn = nn.Linear(d, d, bias=False)
        self.out = nn.Linear(2 * d, TGT_V)


class TranslitEngine:
    def __init__(self, model: Translit, batch: int = 32):
        self.m = model.cuda().eval()
        self.eos = EOS
        self.static_src = torch.zeros(batch, MAX_SRC, dtype=torch.long, device="cuda")
        self.static_len = torch.full((batch,), MAX_SRC, dtype=torch.long, device="cuda")
        self.prev_state = torch.zeros(batch, D, device="cuda")    # carried across words of a session
        self.out_buf = torch.zeros(batch, MAX_TGT, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self._capture()

    def _decode(self):
        m = self.m
        src = self.static_src[:, : self.static_len.max()]  # HAZARD: host-sync
        mem, _ = m.enc(m.src_emb(src))
        h = torch.tanh(m.ctx(self.prev_state))
        tok = torch.full((src.shape[0],), BOS, dtype=torch.long, device=src.device)
        done = torch.zeros_like(tok, dtype=torch.bool)
        for t in range(MAX_TGT):  # CLEAN: fixed trip count
            a = torch.softmax((mem @ m.attn(h)[:, :, None]).squeeze(-1), -1)
            c = (a[:, :, None] * mem).sum(1)
            h = m.cell(torch.cat([m.tgt_emb(tok), c], -1), h)
            tok = m.out(torch.cat([h, c], -1)).argmax(-1)
            tok = torch.where(done, torch.full_like(tok, PAD), tok)  # CLEAN: finished rows masked with torch.where
            self.out_buf[:, t].copy_(tok)
            done = done | (tok == self.eos)
            if done.all():  # HAZARD: dynamic-control-flow
                break
        self.prev_state = h  # HAZARD: static-address

    @torch.no_grad()
    @torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
    def _capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._decode()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self._decode()

    @torch.no_grad()
    def suggest(self, words, new_session_rows=()):
        n = len(words)
        ids = torch.zeros(self.static_src.shape, dtype=torch.long)
        lens = torch.full((ids.shape[0],), 1, dtype=torch.long)
        for i, w in enumerate(words):
            codes = [min(ord(ch) - 94, SRC_V - 1) for ch in w.lower()[:MAX_SRC]]
            ids[i, : len(codes)] = torch.tensor(codes)
            lens[i] = len(codes)
        self.static_src.copy_(ids, non_blocking=False)  # CLEAN: copy_ into the static input, outside the capture
        self.static_len.copy_(lens)
        self.graph.replay()
        return self.out_buf[:n].cpu().tolist()  # CLEAN: read back after replay


if __name__ == "__main__":
    eng = TranslitEngine(Translit())
    print(eng.suggest(["mera", "naam", "rahul", "hai"]))
