"""Cloud fleet reliability: 30-day disk-failure prediction from daily SMART telemetry.

Trained nightly on 8 GPUs.  The encoder runs under the platform's FSDP-style `ShardedModule`
(parameters stored flat, all-gathered in a forward pre-hook before each forward); encoder and
failure head are graphed with torch.cuda.make_graphed_callables.
"""
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

N_ATTR, DAYS, HID = 24, 30, 128
REALLOC = 4  # column of SMART 5 (reallocated sector count), log-scaled
GRAD_NORMS = []


class ShardedModule(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        flat = torch.cat([p.detach().flatten() for p in inner.parameters()])
        self.register_buffer("full", F.pad(flat, (0, (-flat.numel()) % self.world)))
        self.register_forward_pre_hook(self._unshard)  # HAZARD: api-misuse

    @torch.no_grad()
    def _unshard(self, module, args):
        shard = self.full.chunk(self.world)[self.rank].clone()
        dist.all_gather_into_tensor(self.full, shard)
        off = 0
        for p in self.inner.parameters():
            p.copy_(self.full[off:off + p.numel()].view_as(p))
            off += p.numel()

    def forward(self, *args):
        return self.inner(*args)


class SmartEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(N_ATTR, HID, batch_first=True)
        self.stats_stream = torch.cuda.Stream()
        self.realloc_rate = torch.zeros((), device="cuda")

    def forward(self, x):  # x: [B, DAYS, N_ATTR]
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            self.realloc_rate = x[:, :, REALLOC].diff(dim=1).clamp_min(0).mean()
        last, first = x[:, -1, REALLOC], x[:, 0, REALLOC]
        growing = last.masked_select(last > first)  # HAZARD: dynamic-shape
        fleet_growth = growing.mean().nan_to_num(0.0)
        _, h = self.gru(x)
        return torch.cat([h[-1], fleet_growth.expand(x.shape[0], 1)], dim=1)


class FailureHead(nn.Module):
    def __init__(self, vendor_prior: np.ndarray):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(HID + 1, 64), nn.ReLU(), nn.Linear(64, 1))
        self.vendor_prior = torch.from_numpy(vendor_prior.astype(np.float32))  # log-odds per vendor, CPU

    def forward(self, z, vendor_onehot):
        prior = self.vendor_prior.to(z.device, non_blocking=True)  # HAZARD: pinned-memory
        return self.fc(z).squeeze(-1) + vendor_onehot @ prior


def build_and_graph(vendor_prior, batch=2048):
    enc = ShardedModule(SmartEncoder().cuda())
    head = FailureHead(vendor_prior).cuda()
    x = torch.randn(batch, DAYS, N_ATTR, device="cuda")
    z = torch.randn(batch, HID + 1, device="cuda", requires_grad=True)
    v = torch.zeros(batch, len(vendor_prior), device="cuda")
    enc, head = torch.cuda.make_graphed_callables((enc, head), ((x,), (z, v)), num_warmup_iters=3)
    head.register_full_backward_hook(lambda m, gi, go: GRAD_NORMS.append(go[0].norm()))  # CLEAN: hook added after graphing
    return enc, head


def train(enc, head, loader, epochs=3):
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    pos_weight = torch.tensor(50.0, device="cuda")
    for _ in range(epochs):
        for x, vendor, failed in loader:
            logit = head(enc(x), vendor)  # CLEAN: positional arguments in the order of sample_args
            loss = F.binary_cross_entropy_with_logits(logit, failed, pos_weight=pos_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


@torch.no_grad()
def validate(enc, head, loader):
    enc.eval()
    head.eval()
    probs = [torch.sigmoid(head(enc(x), v)) for x, v, _ in loader]  # CLEAN: eval mode runs the original forwards eagerly
    enc.train()
    head.train()
    return torch.cat(probs)


def main(vendor_prior, train_loader, val_loader):
    dist.init_process_group("nccl")
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    enc, head = build_and_graph(vendor_prior)
    train(enc, head, train_loader)
    return validate(enc, head, val_loader)
