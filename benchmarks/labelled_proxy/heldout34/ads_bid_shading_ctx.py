"""First-price auction bid shading: a feature registry and a pacing closure, captured via a context helper."""
import contextlib
import torch
import torch.nn as nn

FEATURES = {}

def feature(name):
    def deco(fn):
        FEATURES[name] = fn
        return fn
    return deco

@feature("floor_ratio")
def floor_ratio(bids, floors):
    return bids / floors.clamp_min(1e-3)

@feature("hour_bucket")
def hour_bucket(bids, floors):
    edges = torch.tensor([0.25, 0.5, 1.0, 2.0], device=bids.device)  # HAZARD: host-sync
    return torch.bucketize(bids, edges).float()

@feature("log_bid")
def log_bid(bids, floors):
    return torch.log1p(bids)  # CLEAN: pure device math

def make_pacer(budget_state):
    def pace(shade):
        spent = budget_state["spent_frac"]  # HAZARD: python-scalar
        return shade * (1.0 - 0.5 * spent)
    return pace

class ThompsonExplore:
    def __init__(self, device="cuda"):
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(7)
    def perturb(self, shade):
        return shade + 0.02 * torch.randn(shade.shape, device=shade.device, generator=self.gen)  # HAZARD: rng

class DropoutExplore:
    def perturb(self, shade):
        return shade + 0.02 * torch.randn_like(shade)  # CLEAN: default CUDA generator is graph-safe

class ShadingNet(nn.Module):
    def __init__(self, names, pacer, explorer):
        super().__init__()
        self.names, self.pacer, self.explorer = names, pacer, explorer
        self.mlp = nn.Sequential(nn.Linear(len(names), 64), nn.ReLU(), nn.Linear(64, 1))
    def forward(self, bids, floors):
        x = torch.stack([FEATURES[n](bids, floors) for n in self.names], -1)
        shade = torch.sigmoid(self.mlp(x)).squeeze(-1)
        return bids * self.pacer(self.explorer.perturb(shade))

@contextlib.contextmanager
def captured(graph, warm_fn, warmup=3):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            warm_fn()  # CLEAN: warm-up on a forked side stream
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield graph

class BidServer:
    def __init__(self, names, explorer, n=4096):
        self.budget = {"spent_frac": 0.0}
        self.net = ShadingNet(names, make_pacer(self.budget), explorer).cuda().eval()
        self.bids = torch.zeros(n, device="cuda")
        self.floors = torch.ones(n, device="cuda")
        self.g = torch.cuda.CUDAGraph()
        with torch.no_grad(), captured(self.g, lambda: self.net(self.bids, self.floors)):
            self.out = self.net(self.bids, self.floors)
    def shade(self, bids, floors):
        self.bids.copy_(bids)  # CLEAN: copy_ into the captured input
        self.floors.copy_(floors)
        self.g.replay()
        return self.out.clone()
    def on_spend(self, spent, budget):
        self.budget["spent_frac"] = spent / budget

def serve(stream_of_auctions, budget):
    server = BidServer(["floor_ratio", "hour_bucket", "log_bid"], ThompsonExplore())
    spent = 0.0
    for bids, floors in stream_of_auctions:
        price = server.shade(bids.cuda(non_blocking=True), floors.cuda(non_blocking=True))  # CLEAN: uploads outside the capture
        spent += float(price.sum())  # CLEAN: host read after replay
        server.on_spend(spent, budget)
    return spent
