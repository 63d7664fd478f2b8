"""TabTransformer for credit-default scoring, trained and served through torch.compile.

Categorical columns go through a transformer encoder; numeric columns are
standardized with statistics kept as buffers and re-fitted each month.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TabTransformer(nn.Module):
    def __init__(self, cardinalities, n_num, dim=32, depth=6, heads=8):
        super().__init__()
        self.cat_embeds = nn.ModuleList([nn.Embedding(c + 1, dim) for c in cardinalities])
        self.register_buffer("num_mu", torch.zeros(n_num))
        self.register_buffer("num_sigma", torch.ones(n_num))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth)
        self.num_norm = nn.LayerNorm(n_num)
        self.mlp = nn.Sequential(nn.Linear(len(cardinalities) * dim + n_num, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, x_cat, x_num):
        x_cat = torch.where(x_cat < 0, torch.zeros_like(x_cat), x_cat + 1)  # CLEAN: missing categories remapped elementwise, no branch
        tok = torch.stack([emb(x_cat[:, i]) for i, emb in enumerate(self.cat_embeds)], 1)
        ctx = self.encoder(tok).flatten(1)
        if self.training and x_num.isnan().any():  # HAZARD: dynamic-control-flow
            x_num = torch.nan_to_num(x_num, nan=0.0)
        x_num = self.num_norm((x_num - self.num_mu) / self.num_sigma)
        return self.mlp(torch.cat([ctx, x_num], 1)).squeeze(-1)


class TabTrainer:
    def __init__(self, model: TabTransformer, lr=1e-3, epochs=30):
        self.base = model.cuda()
        self.model = torch.compile(model, mode="reduce-overhead")
        self.eval_model = torch.compile(model, mode="max-autotune-no-cudagraphs")
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-5)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs)
        self._opt_step = torch.compile(self.opt.step, mode="reduce-overhead")

    def fit_epoch(self, loader):
        self.base.train()
        for i, (xc, xn, y) in enumerate(loader):
            pred = self.model(xc.cuda(non_blocking=True), xn.cuda(non_blocking=True))
            loss = F.binary_cross_entropy_with_logits(pred, y.cuda(non_blocking=True))
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self._opt_step()
            if i % 50 == 0:
                print(f"it {i} loss {loss.item():.4f}")  # CLEAN: host read in the eager loop, outside the compiled code
        self.sched.step()  # HAZARD: optimizer

    def refit_normalizer(self, x_num_all):
        self.base.num_mu = torch.nanmean(x_num_all, 0).cuda()  # HAZARD: static-address
        sigma = torch.sqrt(torch.nanmean((x_num_all - torch.nanmean(x_num_all, 0)) ** 2, 0)).clamp_min(1e-6)
        self.base.num_sigma.copy_(sigma)  # CLEAN: buffer updated in place, address unchanged

    @torch.no_grad()
    def evaluate(self, loader):
        self.base.eval()
        probs = []
        for xc, xn, _ in loader:
            probs.append(torch.sigmoid(self.eval_model(xc.cuda(), xn.cuda())))  # CLEAN: no-cudagraphs compile, ragged last batch is fine
        return torch.cat(probs)

    @torch.no_grad()
    def serve(self, requests):
        self.base.eval()
        xc = torch.stack([r["cat"] for r in requests]).cuda()
        xn = torch.stack([r["num"] for r in requests]).cuda()
        return torch.sigmoid(self.model(xc, xn)).cpu()  # HAZARD: dynamic-shape


def monthly_job(trainer: TabTrainer, train_loader, val_loader, x_num_all, epochs=30):
    trainer.refit_normalizer(x_num_all)
    for _ in range(epochs):
        trainer.fit_epoch(train_loader)
    return trainer.evaluate(val_loader)
