"""Text-line recogniser (CNN + BiLSTM + attention-free CTC head) for a document OCR service.

Line crops are resized to a fixed height and padded to a width bucket; one graph
is captured per (batch, width) bucket. A per-tenant lexicon prior biases the logits.
"""
import logging

import numpy as np
import torch
import torch.nn.functional as F

logger = logging.getLogger("ocr.recognizer")
BUCKETS = [(32, 1024), (32, 512), (64, 256)]


class LineRecognizer:
    def __init__(self, model, vocab, height=48):
        self.model = model.eval().cuda()
        self.vocab = vocab
        self.height = height
        self.lexicon_prior = np.zeros(len(vocab), dtype=np.float32)  # updated per tenant
        self.post_stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.bufs = {}, {}
        self.audit_log = []

    def _bias(self, logits):
        host = torch.empty(logits.shape[-1], pin_memory=True)  # HAZARD: pinned-memory
        host.copy_(torch.from_numpy(self.lexicon_prior))
        return logits + host.to(logits.device, non_blocking=True)

    def _run(self, images):
        logits = self.model(images)  # (B, T, V)
        logp = F.log_softmax(self._bias(logits).float(), -1)
        self.post_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.post_stream):  # HAZARD: stream
            conf = logp.max(-1).values.mean(-1)
        best = logp.argmax(-1)
        return best, conf

    def capture_all(self):
        side = torch.cuda.Stream()
        with torch.autocast("cuda", dtype=torch.float16), torch.no_grad():  # HAZARD: autocast-cache
            for bs, width in BUCKETS:
                x = torch.zeros(bs, 1, self.height, width, device="cuda")
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        self._run(x)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=self.pool):  # CLEAN: all buckets share one pool and never replay concurrently
                    best, conf = self._run(x)
                    best_host = best.cpu()  # HAZARD: host-sync
                self.graphs[(bs, width)] = g
                self.bufs[(bs, width)] = {"x": x, "best": best, "conf": conf, "host": best_host}
                logger.info("captured bucket bs=%d width=%d", bs, width)  # CLEAN: runs outside the capture block

    def _bucket(self, n, width):
        fits = [(b, w) for b, w in BUCKETS if b >= n and w >= width]
        return min(fits, key=lambda bw: bw[0] * bw[1]) if fits else None

    @torch.no_grad()
    def recognize(self, crops, tenant_prior=None):
        if tenant_prior is not None:
            self.lexicon_prior[:] = tenant_prior
        width = max(c.shape[-1] for c in crops)
        key = self._bucket(len(crops), width)
        buf = self.bufs[key]
        buf["x"].zero_()
        for i, c in enumerate(crops):
            buf["x"][i, :, :, : c.shape[-1]].copy_(c)  # CLEAN: copy_ into the static input slice
        self.graphs[key].replay()
        self.audit_log.append(buf["best"])  # HAZARD: static-address
        texts = []
        for row in buf["best"][: len(crops)].tolist():
            chars, prev = [], -1
            for t in row:
                if t != prev and t != 0:
                    chars.append(self.vocab[t])
                prev = t
            texts.append("".join(chars))
        return texts, buf["conf"][: len(crops)].clone()
