"""Speculative decoding: draft proposals and target verification are captured in one graph."""
import time

import torch
import torch.nn as nn


class SpecDecodeGraph:
    def __init__(self, draft: nn.Module, target: nn.Module, batch=8, num_spec=4, vocab=32000, seed=0):
        self.draft, self.target = draft.cuda().eval(), target.cuda().eval()
        self.num_spec, self.vocab = num_spec, vocab
        self.last_tok = torch.zeros(batch, 1, dtype=torch.long, device="cuda")
        self.pos = torch.zeros(batch, dtype=torch.long, device="cuda")
        self.host_hint = [0] * batch
        self.sample_gen = torch.Generator(device="cuda")
        self.sample_gen.manual_seed(seed)
        self.accept_gen = torch.Generator(device="cuda")
        self.accept_gen.manual_seed(seed + 1)
        self.draft_step = torch.compile(self._draft_step, mode="max-autotune-no-cudagraphs")
        self.target_logits = torch.compile(self.target)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.register_generator_state(self.accept_gen)

    def _draft_step(self, tok, pos):
        logits = self.draft(tok, pos)[:, -1]
        noise = torch.rand(logits.shape, device="cuda", generator=self.sample_gen)  # HAZARD: rng
        return torch.argmax(logits.softmax(-1) / -noise.log(), dim=-1, keepdim=True)

    def _verify(self):
        toks, tok = [], self.last_tok
        for i in range(self.num_spec):  # CLEAN: loop count is a constant of the runner
            tok = self.draft_step(tok, self.pos + i)  # HAZARD: api-misuse
            toks.append(tok)
        proposal = torch.cat([self.last_tok] + toks, dim=1)
        hint = torch.tensor(self.host_hint, dtype=torch.long).pin_memory()  # HAZARD: pinned-memory
        pos = self.pos + hint.to("cuda", non_blocking=True)
        logits = self.target_logits(proposal, pos)  # CLEAN: default-mode compiled target, warmed up on the capture stream before capture
        self.last_verify_t = time.monotonic()  # HAZARD: host-code
        p_target = logits[:, :-1].softmax(-1).gather(-1, proposal[:, 1:, None]).squeeze(-1)
        u = torch.rand(p_target.shape, device="cuda", generator=self.accept_gen)  # CLEAN: generator registered with the graph
        accept = (u < p_target).int().cumprod(-1)
        n_accept = accept.sum(-1)  # CLEAN: acceptance count stays a device tensor
        accepted = proposal[:, 1 : n_accept.min() + 1]  # HAZARD: dynamic-shape
        self.pos.add_(n_accept + 1)
        bonus = logits.gather(1, n_accept.view(-1, 1, 1).expand(-1, 1, logits.shape[-1])).argmax(-1)
        self.last_tok.copy_(bonus)
        return proposal, n_accept, accepted

    @torch.inference_mode()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.target_logits(torch.zeros(self.last_tok.shape[0], self.num_spec + 1, dtype=torch.long,
                                               device="cuda"), self.pos)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph, stream=s):
            self.static = self._verify()

    def step(self, hints):
        self.host_hint[:] = hints
        self.graph.replay()
        proposal, n_accept, _ = self.static
        return proposal.clone(), n_accept.clone()
