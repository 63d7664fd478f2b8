"""Cross-sectional equity return model trained on the information coefficient.

Each month the ~3000 stocks of the universe carry 150 firm characteristics;
the net's scores are industry-demeaned and trained to maximise the weighted
Pearson IC with next-month returns.  The whole monthly step is captured.
"""
import torch
import torch.nn as nn

N_STOCKS, N_CHARS, N_IND = 3000, 150, 69


class FactorNet(nn.Module):
    def __init__(self, h=256):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(N_CHARS, h), nn.SiLU(), nn.Dropout(0.1),
                               nn.Linear(h, h // 2), nn.SiLU(), nn.Linear(h // 2, 1))

    def forward(self, x):
        return self.f(x).squeeze(-1)


class ICTrainer:
    def __init__(self):
        self.net = FactorNet().cuda()
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-4, weight_decay=1e-5)
        self.x = torch.zeros(N_STOCKS, N_CHARS, device="cuda")
        self.fwd_ret = torch.zeros(N_STOCKS, device="cuda")
        self.valid = torch.zeros(N_STOCKS, device="cuda")
        self.industry = torch.zeros(N_STOCKS, N_IND, device="cuda")
        self.ind_stream = torch.cuda.Stream()

    def _step(self):
        score = self.net(self.x)
        w = self.valid / self.valid.sum().clamp(min=1.0)  # CLEAN: weights instead of boolean-mask indexing
        with torch.cuda.stream(self.ind_stream):  # HAZARD: stream
            ind_w = self.industry.T @ w
        ind_mean = (self.industry.T @ (score * w)) / ind_w.clamp(min=1e-8)
        s = score - self.industry @ ind_mean
        s_c = s - (w * s).sum()
        r_c = self.fwd_ret - (w * self.fwd_ret).sum()
        ic = (w * s_c * r_c).sum() / torch.sqrt((w * s_c ** 2).sum() * (w * r_c ** 2).sum() + 1e-12)
        loss = -ic
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        return ic.detach()

    def capture(self):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.opt.zero_grad(set_to_none=True)
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            self.opt.zero_grad(set_to_none=True)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_ic = self._step()

    def load_month(self, chars, ret, listed, industry_onehot):
        self.x.copy_(torch.nan_to_num(chars))  # CLEAN: copy_ keeps the captured address
        self.fwd_ret.copy_(torch.nan_to_num(ret))
        self.valid.copy_(listed.float())
        self.industry.copy_(industry_onehot)

    def reconstitute(self):
        # new index constituents: start from a clean characteristics panel
        self.x = torch.zeros(N_STOCKS, N_CHARS, device="cuda")  # HAZARD: static-address
        self.valid.zero_()  # CLEAN: in-place reset keeps the captured address

    def fit(self, months, epochs=20):
        self.capture()
        ics = []
        for ep in range(epochs):
            for m in months:
                if m.get("rebalance"):
                    self.reconstitute()
                self.load_month(m["chars"], m["ret"], m["listed"], m["industry"])
                self.graph.replay()
                ics.append(self.static_ic.clone())  # CLEAN: cloned before the next replay
        return torch.stack(ics).view(epochs, -1).mean(1)


if __name__ == "__main__":
    ind = torch.nn.functional.one_hot(torch.randint(0, N_IND, (N_STOCKS,), device="cuda"), N_IND).float()
    months = [{"chars": torch.randn(N_STOCKS, N_CHARS, device="cuda"), "ret": torch.randn(N_STOCKS, device="cuda") * 0.1,
               "listed": torch.rand(N_STOCKS, device="cuda") > 0.05, "industry": ind, "rebalance": i % 3 == 0}
              for i in range(120)]
    print(ICTrainer().fit(months))
