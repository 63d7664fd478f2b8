"""BART-large-CNN beam search with the per-step bookkeeping compiled.

The decoder step and the beam bookkeeping (log-softmax, length penalty, top-k over
beams, cache reordering) are compiled with options={"triton.cudagraphs": True};
finished hypotheses are collected on the host after each step.
"""
import logging

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)
CG = {"triton.cudagraphs": True}


class BeamHypotheses:
    def __init__(self, num_beams, length_penalty):
        self.num_beams, self.length_penalty, self.beams = num_beams, length_penalty, []

    def add(self, tokens, score):
        self.beams.append((score / (len(tokens) ** self.length_penalty), tokens))
        self.beams = sorted(self.beams, key=lambda b: -b[0])[: self.num_beams]


class BartBeamSearcher:
    def __init__(self, model, tokenizer, num_beams=4, max_length=142, length_penalty=2.0, device="cuda"):
        self.model, self.tok, self.device = model.eval(), tokenizer, device
        self.num_beams, self.max_length, self.length_penalty = num_beams, max_length, length_penalty
        self.cfg = model.config
        self.decode = torch.compile(model.decode_one, options=CG)
        self.beam_step = torch.compile(self._beam_step, options=CG)
        self.rescore = torch.compile(self._rescore)  # default mode, used offline

    def _beam_step(self, logits, beam_scores, finished, cur_len):
        bsz = beam_scores.shape[0] // self.num_beams
        logprobs = F.log_softmax(logits[:, -1].float(), dim=-1)
        if cur_len < self.cfg.min_length:  # HAZARD: python-scalar
            logprobs[:, self.cfg.eos_token_id] = -float("inf")
        beam_scores.masked_fill_(finished, -1e9)  # HAZARD: static-address
        cand = (logprobs + beam_scores[:, None]).view(bsz, -1)
        top_scores, top_ids = torch.topk(cand, 2 * self.num_beams, dim=1)  # CLEAN: topk has a fixed output shape
        vocab = logprobs.shape[-1]
        beam_origin = torch.div(top_ids, vocab, rounding_mode="floor")
        tokens = top_ids % vocab
        eos_hits = (tokens == self.cfg.eos_token_id).nonzero()  # HAZARD: dynamic-shape
        log.debug("beam step %d: best running score %s", cur_len, top_scores[:, 0])  # HAZARD: host-code
        return top_scores, beam_origin, tokens, eos_hits

    def _rescore(self, logits, labels):
        nll = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none").sum(-1)
        log.info("rescored %d candidates, best nll %.3f", nll.numel(), nll.min().item())  # CLEAN: default torch.compile, no CUDA graphs
        return nll

    @torch.inference_mode()
    def generate(self, articles):
        enc = self.tok(articles, max_length=1024, truncation=True, padding="max_length", return_tensors="pt").to(self.device)
        memory = self.model.encode(enc.input_ids, enc.attention_mask).repeat_interleave(self.num_beams, dim=0)
        bsz = len(articles)
        beam_scores = torch.zeros(bsz, self.num_beams, device=self.device)
        beam_scores[:, 1:] = -1e9
        beam_scores = beam_scores.view(-1)
        seqs = torch.full((bsz * self.num_beams, 1), self.cfg.decoder_start_token_id, device=self.device)
        hyps = [BeamHypotheses(self.num_beams, self.length_penalty) for _ in range(bsz)]
        cache = self.model.init_static_cache(bsz * self.num_beams, self.max_length)
        finished = torch.zeros_like(beam_scores, dtype=torch.bool)
        pos = torch.zeros(1, dtype=torch.long, device=self.device)
        for cur_len in range(1, self.max_length):
            logits = self.decode(seqs[:, -1:], memory, cache, pos)  # CLEAN: position passed as a device tensor
            top_scores, origin, tokens, eos_hits = self.beam_step(logits.clone(), beam_scores, finished, cur_len)
            for b, k in eos_hits.tolist():  # CLEAN: eager host read after the compiled step returned
                if k < self.num_beams:
                    src = b * self.num_beams + origin[b, k].item()
                    hyps[b].add(seqs[src, 1:].tolist(), top_scores[b, k].item())
            keep = (tokens != self.cfg.eos_token_id).float().argsort(dim=1, descending=True, stable=True)[:, : self.num_beams]
            sel = lambda t: t.gather(1, keep)
            flat_src = (sel(origin) + torch.arange(bsz, device=self.device)[:, None] * self.num_beams).view(-1)
            seqs = torch.cat([seqs.index_select(0, flat_src), sel(tokens).view(-1, 1)], dim=1)
            cache.reorder(flat_src)  # CLEAN: index_select with CUDA beam indices, eager
            beam_scores = sel(top_scores).view(-1).clone()
            pos += 1
            done = [len(h.beams) == self.num_beams for h in hyps]
            finished = torch.tensor(done, device=self.device).repeat_interleave(self.num_beams)  # CLEAN: eager upload between compiled calls
            if all(done):
                break
        return [self.tok.decode(h.beams[0][1], skip_special_tokens=True) if h.beams else "" for h in hyps]
