"""Per-layer CUDA-graph helper of a TE-based training framework.

Modelled on Megatron's `cuda_graph_impl="transformer_engine"` path: the model trains
eagerly for `warmup_steps` iterations, then the embedding, the transformer layers and
the LM head are graphed with te.make_graphed_callables under FP8 (delayed scaling)
and every later step replays them inside te.autocast.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format


class DroppedEmbedding(nn.Module):
    def __init__(self, vocab, hidden, p=0.1, seed=1234):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.p = p
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(seed)

    def forward(self, ids):
        h = self.emb(ids)
        keep = torch.bernoulli(torch.full_like(h, 1.0 - self.p), generator=self.drop_gen)  # HAZARD: rng
        return h * keep / (1.0 - self.p)


class SoftCapHead(nn.Module):
    def __init__(self, hidden, vocab, softcap=30.0):
        super().__init__()
        self.norm = te.LayerNorm(hidden)
        self.out = te.Linear(hidden, vocab, bias=False)
        self.softcap = softcap  # raised for the long-context phase

    def forward(self, h):
        cap = self.softcap  # HAZARD: python-scalar
        logits = self.out(self.norm(h))
        return cap * torch.tanh(logits / cap)


class TECudaGraphHelper:
    def __init__(self, embed, layers, head, micro_batch, seq_len, hidden, warmup_steps=3):
        self.embed, self.layers, self.head = embed, list(layers), head
        self.shape = (seq_len, micro_batch)
        self.hidden = hidden
        self.warmup_steps = warmup_steps
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
        self.graphed = False

    def create_cudagraphs(self):
        ids = torch.randint(0, 1000, self.shape, device="cuda")

        def hidden():
            return torch.randn(*self.shape, self.hidden, device="cuda", requires_grad=True)

        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            layers = te.make_graphed_callables(
                tuple(self.layers), tuple((hidden(),) for _ in self.layers), num_warmup_iters=3,
                enabled=True, recipe=self.recipe, cache_quantized_params=True,
            )
            embed, head = te.make_graphed_callables(
                (self.embed, self.head), ((ids,), (hidden(),)), num_warmup_iters=3,
                enabled=True, recipe=self.recipe,
            )
        self.embed, self.layers, self.head = embed, list(layers), head
        self.graphed = True

    def _forward(self, ids, first_microbatch):
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replay inside te.autocast with the capture recipe
            h = self.embed(ids)
            for layer in self.layers:
                h = layer(h, is_first_microbatch=first_microbatch)  # CLEAN: is_first_microbatch passed on every replay
            return self.head(h)

    def train_step(self, step, micro_batches, optimizer):
        if step == self.warmup_steps and not self.graphed:
            self.create_cudagraphs()
        for i, (ids, labels) in enumerate(micro_batches):
            logits = self._forward(ids, first_microbatch=(i == 0))
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
            (loss / len(micro_batches)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)  # CLEAN: grads stay allocated for the graphed backward

    @torch.no_grad()
    def validate(self, ids, labels):
        # modules stay in training mode so that the graphs (not the eager forwards) run
        with te.autocast(enabled=True, recipe=self.recipe):
            h = self.embed(ids)
            for layer in self.layers:
                h = layer(h)  # HAZARD: api-misuse
            logits = self.head(h)
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())

    def enter_long_context_phase(self):
        self.head.softcap = 50.0
