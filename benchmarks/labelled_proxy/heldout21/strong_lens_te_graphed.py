"""Strong-lens modelling: regress SIE + external-shear parameters from 64x64 cutouts with a
patch transformer built on Transformer Engine layers (FP8), all parts graphed with TE's
make_graphed_callables. Training images are simulated; each batch is convolved with a
PSF drawn from the HST PSF library so the net does not overfit one PSF.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HID, HEADS, FFN, DEPTH = 256, 8, 1024, 6
IMG, PATCH, BATCH = 64, 8, 32
N_TOK = (IMG // PATCH) ** 2
PARAMS = ("theta_E", "e1", "e2", "gamma1", "gamma2", "x0", "y0")


class PatchStem(nn.Module):
    def __init__(self, psf_bank, gen):
        super().__init__()
        self.proj = nn.Conv2d(1, HID, PATCH, stride=PATCH)
        self.pos = nn.Parameter(torch.zeros(N_TOK, 1, HID))
        self.psf_bank = psf_bank                  # (n_psf, 1, 9, 9) CPU tensor
        self.gen = gen

    def forward(self, img):
        B = img.shape[0]
        psf = self.psf_bank.to(img.device, non_blocking=True)  # HAZARD: pinned-memory
        pick = torch.randint(0, psf.shape[0], (B,), device=img.device, generator=self.gen)  # HAZARD: rng
        k = psf.index_select(0, pick)
        img = F.conv2d(img.transpose(0, 1), k, padding=4, groups=B).transpose(0, 1)
        return self.proj(img).flatten(2).permute(2, 0, 1) + self.pos      # (N_TOK, B, HID)


class ParamHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HID)
        self.fc = nn.Linear(HID, len(PARAMS))

    def forward(self, tok):
        return self.fc(self.norm(tok.mean(0)))


def build(psf_bank, device="cuda"):
    gen = torch.Generator(device=device)
    gen.manual_seed(3)
    stem = PatchStem(psf_bank, gen).to(device)
    layers = [te.TransformerLayer(HID, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="no_mask").to(device) for _ in range(DEPTH)]
    head = ParamHead().to(device)
    stem.register_forward_pre_hook(lambda m, a: None if bool(a[0].isfinite().all()) else print("bad cutout"))  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    samples = [(torch.randn(BATCH, 1, IMG, IMG, device=device),)]
    samples += [(torch.randn(N_TOK, BATCH, HID, device=device, requires_grad=True),) for _ in range(DEPTH + 1)]
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables((stem, *layers, head), tuple(samples), enabled=True, recipe=recipe)
    return (stem, *layers, head), graphed, recipe


@torch.no_grad()
def validate(modules, graphed, loader, device="cuda"):
    for m in modules:
        m.eval()
    g_stem, *g_layers, g_head = graphed
    err = torch.zeros(len(PARAMS), device=device)
    n = 0
    for img, y in loader:
        x = g_stem(img.to(device))  # CLEAN: modules in eval mode, graphed callables run the eager forward
        for lyr in g_layers:
            x = lyr(x)
        err += (g_head(x) - y.to(device)).abs().sum(0)
        n += y.shape[0]
    for m in modules:
        m.train()
    return dict(zip(PARAMS, (err / n).tolist()))


def record_stats(module, inputs, output, _log=[]):
    _log.append(output.detach().abs().mean(0))


def train(loader, val_loader, psf_bank, epochs=40, device="cuda"):
    modules, graphed, recipe = build(psf_bank, device)
    g_stem, *g_layers, g_head = graphed
    modules[-1].register_forward_hook(record_stats)  # CLEAN: hook added after graphing
    opt = torch.optim.AdamW([p for m in modules for p in m.parameters()], lr=3e-4, weight_decay=0.05)
    for ep in range(epochs):
        for img, y in loader:                                  # simulated lenses, drop_last=True
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replay under TE autocast with the capture recipe
                x = g_stem(img.to(device))
                for lyr in g_layers:
                    x = lyr(x)
                pred = g_head(x)
            loss = F.smooth_l1_loss(pred.float(), y.to(device))
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        print(ep, validate(modules, graphed, val_loader, device))


if __name__ == "__main__":
    from lens_sim import SimulatedLenses, load_psf_bank

    train(SimulatedLenses(200_000, batch=BATCH), SimulatedLenses(5_000, batch=BATCH, seed=99),
          load_psf_bank("hst_wfc3_f160w_psfs.fits"))
