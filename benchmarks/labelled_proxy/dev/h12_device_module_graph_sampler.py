"""Device-agnostic capture of a sampling step; the sampler is built inside the region."""
import torch


class TopPSampler:
    def __init__(self, vocab_size, top_p=0.9, device="cuda"):
        self.top_p = top_p
        self.banned = torch.tensor([0, 1, 2], device=device)  # HAZARD: pinned-memory
        self.vocab_size = vocab_size

    def __call__(self, logits, noise):
        logits = logits.index_fill(-1, self.banned, float("-inf"))
        probs = logits.softmax(-1)
        sorted_p, sorted_idx = probs.sort(-1, descending=True)
        cum = sorted_p.cumsum(-1)
        sorted_p = sorted_p.masked_fill(cum - sorted_p > self.top_p, 0.0)  # CLEAN: mask fill, static shape
        choice = torch.argmax(sorted_p / noise, dim=-1, keepdim=True)
        if (choice >= self.vocab_size).any():  # HAZARD: dynamic-control-flow
            raise RuntimeError(f"sampled id out of range for vocab {self.vocab_size}")  # CLEAN: f-string of an int in a raise message
        return sorted_idx.gather(-1, choice)


def capture_sampling(device: str, batch: int, vocab: int):
    dev_mod = torch.get_device_module(device)
    static_logits = torch.zeros(batch, vocab, device=device)
    static_noise = torch.ones(batch, vocab, device=device)
    graph = dev_mod.CUDAGraph()
    graph_ctx = dev_mod.graph
    with graph_ctx(graph):  # HAZARD: api-misuse
        sampler = TopPSampler(vocab, device=device)
        static_ids = sampler(static_logits, static_noise)
    return graph, static_logits, static_noise, static_ids


def decode(model_step, first_ids, steps, device="cuda"):
    ids = first_ids
    g, s_logits, s_noise, s_ids = capture_sampling(device, ids.shape[0], 32000)
    out = []
    for _ in range(steps):
        s_logits.copy_(model_step(ids))
        s_noise.exponential_()
        g.replay()
        ids = s_ids.clone()  # CLEAN: cloned before the next replay overwrites it
        out.append(ids)
    return torch.cat(out, dim=1)
