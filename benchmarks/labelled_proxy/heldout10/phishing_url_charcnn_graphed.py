"""Phishing-URL classifier for a browser safe-browsing backend.

A char-CNN reads the raw URL (up to 200 chars); a small head adds lexical
features (entropy, digit ratio, subdomain depth, ...) and a per-TLD abuse prior.
Both modules are graphed with torch.cuda.make_graphed_callables for the hourly
fine-tune on freshly reported URLs.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAXLEN, B, N_LEX = 200, 2048, 8


class CharCNN(nn.Module):
    def __init__(self, vocab=98, d=32, char_drop=0.05):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(d, 64, k, padding=k // 2) for k in (3, 5, 7))
        self.char_drop = char_drop
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(20240611)

    def forward(self, chars):
        lengths = (chars != 0).sum(1)
        chars = chars[:, : int(lengths.max())]  # HAZARD: host-sync
        if self.training:
            drop = torch.rand(chars.shape, device=chars.device, generator=self.gen) < self.char_drop  # HAZARD: rng
            chars = chars.masked_fill(drop, 1)  # CLEAN: masked_fill, static shape
        e = self.emb(chars).transpose(1, 2)
        return torch.cat([F.relu(conv(e)).amax(-1) for conv in self.convs], -1)


class LexicalHead(nn.Module):
    def __init__(self, tld_prior_np):
        super().__init__()
        self.tld_prior_np = tld_prior_np.astype(np.float32)  # refreshed from the abuse-report DB
        self.fc = nn.Sequential(nn.Linear(192 + N_LEX + 1, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, h, lexical, tld_id):
        prior = torch.from_numpy(self.tld_prior_np).to("cuda")[tld_id]  # HAZARD: pinned-memory
        return self.fc(torch.cat([h, lexical, prior.unsqueeze(-1)], -1)).squeeze(-1)


def build(tld_prior_np, device="cuda"):
    cnn, head = CharCNN().to(device), LexicalHead(tld_prior_np).to(device)
    chars = torch.randint(1, 98, (B, MAXLEN), device=device)
    h = torch.randn(B, 192, device=device, requires_grad=True)
    lex = torch.randn(B, N_LEX, device=device)
    tld = torch.randint(0, len(tld_prior_np), (B,), device=device)
    return torch.cuda.make_graphed_callables((cnn, head), ((chars,), (h, lex, tld)))


class DriftMonitor:
    def __init__(self):
        self.means = []

    def __call__(self, module, inputs, output):
        self.means.append(output.detach().mean(0))


def finetune(loader, val, tld_prior_np, steps=500):
    g_cnn, g_head = build(tld_prior_np)
    monitor = DriftMonitor()
    g_cnn.register_forward_hook(monitor)  # CLEAN: hook registered after graphing
    opt = torch.optim.Adam([*g_cnn.parameters(), *g_head.parameters()], lr=5e-4)
    for step, (chars, lex, tld, y) in zip(range(steps), loader):
        logit = g_head(g_cnn(chars), lexical=lex, tld_id=tld)  # HAZARD: api-misuse
        loss = F.binary_cross_entropy_with_logits(logit, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    g_cnn.eval()
    g_head.eval()
    with torch.no_grad():
        v_chars, v_lex, v_tld, v_y = val
        v_logit = g_head(g_cnn(v_chars), v_lex, v_tld)  # CLEAN: eval mode differs from the capture, the eager forward runs
        acc = ((v_logit > 0).float() == v_y).float().mean().item()
    return g_cnn, g_head, acc


if __name__ == "__main__":
    prior = np.load("tld_abuse_prior.npy")
    reports = torch.load("reported_urls_last_hour.pt")
    loader = torch.utils.data.DataLoader(reports, batch_size=B, shuffle=True, drop_last=True)
    model = finetune(loader, torch.load("val_urls.pt"), prior)
