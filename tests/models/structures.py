"""Models shaped like real ones at their edges: keyword and (args, kwargs) inputs, token ids and
boolean masks, non-tensor arguments; outputs that are dicts, nested tuples and lists, dataclasses,
namedtuples and mapping objects in the style of Hugging Face's ModelOutput.

Each `build_*` has an `inputs_*` factory for `--model` / `--inputs`. The recipes must run all of
them unchanged, in every workflow (tests/test_recipe_structures.py renders them on the CPU;
tests/gpu/test_structures_gpu.py proves them on a GPU).
"""

import dataclasses
from collections import OrderedDict
from typing import NamedTuple

import torch

VOCAB, WIDTH, TOKENS, BATCH = 100, 64, 16, 4


class Block(torch.nn.Module):
    def __init__(self, width=WIDTH):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.proj(self.norm(x)))


# --- A dict output with a nested tuple and list, and a constant that is not a tensor ---------------


class DictHeads(torch.nn.Module):
    def __init__(self, depth=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(depth))
        self.head = torch.nn.Linear(WIDTH, 8)

    def forward(self, x):
        hidden = [x]
        for block in self.blocks:
            hidden.append(block(hidden[-1]))
        return {"logits": self.head(hidden[-1]), "aux": (hidden[1], [hidden[2], hidden[3]]), "depth": len(self.blocks)}


def build_dict():
    return DictHeads()


def inputs_dict():
    return (torch.randn(BATCH, WIDTH),)


# --- Keyword arguments (token ids and a boolean mask) in, a dataclass holding a namedtuple out -----


class Pair(NamedTuple):
    first: torch.Tensor
    last: torch.Tensor


@dataclasses.dataclass
class EncoderOutput:
    logits: torch.Tensor
    hidden: Pair
    tokens_seen: int


class MaskedEncoder(torch.nn.Module):
    """Embeds token ids, zeroes the padded positions (mask False), pools over the valid ones."""

    def __init__(self, depth=4):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.blocks = torch.nn.Sequential(*(Block() for _ in range(depth)))
        self.head = torch.nn.Linear(WIDTH, 8)

    def forward(self, input_ids, attention_mask):
        keep = attention_mask.unsqueeze(-1).to(self.embed.weight.dtype)
        x = self.embed(input_ids) * keep
        hidden = self.blocks(x)
        pooled = (hidden * keep).sum(1) / keep.sum(1).clamp(min=1)
        return EncoderOutput(self.head(pooled), Pair(x, hidden), input_ids.shape[1])


def build_dataclass():
    return MaskedEncoder()


def inputs_kwargs():
    ids = torch.randint(0, VOCAB, (BATCH, TOKENS))
    mask = torch.ones(BATCH, TOKENS, dtype=torch.bool)
    mask[:, TOKENS * 3 // 4:] = False  # the last quarter is padding
    return {"input_ids": ids, "attention_mask": mask}


# --- An (args, kwargs) pair with a non-tensor argument in, a mapping object out ---------------------


@dataclasses.dataclass
class MappingOutput(OrderedDict):
    """A dataclass that is also an ordered mapping, as Hugging Face's ModelOutput is: fields that are
    not None are its items, and setting an item sets the attribute too."""

    logits: torch.Tensor | None = None
    hidden_states: tuple | None = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


class TinyLM(torch.nn.Module):
    def __init__(self, depth=4):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(depth))
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, input_ids, mask=None, temperature=1.0, output_hidden_states=False):
        x = self.embed(input_ids)
        states = [x]
        for block in self.blocks:
            x = block(x)
            states.append(x)
        logits = self.head(x) / temperature
        if mask is not None:
            logits = logits.masked_fill(~mask.unsqueeze(-1), 0.0)
        return MappingOutput(logits=logits, hidden_states=tuple(states) if output_hidden_states else None)


def build_mapping():
    return TinyLM()


def inputs_args_kwargs():
    ids = torch.randint(0, VOCAB, (BATCH, TOKENS))
    mask = torch.rand(BATCH, TOKENS) < 0.9
    return (ids,), {"mask": mask, "temperature": 0.5, "output_hidden_states": True}


# --- A Python value in the output that changes on every call: frozen by a graph -------------------


class CountingModel(torch.nn.Module):
    """Counts its calls in a Python int and returns the count: eager counts, a replay cannot."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(WIDTH, WIDTH)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return {"y": self.layer(x), "calls": self.calls}


def build_counting():
    return CountingModel()


# --- No floating-point output: the stand-in training loss has nothing to train on -----------------


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(WIDTH, 8)

    def forward(self, x):
        return self.layer(x).argmax(-1)


def build_argmax():
    return Classifier()
