"""Product-search learning-to-rank: whole ListNet step captured; batches come from a generator pipeline."""
import torch
import torch.nn as nn
import torch.nn.functional as F

class QueryTower(nn.Module):
    def __init__(self, vocab=100000, d=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
    def forward(self, q):
        return self.mlp(self.emb(q).mean(1))

class ItemTower(nn.Module):
    def __init__(self, n_feats=48, d=128):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(n_feats, 256), nn.ReLU(), nn.Linear(256, d))
    def forward(self, x):
        return self.mlp(x)

def _listnet(scores, labels):
    return -(F.softmax(labels, -1) * F.log_softmax(scores, -1)).sum(-1).mean()

class LtrModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.i = QueryTower(), ItemTower()
        self.items = self.i
        self.side = torch.cuda.Stream()
    def enable_compiled_items(self):
        self.items = torch.compile(self.i)
    def score(self, q, items):
        return (self.q(q).unsqueeze(1) * self.items(items)).sum(-1)  # HAZARD: api-misuse
    def regularizer(self):
        with torch.cuda.stream(self.side):  # HAZARD: stream
            reg = self.i.mlp[0].weight.pow(2).sum()
        return reg

class CapturedStep:
    def __init__(self, model, compile_items=False, batch=64, lists=50, qlen=8, feats=48):
        self.model, self.compile_items = model.cuda(), compile_items
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, capturable=True)  # CLEAN: capturable AdamW
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=1000, gamma=0.5)
        self.q = torch.zeros(batch, qlen, dtype=torch.long, device="cuda")
        self.items = torch.zeros(batch, lists, feats, device="cuda")
        self.labels = torch.zeros(batch, lists, device="cuda")
    def _body(self):
        self.opt.zero_grad(set_to_none=True)
        loss = _listnet(self.model.score(self.q, self.items), self.labels)
        (loss + 1e-6 * self.model.regularizer()).backward()
        self.opt.step()
        self.loss = loss.detach()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._body()
        torch.cuda.current_stream().wait_stream(s)
        if self.compile_items:
            self.model.enable_compiled_items()
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):  # CLEAN: warm-up on a forked side stream
            self._body()
    def run(self, q, items, labels):
        self.q.copy_(q)  # CLEAN: copy_ into static inputs
        self.items.copy_(items)
        self.labels.copy_(labels)
        return self._replay()
    def run_catalog(self, q, labels):
        self.q.copy_(q)
        self.labels.copy_(labels)
        return self._replay()
    def _replay(self):
        self.g.replay()
        self.sched.step()  # HAZARD: optimizer
        return self.loss.clone()

def swap_feature_table(step, table):
    step.items = table.to("cuda")  # HAZARD: static-address

def batches(loader):
    for q, items, labels in loader:
        yield q.cuda(non_blocking=True), items.cuda(non_blocking=True), labels.cuda(non_blocking=True)  # CLEAN: uploads outside the graph

def train(loader, catalog_days=(), compile_items=False):
    step = CapturedStep(LtrModel(), compile_items)
    step.capture()
    losses = [step.run(*b) for b in batches(loader)]
    for table, queries in catalog_days:
        swap_feature_table(step, table)
        losses += [step.run_catalog(q.cuda(), y.cuda()) for q, y in queries]
    return torch.stack(losses).mean().item()  # CLEAN: host read after all replays
