"""Missing-value imputation and PM2.5 regression for an urban air-quality sensor network.

Low-cost sensors drop readings; a BRITS-like recurrent imputer with learned temporal
decay fills gaps in 24-hour windows (36 stations), and a regressor predicts next-hour
PM2.5. Self-supervised training hides extra observed values and reconstructs them.
Both modules are graphed with torch.cuda.make_graphed_callables.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

STATIONS, STEPS, HID, BATCH = 36, 24, 128, 64


class DecayImputer(nn.Module):
    def __init__(self, hide_p=0.1):
        super().__init__()
        self.decay = nn.Linear(STATIONS, HID)
        self.cell = nn.GRUCell(2 * STATIONS, HID)
        self.est = nn.Linear(HID, STATIONS)
        self.hide_p = hide_p
        self.mask_gen = torch.Generator(device="cuda")

    def forward(self, x, m, delta):
        if m.all():  # HAZARD: dynamic-control-flow
            return x, torch.zeros((), device=x.device)
        hide = torch.rand(m.shape, device=x.device, generator=self.mask_gen) < self.hide_p  # HAZARD: rng
        m_in = m & ~hide
        h = torch.zeros(x.shape[0], HID, device=x.device)
        filled, recon = [], 0.0
        for t in range(STEPS):
            h = h * torch.exp(-F.relu(self.decay(delta[:, t])))
            x_hat = self.est(h)
            x_t = torch.where(m_in[:, t], x[:, t], x_hat)  # CLEAN: torch.where keeps shapes static
            recon = recon + ((x_hat - x[:, t]).abs() * (m[:, t] & hide[:, t])).sum() / (hide[:, t].sum() + 1)
            h = self.cell(torch.cat([x_t, m_in[:, t].float()], -1), h)
            filled.append(x_t)
        return torch.stack(filled, 1), recon / STEPS


class PMRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(STEPS * STATIONS, 512), nn.ReLU(),
                                 nn.Dropout(0.2), nn.Linear(512, STATIONS))

    def forward(self, filled):
        return self.net(filled)


def grad_norm_monitor(mod, grad_in, grad_out):
    mod.last_grad_norm = grad_out[0].detach().norm()


def build(imputer, regressor):
    imputer.est.register_full_backward_hook(grad_norm_monitor)  # HAZARD: api-misuse
    x = torch.randn(BATCH, STEPS, STATIONS, device="cuda")
    m = torch.rand(BATCH, STEPS, STATIONS, device="cuda") > 0.2
    delta = torch.rand(BATCH, STEPS, STATIONS, device="cuda")
    filled = torch.randn(BATCH, STEPS, STATIONS, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        imputer, regressor = torch.cuda.make_graphed_callables((imputer, regressor), ((x, m, delta), (filled,)))
    regressor.register_forward_hook(lambda mod, i, o: None)  # CLEAN: hook registered after graphing
    return imputer, regressor


def train(imputer, regressor, loader, epochs=20):
    params = list(imputer.parameters()) + list(regressor.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    g_imp, g_reg = build(imputer, regressor)
    for ep in range(epochs):
        for x, m, delta, y in loader():
            filled, recon = g_imp(x, m, delta)
            pred = g_reg(filled)
            loss = F.smooth_l1_loss(pred, y) + 0.5 * recon
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()  # CLEAN: eager optimizer step outside the graphed callables
        print(f"epoch {ep}: loss {loss.item():.3f}")


if __name__ == "__main__":
    def loader(n=30):
        for _ in range(n):
            yield (torch.randn(BATCH, STEPS, STATIONS, device="cuda"), torch.rand(BATCH, STEPS, STATIONS, device="cuda") > 0.2,
                   torch.rand(BATCH, STEPS, STATIONS, device="cuda"), torch.randn(BATCH, STATIONS, device="cuda"))
    train(DecayImputer().cuda(), PMRegressor().cuda(), loader)
