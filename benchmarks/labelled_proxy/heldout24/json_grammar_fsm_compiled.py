"""Grammar-constrained tool-call decoding: a JSON-schema FSM masks the logits.

The FSM transition table and per-state allow masks live on the GPU, so the masking
and greedy pick are compiled with reduce-overhead.  The prefill path is compiled
without CUDA graphs because prompt lengths vary.
"""
import logging

import torch
import torch.nn.functional as F

log = logging.getLogger("toolcall.fsm")


class SchemaFSM:
    def __init__(self, allow_masks: torch.Tensor, transitions: torch.Tensor, start: int, accept: set):
        self.allow = allow_masks.cuda()          # [n_states, vocab] bool
        self.trans = transitions.cuda()          # [n_states, vocab] long
        self.start = start
        self.accept = accept


class ConstrainedDecoder:
    def __init__(self, lm, fsm: SchemaFSM, max_len=256):
        self.lm = lm.eval().cuda()
        self.fsm = fsm
        self.max_len = max_len
        self.temperature = 1.0
        self.step = torch.compile(self._step, mode="reduce-overhead")
        self.prefill = torch.compile(self._prefill, mode="max-autotune-no-cudagraphs", dynamic=True)

    def _prefill(self, ids):
        print("prefill", ids.shape)  # CLEAN: no CUDA graphs in this compile
        return self.lm(ids)[:, -1]

    def _step(self, last_logits, state):
        allowed = self.fsm.allow[state]  # CLEAN: device gather with a tensor index
        masked = torch.where(allowed, last_logits, torch.full_like(last_logits, float("-inf")))
        scaled = masked / self.temperature  # HAZARD: python-scalar
        probs = F.softmax(scaled.float(), dim=-1)
        tok = probs.argmax(dim=-1)
        nxt_state = self.fsm.trans[state, tok]
        log.debug("fsm %s -> %s", state, nxt_state)  # HAZARD: host-code
        return tok, nxt_state

    @torch.no_grad()
    def decode(self, prompt_ids: torch.Tensor, temperature: float = 1.0):
        self.temperature = temperature
        ids = prompt_ids.cuda()
        logits = self.prefill(ids)
        state = torch.full((ids.shape[0],), self.fsm.start, dtype=torch.long, device="cuda")
        out_tokens, states = [], []
        for _ in range(self.max_len):
            tok, nxt = self.step(logits, state)
            out_tokens.append(tok.clone())  # CLEAN: cloned before the next replay
            states.append(nxt)  # HAZARD: static-address
            state = nxt.clone()
            ids = torch.cat([ids, tok[:, None]], dim=1)
            logits = self.lm(ids)[:, -1]
            if int(state[0]) in self.fsm.accept:  # CLEAN: eager host check, outside the compiled step
                break
        return torch.stack(out_tokens, dim=1), states


class WholeSeqValidator:
    """Re-scores a finished tool call against the schema in one compiled pass."""

    def __init__(self, lm, fsm):
        self.lm, self.fsm = lm, fsm
        self.score = torch.compile(self._score, mode="reduce-overhead")

    def _score(self, ids):
        logp = F.log_softmax(self.lm(ids).float(), dim=-1)
        tok_lp = logp[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)
        bad = tok_lp < -20.0
        if bad.any():  # HAZARD: dynamic-control-flow
            tok_lp = tok_lp.clamp(min=-20.0)
        return tok_lp.sum(dim=-1)

    def validate(self, calls):
        scores = []
        for ids in calls:
            s = self.score(ids.cuda())  # HAZARD: dynamic-shape
            scores.append(s.clone())  # CLEAN: cloned
        return torch.cat(scores)
