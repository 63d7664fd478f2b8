"""GPT-2 story generator with a compiled logits-processor chain.

Processors and warpers mirror the transformers ones (repetition penalty,
no-repeat n-gram, min new tokens, temperature, top-p). The chain plus sampling is
compiled with mode="reduce-overhead"; the model forward runs eagerly with a
dynamic KV cache, so scores arrive as ordinary tensors.
"""
import torch


class RepetitionPenaltyLogitsProcessor:
    def __init__(self, penalty):
        self.penalty = penalty

    def __call__(self, input_ids, scores):
        score = torch.gather(scores, 1, input_ids)
        score = torch.where(score < 0, score * self.penalty, score / self.penalty)
        scores.scatter_(1, input_ids, score)  # HAZARD: static-address
        return scores


class NoRepeatNGramLogitsProcessor:
    def __init__(self, ngram_size):
        self.n = ngram_size

    def __call__(self, input_ids, scores):
        for b, seq in enumerate(input_ids.tolist()):  # HAZARD: host-sync
            prefix = tuple(seq[-(self.n - 1):])
            banned = [seq[i + self.n - 1] for i in range(len(seq) - self.n + 1) if tuple(seq[i:i + self.n - 1]) == prefix]
            scores[b, banned] = -float("inf")
        return scores


class MinNewTokensLogitsProcessor:
    def __init__(self, prompt_len, min_new_tokens, eos_token_id):
        self.prompt_len, self.min_new_tokens, self.eos = prompt_len, min_new_tokens, eos_token_id
        self.cur_len = prompt_len

    def __call__(self, input_ids, scores):
        if self.cur_len - self.prompt_len < self.min_new_tokens:  # HAZARD: python-scalar
            scores[:, self.eos] = -float("inf")
        return scores


class TopPTemperatureWarper:
    def __init__(self, top_p, temperature):
        self.top_p, self.temperature = top_p, temperature

    def __call__(self, input_ids, scores):
        scores = scores / self.temperature  # CLEAN: temperature fixed at construction, never changed
        sorted_logits, sorted_idx = torch.sort(scores, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum > self.top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        mask = remove.scatter(1, sorted_idx, remove)
        return scores.masked_fill(mask, -float("inf"))  # CLEAN: out-of-place masked_fill, fixed shape


class StoryGenerator:
    def __init__(self, model, tokenizer, top_p=0.92, temperature=0.8, device="cuda"):
        self.model, self.tok, self.device = model.eval(), tokenizer, device
        self.warper = TopPTemperatureWarper(top_p, temperature)
        self.min_len = MinNewTokensLogitsProcessor(0, 0, tokenizer.eos_token_id)
        self.processors = [RepetitionPenaltyLogitsProcessor(1.15), NoRepeatNGramLogitsProcessor(3), self.min_len]
        self.select = torch.compile(self._select, mode="reduce-overhead")

    def _select(self, input_ids, scores):
        for proc in self.processors:
            scores = proc(input_ids, scores)
        probs = self.warper(input_ids, scores).softmax(-1)
        return torch.multinomial(probs, 1)  # CLEAN: default-generator sampling is capturable

    @torch.inference_mode()
    def write(self, prompt, max_new_tokens=200, min_new_tokens=50):
        ids = self.tok(prompt, return_tensors="pt").input_ids.to(self.device)
        self.min_len.prompt_len = self.min_len.cur_len = ids.shape[1]
        self.min_len.min_new_tokens = min_new_tokens
        out = self.model(ids, use_cache=True)
        past = out.past_key_values
        for _ in range(max_new_tokens):
            scores = out.logits[:, -1, :].float()
            nxt = self.select(ids, scores)  # HAZARD: dynamic-shape
            ids = torch.cat([ids, nxt], dim=1)  # CLEAN: the sampled token is copied into a new tensor at once
            self.min_len.cur_len += 1
            if nxt.item() == self.tok.eos_token_id:  # CLEAN: eager check after the compiled call returned
                break
            out = self.model(nxt.clone(), past_key_values=past, use_cache=True)
            past = out.past_key_values
        return self.tok.decode(ids[0], skip_special_tokens=True)
