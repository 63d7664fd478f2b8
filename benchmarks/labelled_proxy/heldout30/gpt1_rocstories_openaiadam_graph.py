# ROCStories cloze fine-tuning of a GPT-1 style LM (pytorch-pretrained-bert 0.6 era, OpenAIAdam with
# warmup_linear). Migrated to torch 2.x: the whole step is captured with capture_begin/capture_end.
import logging
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_

logger = logging.getLogger(__name__)


def warmup_linear(x, warmup=0.002):
    return x / warmup if x < warmup else 1.0 - x


class OpenAIAdam(torch.optim.Optimizer):
    def __init__(self, params, lr, t_total, warmup=0.002, b1=0.9, b2=0.999, e=1e-8, l2=0.01, max_grad_norm=1.0):
        super().__init__(params, dict(lr=lr, t_total=t_total, warmup=warmup, b1=b1, b2=b2, e=e, l2=l2,
                                      max_grad_norm=max_grad_norm))

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["step"], state["exp_avg"], state["exp_avg_sq"] = 0, torch.zeros_like(p.data), torch.zeros_like(p.data)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                if group["max_grad_norm"] > 0:
                    clip_grad_norm_(p, group["max_grad_norm"])  # CLEAN: per-parameter clip, device-side
                state["step"] += 1  # HAZARD: host-code
                exp_avg.mul_(group["b1"]).add_(p.grad.data, alpha=1 - group["b1"])
                exp_avg_sq.mul_(group["b2"]).addcmul_(p.grad.data, p.grad.data, value=1 - group["b2"])
                denom = exp_avg_sq.sqrt().add_(group["e"])
                lr = group["lr"] * warmup_linear(state["step"] / group["t_total"], group["warmup"])
                step_size = lr * math.sqrt(1 - group["b2"] ** state["step"]) / (1 - group["b1"] ** state["step"])
                p.data.addcdiv_(exp_avg, denom, value=-step_size)
                p.data.add_(p.data, alpha=-lr * group["l2"])


class DoubleHeadsLM(nn.Module):
    def __init__(self, vocab=40478, n_ctx=77, d=768, n_layer=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(n_ctx, d)
        layer = nn.TransformerEncoderLayer(d, 12, 4 * d, dropout=0.1, activation="gelu", batch_first=True)
        self.h = nn.TransformerEncoder(layer, n_layer)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.mc_head = nn.Linear(d, 1)
        self.register_buffer("causal", torch.triu(torch.full((n_ctx, n_ctx), float("-inf")), 1))

    def forward(self, ids, mc_token_ids):
        B, C, T = ids.shape
        x = self.tok(ids.view(-1, T)) + self.pos.weight[:T]
        h = self.h(x, mask=self.causal[:T, :T])
        clf_h = h[torch.arange(B * C, device=ids.device), mc_token_ids.view(-1)]  # CLEAN: CUDA index tensors (a gather)
        return self.lm_head(h), self.mc_head(F.dropout(clf_h, 0.1, self.training)).view(B, C)  # CLEAN: dropout on the default generator


class ClozeTrainer:
    def __init__(self, model, n_train_steps, seed=42, lm_coef=0.5):
        self.model, self.lm_coef, self.seed, self.epoch = model.cuda(), lm_coef, seed, 0
        self.opt = OpenAIAdam(model.parameters(), lr=6.25e-5, t_total=n_train_steps)
        self.ids = torch.zeros(8, 2, 77, dtype=torch.long, device="cuda")
        self.mc_ids = torch.zeros(8, 2, dtype=torch.long, device="cuda")
        self.mc_labels = torch.zeros(8, dtype=torch.long, device="cuda")

    def step(self):
        torch.cuda.manual_seed(self.seed + self.epoch)  # HAZARD: rng
        lm_logits, mc_logits = self.model(self.ids, self.mc_ids)
        lm_loss = F.cross_entropy(lm_logits[:, :-1].flatten(0, 1), self.ids.view(-1, 77)[:, 1:].flatten())
        mc_loss = F.cross_entropy(mc_logits, self.mc_labels)
        self.loss = mc_loss + self.lm_coef * lm_loss
        self.loss.backward()
        logger.info(f"lm={lm_loss:.3f} mc={mc_loss:.3f}")  # HAZARD: host-sync
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        print("capturing the cloze step")  # CLEAN: plain string, printed once at capture
        self.graph = torch.cuda.CUDAGraph()
        self.graph.capture_begin()  # HAZARD: stream
        self.step()
        self.graph.capture_end()

    def fit(self, loader, epochs=3):
        self.capture()
        for self.epoch in range(epochs):
            for ids, mc_ids, mc_labels in loader:
                self.ids.copy_(ids)  # CLEAN: copy_ into the static input
                self.mc_ids.copy_(mc_ids)
                self.mc_labels.copy_(mc_labels)
                self.graph.replay()
            logger.info("epoch %d loss %.4f", self.epoch, self.loss.item())  # CLEAN: read after replay, outside the capture
