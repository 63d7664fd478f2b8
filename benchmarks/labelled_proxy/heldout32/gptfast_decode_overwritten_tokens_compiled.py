# Decode loop adapted from gpt-fast's generate.py for a MoE checkpoint. Without
# the clones I hit "accessing tensor output of CUDAGraphs that has been
# overwritten by a subsequent run" (same as meta-pytorch/gpt-fast#232), and
# with prefill routed through decode_one_token it records a graph per prompt
# length. Toy model with a static KV-like cache below. torch 2.11, H200.
import torch
import torch.nn as nn

VOCAB, D, MAX_SEQ, EOS = 32000, 512, 2048, 2


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(MAX_SEQ, D)
        self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.SiLU(), nn.Linear(4 * D, D))
        self.out = nn.Linear(D, VOCAB, bias=False)
        self.register_buffer("cache", torch.zeros(MAX_SEQ, D))

    def forward(self, idx, input_pos):
        h = self.tok(idx) + self.pos(input_pos)
        self.cache.index_copy_(0, input_pos, h[0])  # CLEAN: in-place write into a registered buffer
        ctx = self.cache.mean(0)
        return self.out(h + self.ff(h + ctx))


def multinomial_sample_one_no_sync(probs):
    q = torch.empty_like(probs).exponential_(1)
    return torch.argmax(probs / q, dim=-1, keepdim=True).to(dtype=torch.int)  # CLEAN: sampling without a host sync


def logits_to_probs(logits, temperature):
    logits = logits / max(temperature, 1e-5)  # HAZARD: python-scalar
    return torch.softmax(logits, dim=-1)


@torch.compile(mode="reduce-overhead", fullgraph=False)
def decode_one_token(model, x, input_pos, temperature):
    logits = model(x, input_pos)
    print("step logits", logits[0, -1, :4])  # HAZARD: host-code
    probs = logits_to_probs(logits[:, -1], temperature)
    return multinomial_sample_one_no_sync(probs), probs


@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature):
    T = prompt.size(1)
    input_pos = torch.arange(0, T, device=prompt.device)
    next_token, _ = decode_one_token(model, prompt, input_pos, temperature)  # HAZARD: dynamic-shape
    new_tokens = [next_token.clone()]  # CLEAN: cloned right after the call
    cur = torch.tensor([T], device=prompt.device)  # CLEAN: eager tensor, built outside compiled code
    for _ in range(max_new_tokens - 1):
        next_token, probs = decode_one_token(model, next_token.clone().view(1, -1), cur, temperature)  # CLEAN: fed back as a clone
        new_tokens.append(next_token)  # HAZARD: static-address
        cur += 1
        if next_token.item() == EOS:  # CLEAN: eager read right after the producing call
            break
    return torch.cat(new_tokens, dim=-1)


model = TinyLM().cuda().eval()
requests = [(64, 0.7), (91, 1.0), (128, 0.2), (37, 0.9)]
for plen, temp in requests:
    prompt = torch.randint(3, VOCAB, (1, plen), device="cuda")
    out = generate(model, prompt, max_new_tokens=32, temperature=temp)
    print(plen, temp, out.view(-1)[:8].tolist())
