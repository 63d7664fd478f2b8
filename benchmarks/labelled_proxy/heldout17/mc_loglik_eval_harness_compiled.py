"""Multiple-choice log-likelihood evaluation harness (lm-eval style) for causal LMs.

Each document expands to (context + choice) sequences; the harness sums the log-probs of
the continuation tokens and reports acc / acc_norm. The scorer is compiled with the mode
named in the run profile.
"""
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class HarnessConfig:
    compile_mode: str = "reduce-overhead"
    pad_to: int = 512
    max_choices: int = 8
    time_budget_s: float = 4 * 3600.0


PROFILES = {"full": HarnessConfig(), "ci": HarnessConfig(compile_mode="max-autotune-no-cudagraphs")}


class MultipleChoiceHarness:
    def __init__(self, model, tokenizer, profile="full"):
        self.model = model.eval().cuda()
        self.tok = tokenizer
        self.cfg = PROFILES[profile]
        self.score = torch.compile(self._score, mode=self.cfg.compile_mode)
        self.started = time.time()
        self.tokens_scored = 0

    def _score(self, ids, cont_mask):
        logits = self.model(ids).logits[:, :-1].float()
        logp = F.log_softmax(logits, -1)
        tok_lp = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # CLEAN: gather with a CUDA index tensor
        tok_lp = tok_lp * cont_mask[:, 1:]
        total = tok_lp.sum(-1)
        if torch.isinf(total).any():  # HAZARD: dynamic-control-flow
            total = total.clamp(min=-1e4)
        self.tokens_scored += cont_mask.sum().item()  # HAZARD: host-sync
        if time.time() - self.started > self.cfg.time_budget_s:  # HAZARD: host-code
            raise TimeoutError("evaluation budget exhausted")
        greedy = (logits.argmax(-1) == ids[:, 1:]) | (cont_mask[:, 1:] == 0)
        return total, greedy.all(-1)

    def _encode(self, doc):
        ctx = self.tok(doc["query"])["input_ids"]
        rows, masks = [], []
        for choice in doc["choices"]:
            cont = self.tok(" " + choice)["input_ids"]
            rows.append(torch.tensor(ctx + cont))
            masks.append(torch.tensor([0] * len(ctx) + [1] * len(cont)))
        ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
        mask = torch.nn.utils.rnn.pad_sequence(masks, batch_first=True)
        return ids.cuda(), mask.cuda().float(), [len(c) for c in doc["choices"]]

    @torch.no_grad()
    def run(self, docs):
        acc = acc_norm = 0
        for doc in docs:
            ids, mask, lens = self._encode(doc)
            lp, _ = self.score(ids, mask)  # HAZARD: dynamic-shape
            lp = lp.cpu()  # CLEAN: host copy right after the call, before any other compiled call
            acc += int(lp.argmax() == doc["gold"])
            acc_norm += int((lp / torch.tensor(lens)).argmax() == doc["gold"])
        return acc / len(docs), acc_norm / len(docs)

    @torch.no_grad()
    def run_padded(self, docs):
        acc = 0
        for doc in docs:
            ids, mask, _ = self._encode(doc)
            ids = F.pad(ids, (0, self.cfg.pad_to - ids.shape[1], 0, self.cfg.max_choices - ids.shape[0]))
            mask = F.pad(mask, (0, self.cfg.pad_to - mask.shape[1], 0, self.cfg.max_choices - mask.shape[0]))
            lp, _ = self.score(ids, mask)  # CLEAN: padded to one fixed shape
            n = len(doc["choices"])
            acc += int(lp[:n].argmax().item() == doc["gold"])
        return acc / len(docs)
