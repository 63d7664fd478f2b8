"""make_graphed_callables on a module that draws dropout masks from its own generator."""
import torch
import torch.nn as nn


class StochasticDepthBlock(nn.Module):
    def __init__(self, dim, p=0.1, seed=0):
        super().__init__()
        self.p = p
        self.fc = nn.Linear(dim, dim)
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)  # CLEAN: seeded at construction, before any capture

    def forward(self, x):
        keep = torch.rand(x.shape[0], 1, device=x.device, generator=self.gen) >= self.p  # HAZARD: rng
        state = torch.cuda.get_rng_state()  # HAZARD: rng
        y = self.fc(x) * keep / (1 - self.p)
        self._saved_state = state
        return x + y


class Encoder(nn.Module):
    def __init__(self, dim=512, depth=6):
        super().__init__()
        self.blocks = nn.Sequential(*[StochasticDepthBlock(dim, seed=i) for i in range(depth)])

    def forward(self, x):
        return self.blocks(x)


def main():
    torch.manual_seed(0)  # CLEAN: global seed set once, before capture
    enc = Encoder().cuda()
    head = nn.Linear(512, 1).cuda()
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-3, capturable=True)
    x = torch.randn(128, 512, device="cuda", requires_grad=True)
    enc_g = torch.cuda.make_graphed_callables(enc, (x,), num_warmup_iters=3)
    for step in range(1000):
        data = torch.randn(128, 512, device="cuda")
        loss = head(enc_g(data)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
