"""Randomized smoothing certification (Cohen, Rosenfeld & Kolter, ICML 2019),
core.py style: the Monte Carlo noise/classify/count loop is captured through a
small `graph_capture` context manager and replayed n / batch times."""
import argparse
import contextlib
from math import ceil
import torch
from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint

parser = argparse.ArgumentParser(description="Certify many examples")
parser.add_argument("--sigmas", type=str, default="0.25,0.5,1.0")
parser.add_argument("--batch", type=int, default=1000)
parser.add_argument("--N0", type=int, default=100)
parser.add_argument("--N", type=int, default=100000)
parser.add_argument("--alpha", type=float, default=0.001)
parser.add_argument("--noise_seed", type=int, default=0)
args = parser.parse_args()

@contextlib.contextmanager
def graph_capture(pool=None):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):  # HAZARD: api-misuse
        yield g

class Smooth:
    ABSTAIN = -1

    def __init__(self, base_classifier, num_classes, sigma):
        self.base_classifier, self.num_classes, self.sigma = base_classifier, num_classes, sigma
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(args.noise_seed)
        self.counts = torch.zeros(num_classes, dtype=torch.long, device="cuda")
        self.graphs, self.static_x = {}, None

    def _noisy_predictions(self, batch):
        sigma = self.sigma  # HAZARD: python-scalar
        noise = torch.randn(batch.shape, device=batch.device, generator=self.gen) * sigma  # HAZARD: rng
        return self.base_classifier(batch + noise).argmax(1)

    def _capture(self, x, counting):
        if self.static_x is None:
            self.static_x = x.repeat((args.batch, 1, 1, 1))
        with torch.no_grad(), graph_capture() as g:
            preds = self._noisy_predictions(self.static_x)
            if counting == "bincount":
                self.counts += torch.bincount(preds, minlength=self.num_classes)  # HAZARD: host-sync
            else:
                self.counts.scatter_add_(0, preds, torch.ones_like(preds))  # CLEAN: fixed-size device histogram
        self.graphs[counting] = g

    def _sample_noise(self, x, num, counting="bincount"):
        if counting not in self.graphs:
            self._capture(x, counting)
        self.static_x.copy_(x.repeat((args.batch, 1, 1, 1)))  # CLEAN: copy_ into the captured input
        self.counts.zero_()
        for _ in range(ceil(num / args.batch)):
            self.graphs[counting].replay()
        return self.counts.cpu().numpy()  # CLEAN: read after the replays, outside the graph

    def certify(self, x, n0, n, alpha):
        self.base_classifier.eval()
        cAHat = self._sample_noise(x, n0, counting="scatter").argmax().item()
        nA = self._sample_noise(x, n)[cAHat].item()
        pABar = proportion_confint(nA, n, alpha=2 * alpha, method="beta")[0]
        if pABar < 0.5:
            return Smooth.ABSTAIN, 0.0
        return cAHat, self.sigma * norm.ppf(pABar)  # CLEAN: radius computed on the host from NumPy counts

def main(base_classifier, dataset, num_classes):
    smoothed = Smooth(base_classifier, num_classes, float(args.sigmas.split(",")[0]))
    for sigma in map(float, args.sigmas.split(",")):
        smoothed.sigma = sigma
        for i in range(0, len(dataset), 20):
            x, label = dataset[i]
            prediction, radius = smoothed.certify(x.cuda(), args.N0, args.N, args.alpha)
            print(f"{sigma}\t{i}\t{label}\t{prediction}\t{radius:.3}\t{int(prediction == label)}")
