"""Beam-search step for the NMT decoder, captured once per beam width.

The encoder runs eagerly per request; only the fixed-shape decoder step plus
beam pruning is graphed. Stochastic beam search perturbs scores with Gumbel noise.
"""
import logging

import torch
import torch.nn.functional as F

log = logging.getLogger("nmt.beam")


class BeamStepRunner:
    def __init__(self, decoder, d_model, max_src, max_len, beam_widths=(1, 4, 8), eos_id=2, banned_ids=(0, 3)):
        self.decoder = decoder
        self.d_model, self.max_src, self.max_len = d_model, max_src, max_len
        self.eos_id = eos_id
        self.banned_ids = list(banned_ids)
        self.length_penalty = 1.0
        self.beam_widths = sorted(beam_widths, reverse=True)
        self.graphs, self.bufs = {}, {}
        self.pool = torch.cuda.graph_pool_handle()
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(17)

    def _alloc(self, bw):
        dev = torch.device("cuda")
        return {
            "tokens": torch.full((bw, self.max_len), self.eos_id, dtype=torch.long, device=dev),
            "memory": torch.zeros(bw, self.max_src, self.d_model, device=dev, dtype=torch.half),
            "pos": torch.zeros(1, dtype=torch.long, device=dev),
            "scores": torch.zeros(bw, device=dev),
            "lengths": torch.ones(bw, device=dev),
        }

    def _length_norm(self, cand, lengths):
        lp = ((5.0 + lengths) / 6.0) ** self.length_penalty  # HAZARD: python-scalar
        return cand / lp

    def _perturb(self, cand):
        u = torch.rand(cand.shape, device=cand.device, generator=self.noise_gen)  # HAZARD: rng
        return cand - torch.log(-torch.log(u.clamp_min(1e-9)))

    def _step(self, b):
        logits = self.decoder(b["tokens"], b["memory"], b["pos"])
        logp = F.log_softmax(logits.float(), dim=-1)
        banned = torch.tensor(self.banned_ids, device=logp.device)  # HAZARD: host-sync
        logp = logp.index_fill(1, banned, float("-inf"))
        bw = b["scores"].shape[0]
        last = b["tokens"].gather(1, b["pos"].expand(bw, 1)).squeeze(1)
        done = last.eq(self.eos_id)  # CLEAN: eos_id is fixed at construction, never changes between replays
        if done.all():  # HAZARD: dynamic-control-flow
            return b["scores"], last
        logp = torch.where(done[:, None], torch.full_like(logp, -1e4), logp)
        cand = self._length_norm(b["scores"][:, None] + logp, b["lengths"][:, None] + 1.0)
        cand = self._perturb(cand)
        top, flat = cand.view(-1).topk(bw)  # CLEAN: k is the static beam width, not data dependent
        src_beam = torch.div(flat, logp.shape[-1], rounding_mode="floor")
        tok = flat % logp.shape[-1]
        b["tokens"].copy_(b["tokens"].index_select(0, src_beam))
        b["tokens"].scatter_(1, (b["pos"] + 1).expand(bw, 1), tok[:, None])
        b["scores"].copy_(top)
        b["lengths"].add_((~done).float())
        return top, tok

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        for bw in self.beam_widths:
            b = self._alloc(bw)
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._step(b)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                log.info("capturing beam step")  # CLEAN: plain string, logged once at capture time
                b["out"] = self._step(b)
            self.graphs[bw], self.bufs[bw] = g, b

    @torch.no_grad()
    def generate(self, memory, bos_id, beam_width, length_penalty=1.0):
        b = self.bufs[beam_width]
        self.length_penalty = length_penalty
        b["memory"].copy_(memory.expand(beam_width, -1, -1))  # CLEAN: copy_ into the static input buffer
        b["tokens"].fill_(self.eos_id)
        b["tokens"][:, 0] = bos_id
        b["pos"].zero_()
        b["scores"].fill_(-1e4)
        b["scores"][0] = 0.0
        b["lengths"].fill_(1.0)
        step_tokens = []
        for _ in range(self.max_len - 1):
            self.graphs[beam_width].replay()
            step_tokens.append(b["out"][1])  # HAZARD: static-address
            b["pos"].add_(1)
        best = b["scores"].argmax()
        return b["tokens"][best].clone(), step_tokens
