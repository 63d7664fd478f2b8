"""CGCNN crystal-property regression (formation energy) on padded neighbour lists.

The whole model is graphed with torch.cuda.make_graphed_callables; every batch is padded to the
same number of atoms, neighbours and crystals.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GaussianDistance(nn.Module):
    def __init__(self, dmin=0.0, dmax=8.0, step=0.2):
        super().__init__()
        self.register_buffer("centers", torch.arange(dmin, dmax + step, step))
        self.var = step

    def forward(self, d):
        return torch.exp(-((d[..., None] - self.centers) ** 2) / self.var ** 2)


class ConvLayer(nn.Module):
    def __init__(self, a, n):
        super().__init__()
        self.fc = nn.Linear(2 * a + n, 2 * a)
        self.bn1, self.bn2 = nn.BatchNorm1d(2 * a), nn.BatchNorm1d(a)

    def forward(self, atom, nbr_fea, nbr_idx, nbr_mask):  # atom (N, a), nbr_idx (N, M)
        N, M = nbr_idx.shape
        z = torch.cat([atom[:, None].expand(N, M, -1), atom[nbr_idx], nbr_fea], -1)
        f, c = self.bn1(self.fc(z).view(N * M, -1)).view(N, M, -1).chunk(2, -1)
        msg = torch.sigmoid(f) * F.softplus(c) * nbr_mask[..., None]
        return F.softplus(atom + self.bn2(msg.sum(1)))


class CGCNN(nn.Module):
    def __init__(self, orig=92, a=64, n_conv=3, jitter_seed=0):
        super().__init__()
        self.embed = nn.Linear(orig, a)
        self.gdf = GaussianDistance()
        self.convs = nn.ModuleList(ConvLayer(a, self.gdf.centers.numel()) for _ in range(n_conv))
        self.fc = nn.Sequential(nn.Linear(a, 128), nn.Softplus(), nn.Dropout(0.1), nn.Linear(128, 1))
        self.aug_gen = torch.Generator(device="cuda")
        self.aug_gen.manual_seed(jitter_seed)

    def forward(self, atom_fea, nbr_dist, nbr_idx, nbr_mask, crystal_idx, atom_mask, counts):
        if self.training:
            nbr_dist = nbr_dist + 0.02 * torch.randn(nbr_dist.shape, device=nbr_dist.device, generator=self.aug_gen)  # HAZARD: rng
        atom = self.embed(atom_fea)
        nbr_fea = self.gdf(nbr_dist)
        for conv in self.convs:
            atom = conv(atom, nbr_fea, nbr_idx, nbr_mask)
        n_real = int(atom_mask.sum())  # HAZARD: host-sync
        atom, crystal_idx = atom[:n_real], crystal_idx[:n_real]
        pooled = torch.zeros(counts.shape[0], atom.shape[1], device=atom.device).index_add_(0, crystal_idx, atom)
        return self.fc(pooled / counts.clamp(min=1)[:, None]).squeeze(-1)


def build(sample):
    model = CGCNN().cuda().train()
    grad_norms = []
    model.register_full_backward_hook(lambda m, gin, gout: grad_norms.append(gout[0].norm()))  # HAZARD: api-misuse
    graphed = torch.cuda.make_graphed_callables(model, tuple(sample), num_warmup_iters=3)
    graphed.register_forward_hook(lambda m, inp, out: None)  # CLEAN: hook registered after graphing
    return graphed, grad_norms


def train(loader, epochs=100):
    model, opt = None, None
    for epoch in range(epochs):
        for batch in loader:
            atom_fea, nbr_dist, nbr_idx, nbr_mask, crystal_idx, atom_mask, counts, target = [t.cuda(non_blocking=True) for t in batch]
            if model is None:
                model, _ = build((atom_fea, nbr_dist, nbr_idx, nbr_mask, crystal_idx, atom_mask, counts))
                opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            pred = model(atom_fea=atom_fea, nbr_dist=nbr_dist, nbr_idx=nbr_idx, nbr_mask=nbr_mask, crystal_idx=crystal_idx, atom_mask=atom_mask, counts=counts)  # HAZARD: api-misuse
            loss = F.l1_loss(pred, target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: MAE {loss.item():.4f} eV/atom")  # CLEAN: .item() outside the graphed callable
    return model


def validate(model, loader):
    errs = []
    for batch in loader:
        inputs = [t.cuda(non_blocking=True) for t in batch[:-1]]
        pred = model(*inputs)  # CLEAN: graphed module called positionally, as captured
        errs.append((pred.detach() - batch[-1].cuda()).abs())
    return torch.cat(errs).mean().item()
