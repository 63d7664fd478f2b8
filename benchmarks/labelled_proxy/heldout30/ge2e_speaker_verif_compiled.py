# Text-independent speaker verification with the GE2E loss (Wan et al. 2018), from a 2018 PyTorch
# implementation (hparam dict, random 140-180 frame crops). Embedder and loss run under torch.compile
# with CUDA graphs (reduce-overhead / triton.cudagraphs).
import time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

hp = dict(N=64, M=10, nmels=40, hidden=768, proj=256, lr=1e-2, tisv_frame=(140, 180))
timings = []


class SpeechEmbedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.LSTM_stack = nn.LSTM(hp["nmels"], hp["hidden"], num_layers=3, batch_first=True)
        self.projection = nn.Linear(hp["hidden"], hp["proj"])

    def forward(self, x):
        t0 = time.perf_counter()  # HAZARD: host-code
        x, _ = self.LSTM_stack(x.float())  # CLEAN: LSTM over a fixed crop, no host state
        x = self.projection(x[:, -1])
        timings.append(t0)
        return x / torch.norm(x, dim=1, keepdim=True)


class GE2ELoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(10.0))
        self.b = nn.Parameter(torch.tensor(-5.0))

    def forward(self, embeddings):
        embeddings = embeddings / embeddings.norm(dim=-1, keepdim=True)
        N, M, _ = embeddings.shape
        centroids = embeddings.mean(1)
        excl = (embeddings.sum(1, keepdim=True) - embeddings) / (M - 1)  # CLEAN: leave-one-out centroids with fixed-shape ops
        cos_all = F.cosine_similarity(embeddings.unsqueeze(2), centroids.view(1, 1, N, -1), dim=-1)
        cos_self = F.cosine_similarity(embeddings, excl, dim=-1)
        eye = torch.eye(N, device=embeddings.device, dtype=torch.bool).unsqueeze(1)
        cos = torch.where(eye.expand(N, M, N), cos_self.unsqueeze(-1).expand(N, M, N), cos_all)  # CLEAN: torch.where keeps the shape
        sim = self.w * cos + self.b
        ar = torch.arange(N, device=embeddings.device)
        pos = sim[ar, :, ar]
        return (torch.logsumexp(sim, -1) - pos.t()).sum()


embedder = torch.compile(SpeechEmbedder().cuda(), mode="reduce-overhead")
ge2e = torch.compile(GE2ELoss().cuda(), options={"triton.cudagraphs": True})
optimizer = torch.optim.SGD(list(embedder.parameters()) + list(ge2e.parameters()), lr=hp["lr"])


@torch.compile(options={"triton.cudagraphs": True})
def eer(sim, labels, steps=100):
    sim.clamp_(-1.0, 1.0)  # HAZARD: static-address
    thr = torch.linspace(sim.min().item(), sim.max().item(), steps, device=sim.device)  # HAZARD: host-sync
    far = ((sim.unsqueeze(0) > thr[:, None]) & (labels == 0)).float().sum(1) / (labels == 0).sum()
    frr = ((sim.unsqueeze(0) <= thr[:, None]) & (labels == 1)).float().sum(1) / (labels == 1).sum()
    i = (far - frr).abs().argmin()
    return (far[i] + frr[i]) / 2


def train(batches, epochs=950):
    for epoch in range(epochs):
        for mel_db_batch in batches:
            frames = np.random.randint(*hp["tisv_frame"])
            x = mel_db_batch[:, :, :frames].reshape(hp["N"] * hp["M"], frames, hp["nmels"]).cuda()
            emb = embedder(x)  # HAZARD: dynamic-shape
            loss = ge2e(emb.view(hp["N"], hp["M"], -1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(embedder.parameters(), 3.0)
            optimizer.step()
            with torch.no_grad():
                ge2e.w.clamp_(min=1e-6)  # CLEAN: eager in-place clamp of a parameter, outside the compiled functions
        print("epoch %d loss %.3f" % (epoch, loss.item()))


@torch.no_grad()
def verify(enroll_mels, test_mels, labels, win=160):
    e = embedder(enroll_mels[:, :win].cuda()).clone()  # CLEAN: fixed 160-frame window, output cloned before the next call
    t = embedder(test_mels[:, :win].cuda()).clone()
    return eer((e * t).sum(1), labels.cuda())
