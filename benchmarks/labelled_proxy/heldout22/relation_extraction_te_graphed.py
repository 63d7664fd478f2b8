"""Sentence-level relation extraction (TACRED-style typed entity markers) on Transformer Engine layers; the
encoder layers and the relation head are graphed together in one TE make_graphed_callables call."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

RELATIONS = ["no_relation", "per:employee_of", "org:founded_by", "per:city_of_birth", "org:subsidiaries"] + [
    f"rel_{i}" for i in range(37)]
ENTITY_TYPES = ["PERSON", "ORGANIZATION", "CITY", "DATE", "NUMBER", "MISC"]

class RelationHead(nn.Module):
    def __init__(self, hidden, n_rel, class_prior, active_types=(0, 1, 2), marker_drop=0.1, seed=13):
        super().__init__()
        self.type_table = nn.Parameter(torch.randn(len(ENTITY_TYPES), hidden) * 0.02)
        self.active_types = list(active_types)
        self.cls = nn.Linear(3 * hidden, n_rel)
        self.class_prior_np = np.asarray(class_prior, dtype=np.float32)
        self.marker_drop = marker_drop
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, h, subj_pos, obj_pos):
        h = h.transpose(0, 1)
        b, _, d = h.shape
        subj = h.gather(1, subj_pos.view(b, 1, 1).expand(-1, 1, d)).squeeze(1)  # CLEAN: gather with a CUDA index
        obj = h.gather(1, obj_pos.view(b, 1, 1).expand(-1, 1, d)).squeeze(1)
        types = self.type_table[self.active_types].mean(0)  # HAZARD: host-sync
        keep = torch.rand(subj.shape, device=h.device, generator=self.gen) > self.marker_drop  # HAZARD: rng
        logits = self.cls(torch.cat([subj * keep, obj, types.expand_as(subj)], -1))
        prior = torch.from_numpy(self.class_prior_np).to(h.device, non_blocking=True)  # HAZARD: pinned-memory
        return logits + prior.log()

class ActivationStats:
    def __init__(self):
        self.norms = []

    def pre_hook(self, module, args):
        self.norms.append(args[0].detach().float().norm())

def build(hidden=768, ffn=3072, heads=12, n_layers=6):
    layers = [te.TransformerLayer(hidden, ffn, heads, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="padding").cuda() for _ in range(n_layers)]
    prior = np.full(len(RELATIONS), 0.2 / (len(RELATIONS) - 1), np.float32)
    prior[0] = 0.8
    return layers, RelationHead(hidden, len(RELATIONS), prior).cuda()

def train(loader, seq=128, batch=32, hidden=768, epochs=5):
    layers, head = build(hidden)
    stats = ActivationStats()
    layers[0].register_forward_pre_hook(stats.pre_hook)  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32, amax_compute_algo="max")
    mask = torch.zeros(batch, 1, 1, seq, dtype=torch.bool, device="cuda")
    layer_args = [(torch.randn(seq, batch, hidden, device="cuda", requires_grad=True),) for _ in layers]
    pos = torch.zeros(batch, dtype=torch.long, device="cuda")
    head_args = (torch.randn(seq, batch, hidden, device="cuda", requires_grad=True), pos, pos.clone())
    graphed = te.make_graphed_callables(tuple(layers) + (head,), tuple(layer_args) + (head_args,),
                                        sample_kwargs=tuple({"attention_mask": mask} for _ in layers) + ({},),
                                        enabled=True, recipe=recipe)
    g_layers, g_head = graphed[:-1], graphed[-1]
    layers[-1].register_forward_hook(lambda m, a, out: None)  # CLEAN: hook registered after graphing
    embed = nn.Embedding(30522, hidden).cuda()
    params = [p for l in layers for p in l.parameters()] + list(head.parameters()) + list(embed.parameters())
    opt = torch.optim.AdamW(params, lr=3e-5)
    for epoch in range(epochs):
        for ids, attn_mask, subj_pos, obj_pos, label in loader:
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast around the replays
                h = embed(ids).transpose(0, 1)
                for layer in g_layers:
                    h = layer(h, attention_mask=attn_mask)
                logits = g_head(h, subj_pos, obj_pos)
            loss = F.cross_entropy(logits.float(), label)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
        print(f"epoch {epoch} loss {loss.item():.4f}")
