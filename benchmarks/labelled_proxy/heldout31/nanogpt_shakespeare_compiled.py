"""nanoGPT-style char-level Shakespeare training. Asked to "make it faster with torch.compile
reduce-overhead", the assistant compiled the model and the optimizer step and kept the rest of train.py."""
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

block_size, batch_size, n_embd, n_head, n_layer, vocab = 256, 64, 384, 6, 6, 65
learning_rate, min_lr, warmup_iters, lr_decay_iters, max_iters = 1e-3, 1e-4, 100, 5000, 5000
eval_interval, eval_iters = 250, 200
train_data = np.memmap("data/shakespeare_char/train.bin", dtype=np.uint16, mode="r")
val_data = np.memmap("data/shakespeare_char/val.bin", dtype=np.uint16, mode="r")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd), nn.Dropout(0.2))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, n_head, C // n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.2 if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
        self.ln_f, self.lm_head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
        return logits, loss


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    return x.pin_memory().cuda(non_blocking=True), y.pin_memory().cuda(non_blocking=True)  # CLEAN: eager pinned upload


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters
    ratio = min(1.0, (it - warmup_iters) / (lr_decay_iters - warmup_iters))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


model = GPT().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.99))
cmodel = torch.compile(model, mode="reduce-overhead")  # CUDA graphs via cudagraph trees
opt_step = torch.compile(optimizer.step, mode="reduce-overhead")


@torch.no_grad()
def estimate_loss():
    model.eval()
    out = {}
    for split in ("train", "val"):
        losses = []
        for _ in range(eval_iters):
            _, loss = cmodel(*get_batch(split))
            losses.append(loss)  # HAZARD: static-address
        out[split] = torch.stack(losses).mean().item()
    model.train()
    return out


@torch.no_grad()
def generate(idx, max_new_tokens=500, temperature=0.8):
    model.eval()
    for _ in range(max_new_tokens):
        logits, _ = cmodel(idx[:, -block_size:])  # HAZARD: dynamic-shape
        probs = F.softmax(logits[:, -1] / temperature, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
    model.train()
    return idx


for it in range(max_iters + 1):
    lr = get_lr(it)
    for group in optimizer.param_groups:
        group["lr"] = lr  # HAZARD: optimizer
    if it % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {it}: train {losses['train']:.4f}, val {losses['val']:.4f}")
    X, Y = get_batch("train")
    logits, loss = cmodel(X, Y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # CLEAN: eager, outside the compiled regions
    opt_step()
    optimizer.zero_grad(set_to_none=True)
    if it % 10 == 0: print(f"iter {it}: loss {loss.item():.4f}")  # HAZARD: static-address

print(generate(torch.zeros(1, 1, dtype=torch.long, device="cuda"))[0].tolist())  # CLEAN: host read after generation
