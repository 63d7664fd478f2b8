"""Assisted generation (draft model proposes, target model verifies) with compiled steps.

Both models use static caches. The draft's one-token step and the target's
verification over the candidate window are compiled with mode="reduce-overhead".
`num_assistant_tokens` follows the "heuristic" schedule (+2 on full acceptance,
-1 otherwise) unless the schedule is "constant".
"""
from dataclasses import dataclass

import torch


@dataclass
class AssistantConfig:
    num_assistant_tokens: int = 5
    num_assistant_tokens_schedule: str = "heuristic"
    max_assistant_tokens: int = 8
    max_new_tokens: int = 256


class AssistedGenerator:
    def __init__(self, target, draft, tokenizer, cfg=AssistantConfig(), device="cuda"):
        self.target, self.draft, self.tok, self.cfg, self.device = target.eval(), draft.eval(), tokenizer, cfg, device
        self.draft_step = torch.compile(self._draft_step, mode="reduce-overhead")
        self.verify = torch.compile(self._verify, mode="reduce-overhead")

    def _draft_step(self, token, cur_len):
        pos = torch.full((1,), cur_len, dtype=torch.long, device=token.device)  # HAZARD: python-scalar
        logits = self.draft(token, cache_position=pos, past_key_values=self.draft_cache).logits
        return logits[:, -1].argmax(-1, keepdim=True)

    def _verify(self, window, cache_position):
        logits = self.target(window, cache_position=cache_position, past_key_values=self.target_cache).logits
        selected = logits.argmax(-1)
        candidate = window[:, 1:]
        mismatch = (candidate != selected[:, :-1]).int().cumsum(-1) < 1
        n_matches = int(mismatch.sum())  # HAZARD: host-sync
        return selected, n_matches

    @torch.inference_mode()
    def generate(self, prompt):
        ids = self.tok(prompt, return_tensors="pt").input_ids.to(self.device)
        self.target_cache = self.target.new_static_cache(max_len=4096)
        self.draft_cache = self.draft.new_static_cache(max_len=4096)
        pos = torch.arange(ids.shape[1], device=self.device)
        self.draft(ids, cache_position=pos, past_key_values=self.draft_cache)
        last = self.target(ids, cache_position=pos, past_key_values=self.target_cache).logits[:, -1:].argmax(-1)
        out, cur_len = [ids, last], ids.shape[1]
        k = self.cfg.num_assistant_tokens
        while cur_len - ids.shape[1] < self.cfg.max_new_tokens:
            candidates = [last]
            for j in range(k):
                tok = self.draft_step(candidates[-1], cur_len + j)
                candidates.append(tok)  # HAZARD: static-address
            window = torch.cat(candidates, dim=1)
            cache_position = torch.arange(cur_len, cur_len + k + 1, device=self.device)  # CLEAN: eager arange, passed as a tensor
            if self.cfg.num_assistant_tokens_schedule == "constant":
                selected, n = self.verify(window, cache_position)  # CLEAN: window length fixed by the constant schedule
            else:
                selected, n = self.verify(window, cache_position)  # HAZARD: dynamic-shape
            accepted = selected[:, : n + 1].clone()  # CLEAN: cloned before the next compiled call
            out.append(accepted)
            cur_len += n + 1
            self.draft_cache.crop(cur_len)
            self.target_cache.crop(cur_len)
            last = accepted[:, -1:]
            if self.cfg.num_assistant_tokens_schedule == "heuristic":
                k = min(k + 2, self.cfg.max_assistant_tokens) if n == k else max(1, k - 1)
            if (accepted == self.tok.eos_token_id).any().item():  # CLEAN: eager stop check between compiled calls
                break
        return self.tok.decode(torch.cat(out, dim=1)[0], skip_special_tokens=True)
