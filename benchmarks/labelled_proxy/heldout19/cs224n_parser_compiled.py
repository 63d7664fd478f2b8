"""CS224n Assignment 3 -- neural transition-based dependency parser (Chen & Manning 2014).
parser_model.py + parser_transitions.py + run.py in one file for the write-up; after training the
global `predict` and `score` functions are swapped for reduce-overhead compiled versions."""
import time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

TRANSITIONS = ["S", "LA", "RA"]

class ParserModel(nn.Module):
    def __init__(self, embeddings, n_features=36, hidden_size=200, n_classes=3, dropout_prob=0.5):
        super().__init__()
        self.embeddings = nn.Parameter(torch.tensor(embeddings))
        self.embed_to_hidden = nn.Linear(n_features * embeddings.shape[1], hidden_size)
        self.dropout = nn.Dropout(dropout_prob)
        self.hidden_to_logits = nn.Linear(hidden_size, n_classes)

    def forward(self, w):
        x = self.embeddings[w].view(w.shape[0], -1)
        return self.hidden_to_logits(self.dropout(F.relu(self.embed_to_hidden(x))))

class PartialParse:
    def __init__(self, sentence):
        self.stack, self.buffer, self.dependencies = ["ROOT"], list(sentence), []

    def parse_step(self, transition):
        if transition == "S":
            self.stack.append(self.buffer.pop(0))
        elif transition == "LA":
            self.dependencies.append((self.stack[-1], self.stack.pop(-2)))
        else:
            self.dependencies.append((self.stack[-2], self.stack.pop()))

    def done(self):
        return not self.buffer and len(self.stack) == 1

def legal_labels(p):
    return [int(len(p.buffer) > 0), int(len(p.stack) > 2), int(len(p.stack) > 1 and (len(p.stack) > 2 or not p.buffer))]

def make_featurizer(tok2id, n_features=36):
    null = tok2id["<NULL>"]
    def featurize(p):
        s = [tok2id.get(t, 1) for t in p.stack[-3:]]
        b = [tok2id.get(t, 1) for t in p.buffer[:3]]
        deps = [tok2id.get(d, 1) for _, d in p.dependencies[-30:]]
        f = [null] * (3 - len(s)) + s + b + [null] * (3 - len(b)) + deps
        return (f + [null] * n_features)[:n_features]
    return featurize

def score(model, w):
    return model(w)

def predict(model, w, legal):
    logits = model(w)
    if legal.sum() == 0:  # HAZARD: dynamic-control-flow
        return [0] * w.shape[0]
    masked = logits.masked_fill(legal == 0, -1e4)  # CLEAN: illegal transitions masked on the device
    return masked.argmax(1).tolist()  # HAZARD: host-sync

def minibatch_parse(sentences, model, featurize, batch_size=1024):
    parses = [PartialParse(s) for s in sentences]
    unfinished = parses[:]
    while unfinished:
        mb = unfinished[:batch_size]
        w = torch.tensor([featurize(p) for p in mb], device="cuda")  # CLEAN: features built eagerly, outside the compiled function
        legal = torch.tensor([legal_labels(p) for p in mb], device="cuda")
        for p, t in zip(mb, predict(model, w, legal)):  # HAZARD: dynamic-shape
            p.parse_step(TRANSITIONS[t])
        unfinished = [p for p in unfinished if not p.done()]
    return [p.dependencies for p in parses]

def train(model, train_x, train_y, epochs=10, batch=1024):
    step = torch.compile(model)  # CLEAN: default torch.compile (no CUDA graphs) for training; the ragged last batch is fine
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(train_x), device=train_x.device)
        for i in range(0, len(perm), batch):
            loss = F.cross_entropy(step(train_x[perm[i:i + batch]]), train_y[perm[i:i + batch]])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}  loss {loss.item():.4f}")

@torch.no_grad()
def oracle_margins(model, dev_x, batch=1024):
    kept = []
    for i in range(0, len(dev_x) - batch + 1, batch):
        kept.append(score(model, dev_x[i:i + batch]))  # HAZARD: static-address
    return torch.cat(kept).softmax(-1).amax(-1)

def main():
    global predict, score
    data = torch.load("parser_data.pt")        # embeddings, tok2id, train/dev tensors, dev sentences, gold arcs
    model = ParserModel(data["embeddings"]).cuda()
    train(model, data["train_x"].cuda(), data["train_y"].cuda())
    model.eval()
    predict = torch.compile(predict, mode="reduce-overhead")
    score = torch.compile(score, mode="reduce-overhead")
    t0 = time.time()
    with torch.no_grad():
        deps = minibatch_parse(data["dev_sentences"], model, make_featurizer(data["tok2id"]))
    uas = np.mean([len(set(d) & set(g)) / len(g) for d, g in zip(deps, data["dev_gold"])])
    print(f"dev UAS {uas:.4f}  ({time.time() - t0:.1f} s)")
    print("mean oracle margin", oracle_margins(model, data["dev_x"].cuda()).mean().item())

if __name__ == "__main__":
    main()
