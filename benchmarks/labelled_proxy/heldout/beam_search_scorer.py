from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class BeamState:
    tokens: torch.Tensor       # (batch, beams, cur_len)
    scores: torch.Tensor       # (batch, beams)
    finished: torch.Tensor     # (batch, beams) bool


class BeamScorer:
    def __init__(self, num_beams: int, eos_id: int, length_penalty: float = 1.0, early_stopping: str = "heuristic"):
        self.num_beams = num_beams
        self.eos_id = eos_id
        self.length_penalty = length_penalty
        self.early_stopping = early_stopping
        self.step = torch.compile(self._step, mode="max-autotune")

    def _step(self, log_probs: torch.Tensor, state: BeamState, cur_len: int) -> Optional[BeamState]:
        B, K, V = log_probs.shape
        scores = log_probs + state.scores.unsqueeze(-1)
        scores = scores.masked_fill(state.finished.unsqueeze(-1), -1e9)  # CLEAN: masked_fill keeps the shape static
        top_scores, top_idx = scores.view(B, -1).topk(2 * K, dim=-1)
        beam_idx, token_idx = top_idx // V, top_idx % V
        eos_hits = torch.where(token_idx == self.eos_id)  # HAZARD: dynamic-shape
        if (top_scores < -1e8).all():  # HAZARD: dynamic-control-flow
            return None
        normalized = top_scores / (cur_len ** self.length_penalty)  # HAZARD: python-scalar
        best_beam = normalized[:, 0].argmax().item()  # HAZARD: host-sync
        print("beam scores:", normalized[0, :K])  # HAZARD: host-sync
        keep = normalized[:, :K]
        src = beam_idx[:, :K]
        tokens = torch.cat([state.tokens.gather(1, src.unsqueeze(-1).expand(-1, -1, state.tokens.shape[-1])),
                            token_idx[:, :K].unsqueeze(-1)], dim=-1)
        finished = state.finished.gather(1, src) | (token_idx[:, :K] == self.eos_id)
        if self.early_stopping == "never":  # CLEAN: string comparison on a config value
            finished = torch.zeros_like(finished)
        return BeamState(tokens, keep, finished)


def beam_search(model, input_ids, num_beams=4, max_new_tokens=64, eos_id=2):
    scorer = BeamScorer(num_beams, eos_id)
    B = input_ids.shape[0]
    state = BeamState(input_ids[:, None, :].expand(-1, num_beams, -1).contiguous(),
                      torch.zeros(B, num_beams, device=input_ids.device),
                      torch.zeros(B, num_beams, dtype=torch.bool, device=input_ids.device))
    for _ in range(max_new_tokens):
        logits = model(state.tokens.flatten(0, 1))[:, -1].view(B, num_beams, -1)
        nxt = scorer.step(logits.log_softmax(-1), state, state.tokens.shape[-1])
        if nxt is None:
            break
        state = nxt
        if state.finished.all():  # CLEAN: host-side check in the eager driver loop, outside the compiled scorer
            break
    return state
