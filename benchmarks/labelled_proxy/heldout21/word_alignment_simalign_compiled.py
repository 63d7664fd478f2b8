"""SimAlign-style word alignment from multilingual embeddings (mutual argmax + itermax).

Written with an AI assistant ("make the alignment of our parallel corpus faster with CUDA
graphs"): the encoder stays eager in HF transformers, the matching is compiled with
CUDA graphs on padded batches.
"""
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

CG = {"triton.cudagraphs": True}
MAX_LEN = 128
BATCH = 32
PAIR_CFG = {"en-de": {"distortion": 0.0}, "en-ja": {"distortion": 0.15}, "en-ro": {"distortion": 0.05}}


class Aligner:
    def __init__(self, name="bert-base-multilingual-cased", layer=8, device="cuda"):
        self.tok = AutoTokenizer.from_pretrained(name)
        self.enc = AutoModel.from_pretrained(name, output_hidden_states=True).to(device).eval()
        self.layer, self.dev = layer, device
        self.distortion = 0.0
        self.itermax_rounds = 2
        self.heatmaps = []
        self.match = torch.compile(self._match, options=CG)
        self.preview = torch.compile(self._match)

    @torch.no_grad()
    def embed(self, sents):
        batch = self.tok(sents, is_split_into_words=True, padding="max_length", truncation=True,
                         max_length=MAX_LEN, return_tensors="pt").to(self.dev)
        hs = self.enc(**batch).hidden_states[self.layer]
        word_ids = [batch.word_ids(i) for i in range(len(sents))]
        return hs, batch["attention_mask"].bool(), word_ids

    def _match(self, es, et, ms, mt):
        sim = torch.bmm(F.normalize(es, dim=-1), F.normalize(et, dim=-1).transpose(1, 2))
        i = torch.arange(MAX_LEN, device=sim.device)[:, None] / MAX_LEN
        j = torch.arange(MAX_LEN, device=sim.device)[None, :] / MAX_LEN
        dist = self.distortion  # HAZARD: python-scalar
        sim = sim - dist * (i - j).abs()
        sim = sim.masked_fill(~(ms[:, :, None] & mt[:, None, :]), float("-inf"))  # CLEAN: masked_fill keeps the padded shape
        aligned = (sim == sim.amax(2, keepdim=True)) & (sim == sim.amax(1, keepdim=True))
        for _ in range(self.itermax_rounds):  # CLEAN: round count fixed at construction
            free = ~aligned.any(2, keepdim=True) | ~aligned.any(1, keepdim=True)
            s = sim.masked_fill(~free, float("-inf"))
            aligned = aligned | ((s == s.amax(2, keepdim=True)) & (s == s.amax(1, keepdim=True)) & free)
        aligned = aligned & torch.isfinite(sim)
        print(f"links per sentence: {aligned.sum((1, 2)).float().mean()}")  # HAZARD: host-code
        return aligned, sim

    @torch.no_grad()
    def align_corpus(self, src, tgt, keep_heatmaps=False):
        links = []
        for b in range(0, len(src), BATCH):
            es, ms, wid_s = self.embed(src[b:b + BATCH])
            et, mt, wid_t = self.embed(tgt[b:b + BATCH])
            aligned, sim = self.match(es, et, ms, mt)  # HAZARD: dynamic-shape
            if keep_heatmaps:
                self.heatmaps.append(sim)  # HAZARD: static-address
            pairs = aligned.nonzero().tolist()  # CLEAN: eager, after the compiled call returned
            sent = [set() for _ in range(es.shape[0])]
            for k, a, c in pairs:
                ws, wt = wid_s[k][a], wid_t[k][c]
                if ws is not None and wt is not None:
                    sent[k].add((ws, wt))
            links.extend(sorted(s) for s in sent)
        return links

    @torch.no_grad()
    def show(self, src_words, tgt_words):
        es, ms, _ = self.embed([src_words])
        et, mt, _ = self.embed([tgt_words])
        return self.preview(es, et, ms, mt)[0]  # CLEAN: default torch.compile, no CUDA graphs


if __name__ == "__main__":
    al = Aligner()
    for pair, cfg in PAIR_CFG.items():
        al.distortion = cfg["distortion"]
        src = [l.split() for l in open(f"data/{pair}.src", encoding="utf-8")]
        tgt = [l.split() for l in open(f"data/{pair}.tgt", encoding="utf-8")]
        with open(f"out/{pair}.align", "w") as f:
            for sent in al.align_corpus(src, tgt, keep_heatmaps=(pair == "en-ja")):
                f.write(" ".join(f"{i}-{j}" for i, j in sent) + "\n")
