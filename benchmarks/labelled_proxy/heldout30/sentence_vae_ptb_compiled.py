# Sentence VAE on Penn Treebank (Bowman et al. 2016; a 2018 PyTorch implementation with logistic KL
# annealing and word dropout). The ELBO step is compiled with mode="reduce-overhead".
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, UNK = 0, 2, 1


class SentenceVAE(nn.Module):
    def __init__(self, vocab=10000, emb=300, hid=256, latent=16, word_dropout=0.38):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.encoder_rnn = nn.GRU(emb, hid, batch_first=True)
        self.decoder_rnn = nn.GRU(emb, hid, batch_first=True)
        self.hidden2mean, self.hidden2logv = nn.Linear(hid, latent), nn.Linear(hid, latent)
        self.latent2hidden, self.outputs2vocab = nn.Linear(latent, hid), nn.Linear(hid, vocab)
        self.word_dropout_rate = word_dropout

    def forward(self, input_sequence, length):
        print("batch", input_sequence.shape, "max len", length.max())  # HAZARD: host-code
        emb = self.embedding(input_sequence)
        _, hidden = self.encoder_rnn(emb)  # CLEAN: GRU over the padded batch, fixed shapes
        mean, logv = self.hidden2mean(hidden[-1]), self.hidden2logv(hidden[-1])
        z = mean + torch.randn_like(mean) * torch.exp(0.5 * logv)
        prob = torch.rand(input_sequence.shape, device=input_sequence.device)  # CLEAN: word-dropout draw on the default CUDA generator
        dec_in = input_sequence.masked_fill((prob < self.word_dropout_rate) & (input_sequence != SOS) & (input_sequence != PAD), UNK)
        out, _ = self.decoder_rnn(self.embedding(dec_in), self.latent2hidden(z).unsqueeze(0))
        return F.log_softmax(self.outputs2vocab(out), -1), mean, logv


def kl_anneal_function(step, k=0.0025, x0=2500):
    return float(1 / (1 + np.exp(-k * (step - x0))))


model = SentenceVAE().cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


@torch.compile(mode="reduce-overhead")
def elbo(batch, target, length, kl_weight):
    logp, mean, logv = model(batch, length)
    mask = (target != PAD).float()
    nll = -(logp.gather(2, target.unsqueeze(2)).squeeze(2) * mask).sum()  # CLEAN: gather with CUDA indices
    kl = -0.5 * torch.sum(1 + logv - mean.pow(2) - logv.exp())
    w = kl_weight  # HAZARD: python-scalar
    if torch.isnan(kl):  # HAZARD: dynamic-control-flow
        kl = torch.zeros_like(kl)
    return (nll + w * kl) / batch.size(0), nll, kl


@torch.compile(mode="reduce-overhead")
def lengths_report(length):
    return length.float().mean(), length.tolist()  # HAZARD: host-sync


def train(data_loader, epochs=10, max_len=60):
    step = 0
    for epoch in range(epochs):
        model.train()
        for batch in data_loader:
            inp = F.pad(batch["input"], (0, max_len - batch["input"].size(1)), value=PAD).cuda()
            tgt = F.pad(batch["target"], (0, max_len - batch["target"].size(1)), value=PAD).cuda()
            loss, nll, kl = elbo(inp, tgt, batch["length"].cuda(), kl_anneal_function(step))  # CLEAN: padded to a fixed length
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 50 == 0:
                print("step %d  nll %.2f  kl %.2f" % (step, nll.item(), kl.item()))  # CLEAN: eager reads after the backward
        mean_len, _ = lengths_report(batch["length"].cuda())
