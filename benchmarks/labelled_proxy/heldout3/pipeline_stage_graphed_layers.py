"""One pipeline-parallel stage of a T5-style model, with per-layer graphed callables.

The stage holds the last encoder layers and the first decoder layers. Each layer is
wrapped with torch.cuda.make_graphed_callables for a fixed micro-batch shape.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class StageLayer(nn.Module):
    def __init__(self, dim, heads=16, p_token_drop=0.1, monitor=False):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.heads, self.p = heads, p_token_drop
        self.drop_gen = torch.Generator(device="cuda")
        self.monitor = monitor
        self.act_norms = []

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        h = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        keep = torch.full((b, t, 1), 1.0 - self.p, device=x.device)
        h = h * torch.bernoulli(keep, generator=self.drop_gen) / (1.0 - self.p)  # HAZARD: rng
        out = h + self.mlp(self.ln2(h))
        if self.monitor:
            self.act_norms.append(out.float().norm().item())  # HAZARD: host-sync
        return out


def _stash_input(module, args):
    module.last_input = args[0]


def _log_output(module, args, out):
    module.out_shape = tuple(out.shape)


def build_stage(layers, micro_batch, seq, dim, n_encoder):
    pool = torch.cuda.graph_pool_handle()
    enc_layers, dec_layers = layers[:n_encoder], layers[n_encoder:]
    for layer in dec_layers:
        layer.register_forward_pre_hook(_stash_input)  # HAZARD: api-misuse

    def samples(n):
        return tuple((torch.randn(micro_batch, seq, dim, device="cuda", requires_grad=True),) for _ in range(n))

    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: weight-cast cache disabled
        enc_g = torch.cuda.make_graphed_callables(tuple(enc_layers), samples(len(enc_layers)), pool=pool)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        dec_g = torch.cuda.make_graphed_callables(tuple(dec_layers), samples(len(dec_layers)), pool=pool)
    for layer in enc_g:
        layer.register_forward_hook(_log_output)  # CLEAN: hooks registered after graphing are allowed
    return nn.ModuleList(list(enc_g) + list(dec_g))


class StageRunner:
    def __init__(self, layers, micro_batch=4, seq=512, dim=1024, n_encoder=2):
        for layer in layers:
            layer.monitor = True
        self.stage = build_stage(layers, micro_batch, seq, dim, n_encoder)
        self.recv_buf = torch.empty(micro_batch, seq, dim, device="cuda")

    def forward_microbatch(self, recv_tensor):
        self.recv_buf.copy_(recv_tensor)  # CLEAN: eager copy into a persistent receive buffer
        x = self.recv_buf.detach().requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            for layer in self.stage:
                x = layer(x)
        return x

    def backward_microbatch(self, out, grad_from_next):
        out.backward(grad_from_next)
