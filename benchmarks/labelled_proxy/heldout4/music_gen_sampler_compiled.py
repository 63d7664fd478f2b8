"""Symbolic music generation (REMI tokens) with a sliding-window transformer.

`sample_step` is swapped for a reduce-overhead compiled version at start-up; the
generator varies the temperature per bar to alternate calm and busy passages.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BAR = 0, 1
N_TYPES = 6


class REMITransformer(nn.Module):
    def __init__(self, vocab=512, dim=512, depth=8, heads=8, ctx=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, ctx, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, depth)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("causal", torch.triu(torch.full((ctx, ctx), float("-inf")), 1))

    def forward(self, window):
        h = self.tok(window) + self.pos[:, : window.shape[1]]
        return self.head(self.body(h, mask=self.causal, is_causal=True))


def sample_step(model, window, token_type, grammar_mask, temperature, top_p=0.95, rep_penalty=1.2):
    logits = model(window)[:, -1].float()
    allowed = grammar_mask[token_type[window[:, -1]]]  # CLEAN: grammar lookup is a device gather
    logits = logits.masked_fill(~allowed, float("-inf"))
    recent = window[0, -32:].tolist()  # HAZARD: host-sync
    logits[:, recent] = logits[:, recent] / rep_penalty
    print(f"[remi] sample_step ctx={window.shape[1]}")  # HAZARD: host-code
    probs = F.softmax(logits / temperature, -1)  # HAZARD: python-scalar
    sorted_p, idx = probs.sort(-1, descending=True)
    cut = sorted_p.cumsum(-1) - sorted_p > top_p
    sorted_p = sorted_p.masked_fill(cut, 0.0)  # CLEAN: nucleus cut as a masked_fill, fixed shape
    choice = torch.multinomial(sorted_p, 1)  # CLEAN: multinomial compiles without a graph break or skip
    return idx.gather(-1, choice)


def prime(model, prompt):
    n_bars = int((prompt == BAR).sum().item())  # CLEAN: default torch.compile, no CUDA graphs
    return model(prompt)[:, -1].argmax(-1), n_bars


def setup():
    global sample_step, prime
    sample_step = torch.compile(sample_step, mode="reduce-overhead")
    prime = torch.compile(prime)


@torch.no_grad()
def generate(model, prompt, token_type, grammar_mask, n_tokens=2048, base_temp=1.0, tokens_per_bar=64):
    window = prompt.clone()
    _, n_bars = prime(model, window)
    tokens = []
    for i in range(n_tokens):
        busy = ((i // tokens_per_bar) + n_bars) % 2
        temp = base_temp * (0.85 + 0.3 * busy)
        nxt = sample_step(model, window, token_type, grammar_mask, temp)
        tokens.append(nxt)  # HAZARD: static-address
        window = torch.cat([window[:, 1:], nxt], 1)
    return torch.cat(tokens, 1)


if __name__ == "__main__":
    model = REMITransformer().cuda().eval()
    token_type = torch.randint(0, N_TYPES, (512,), device="cuda")
    grammar = torch.ones(N_TYPES, 512, dtype=torch.bool, device="cuda")
    setup()
    prompt = torch.full((1, 512), PAD, dtype=torch.long, device="cuda")
    song = generate(model, prompt, token_type, grammar)
    print(song.shape)
