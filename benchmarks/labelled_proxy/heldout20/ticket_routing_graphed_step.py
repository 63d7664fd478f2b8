"""IT service management: ticket routing model (assignment group + priority) for the service
desk.  The platform's `GraphedStep` utility captures any step function; step functions are
built by factories registered by name and picked from the job config.
"""
import logging
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("itsm.routing")
STEP_FACTORIES = {}


@dataclass
class JobConfig:
    vocab: int = 30_000
    n_groups: int = 120
    n_prio: int = 4
    seq: int = 256
    batch: int = 128
    lr: float = 5e-4
    seed: int = 0
    token_drop: float = 0.1
    step_factory: str = "multitask"


def step_factory(name):
    def deco(fn):
        STEP_FACTORIES[name] = fn
        return fn
    return deco


class TicketEncoder(nn.Module):
    def __init__(self, cfg: JobConfig):
        super().__init__()
        self.emb = nn.Embedding(cfg.vocab, 256, padding_idx=0)
        self.conv = nn.Conv1d(256, 256, 3, padding=1)
        self.group = nn.Linear(256, cfg.n_groups)
        self.prio = nn.Linear(256, cfg.n_prio)

    def forward(self, ids):
        h = F.gelu(self.conv(self.emb(ids).transpose(1, 2))).amax(-1)
        h = F.dropout(h, 0.1, self.training)  # CLEAN: dropout on the default CUDA generator
        return self.group(h), self.prio(h)


@step_factory("multitask")
def make_multitask_step(model, opt, batch, cfg: JobConfig):
    aug_gen = torch.Generator(device="cuda")
    aug_gen.manual_seed(cfg.seed)

    def step():
        ids = batch["ids"]
        keep = torch.rand(ids.shape, device=ids.device, generator=aug_gen) > cfg.token_drop  # HAZARD: rng
        g_logit, p_logit = model(ids * keep)
        loss = F.cross_entropy(g_logit, batch["group"]) + 0.5 * F.cross_entropy(p_logit, batch["prio"])
        if loss > 10.0:  # HAZARD: dynamic-control-flow
            loss = loss.clamp(max=10.0)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()  # HAZARD: optimizer
        log.info(f"routing step loss {loss:.3f}")  # HAZARD: host-sync
        return loss.detach()
    return step


class GraphedStep:
    def __init__(self, step_fn, warmup=3):
        self.step_fn, self.warmup = step_fn, warmup
        self.stream = torch.cuda.Stream()
        self.graph = None

    def __call__(self):
        if self.graph is None:
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                for _ in range(self.warmup):
                    self.step_fn()
            torch.cuda.current_stream().wait_stream(self.stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=self.stream):  # CLEAN: captured on the warmed side stream
                self.loss = self.step_fn()
        self.graph.replay()
        return self.loss


def build_job(cfg: JobConfig):
    model = TicketEncoder(cfg).cuda().train()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    batch = {"ids": torch.zeros(cfg.batch, cfg.seq, dtype=torch.long, device="cuda"),
             "group": torch.zeros(cfg.batch, dtype=torch.long, device="cuda"),
             "prio": torch.zeros(cfg.batch, dtype=torch.long, device="cuda")}
    step = GraphedStep(STEP_FACTORIES[cfg.step_factory](model, opt, batch, cfg))
    return model, batch, step


def train(cfg: JobConfig, loader):
    model, batch, step = build_job(cfg)
    for ids, group, prio in loader:
        batch["ids"].copy_(ids)  # CLEAN: static batch refreshed in place
        batch["group"].copy_(group)
        batch["prio"].copy_(prio)
        step()
    return model
