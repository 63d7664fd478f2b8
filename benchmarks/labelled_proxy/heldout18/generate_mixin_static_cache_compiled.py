"""GenerationMixin-style `generate()` for a model library with a static KV cache.

Follows the HF recipe: the model keeps a preallocated cache (registered buffers),
the one-token decode step is compiled with mode="reduce-overhead", and prefill is
compiled separately without CUDA graphs. Logits processors run inside the compiled
decode step so that sampling stays on the device.
"""
from dataclasses import dataclass

import torch


@dataclass
class GenerationConfig:
    max_new_tokens: int = 128
    temperature: float = 1.0
    repetition_penalty: float = 1.0
    top_k: int = 50
    eos_token_id: int = 2
    compile_mode: str = "reduce-overhead"


class RepetitionPenalty:
    def __init__(self, penalty):
        self.penalty = penalty

    def __call__(self, seen_ids, logits):
        for tok in set(seen_ids[0].tolist()):  # HAZARD: host-sync
            logits[:, tok] = torch.where(logits[:, tok] > 0, logits[:, tok] / self.penalty,
                                         logits[:, tok] * self.penalty)
        return logits


class StaticCacheGenerator:
    def __init__(self, model, config: GenerationConfig):
        self.model, self.config = model, config
        self.temperature = config.temperature
        self.processor = RepetitionPenalty(config.repetition_penalty)
        self.decode_step = torch.compile(self._decode_step, mode=config.compile_mode, fullgraph=False)
        self.prefill = torch.compile(self._prefill, mode="max-autotune-no-cudagraphs", dynamic=True)

    def _prefill(self, input_ids, cache_position):
        logits = self.model(input_ids, cache_position=cache_position)
        return logits[:, -1].argmax(-1, keepdim=True)

    def _decode_step(self, input_ids, cache_position, seen_ids):
        logits = self.model(input_ids, cache_position=cache_position)[:, -1].float()
        logits = self.processor(seen_ids, logits)
        temp = self.temperature  # HAZARD: python-scalar
        logits = logits / temp
        kth = torch.topk(logits, self.config.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
        return torch.multinomial(logits.softmax(-1), num_samples=1)  # CLEAN: multinomial stays in the graph

    @torch.inference_mode()
    def generate(self, input_ids, temperature=None, use_compiled_prefill=True):
        self.temperature = temperature if temperature is not None else self.config.temperature
        prompt_len = input_ids.size(1)
        pos = torch.arange(prompt_len, device=input_ids.device)
        if use_compiled_prefill:
            next_tok = self.prefill(input_ids, pos)
        else:
            next_tok = self.decode_step(input_ids, pos, input_ids).clone()  # HAZARD: dynamic-shape
        seen = input_ids.new_zeros(input_ids.size(0), self.config.max_new_tokens + prompt_len)
        seen[:, :prompt_len] = input_ids
        tokens, step_logs = [next_tok], []
        for i in range(self.config.max_new_tokens - 1):
            cur = prompt_len + i
            seen[:, cur] = next_tok.squeeze(-1)
            pos = torch.tensor([cur], device=input_ids.device)  # CLEAN: built eagerly between compiled calls
            next_tok = self.decode_step(next_tok.clone(), pos, seen)  # CLEAN: the fed-back token is cloned
            tokens.append(next_tok)  # HAZARD: static-address
            step_logs.append(next_tok.clone())  # CLEAN: cloned before the next step overwrites it
            if (next_tok == self.config.eos_token_id).all():  # CLEAN: eager check right after the call, outside the compiled step
                break
        self.last_trace = step_logs
        return torch.cat(tokens, dim=1)
