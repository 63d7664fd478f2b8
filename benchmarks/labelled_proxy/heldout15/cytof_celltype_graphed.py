"""Mass cytometry (CyTOF) cell-type annotation.

A 40-marker panel is arcsinh-transformed and classified into 24 immune cell
types. The classifier is graphed with torch.cuda.make_graphed_callables and
trained on 4096-cell batches: first on the pooled reference atlas, then per
study panel (different cofactors, some markers missing).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_MARKERS, N_TYPES, BATCH = 40, 24, 4096


class CellTyper(nn.Module):
    def __init__(self, width=256, cofactor=5.0):
        super().__init__()
        self.cofactor = cofactor
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(0)
        self.mlp = nn.Sequential(
            nn.Linear(N_MARKERS, width), nn.LayerNorm(width), nn.GELU(), nn.Dropout(0.2),
            nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(), nn.Dropout(0.2),
            nn.Linear(width, N_TYPES),
        )

    def forward(self, counts, panel_mask):
        x = torch.asinh(counts / self.cofactor)  # HAZARD: python-scalar
        keep = torch.rand(x.shape, device=x.device, generator=self.drop_gen) > 0.15  # HAZARD: rng
        x = x * keep * panel_mask
        n_active = int(panel_mask.sum(1).max())  # HAZARD: host-sync
        x = x * (N_MARKERS / max(n_active, 1))
        return self.mlp(x)


def graph_model(model):
    x0 = torch.rand(BATCH, N_MARKERS, device="cuda") * 50.0
    m0 = torch.ones(BATCH, N_MARKERS, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cast cache disabled around graphing
        return torch.cuda.make_graphed_callables(model, (x0, m0))


def pretrain(gmodel, atlas_loader, opt, epochs=5):
    gmodel.train()
    for _ in range(epochs):
        for counts, mask, y in atlas_loader:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = gmodel(counts.cuda(non_blocking=True), mask.cuda(non_blocking=True))  # CLEAN: positional tensors, as captured
            loss = F.cross_entropy(logits.float(), y.cuda(non_blocking=True), label_smoothing=0.05)
            loss.backward()
            opt.step()
            opt.zero_grad()


def train_panel(model, gmodel, panel, opt, epochs=2):
    model.cofactor = panel["cofactor"]           # 5 for CyTOF panels, 150 for the spectral-flow studies
    for _ in range(epochs):
        for counts, mask, y in panel["loader"]:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = gmodel(counts.cuda(), panel_mask=mask.cuda())  # HAZARD: api-misuse
            loss = F.cross_entropy(logits.float(), y.cuda())
            loss.backward()
            opt.step()
            opt.zero_grad()


def main(atlas_loader, panels):
    model = CellTyper().cuda()
    gmodel = graph_model(model)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    pretrain(gmodel, atlas_loader, opt)
    for panel in panels:
        train_panel(model, gmodel, panel, opt)
    gmodel.eval()
    with torch.no_grad():
        counts, mask, _ = next(iter(panels[0]["loader"]))
        pred = gmodel(counts.cuda(), mask.cuda()).argmax(1)  # CLEAN: eval mode runs the eager forward
    return pred.cpu()
