"""IceNet-style seasonal sea-ice forecaster (3 concentration classes per month).

Monthly rollout: each lead month gets the ERA5 forcing for that month plus the previous
predicted concentration. An ensemble of perturbed members is rolled out in one graph.
"""
import torch
import torch.nn as nn

MAX_LEADS = 6
CLASS_CENTRES = (0.0, 0.5, 0.925)   # open water, marginal ice, full ice


def block(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(),
                         nn.Conv2d(c_out, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU())


class IceUNet(nn.Module):
    def __init__(self, c_in, w=32):
        super().__init__()
        self.enc1, self.enc2 = block(c_in, w), block(w, 2 * w)
        self.mid = block(2 * w, 4 * w)
        self.up2, self.dec2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, 2), block(4 * w, 2 * w)
        self.up1, self.dec1 = nn.ConvTranspose2d(2 * w, w, 2, 2), block(2 * w, w)
        self.out = nn.Conv2d(w, len(CLASS_CENTRES), 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
        m = self.mid(nn.functional.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.out(d1)


class SeaIceForecaster:
    def __init__(self, model, land_mask, cell_area_km2, n_forcing, n_members=8, device="cuda"):
        self.model = model.eval().to(device)
        self.ocean = (~land_mask).to(device)
        self.cell_area = cell_area_km2.to(device)
        self.ocean_area = self.cell_area[self.ocean]  # CLEAN: eager mask indexing in __init__, outside the graph
        self.centres = torch.tensor(CLASS_CENTRES, device=device).view(1, -1, 1, 1)  # CLEAN: built in __init__, outside the graph
        self.n_leads = MAX_LEADS
        h, w = land_mask.shape
        self.static_sic = torch.zeros(1, 1, h, w, device=device)
        self.static_forcing = torch.zeros(MAX_LEADS, n_forcing, h, w, device=device)
        self.n_members = n_members
        self.perturb_gen = torch.Generator(device=device)
        self.perturb_gen.manual_seed(2024)
        self.graph = None

    def set_horizon(self, n_months):
        self.n_leads = min(n_months, MAX_LEADS)

    def _rollout(self):
        sic = self.static_sic.expand(self.n_members, -1, -1, -1)
        noise = torch.randn(sic.shape, device=sic.device, generator=self.perturb_gen)  # HAZARD: rng
        sic = (sic + 0.03 * noise).clamp(0.0, 1.0)
        outs = []
        for k in range(self.n_leads):  # HAZARD: python-scalar
            forcing = self.static_forcing[k].expand(self.n_members, -1, -1, -1)
            probs = self.model(torch.cat([forcing, sic], 1)).softmax(1)
            sic = (probs * self.centres).sum(1, keepdim=True)
            sic = sic.masked_fill(~self.ocean, 0.0)  # CLEAN: masked_fill keeps the shape fixed
            outs.append(sic)
        torch.cuda.empty_cache()  # HAZARD: memory
        stack = torch.cat(outs, 1)                                   # (members, leads, H, W)
        ocean_sic = stack[..., self.ocean]  # HAZARD: dynamic-shape
        extent = ((ocean_sic > 0.15).float() * self.ocean_area).sum(-1)
        return stack.mean(0), extent

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._rollout()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_mean, self.static_extent = self._rollout()

    @torch.no_grad()
    def forecast(self, init_sic, forcing):
        self.set_horizon(forcing.shape[0])                           # outlooks of 1-6 months
        self.static_sic.copy_(init_sic)  # CLEAN: copy_ into the captured input
        self.static_forcing[: forcing.shape[0]].copy_(forcing)
        self.graph.replay()
        return self.static_mean.float().clone(), self.static_extent.float().clone()

    def sea_ice_extent(self, sic_map):
        # eager diagnostic used by the verification notebook
        return ((sic_map > 0.15) & self.ocean).float().mul(self.cell_area).sum((-2, -1))  # CLEAN: mask multiply, fixed shape
