import time
from typing import Optional

import torch
import torch._inductor.config

torch._inductor.config.coordinate_descent_tuning = True
torch._inductor.config.triton.unique_kernel_names = True


def multinomial_sample_one_no_sync(probs_sort):
    q = torch.empty_like(probs_sort).exponential_(1)
    return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)


def logits_to_probs(logits, temperature: float = 1.0, top_k: Optional[int] = None):
    logits = logits / max(temperature, 1e-5)  # HAZARD: python-scalar
    if top_k is not None:  # CLEAN: None check on a Python argument, resolved at trace time
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        pivot = v.select(-1, -1).unsqueeze(-1)
        logits = torch.where(logits < pivot, -float("Inf"), logits)
    return torch.nn.functional.softmax(logits, dim=-1)


def sample(logits, temperature: float = 1.0, top_k: Optional[int] = None):
    probs = logits_to_probs(logits[:, -1], temperature, top_k)
    return multinomial_sample_one_no_sync(probs), probs


def decode_one_token(model, x, input_pos, temperature, top_k):
    logits = model(x, input_pos)
    input_pos += 1  # HAZARD: static-address
    return sample(logits, temperature, top_k)


def decode_n_tokens(model, cur_token, input_pos, num_new_tokens, callback=lambda _: _, **sampling_kwargs):
    new_tokens, new_probs = [], []
    for _ in range(num_new_tokens):
        next_token, next_prob = decode_one_token(model, cur_token, input_pos, **sampling_kwargs)
        new_tokens.append(next_token)  # HAZARD: static-address
        new_probs.append(next_prob.clone())  # CLEAN: probabilities cloned before the next replay
        callback(new_tokens[-1])
        cur_token = next_token.view(1, -1)
    return new_tokens, new_probs


@torch.no_grad()
def generate(model, prompt, max_new_tokens, **sampling_kwargs):
    T = prompt.size(0)
    model.setup_caches(max_batch_size=1, max_seq_length=T + max_new_tokens)
    input_pos = torch.arange(0, T, device=prompt.device)
    logits = model(prompt.view(1, -1), input_pos)
    first, _ = sample(logits, **sampling_kwargs)
    input_pos = torch.tensor([T], device=prompt.device, dtype=torch.int)
    tokens, _ = decode_n_tokens(model, first.view(1, -1), input_pos, max_new_tokens - 1, **sampling_kwargs)
    return torch.cat([first.view(-1)] + [t.view(-1) for t in tokens])


def main(model, encode, decode, prompt="Hello, my name is", compile=True):
    global decode_one_token
    if compile:
        decode_one_token = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
    encoded = encode(prompt)
    for i, temperature in enumerate([0.2, 0.6, 0.8, 1.0]):
        t0 = time.perf_counter()
        y = generate(model, encoded, max_new_tokens=200, temperature=temperature, top_k=200)
        torch.cuda.synchronize()  # CLEAN: timing sync in the driver, outside the compiled function
        print(f"run {i}: {time.perf_counter() - t0:.2f}s")
        print(decode(y.tolist()))  # CLEAN: .tolist() on the final tokens, outside the compiled function
