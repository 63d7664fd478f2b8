"""Offline batch-scoring job (Ray Data `map_batches` UDF) with a CUDA-graph plugin.

`@cuda_graphed` is the team's plugin decorator: the first call allocates static
copies of the arguments and captures the function, later calls copy their arguments
into the static tensors and replay. The scoring UDF runs a churn model with a little
test-time augmentation and writes one score per customer row.
"""
import functools

import numpy as np
import pandas as pd
import torch

from churn.model import load_model

MODEL = None
REGION_PRIOR = torch.from_numpy(np.load("region_prior.npy").astype(np.float32))  # CPU, pageable
TTA_GEN = torch.Generator(device="cuda")
TTA_GEN.manual_seed(99)


def cuda_graphed(fn=None, *, warmup=0, pool=None):
    if fn is None:
        return functools.partial(cuda_graphed, warmup=warmup, pool=pool)
    state = {}

    @functools.wraps(fn)
    def wrapper(*args):
        if "graph" not in state:
            state["static"] = tuple(a.detach().clone() for a in args)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(warmup):
                    fn(*state["static"])
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):  # HAZARD: api-misuse
                state["out"] = fn(*state["static"])
            state["graph"] = g
        for dst, src in zip(state["static"], args):
            dst.copy_(src)  # CLEAN: copy_ into the static arguments
        state["graph"].replay()
        return state["out"].clone()  # CLEAN: cloned before the next batch replays

    return wrapper


@cuda_graphed
@torch.no_grad()
def score_batch(features, region_idx):
    prior = REGION_PRIOR.cuda()  # HAZARD: pinned-memory
    noise = torch.randn(features.shape, device=features.device, generator=TTA_GEN)  # HAZARD: rng
    jitter = np.random.normal(0.0, 0.01)  # HAZARD: host-code
    views = torch.stack([features, features + 0.02 * noise, features * (1.0 + jitter)])
    logits = MODEL(views.flatten(0, 1)).view(3, features.size(0))
    region_bias = prior.index_select(0, region_idx)  # CLEAN: index_select with a CUDA index tensor
    return torch.sigmoid(logits.mean(0) + region_bias)


class ChurnScorer:
    """Callable class for `ds.map_batches(ChurnScorer, batch_size=4096, num_gpus=1)`."""

    FEATURES = [f"f{i}" for i in range(64)]
    BATCH = 4096

    def __init__(self):
        global MODEL
        MODEL = load_model("s3://models/churn/v17").cuda().eval()

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        n = len(batch)
        feats = np.zeros((self.BATCH, len(self.FEATURES)), dtype=np.float32)
        feats[:n] = batch[self.FEATURES].to_numpy(np.float32)
        regions = np.zeros(self.BATCH, dtype=np.int64)
        regions[:n] = batch["region_id"].to_numpy(np.int64)
        x = torch.from_numpy(feats).cuda(non_blocking=True)
        r = torch.from_numpy(regions).cuda(non_blocking=True)
        scores = score_batch(x, r)[:n].cpu().numpy()  # CLEAN: host read of a clone
        return pd.DataFrame({"customer_id": batch["customer_id"].to_numpy(), "churn_score": scores})


def run(input_path, output_path):
    import ray

    ds = ray.data.read_parquet(input_path)
    ds = ds.map_batches(ChurnScorer, batch_size=ChurnScorer.BATCH, batch_format="pandas",
                        num_gpus=1, concurrency=4)
    ds.write_parquet(output_path)
