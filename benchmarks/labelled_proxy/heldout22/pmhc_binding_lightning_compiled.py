"""Peptide-MHC class I binding prediction as a Lightning-style module: the network is compiled with
mode="reduce-overhead" in configure_model(). Peptides are padded to 15 residues, MHC pseudo-sequences
are 34 residues; training batches are grouped by allele."""
import torch
import torch.nn as nn
import torch.nn.functional as F

AA = "ACDEFGHIKLMNPQRSTVWY"
PAD = 0
ALLELES = [f"HLA-{g}*{a:02d}:{b:02d}" for g in "ABC" for a, b in ((1, 1), (2, 1), (3, 1), (7, 2), (8, 1), (24, 2))]

class PMHCNet(nn.Module):
    def __init__(self, dim=128, allele_bias=None):
        super().__init__()
        self.pep_emb = nn.Embedding(len(AA) + 1, dim, padding_idx=PAD)
        self.mhc_emb = nn.Embedding(len(AA) + 1, dim, padding_idx=PAD)
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 1))
        self.allele_bias = allele_bias or {}
        self.current_allele = "HLA-A*02:01"

    def forward(self, pep, mhc):
        longest = int((pep != PAD).sum(1).max())  # HAZARD: host-sync
        pep = pep[:, :longest]
        q, m = self.pep_emb(pep), self.mhc_emb(mhc)
        att = (torch.einsum("bpd,bmd->bpm", self.q(q), self.k(m)) / q.shape[-1] ** 0.5).softmax(-1)
        h = q + torch.einsum("bpm,bmd->bpd", att, self.v(m))
        h = h.masked_fill((pep == PAD)[..., None], 0.0)  # CLEAN: masked_fill keeps the shape
        pooled = h.sum(1) / (pep != PAD).sum(1, keepdim=True).clamp_min(1)
        bias = self.allele_bias.get(self.current_allele, 0.0)  # HAZARD: python-scalar
        return torch.sigmoid(self.out(pooled).squeeze(-1) + bias)

class LightningModuleLite(nn.Module):
    def log(self, name, value):
        self.logged[name] = value

class PMHCModule(LightningModuleLite):
    def __init__(self, allele_bias):
        super().__init__()
        self.model = PMHCNet(allele_bias=allele_bias)
        self.net = self.model
        self.logged, self.val_preds, self.test_preds = {}, [], []

    def configure_model(self):
        self.scorer = torch.compile(self.model, mode="max-autotune-no-cudagraphs")
        self.net = torch.compile(self.model, mode="reduce-overhead")

    def training_step(self, batch, batch_idx):
        self.model.current_allele = batch["allele"]
        pred = self.net(batch["pep"], batch["mhc"])
        loss = F.binary_cross_entropy(pred, batch["label"])
        self.log("train_loss", loss.detach())
        return loss

    def validation_step(self, batch, batch_idx):
        with torch.no_grad():
            pred = self.net(batch["pep"], batch["mhc"])  # HAZARD: dynamic-shape
        self.val_preds.append(pred)  # HAZARD: static-address

    def test_step(self, batch, batch_idx):
        with torch.no_grad():
            pred = self.net(batch["pep"], batch["mhc"])
        self.test_preds.append(pred.clone())  # CLEAN: cloned before the next call

    def predict_step(self, batch, batch_idx):
        with torch.no_grad():
            return self.scorer(batch["pep"], batch["mhc"])  # CLEAN: compiled without CUDA graphs

    def on_validation_epoch_end(self):
        preds = torch.cat(self.val_preds)
        self.log("val_mean_score", preds.mean())
        self.val_preds.clear()

def batches(n, bs, drop_last, device="cuda"):
    for i in range(0, n, bs):
        m = min(bs, n - i)
        if drop_last and m < bs:
            return
        yield {"pep": torch.randint(1, 21, (m, 15), device=device), "mhc": torch.randint(1, 21, (m, 34), device=device),
               "label": torch.rand(m, device=device), "allele": ALLELES[i // bs % len(ALLELES)]}

def fit(module, epochs=3):
    module.cuda().configure_model()
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    for epoch in range(epochs):
        for idx, batch in enumerate(batches(50_000, 512, drop_last=True)):
            loss = module.training_step(batch, idx)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        for idx, batch in enumerate(batches(10_300, 512, drop_last=False)):
            module.validation_step(batch, idx)
        module.on_validation_epoch_end()
    for idx, batch in enumerate(batches(4096, 512, drop_last=True)):
        module.test_step(batch, idx)

if __name__ == "__main__":
    fit(PMHCModule(allele_bias={a: 0.02 * (i - 9) for i, a in enumerate(ALLELES)}))
