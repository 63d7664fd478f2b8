"""DNS tunnelling / DGA detection on a recursive resolver (query-name character CNN).

The resolver's dnstap stream is parsed by a reader thread into padded byte sequences of the
query names; batches of 256 names are scored by a char-CNN graphed with
torch.cuda.make_graphed_callables, and suspicious client IPs are rate-limited through the
resolver's RPZ. The model is fine-tuned nightly on the day's labelled queries with the same
graphed callable.
"""
import queue
import threading

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAXLEN, VOCAB, BATCH = 128, 64, 256
VOWELS = [1, 5, 9, 15, 21]


class CharCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32)
        self.convs = nn.ModuleList([nn.Conv1d(32, 64, k, padding=k // 2) for k in (3, 5, 7)])
        self.head = nn.Linear(3 * 64 + 2, 2)
        self.entropy_lut = np.log2(np.arange(1, MAXLEN + 1, dtype=np.float32))
        self.register_buffer("vowel_ids", torch.tensor(VOWELS))
        self.vocab = VOCAB

    def forward(self, chars):
        if chars.max() >= self.vocab:  # HAZARD: dynamic-control-flow
            chars = chars.clamp_max(self.vocab - 1)
        emb_t = self.emb(chars)
        e = emb_t.transpose(1, 2)
        feats = torch.cat([F.relu(c(e)).amax(-1) for c in self.convs], -1)
        vowel_e = self.emb.weight[VOWELS]  # HAZARD: host-sync
        vowel_e2 = self.emb.weight.index_select(0, self.vowel_ids)  # CLEAN: index tensor already on the device
        vowel_frac = (emb_t @ vowel_e.T).amax(-1).mean(1)
        vowel_frac2 = (emb_t @ vowel_e2.T).amax(-1).mean(1)
        lut = torch.from_numpy(self.entropy_lut).to(chars.device)  # HAZARD: pinned-memory
        length = (chars > 0).sum(1).clamp_min(1)
        ent = lut.gather(0, length - 1)
        extra = torch.stack([0.5 * (vowel_frac + vowel_frac2), ent / 7.0], -1)
        return self.head(torch.cat([feats, extra], -1))


class Detector:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.model = CharCNN().to(dev)
        sample = torch.randint(0, VOCAB, (BATCH, MAXLEN), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            self.g_model = torch.cuda.make_graphed_callables(self.model, (sample,))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.buf = torch.zeros(BATCH, MAXLEN, dtype=torch.long, device=dev)

    def score(self, names_u8):
        n = names_u8.shape[0]
        self.buf.zero_()
        self.buf[:n].copy_(names_u8)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast without its cache at the call site
            logits = self.g_model(self.buf)
        return logits[:n].float().softmax(-1)[:, 1].detach().cpu()  # CLEAN: read back after the graphed call

    def nightly_finetune(self, loader):
        for names, labels in loader:
            logits = self.g_model(names.to(self.dev))
            loss = F.cross_entropy(logits.float(), labels.to(self.dev))
            self.opt.zero_grad(set_to_none=False)
            loss.backward()
            self.opt.step()  # CLEAN: eager optimizer step outside the graphed callable


def reader(dnstap, out_q):
    batch, clients = [], []
    for msg in dnstap:
        codes = np.frombuffer(msg.qname.lower()[:MAXLEN], dtype=np.uint8) % VOCAB
        batch.append(np.pad(codes, (0, MAXLEN - len(codes))))
        clients.append(msg.client_ip)
        if len(batch) == BATCH:
            out_q.put((torch.from_numpy(np.stack(batch)).long().pin_memory(), clients))
            batch, clients = [], []


def serve(dnstap, rpz):
    det = Detector()
    q = queue.Queue(maxsize=8)
    threading.Thread(target=reader, args=(dnstap, q), daemon=True).start()
    while True:
        names, clients = q.get()
        p = det.score(names.to(det.dev, non_blocking=True))
        for ip, prob in zip(clients, p.tolist()):
            if prob > 0.95:
                rpz.rate_limit(ip)
