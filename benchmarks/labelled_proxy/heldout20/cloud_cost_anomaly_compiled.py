"""FinOps platform: cloud cost anomaly detection (daily spend per account x service).

Trainer: a DDP-wrapped sequence autoencoder compiled with CUDA graphs from the job's
TrainConfig.  The exporter then freezes the scoring path into a standalone CUDA graph that
the billing pipeline's sidecar replays.
"""
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

RUN_STATS = {"worst_batch_err": 0.0}


@dataclass
class TrainConfig:
    compile_mode: str = "reduce-overhead"
    batch: int = 512
    lr: float = 1e-3
    epochs: int = 20
    window: int = 56
    n_ctx: int = 16


class SpendAutoencoder(nn.Module):
    def __init__(self, window=56, n_ctx=16, hid=64):
        super().__init__()
        self.enc = nn.GRU(1 + n_ctx, hid, batch_first=True)
        self.dec = nn.Linear(hid, window)

    def forward(self, spend, ctx):  # spend [B, window], ctx [B, window, n_ctx]
        _, h = self.enc(torch.cat([spend.unsqueeze(-1), ctx], -1))
        return self.dec(h[-1])


def recon_step(model, spend, ctx, mask):
    err = ((model(spend, ctx) - spend) ** 2 * mask).sum() / mask.sum().clamp_min(1.0)
    RUN_STATS["worst_batch_err"] = max(RUN_STATS["worst_batch_err"], err.item())  # HAZARD: host-sync
    return err


class Trainer:
    def __init__(self, cfg: TrainConfig, rank: int):
        self.cfg = cfg
        self.model = DDP(SpendAutoencoder(cfg.window, cfg.n_ctx).cuda(rank), device_ids=[rank])
        self.step_fn = torch.compile(recon_step, mode=cfg.compile_mode)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.opt_step = torch.compile(self.opt.step, mode=cfg.compile_mode)
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, factor=0.5, patience=2)

    def train_epoch(self, loader):
        running = torch.zeros((), device="cuda")
        for spend, ctx, mask in loader:  # the loader keeps the last, shorter batch of each shard
            err = self.step_fn(self.model, spend, ctx, mask)  # HAZARD: dynamic-shape
            running += err.detach()  # CLEAN: read right after the call, before backward and the compiled step
            err.backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=True)
        dist.all_reduce(running)
        epoch_loss = running.item() / dist.get_world_size()  # CLEAN: eager host read of a plain tensor
        self.plateau.step(epoch_loss)  # HAZARD: optimizer
        return epoch_loss


class SidecarExporter:
    """Freezes the scoring path into one CUDA graph for the billing sidecar."""

    def __init__(self, model: nn.Module, window=56, n_ctx=16, accounts=2048):
        self.model = model.eval()
        self.score = torch.compile(self._score, mode="max-autotune-no-cudagraphs")
        self.spend = torch.zeros(accounts, window, device="cuda")
        self.ctx = torch.zeros(accounts, window, n_ctx, device="cuda")

    @torch.no_grad()
    def _score(self, spend, ctx):
        return ((self.model(spend, ctx) - spend) ** 2).mean(-1)

    def freeze(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._score(self.spend, self.ctx)  # eager warm-up of the kernels
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=s):
            self.anomaly = self.score(self.spend, self.ctx)  # HAZARD: api-misuse
        return self.graph


def shard_loader(rank, cfg: TrainConfig):
    data = torch.load(f"/data/finops/spend_shard_{rank}.pt")
    n = data["spend"].shape[0]
    for i in range(0, n, cfg.batch):
        yield tuple(data[k][i:i + cfg.batch].cuda(non_blocking=True) for k in ("spend", "ctx", "mask"))


def main():
    dist.init_process_group("nccl")
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    cfg = TrainConfig()
    trainer = Trainer(cfg, rank)
    for _ in range(cfg.epochs):
        trainer.train_epoch(shard_loader(rank, cfg))
    if rank == 0:
        SidecarExporter(trainer.model.module, cfg.window, cfg.n_ctx).freeze()
