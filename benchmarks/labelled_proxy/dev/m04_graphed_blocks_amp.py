"""Partial-network graphing of transformer blocks with make_graphed_callables under AMP."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.ff(self.ln(x))


def log_activation(mod, inp, out):
    mod._last_norm = out.detach().norm()


def train(loader, dim=1024, bs=8, seq=512, n_classes=10):
    blocks = nn.Sequential(*[Block(dim) for _ in range(4)]).cuda()
    head = nn.Linear(dim, n_classes).cuda()
    blocks[0].register_forward_hook(log_activation)  # HAZARD: api-misuse
    head.register_load_state_dict_post_hook(lambda m, keys: None)  # CLEAN: load-state-dict hook, not a forward/backward hook
    opt = torch.optim.AdamW(list(blocks.parameters()) + list(head.parameters()), lr=1e-4)

    sample = torch.randn(bs, seq, dim, device="cuda", requires_grad=True)
    sample_h = torch.randn(bs, seq, dim, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        blocks_g, head_g = torch.cuda.make_graphed_callables(
            (blocks, head), ((sample,), (sample_h,)), num_warmup_iters=3
        )

    for step, (x, y) in enumerate(loader):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cache disabled, graphed callables only replayed here
            logits = head_g(blocks_g(x)).mean(1)
            loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        opt.step()  # CLEAN: optimizer steps eagerly, outside any graph
        opt.zero_grad(set_to_none=True)
        if step % 100 == 0:
            print(f"step {step}: loss={loss.item():.3f}")
