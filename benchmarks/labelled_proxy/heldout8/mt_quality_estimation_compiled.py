"""Reference-free quality estimation for a machine-translation vendor portal.

Source and MT output are embedded by a shared sentence encoder; a COMET-QE-like
regressor maps [s; m; s*m; |s-m|] to a direct-assessment score.  A fluency
probe scores single hypotheses typed into the CAT tool.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("qe.service")
VOCAB, D, MAX_LEN = 32000, 384, 128


class SentenceEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D, padding_idx=0)
        self.pos = nn.Embedding(MAX_LEN, D)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 6, 4 * D, batch_first=True, norm_first=True), 4)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.enc(self.tok(ids) + self.pos(pos))
        m = (ids != 0).unsqueeze(-1).float()
        return (h * m).sum(1) / m.sum(1).clamp(min=1.0)


class QERegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(4 * D, 1024), nn.Tanh(), nn.Linear(1024, 1))

    def forward(self, s, m):
        return self.mlp(torch.cat([s, m, s * m, (s - m).abs()], -1)).squeeze(-1)


def pad_to(ids, n):
    return F.pad(ids[:, :n], (0, n - min(ids.shape[1], n)), value=0)


class QEService:
    def __init__(self, encoder, regressor, mode="reduce-overhead"):
        self.encode = torch.compile(encoder.cuda().eval(), mode=mode)
        self.regress = torch.compile(regressor.cuda().eval(), mode=mode)
        self.fluency = nn.Linear(D, 1).cuda().eval()
        self.report = torch.compile(self._report, mode=mode)

    def _report(self, scores):
        log.info("scored a batch of %d segments", scores.shape[0])  # HAZARD: host-code
        z = (scores - scores.mean()) / scores.std().clamp(min=1e-6)
        return {"raw": scores.tolist(), "z": z}  # HAZARD: host-sync

    @torch.inference_mode()
    def score(self, src_ids, mt_ids):
        src = self.encode(pad_to(src_ids, MAX_LEN)).clone()  # CLEAN: padded to a fixed length and cloned
        mt = self.encode(pad_to(mt_ids, MAX_LEN))
        drift = 1 - F.cosine_similarity(src, mt, dim=-1)  # CLEAN: mt read before any other compiled call
        da = self.regress(src, mt)
        gap = (mt - src).norm(dim=-1)  # HAZARD: static-address
        return da.clone(), drift, gap

    @torch.inference_mode()
    def quick_fluency(self, mt_ids):
        emb = self.encode(mt_ids)  # HAZARD: dynamic-shape
        return torch.sigmoid(self.fluency(emb)).squeeze(-1)


def score_job(service, segments, batch=64):
    rows = []
    for i in range(0, len(segments), batch):
        n = len(segments[i:i + batch])
        src, mt = zip(*segments[i:i + batch])
        src = nn.utils.rnn.pad_sequence(src, batch_first=True)
        mt = nn.utils.rnn.pad_sequence(mt, batch_first=True)
        if src.shape[0] < batch:
            src = F.pad(src, (0, 0, 0, batch - src.shape[0]))
            mt = F.pad(mt, (0, 0, 0, batch - mt.shape[0]))
        da, _, _ = service.score(src, mt)
        rows.extend(service.report(da)["raw"][:n])
    return rows


if __name__ == "__main__":
    svc = QEService(SentenceEncoder(), QERegressor())
    segs = [(torch.randint(1, VOCAB, (int(n),), device="cuda"), torch.randint(1, VOCAB, (int(n) + 3,), device="cuda"))
            for n in torch.randint(5, 90, (300,))]
    print(score_job(svc, segs)[:5])
    for _, hyp in segs[:10]:
        svc.quick_fluency(hyp.unsqueeze(0))
