"""Procedural NPC / town name generator for the RPG's world builder (char-RNN).

Originally the 2017 char-rnn tutorial code (Variable, .data, .cuda()); the sampling
step is now captured as a CUDA graph because the world builder asks for ~50k names
per region. Name "styles" (elvish, dwarven, ...) set the temperature.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

ALPHABET = "^$abcdefghijklmnopqrstuvwxyz'- "
STYLES = {"elvish": 0.7, "dwarven": 1.1, "orcish": 1.4}


class CharRNN(nn.Module):
    def __init__(self, n_chars=len(ALPHABET), hidden=256, layers=2):
        super().__init__()
        self.embed = nn.Embedding(n_chars, 64)
        self.rnn = nn.GRU(64, hidden, layers)
        self.decoder = nn.Linear(hidden, n_chars)

    def forward(self, char, hidden):
        out, hidden = self.rnn(self.embed(char).unsqueeze(0), hidden)
        return self.decoder(out.squeeze(0)), hidden


class NameSampler:
    def __init__(self, model, batch=512, seed=42):
        self.model = model.cuda()
        self.model.eval()
        self.batch = batch
        self.seed = seed
        self.temperature = STYLES["elvish"]
        self.rare_prob = 0.05
        self.static_char = Variable(torch.zeros(batch).long()).cuda()  # CLEAN: eager allocation, before capture
        self.static_hidden = Variable(torch.zeros(2, batch, 256)).cuda()
        self.vowel_boost = torch.zeros(len(ALPHABET)).cuda()
        self.vowel_boost[[ALPHABET.index(v) for v in "aeiou"]] = 0.3  # CLEAN: list index assignment in eager setup

    def set_style(self, style):
        self.temperature = STYLES[style]

    def _step(self):
        torch.manual_seed(self.seed)  # HAZARD: rng
        logits, hidden = self.model(self.static_char, self.static_hidden)
        logits = logits / self.temperature  # HAZARD: python-scalar
        if random.random() < self.rare_prob:  # HAZARD: host-code
            logits = logits + self.vowel_boost
        probs = F.softmax(logits, dim=-1)
        nxt = torch.multinomial(probs, 1).squeeze(1)  # CLEAN: multinomial on the default CUDA generator is capturable
        self.static_char.copy_(nxt)  # CLEAN: recurrent input updated in place
        self.static_hidden.copy_(hidden)
        return nxt

    def build(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.out_char = self._step()

    def reload(self, ckpt_path):
        state = torch.load(ckpt_path, map_location="cpu")
        for name, p in self.model.named_parameters():
            p.data = state[name].cuda()  # HAZARD: static-address

    def hot_patch_decoder(self, weight):
        self.model.decoder.weight.data.copy_(weight)  # CLEAN: in-place update keeps the captured address

    def sample(self, style, max_len=12):
        self.set_style(style)
        self.static_char.fill_(ALPHABET.index("^"))
        self.static_hidden.zero_()
        cols = []
        for _ in range(max_len):
            self.graph.replay()
            cols.append(self.out_char.clone())
        chars = torch.stack(cols, 1).cpu().numpy()  # CLEAN: eager readback after the replays
        return ["".join(ALPHABET[c] for c in row).split("$")[0] for row in chars]
