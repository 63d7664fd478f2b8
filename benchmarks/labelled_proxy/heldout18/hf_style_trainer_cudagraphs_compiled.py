"""HF-Trainer-style training loop with `torch_compile_backend="cudagraphs"`.

A TrainingArguments-like dataclass selects the dynamo backend; `compute_loss` and the
optimizer step are compiled with it, evaluation uses plain torch.compile. The model
keeps a class-frequency buffer that re-weights the loss and is reset every epoch.
"""
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

UNK_ID = 3


@dataclass
class TrainingArguments:
    learning_rate: float = 5e-5
    num_train_epochs: int = 3
    torch_compile_backend: str = "cudagraphs"
    word_dropout: float = 0.1
    logging_steps: int = 50


class BagOfEmbeddingsClassifier(nn.Module):
    def __init__(self, vocab, d, n_cls):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, d, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, n_cls))
        self.register_buffer("class_counts", torch.ones(n_cls))

    def forward(self, ids):
        return self.mlp(self.emb(ids))


class CompiledTrainer:
    def __init__(self, model, args: TrainingArguments, train_loader, eval_loader, total_steps):
        self.model, self.args = model.cuda(), args
        self.train_loader, self.eval_loader = train_loader, eval_loader
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate)
        self.scheduler = torch.optim.lr_scheduler.LinearLR(self.optimizer, 1.0, 0.05, total_iters=total_steps)
        self.log_history = []
        self._loss_fn = torch.compile(self.compute_loss, backend=args.torch_compile_backend)
        self._opt_step = torch.compile(self.optimizer.step, backend=args.torch_compile_backend)
        self._eval_loss = torch.compile(self.compute_eval_loss)

    def compute_loss(self, model, ids, labels):
        keep_np = np.random.rand(*ids.shape) >= self.args.word_dropout  # HAZARD: host-code
        ids = torch.where(torch.as_tensor(keep_np, device=ids.device), ids, UNK_ID)
        logits = model(ids)
        counts = model.class_counts
        weights = (counts.sum() / (counts.numel() * counts)).clamp(max=10.0)
        loss = F.cross_entropy(logits, labels, weight=weights)
        self.log_history.append({"loss": loss.item()})  # HAZARD: host-sync
        return loss

    def compute_eval_loss(self, model, ids, labels):
        loss = F.cross_entropy(model(ids), labels)
        return loss.item()  # CLEAN: plain torch.compile, no CUDA graphs

    def reset_counts(self):
        n_cls = self.model.class_counts.numel()
        self.model.class_counts = torch.ones(n_cls, device="cuda")  # HAZARD: static-address

    def train(self):
        step = 0
        for epoch in range(self.args.num_train_epochs):
            self.reset_counts()
            for ids, labels in self.train_loader:
                ids, labels = ids.cuda(non_blocking=True), labels.cuda(non_blocking=True)
                loss = self._loss_fn(self.model, ids, labels)
                loss.backward()
                self._opt_step()
                self.scheduler.step()  # HAZARD: optimizer
                self.optimizer.zero_grad(set_to_none=True)
                with torch.no_grad():
                    self.model.class_counts.add_(torch.bincount(labels, minlength=self.model.class_counts.numel()))  # CLEAN: eager, outside the compiled functions
                step += 1
                if step % self.args.logging_steps == 0:
                    print(f"epoch {epoch} step {step} loss {self.log_history[-1]['loss']:.4f}")
            print(f"epoch {epoch} eval loss {self.evaluate():.4f}")

    @torch.no_grad()
    def evaluate(self):
        losses = [self._eval_loss(self.model, ids.cuda(), labels.cuda()) for ids, labels in self.eval_loader]
        return float(np.mean(losses))
