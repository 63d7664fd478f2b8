"""MLflow-tracked fine-tuning job (scheduled by the team's MLOps platform).

Encoder and classification head are graphed with torch.cuda.make_graphed_callables;
the optimizer, scheduler and tracking stay eager. Run parameters, per-step metrics
and the final model are logged to the MLflow tracking server.
"""
import argparse

import mlflow
import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE = -100


class TokenDropEmbedding(nn.Module):
    def __init__(self, vocab, d, p, seed):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.p = p
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, ids):
        keep = torch.rand(ids.shape, device=ids.device, generator=self.gen) >= self.p  # HAZARD: rng
        return self.emb(ids) * keep.unsqueeze(-1)


class Encoder(nn.Module):
    def __init__(self, vocab, d, p_drop, seed):
        super().__init__()
        self.embed = TokenDropEmbedding(vocab, d, p_drop, seed)
        self.mix = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, ids):
        h = self.embed(ids)
        return h + self.mix(h)


class Head(nn.Module):
    def __init__(self, d, n_cls):
        super().__init__()
        self.proj = nn.Linear(d, n_cls)
        self.smoothing = 0.0
        self.n_forward = 0

    def forward(self, h, labels):
        self.n_forward += 1  # HAZARD: host-code
        logits = self.proj(h.mean(dim=1))
        eps = self.smoothing  # HAZARD: python-scalar
        loss = F.cross_entropy(logits, labels, label_smoothing=eps, ignore_index=IGNORE)
        labelled = logits[labels != IGNORE]  # HAZARD: dynamic-shape
        conf_pen = labelled.softmax(-1).amax(-1).mean()
        return loss + 0.01 * conf_pen


def main(args):
    mlflow.set_experiment(args.experiment)
    enc = Encoder(args.vocab, args.d_model, args.token_drop, args.seed).cuda()
    head = Head(args.d_model, args.n_classes).cuda()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq_len), device="cuda")
    h = torch.randn(args.batch, args.seq_len, args.d_model, device="cuda", requires_grad=True)
    y = torch.randint(0, args.n_classes, (args.batch,), device="cuda")
    enc, head = torch.cuda.make_graphed_callables((enc, head), ((ids,), (h, y)))
    enc.register_forward_hook(lambda m, a, o: None)  # CLEAN: hook registered after graphing

    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps)
    loader = make_loader(args)  # fixed batch and sequence length, drop_last=True

    with mlflow.start_run():
        mlflow.log_params(vars(args))
        step = 0
        for epoch in range(args.epochs):
            head.smoothing = 0.1 * min(1.0, epoch / 3)
            for batch_ids, batch_y in loader:
                loss = head(enc(batch_ids.cuda(non_blocking=True)), batch_y.cuda(non_blocking=True))
                loss.backward()
                opt.step()
                sched.step()  # CLEAN: eager optimizer and scheduler
                opt.zero_grad(set_to_none=True)
                if step % args.log_every == 0:
                    mlflow.log_metric("train_loss", loss.item(), step=step)  # CLEAN: eager read after the graphed backward
                step += 1
        mlflow.pytorch.log_model(nn.ModuleDict({"enc": enc, "head": head}), "model")


def make_loader(args):
    data = torch.load(args.data)
    ds = torch.utils.data.TensorDataset(data["ids"], data["labels"])
    return torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, drop_last=True, pin_memory=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for k, v in dict(experiment="ticket-router", vocab=32000, d_model=256, n_classes=24, token_drop=0.1,
                     seed=0, batch=64, seq_len=128, lr=3e-4, steps=20000, epochs=8, log_every=50,
                     data="tickets.pt").items():
        p.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    main(p.parse_args())
