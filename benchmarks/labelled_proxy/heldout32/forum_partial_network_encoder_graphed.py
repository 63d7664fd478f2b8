# Forum: following the docs' "partial-network capture" advice -- graph the
# static encoder with make_graphed_callables, keep the data-dependent head
# eager. Graphing the encoder fails, and once it "worked" (after I removed two
# lines) the noise annealing stopped having any effect. Encoder below.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, vocab_norm):
        super().__init__()
        self.proj = nn.Linear(128, 256)
        self.out = nn.Linear(256, 256)
        self.noise_scale = 0.0
        self.vocab_norm = vocab_norm  # CPU tensor from the tokenizer statistics

    def forward(self, x, mask):
        h = self.proj(x) * self.vocab_norm.cuda()  # HAZARD: pinned-memory
        h = h + self.noise_scale * torch.randn_like(h)  # HAZARD: python-scalar
        h = h.masked_fill(~mask.unsqueeze(-1), 0.0)  # CLEAN: masked_fill keeps the shape static
        if torch.isnan(h).any():  # HAZARD: dynamic-control-flow
            h = torch.nan_to_num(h)
        pooled = h[mask].mean(0)  # HAZARD: dynamic-shape
        return self.out(h) + pooled


def head(h, mask, labels):
    # data-dependent, deliberately left out of the graph
    idx = torch.nonzero(mask.any(0)).squeeze(1)  # CLEAN: eager code outside the graphed callable
    logits = h[:, idx].mean(1) @ torch.ones(256, 10, device=h.device)
    return F.cross_entropy(logits, labels)


B, T = 32, 64
enc = Encoder(torch.linspace(0.5, 1.5, 256)).cuda()
opt = torch.optim.SGD(enc.parameters(), lr=1e-2)
sample_x = torch.randn(B, T, 128, device="cuda")
sample_mask = torch.ones(B, T, dtype=torch.bool, device="cuda")
enc = torch.cuda.make_graphed_callables(enc, (sample_x, sample_mask))

for epoch in range(5):
    enc.noise_scale = 0.1 * epoch  # anneal the input noise
    for _ in range(20):
        x = torch.randn(B, T, 128, device="cuda")
        mask = torch.rand(B, T, device="cuda") > 0.2
        labels = torch.randint(0, 10, (B,), device="cuda")
        h = enc(x, mask)  # CLEAN: positional tensors, same training mode as at graphing time
        loss = head(h, mask, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(epoch, loss.item())  # CLEAN: eager read after backward and step
