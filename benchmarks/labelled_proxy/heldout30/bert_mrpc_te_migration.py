# MRPC paraphrase fine-tuning from a pytorch-pretrained-bert 0.6 script, half-way through a move to
# Transformer Engine: encoder layers are te.TransformerLayer now, graphed with TE make_graphed_callables.
# BertAdam and warmup_linear are kept from the old script (TODO: AdamW + LambdaLR after the migration).
import random
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

H, HEADS, LAYERS, SEQ, BATCH = 1024, 16, 4, 128, 32
attn_stats = []


class ClsHead(nn.Module):
    def __init__(self, hidden=H, n_labels=2):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, n_labels)
        self.drop = nn.Dropout(0.1)

    def forward(self, h):
        pooled = torch.tanh(self.dense(h[0]))
        if self.training and random.random() < 0.1:  # HAZARD: host-code
            pooled = pooled.detach()
        return self.out(self.drop(pooled))  # CLEAN: dropout on the default CUDA generator


def warmup_linear(x, warmup=0.1):
    return x / warmup if x < warmup else 1.0 - x


def build(embeddings):
    layers = [te.TransformerLayer(H, 4 * H, HEADS, hidden_dropout=0.0, attention_dropout=0.0, params_dtype=torch.bfloat16,
                                  self_attn_mask_type="padding").cuda() for _ in range(LAYERS)]
    head = ClsHead().cuda().to(torch.bfloat16)
    layers[0].register_forward_pre_hook(lambda m, args: attn_stats.append(args[0].detach().float().std()))  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    sample = torch.randn(SEQ, BATCH, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = te.make_graphed_callables(tuple(layers) + (head,), tuple((sample,) for _ in range(LAYERS + 1)), num_warmup_iters=3,
                                            enabled=True, recipe=recipe, cache_quantized_params=True)
    graphed[-1].register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing
    return embeddings.cuda(), list(graphed[:-1]), graphed[-1], recipe


def train(embeddings, loader, n_steps, lr=2e-5):
    emb, layers, head, recipe = build(embeddings)
    params = list(emb.parameters()) + [p for l in layers for p in l.parameters()] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    step = 0
    for input_ids, segment_ids, label in loader:
        for g in opt.param_groups:
            g["lr"] = lr * warmup_linear(step / n_steps)  # CLEAN: the optimizer step runs eagerly
        x = emb(input_ids.cuda(), segment_ids.cuda()).transpose(0, 1).contiguous().to(torch.bfloat16)
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE's own autocast at replay
            for layer in layers:
                x = layer(x)  # HAZARD: api-misuse
            logits = head(x)
        loss = nn.functional.cross_entropy(logits.float(), label.cuda())
        loss.backward()
        if step % 2 == 1:
            opt.step()
            opt.zero_grad()
        step += 1
    return loss.item()


@torch.no_grad()
def evaluate(emb, layers, head_state, recipe, loader):
    head = ClsHead().cuda().to(torch.bfloat16).eval()
    head.load_state_dict(head_state)
    correct = total = 0
    for input_ids, segment_ids, label in loader:
        x = emb(input_ids.cuda(), segment_ids.cuda()).transpose(0, 1).contiguous().to(torch.bfloat16)
        with te.autocast(enabled=True, recipe=recipe):
            for layer in layers:
                x = layer(x, is_first_microbatch=False)  # CLEAN: is_first_microbatch passed on every replay
        correct += (head(x).argmax(-1) == label.cuda()).sum().item()  # CLEAN: eager head outside the graphs
        total += label.numel()
    return correct / total
