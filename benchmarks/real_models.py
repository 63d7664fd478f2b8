"""Factories for models written elsewhere, for `cgkit scaffold`/`smoke` (--model / --inputs REFs).

The models' own files are not part of cgkit: they are fetched (benchmarks/real_code/projects.json
names the commits) and copied, unchanged, into `.realcode/` at the repository root, which git ignores:

    .realcode/nanogpt_model.py   karpathy/nanoGPT 3adf61e, model.py
    .realcode/gptfast_model.py   meta-pytorch/gpt-fast 32971d3, model.py

nanoGPT's GPT takes `idx` (and `targets`) and returns `(logits, loss)`, with `loss` None without
targets; gpt-fast's Transformer decodes one token at `input_pos` into its KV cache (a stateful model
whose caches and masks are plain attributes, made where `setup_caches` runs).
"""

import importlib.util
import sys
from pathlib import Path

import torch

REALCODE = Path(__file__).resolve().parent.parent / ".realcode"


def _load(name: str):
    path = REALCODE / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: copy the project's model.py there (see this file's docstring)")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # importable by name: Dynamo imports the modules of the code it inlines
    spec.loader.exec_module(module)
    return module


# --- nanoGPT: keyword inputs, a (logits, None) or (logits, loss) tuple out ---------------------------

def nanogpt_model():
    nano = _load("nanogpt_model")
    return nano.GPT(nano.GPTConfig(block_size=64, vocab_size=1024, n_layer=4, n_head=4, n_embd=128, dropout=0.0))


def nanogpt_inputs():
    return {"idx": torch.randint(0, 1024, (4, 32))}


def nanogpt_train_inputs():
    ids = torch.randint(0, 1024, (4, 33))
    return {"idx": ids[:, :-1].contiguous(), "targets": ids[:, 1:].contiguous()}  # nanoGPT views targets


def nanogpt_loss(output, idx, targets):
    """nanoGPT computes its own loss when given targets: the second element of its output."""
    return output[1]


# --- gpt-fast: one decode step into a KV cache, at a position given as a tensor ----------------------

def gptfast_model():
    gf = _load("gptfast_model")
    model = gf.Transformer(gf.ModelArgs(block_size=128, vocab_size=1024, n_layer=4, n_head=8, dim=256))
    # gpt-fast makes its caches under the target device (generate.py does the same): freqs_cis and
    # causal_mask are attributes, not buffers, so .cuda() would not move them.
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model.setup_caches(max_batch_size=1, max_seq_length=64)
    return model


def gptfast_decode_inputs():
    return {"idx": torch.randint(0, 1024, (1, 1)), "input_pos": torch.tensor([5])}
