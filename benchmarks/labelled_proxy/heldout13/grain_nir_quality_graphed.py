"""Wheat protein and moisture from NIR transmittance spectra (850-1050 nm, 100
points) measured at a grain elevator intake. A 1D CNN and a calibration head
are graphed together with torch.cuda.make_graphed_callables for site training.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_WL = 100
WATER_BANDS = [62, 63, 64, 65, 66, 67]  # ~970 nm O-H second overtone


class SpectraCNN(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, c, 7, padding=3), nn.ELU(),
            nn.Conv1d(c, c, 7, padding=3), nn.ELU(),
            nn.AdaptiveAvgPool1d(16),
        )
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(11)

    def forward(self, spectra):
        if self.training:
            shift = 0.01 * torch.randn(spectra.shape[0], 1, 1, device=spectra.device, generator=self.gen)  # HAZARD: rng
            spectra = spectra + shift  # baseline offset augmentation
            spectra = spectra + 0.002 * torch.randn_like(spectra)  # CLEAN: default CUDA generator is registered by the capture
        water = spectra[:, :, WATER_BANDS].mean(-1)  # HAZARD: host-sync
        return torch.cat([self.conv(spectra).flatten(1), water], dim=1)


class CalibrationHead(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(16 * c + 1, 64), nn.ELU(), nn.Linear(64, 2))
        self.temp_comp = 0.0  # sample temperature above the 20 C reference

    def forward(self, feats, moisture_ref=None):
        y = self.mlp(feats)
        moisture = y[:, 1] - 0.03 * self.temp_comp  # HAZARD: python-scalar
        if moisture_ref is not None:
            moisture = moisture + 0.1 * (moisture_ref - moisture).detach()
        return torch.stack([y[:, 0], moisture], dim=1)


def main(device="cuda", batches=500):
    cnn, head = SpectraCNN().to(device), CalibrationHead().to(device)
    x = torch.randn(64, 1, N_WL, device=device)
    h = torch.randn(64, 16 * 32 + 1, device=device, requires_grad=True)
    g_cnn, g_head = torch.cuda.make_graphed_callables((cnn, head), ((x,), (h,)), num_warmup_iters=3)
    opt = torch.optim.Adam(list(cnn.parameters()) + list(head.parameters()), lr=1e-3)
    scale = torch.tensor([15.0, 20.0], device=device)
    for b in range(batches):
        spectra = torch.rand(64, 1, N_WL, device=device)
        ref = torch.rand(64, 2, device=device) * scale
        head.temp_comp = 8.0 * (b % 50) / 50  # silo samples warm up during the day
        pred = g_head(g_cnn(spectra))  # CLEAN: graphed callables called with positional tensors
        loss = F.mse_loss(pred, ref)
        opt.zero_grad()
        loss.backward()
        opt.step()

    # acceptance check against the oven-dried reference moisture of the same samples
    m_ref = torch.rand(64, device=device) * 20
    checked = g_head(g_cnn(spectra), moisture_ref=m_ref)  # HAZARD: api-misuse
    cnn.eval()
    head.eval()
    with torch.no_grad():
        val = head(cnn(spectra))  # CLEAN: eval mode differs from capture, so the eager forward runs
    rmse = (val - ref).pow(2).mean(0).sqrt()
    print("RMSEP protein / moisture:", rmse.tolist(), checked.shape)


if __name__ == "__main__":
    main()
