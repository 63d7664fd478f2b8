"""Send-time optimisation for push notifications in a food-delivery app.

For each user we predict the open probability for each of the 24 hourly slots
and send at the best local hour outside quiet hours. Training steps, the
optimizer step and the planner are compiled with **COMPILE_KW
(reduce-overhead, dynamic=False); cohorts are planned per UTC offset.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

COMPILE_KW = dict(mode="reduce-overhead", dynamic=False)
HOURS, FEAT, B = 24, 40, 4096


class OpenModel(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.user = nn.Sequential(nn.Linear(FEAT, d), nn.ReLU(), nn.Linear(d, d))
        self.hour = nn.Embedding(HOURS, d)
        self.register_buffer("hour_prior", torch.zeros(HOURS))  # global open-rate logit per UTC hour

    def forward(self, feats):
        return self.user(feats) @ self.hour.weight.T + self.hour_prior


class SendTimePlanner:
    def __init__(self, model, lr=2e-3):
        self.model = model.cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.05)
        self.train_step = torch.compile(self._train_step, **COMPILE_KW)
        self.opt_step = torch.compile(self.opt.step, **COMPILE_KW)
        self.plan = torch.compile(self._plan, **COMPILE_KW)
        self.loss_ema = torch.zeros((), device="cuda")
        quiet = torch.zeros(HOURS, dtype=torch.bool)
        quiet[22:] = True
        quiet[:8] = True
        self.quiet = quiet.cuda()

    def _train_step(self, feats, opened, sent_hour):
        logits = self.model(feats)
        picked = logits.gather(1, sent_hour.unsqueeze(1)).squeeze(1)
        loss = F.binary_cross_entropy_with_logits(picked, opened)
        print("send-time train loss", loss)  # HAZARD: host-code
        return loss

    def _plan(self, feats, utc_offset):
        p = torch.sigmoid(self.model(feats))
        local = torch.roll(p, shifts=utc_offset, dims=1)  # HAZARD: python-scalar
        local = local.masked_fill(self.quiet, 0.0)  # CLEAN: masked_fill with a fixed boolean mask, static shape
        return local.argmax(1)

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for feats, opened, sent_hour in loader:  # drop_last=True: always B rows
                loss = self.train_step(feats, opened, sent_hour)
                self.loss_ema.lerp_(loss.detach(), 0.02)  # CLEAN: read before backward, while the step's output is still live
                loss.backward()
                self.opt_step()
                self.opt.zero_grad(set_to_none=False)
            if epoch == 3:
                for group in self.opt.param_groups:
                    group["weight_decay"] = 0.0  # HAZARD: optimizer

    def refresh_prior(self, prior):
        self.model.hour_prior = prior.cuda()  # HAZARD: static-address

    def refresh_prior_inplace(self, prior):
        self.model.hour_prior.copy_(prior)  # CLEAN: copy_ keeps the buffer's address

    @torch.no_grad()
    def schedule(self, cohorts):
        """cohorts: {utc_offset_hours: (B, FEAT) features}, padded to B rows."""
        return {tz: self.plan(feats, tz).cpu() for tz, feats in cohorts.items()}


if __name__ == "__main__":
    planner = SendTimePlanner(OpenModel())
    data = torch.load("push_opens_30d.pt")
    planner.fit(torch.utils.data.DataLoader(data, batch_size=B, shuffle=True, drop_last=True), epochs=8)
    planner.refresh_prior(torch.load("hour_prior_today.pt"))
    sends = planner.schedule(torch.load("cohorts_by_offset.pt"))
