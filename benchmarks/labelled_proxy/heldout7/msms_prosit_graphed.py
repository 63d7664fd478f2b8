"""Prosit-style MS/MS fragment intensity prediction for tryptic peptides.

Peptide sequence (with oxidised Met as its own token), precursor charge and NCE go
through a BiGRU encoder; a GRU decoder emits y/b ion intensities (charges 1-3) for
29 fragment positions. Encoder and decoder are graphed with make_graphed_callables.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAX_LEN, N_FRAG = 30, 29
ALPHABET = "ACDEFGHIKLMNPQRSTVWYm"                       # m = M(ox)
OX_M = ALPHABET.index("m") + 1
AA_MASS_NP = np.array([0.0, 71.04, 103.01, 115.03, 129.04, 147.07, 57.02, 137.06, 113.08, 128.09, 113.08,
                       131.04, 114.04, 97.05, 128.06, 156.10, 87.03, 101.05, 99.07, 186.08, 163.06, 147.04],
                      dtype=np.float32)
HYDRO = [0.0, 1.8, 2.5, -3.5, -3.5, 2.8, -0.4, -3.2, 4.5, -3.9, 3.8, 1.9, -3.5, -1.6, -3.5, -4.5, -0.8,
         -0.7, 4.2, -0.9, -1.3, 1.9]
CHARGE_COLUMNS = [1, 2, 3, 4, 5, 6]                     # meta = [NCE, one-hot charge 1..6]


class PeptideEncoder(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.emb = nn.Embedding(len(ALPHABET) + 1, d - 2, padding_idx=0)
        self.mod_emb = nn.Parameter(torch.zeros(d - 2))
        self.register_buffer("hydro", torch.tensor(HYDRO))  # CLEAN: buffer built at construction
        self.gru = nn.GRU(d, d // 2, num_layers=2, batch_first=True, bidirectional=True)
        self.meta = nn.Linear(7, d)

    def forward(self, seq, meta):
        x = self.emb(seq)
        ox = (seq == OX_M).nonzero()  # HAZARD: dynamic-shape
        x = x.index_put((ox[:, 0], ox[:, 1]), x[ox[:, 0], ox[:, 1]] + self.mod_emb)
        aa_mass = torch.from_numpy(AA_MASS_NP).to(seq.device)  # HAZARD: pinned-memory
        x = torch.cat([x, (aa_mass[seq] / 200.0).unsqueeze(-1), (self.hydro[seq] / 4.5).unsqueeze(-1)], -1)
        h, _ = self.gru(x)
        charge = meta[:, CHARGE_COLUMNS]  # HAZARD: host-sync
        ctx = self.meta(torch.cat([meta[:, :1] / 100.0, charge], -1))
        return (h.mean(1) * ctx).tanh()


class IonDecoder(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.gru = nn.GRU(d, d, batch_first=True)
        self.out = nn.Linear(d, 6)                              # y1+ y2+ y3+ b1+ b2+ b3+

    def forward(self, z, ion_mask):
        h, _ = self.gru(z.unsqueeze(1).expand(-1, N_FRAG, -1).contiguous())
        pred = torch.relu(self.out(h)).flatten(1)
        return pred.masked_fill(~ion_mask, -1.0)  # CLEAN: impossible ions flagged with masked_fill


def spectral_angle_loss(pred, target, ion_mask):
    p = F.normalize(pred.clamp_min(0) * ion_mask, dim=1)
    t = F.normalize(target * ion_mask, dim=1)
    return (2 / torch.pi * torch.acos((p * t).sum(1).clamp(-1 + 1e-7, 1 - 1e-7))).mean()


def train(loader, epochs=50, batch=1024, device="cuda"):
    enc, dec = PeptideEncoder().to(device), IonDecoder().to(device)
    grad_norms = []
    dec.register_full_backward_hook(lambda m, gi, go: grad_norms.append(go[0].norm()))  # HAZARD: api-misuse
    seq = torch.randint(1, len(ALPHABET) + 1, (batch, MAX_LEN), device=device)
    meta = torch.zeros(batch, 7, device=device)
    z = torch.zeros(batch, 256, device=device, requires_grad=True)
    mask = torch.ones(batch, N_FRAG * 6, dtype=torch.bool, device=device)
    g_enc, g_dec = torch.cuda.make_graphed_callables((enc, dec), ((seq, meta), (z, mask)))
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-3)
    for _ in range(epochs):
        for seq, meta, target, mask in loader:
            seq, meta, target, mask = (t.to(device, non_blocking=True) for t in (seq, meta, target, mask))
            pred = g_dec(g_enc(seq, meta), mask)  # CLEAN: graphed callables called positionally
            loss = spectral_angle_loss(pred, target, mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return enc, dec
