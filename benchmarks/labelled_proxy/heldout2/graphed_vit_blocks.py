"""ViT fine-tuning where each encoder block is wrapped with make_graphed_callables."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim=768, heads=12, drop_path=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.drop_path = drop_path

    def forward(self, x, attn_mask=None):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        if self.training and torch.rand(1).item() < self.drop_path:  # HAZARD: host-code
            return x
        return x + F.dropout(self.mlp(self.norm2(x)), p=0.1, training=self.training)  # CLEAN: dropout on the default CUDA generator is graph-safe


class Head(nn.Module):
    def __init__(self, dim=768, n_cls=1000):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, n_cls)

    def forward(self, x):
        return self.fc(self.norm(x[:, 0]))


def log_activation(mod, args):
    mod.last_input_norm = args[0].detach().norm()


def build(depth=12, batch=32, tokens=197, dim=768, device="cuda"):
    blocks = [Block(dim).to(device) for _ in range(depth)]
    head = Head(dim).to(device)
    blocks[0].register_forward_pre_hook(log_activation)  # HAZARD: api-misuse
    sample = tuple((torch.randn(batch, tokens, dim, device=device, requires_grad=True),) for _ in blocks)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed_blocks = torch.cuda.make_graphed_callables(tuple(blocks), sample)
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast cache disabled around graphing
        graphed_head = torch.cuda.make_graphed_callables(
            head, (torch.randn(batch, tokens, dim, device=device, requires_grad=True),))
    graphed_head.register_forward_hook(lambda m, a, o: None)  # CLEAN: hook added after graphing
    return list(graphed_blocks), graphed_head


def train(loader, epochs=1):
    blocks, head = build()
    params = [p for b in blocks for p in b.parameters()] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    attn_mask = None
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            for blk in blocks[:-1]:
                x = blk(x)
            x = blocks[-1](x, attn_mask=attn_mask)  # HAZARD: api-misuse
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                loss = F.cross_entropy(head(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
