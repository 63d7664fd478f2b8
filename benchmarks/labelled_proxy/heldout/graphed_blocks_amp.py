from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, drop_path=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.drop_path = drop_path

    def forward(self, x):
        if self.training and self.drop_path > 0 and torch.rand(1).item() < self.drop_path:  # HAZARD: host-code
            return x
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def _record_norm(name, store, module, inputs, output):
    store[name] = output.detach().float().norm()


def graph_blocks(blocks: nn.ModuleList, sample: torch.Tensor, stats: dict):
    for i, blk in enumerate(blocks):
        if i % 2 == 0:  # CLEAN: int comparison on a Python loop index
            blk.register_forward_hook(partial(_record_norm, f"block{i}", stats))  # HAZARD: api-misuse
    args = tuple((sample.clone().requires_grad_(),) for _ in blocks)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = torch.cuda.make_graphed_callables(tuple(blocks), args)
    return nn.Sequential(*graphed)


def graph_head(head: nn.Module, sample: torch.Tensor):
    head.register_load_state_dict_post_hook(lambda module, incompatible_keys: None)  # CLEAN: load_state_dict hook, not a forward/backward hook
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast cache disabled for graphing
        graphed = torch.cuda.make_graphed_callables(head, (sample,))
    return graphed


def main(dim=512, depth=4, batch=32, seq=128, steps=500):
    blocks = nn.ModuleList([Block(dim) for _ in range(depth)]).cuda()
    head = nn.Linear(dim, 10).cuda()
    stats = {}
    sample = torch.randn(batch, seq, dim, device="cuda")
    body = graph_blocks(blocks, sample, stats)
    head_g = graph_head(head, torch.randn(batch, seq, dim, device="cuda", requires_grad=True))
    params = list(blocks.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    for step in range(steps):
        x = torch.randn(batch, seq, dim, device="cuda")
        y = torch.randint(0, 10, (batch,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            logits = head_g(body(x)).mean(1)
            loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0:
            print(step, loss.item())  # CLEAN: .item() in the eager loop, outside any capture


if __name__ == "__main__":
    main()
