"""Distributed evaluation of a multi-label audio tagger (AudioSet, 527 classes) on 16 GPUs:
each rank scores its shard with a compiled forward, predictions are all-gathered, and
mean average precision is computed by a compiled metric on every rank."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


@torch.compile(mode="reduce-overhead")
def tagger_forward(model, mel):
    return torch.sigmoid(model(mel))


@torch.compile(mode="reduce-overhead")
def average_precision(scores, targets):
    classes = torch.unique(targets.nonzero()[:, 1])  # HAZARD: dynamic-shape
    order = torch.argsort(scores, dim=0, descending=True)  # CLEAN: fixed-shape sort on the device
    t = targets.gather(0, order).float()
    hits = t.cumsum(0)
    ranks = torch.arange(1, t.shape[0] + 1, device=t.device, dtype=t.dtype)[:, None]
    n_pos = t.sum(0)
    ap = (hits / ranks * t).sum(0) / n_pos.clamp_min(1.0)
    weights = n_pos.tolist()  # HAZARD: host-sync
    print("evaluated classes:", classes.numel())  # HAZARD: host-code
    return ap, weights


def gather_padded(x, n_per_rank):
    pad = F.pad(x, (0, 0, 0, n_per_rank - x.shape[0]))  # CLEAN: every rank sends the same padded size
    out = pad.new_empty((dist.get_world_size() * n_per_rank,) + tuple(pad.shape[1:]))
    dist.all_gather_into_tensor(out, pad)
    return out


@torch.no_grad()
def evaluate(model, loader, n_per_rank, batch=64):
    model.eval()
    chunks, labels = [], []
    for mel, y in loader:
        n = mel.shape[0]
        if n < batch:
            mel = F.pad(mel, (0, 0, 0, 0, 0, batch - n))  # CLEAN: short last batch padded to the captured batch size
        scores = tagger_forward(model, mel.cuda(non_blocking=True))
        chunks.append(scores[:n])  # HAZARD: static-address
        labels.append(y.cuda(non_blocking=True))
    local = torch.cat(chunks)
    all_scores = gather_padded(local, n_per_rank)
    all_y = gather_padded(torch.cat(labels), n_per_rank)
    ap, weights = average_precision(all_scores.clone(), all_y.clone())  # CLEAN: inputs cloned out of the gather buffers
    per_class = ap.tolist()  # CLEAN: eager host read; no other compiled function ran after the metric
    macro = sum(per_class) / len(per_class)
    weighted = sum(a * w for a, w in zip(per_class, weights)) / max(sum(weights), 1.0)
    return macro, weighted


@torch.no_grad()
def score_cloned(model, loader):  # loader built with drop_last=True and batch=64
    out = []
    for mel, _ in loader:
        out.append(tagger_forward(model, mel.cuda(non_blocking=True)).clone())  # CLEAN: cloned before the next replay
    return torch.cat(out)


if __name__ == "__main__":
    dist.init_process_group("nccl")
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
