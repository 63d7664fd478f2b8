"""Medusa-style multi-head decoding with tree attention over a Vicuna backbone.

The tree buffers (attention mask, tree indices, retrieve indices) are built once
from `medusa_choices` and registered. Candidate generation + tree verification
is one function compiled with mode="max-autotune"; typical acceptance is used when
sampling.
"""
import time

import torch
import torch.nn as nn

MC_SIM_7B_63 = [[0], [0, 0], [1], [0, 1], [2], [0, 0, 0], [1, 0], [0, 2], [3], [0, 3], [4], [0, 4], [2, 0]]


def generate_medusa_buffers(choices, topk=10):
    choices = sorted(choices, key=lambda x: (len(x), x))
    n = len(choices) + 1
    attn = torch.eye(n)
    attn[:, 0] = 1
    tree_indices = torch.zeros(n, dtype=torch.long)
    for i, c in enumerate(choices):
        tree_indices[i + 1] = c[-1] + topk * (len(c) - 1) + 1
        for j in range(len(c) - 1):
            attn[i + 1, choices.index(c[: j + 1]) + 1] = 1
    leaves = [c for c in choices if not any(d[: len(c)] == c and len(d) > len(c) for d in choices)]
    depth = max(len(c) for c in choices)
    retrieve = torch.full((len(leaves), depth + 1), -1, dtype=torch.long)
    for r, c in enumerate(leaves):
        retrieve[r, 0] = 0
        for j in range(len(c)):
            retrieve[r, j + 1] = choices.index(c[: j + 1]) + 1
    return attn, tree_indices, retrieve


class MedusaModel(nn.Module):
    def __init__(self, base, medusa_heads, choices=MC_SIM_7B_63, topk=10):
        super().__init__()
        self.base, self.heads, self.topk = base, medusa_heads, topk
        attn, tree_idx, retrieve = generate_medusa_buffers(choices, topk)
        self.register_buffer("tree_attn_mask", attn)
        self.register_buffer("tree_indices", tree_idx)
        self.register_buffer("retrieve_indices", retrieve)
        self.posterior_threshold, self.posterior_alpha = 0.09, 0.3
        self.tok_times, self.accept_hist = [], []

    def propose_and_verify(self, last_logits, medusa_logits, cache_position, cache, temperature):
        cand = torch.cat([last_logits.argmax(-1, keepdim=True),
                          torch.topk(medusa_logits, self.topk, dim=-1).indices.flatten(1)], dim=1)  # CLEAN: topk has a fixed shape
        tree_cand = cand[:, self.tree_indices]  # CLEAN: indexed by a registered CUDA buffer
        pos = cache_position + self.tree_attn_mask.sum(-1).long() - 1
        out = self.base(tree_cand, position_ids=pos[None], tree_mask=self.tree_attn_mask, past_key_values=cache)
        tree_logits = out.logits[0, self.retrieve_indices.clamp(min=0)]
        cands = tree_cand[0, self.retrieve_indices.clamp(min=0)]
        valid_paths = (self.retrieve_indices[:, -1] != -1).nonzero()  # HAZARD: dynamic-shape
        probs = (tree_logits[:, :-1] / temperature).softmax(-1)
        p_tok = probs.gather(-1, cands[:, 1:, None]).squeeze(-1)
        ent = -(probs * probs.clamp_min(1e-10).log()).sum(-1)
        thresh = torch.minimum(torch.full_like(ent, self.posterior_threshold), self.posterior_alpha * torch.exp(-ent))  # HAZARD: python-scalar
        accept = (p_tok > thresh).cumprod(dim=1).sum(dim=1)
        best = accept.argmax()
        self.accept_hist.append(int(accept[best]))  # HAZARD: host-sync
        self.tok_times.append(time.time())  # HAZARD: host-code
        return cands[best], accept[best], best, valid_paths, out.hidden_states


class MedusaGenerator:
    def __init__(self, model, tokenizer, device="cuda"):
        self.model, self.tok, self.device = model.to(device).eval(), tokenizer, device
        self.verify = torch.compile(model.propose_and_verify, mode="max-autotune")

    @torch.inference_mode()
    def generate(self, prompt, temperature=0.7, max_new_tokens=512, posterior_threshold=0.09):
        self.model.posterior_threshold = posterior_threshold
        ids = self.tok(prompt, return_tensors="pt").input_ids.to(self.device)
        cache = self.model.base.new_static_cache(max_len=2048)
        out = self.model.base(ids, past_key_values=cache, output_hidden_states=True)
        h, last = out.hidden_states[-1][:, -1], out.logits[:, -1]
        seq, cur = [ids], ids.shape[1]
        t = torch.tensor(temperature, device=self.device)
        while cur - ids.shape[1] < max_new_tokens:
            medusa_logits = torch.stack([head(h) for head in self.model.heads], dim=1)
            cand, n_acc, best, _, hidden = self.verify(last, medusa_logits, torch.tensor(cur, device=self.device), cache, t)
            n = int(n_acc)  # CLEAN: eager read right after the compiled call returned
            accepted = cand[: n + 1].clone()
            cache.select_path(self.model.retrieve_indices[best], cur, n + 1)
            h = hidden[-1][0, self.model.retrieve_indices[best, n]].clone()[None]
            seq.append(accepted[None])
            cur += n + 1
            if (accepted == self.tok.eos_token_id).any():  # CLEAN: eager branch outside the compiled function
                break
            last = self.model.base.lm_head(h)
        return self.tok.decode(torch.cat(seq, dim=1)[0], skip_special_tokens=True)
