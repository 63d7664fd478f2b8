# InferSent (Conneau et al. 2017) BiLSTM-max encoder trained on SNLI; 2017 code base (GloVe dict,
# numpy batching, lrshrink). The NLI net is compiled with mode="reduce-overhead" and kept on the trainer.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class BLSTMEncoder(nn.Module):
    def __init__(self, word_dim=300, enc_dim=2048):
        super().__init__()
        self.enc_lstm = nn.LSTM(word_dim, enc_dim, 1, bidirectional=True, batch_first=True)
        self.word_drop = 0.0

    def forward(self, emb, lengths):
        if (lengths == 0).any():  # HAZARD: dynamic-control-flow
            lengths = lengths.clamp(min=1)
        keep = (torch.rand(emb.shape[:2], device=emb.device) >= self.word_drop).unsqueeze(-1)  # HAZARD: python-scalar
        out, _ = self.enc_lstm(emb * keep)
        pad = torch.arange(emb.size(1), device=emb.device)[None, :] >= lengths[:, None]
        return out.masked_fill(pad.unsqueeze(-1), -1e9).max(1).values  # CLEAN: masked max-pool, fixed shape


class NLINet(nn.Module):
    def __init__(self, encoder, enc_dim=2048, fc_dim=512, n_classes=3):
        super().__init__()
        self.encoder = encoder
        self.classifier = nn.Sequential(nn.Linear(4 * 2 * enc_dim, fc_dim), nn.Linear(fc_dim, fc_dim), nn.Linear(fc_dim, n_classes))

    def forward(self, s1, l1, s2, l2):
        u, v = self.encoder(s1, l1), self.encoder(s2, l2)
        return self.classifier(torch.cat([u, v, (u - v).abs(), u * v], 1))


def get_batch(batch, word_vec, dim=300):
    lengths = np.array([len(x) for x in batch])
    embed = np.zeros((len(batch), max(lengths), dim), dtype=np.float32)
    for i, sent in enumerate(batch):
        for j, w in enumerate(sent):
            embed[i, j] = word_vec[w]
    return torch.from_numpy(embed).cuda(), torch.from_numpy(lengths).cuda()  # CLEAN: eager upload before the compiled call


class Trainer:
    def __init__(self, word_vec, lr=0.1, decay=0.99, lrshrink=5):
        self.word_vec = word_vec
        self.net = NLINet(BLSTMEncoder()).cuda()
        self.cnet = torch.compile(self.net, mode="reduce-overhead")
        self.cenc = torch.compile(self.net.encoder, mode="reduce-overhead")
        self.encode_long = torch.compile(self.net.encoder, mode="max-autotune-no-cudagraphs", dynamic=True)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=lr)
        self.decay, self.lrshrink = decay, lrshrink

    def epoch(self, s1, s2, target, epoch, batch_size=64):
        self.net.train()
        self.net.encoder.word_drop = min(0.1, 0.02 * epoch)
        perm = np.random.permutation(len(s1))
        correct = 0.0
        for i in range(0, len(s1), batch_size):
            idx = perm[i:i + batch_size]
            b1, l1 = get_batch([s1[k] for k in idx], self.word_vec)
            b2, l2 = get_batch([s2[k] for k in idx], self.word_vec)
            tgt = torch.as_tensor(target[idx], device="cuda")
            out = self.cnet(b1, l1, b2, l2)  # HAZARD: dynamic-shape
            loss = F.cross_entropy(out, tgt)
            correct += (out.argmax(1) == tgt).sum().item()  # CLEAN: eager read before the backward, nothing else compiled ran
            self.opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.net.parameters(), 5.0)
            self.opt.step()
        return correct / len(s1)

    @torch.no_grad()
    def encode(self, sentences, bsize=64, max_len=64):
        self.net.eval()
        fixed, anylen = [], []
        for i in range(0, len(sentences), bsize):
            batch = [s[:max_len] + ["</s>"] * (max_len - len(s[:max_len])) for s in sentences[i:i + bsize]]
            emb, lengths = get_batch(batch, self.word_vec)
            fixed.append(self.cenc(emb, lengths))  # HAZARD: static-address
            anylen.append(self.encode_long(*get_batch(sentences[i:i + bsize], self.word_vec)))  # CLEAN: compiled without CUDA graphs
        return torch.cat(fixed), torch.cat(anylen)
