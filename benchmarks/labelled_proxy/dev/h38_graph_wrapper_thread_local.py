"""Capture wrapper in the style of a serving engine: thread_local capture of a step fn."""
import numpy as np
import torch


class CudaGraphWrapper:
    def __init__(self, fn, warmup_steps=2):
        self.fn = fn
        self.warmup_steps = warmup_steps
        self.graph = None
        self.kwargs = None
        self.result = None

    def __call__(self, **kwargs):
        if self.graph is None:
            self.kwargs = kwargs
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(self.warmup_steps):
                    self.fn(**kwargs)
            torch.cuda.current_stream().wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=stream, capture_error_mode="thread_local"):
                self.result = self.fn(**kwargs)
        else:
            for k, v in kwargs.items():
                self.kwargs[k].copy_(v)
        self.graph.replay()
        return self.result


def spec_verify_step(draft_tokens, target_logits, accept_thresh, step_idx):
    torch.cuda.manual_seed(0)  # HAZARD: rng
    probs = target_logits.softmax(-1)
    p_draft = probs.gather(-1, draft_tokens[..., None]).squeeze(-1)
    accepted = (p_draft > accept_thresh).int().cumprod(-1)
    n_acc = accepted.sum(-1)
    n_acc_host = n_acc.cpu().numpy()  # HAZARD: host-sync
    torch.cuda.current_stream().synchronize()  # HAZARD: host-sync
    bonus_pos = torch.as_tensor(np.minimum(n_acc_host, draft_tokens.shape[1] - 1), device="cuda")  # HAZARD: pinned-memory
    lengths_pinned = torch.empty(n_acc.shape, dtype=n_acc.dtype, pin_memory=True)  # HAZARD: pinned-memory
    lengths_pinned.copy_(n_acc + step_idx, non_blocking=True)
    if (n_acc == 0).all():  # HAZARD: dynamic-control-flow
        bonus_pos = torch.zeros_like(bonus_pos)
    bonus = probs.argmax(-1).gather(-1, bonus_pos[:, None])
    return accepted, bonus, lengths_pinned


def build(batch=16, k=4, vocab=32000):
    runner = CudaGraphWrapper(spec_verify_step)
    args = dict(
        draft_tokens=torch.zeros(batch, k, dtype=torch.long, device="cuda"),
        target_logits=torch.zeros(batch, k, vocab, device="cuda"),
        accept_thresh=torch.full((batch, 1), 0.3, device="cuda"),  # CLEAN: threshold kept as a device tensor
        step_idx=torch.zeros(1, dtype=torch.long, device="cuda"),
    )
    runner(**args)
    return runner, args
