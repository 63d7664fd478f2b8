"""GPU augmentation stage of an image-training data pipeline (DALI-style).

Decoded uint8 NHWC batches from the loader workers land in a pinned staging buffer,
are copied into a static device buffer, and one CUDA graph per output resolution
runs random-resized-crop, flip, brightness jitter, mixup and normalisation. The
progressive-resizing schedule switches resolution between epochs.
"""
import numpy as np
import torch
import torch.nn.functional as F


def rrc_theta(batch, gen, scale=(0.25, 1.0), device="cuda"):
    """Affine matrices for a random resized crop, sampled on the device."""
    u = torch.rand(batch, 3, device=device, generator=gen)  # CLEAN: generator registered with every graph
    area = scale[0] + (scale[1] - scale[0]) * u[:, 0]
    side = area.sqrt()
    tx = (1 - side) * (2 * u[:, 1] - 1)
    ty = (1 - side) * (2 * u[:, 2] - 1)
    theta = torch.zeros(batch, 2, 3, device=device)
    theta[:, 0, 0] = side
    theta[:, 1, 1] = side
    theta[:, 0, 2] = tx
    theta[:, 1, 2] = ty
    return theta


class GraphedAugment:
    def __init__(self, batch, in_hw, mean, std, seed=0, mixup_alpha=0.2):
        self.batch, self.in_hw = batch, in_hw
        self.mean, self.std = mean, std  # Python lists from the dataset card
        self.mixup_alpha = mixup_alpha
        self.crop_gen = torch.Generator(device="cuda")
        self.crop_gen.manual_seed(seed + 1)
        self.flip_gen = torch.Generator(device="cuda")
        self.flip_gen.manual_seed(seed + 2)
        self.static_raw = torch.zeros(batch, *in_hw, 3, dtype=torch.uint8, device="cuda")
        self.std_t = torch.tensor(std, device="cuda").view(1, 3, 1, 1)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs = {}

    def _augment(self, out_hw):
        b = self.batch
        x = self.static_raw.permute(0, 3, 1, 2).float().div_(255.0)
        if (x.amax(dim=(1, 2, 3)) == 0).any():  # HAZARD: dynamic-control-flow
            x = x + 1e-3
        grid = F.affine_grid(rrc_theta(b, self.crop_gen), (b, 3, *out_hw), align_corners=False)
        x = F.grid_sample(x, grid, mode="bilinear", align_corners=False)
        flip = torch.rand(b, 1, 1, 1, device=x.device, generator=self.flip_gen) < 0.5  # HAZARD: rng
        x = torch.where(flip, x.flip(-1), x)  # CLEAN: torch.where keeps the shape, no sync
        x = x * (0.8 + 0.4 * torch.rand(b, 1, 1, 1, device=x.device))  # CLEAN: default CUDA generator
        lam = float(np.random.beta(self.mixup_alpha, self.mixup_alpha))  # HAZARD: host-code
        perm = torch.randperm(b, device=x.device)  # CLEAN: randperm on the default generator is capturable
        x = lam * x + (1.0 - lam) * x[perm]
        mean = torch.tensor(self.mean, device=x.device).view(1, 3, 1, 1)  # HAZARD: host-sync
        return (x - mean) / self.std_t, perm, torch.full((b,), lam, device=x.device)

    def _capture(self, out_hw):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._augment(out_hw)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        g.register_generator_state(self.crop_gen)
        with torch.cuda.graph(g, pool=self.pool):
            out = self._augment(out_hw)
        self.graphs[out_hw] = (g, out)

    def __call__(self, staged_pinned: torch.Tensor, out_hw):
        self.static_raw.copy_(staged_pinned, non_blocking=True)  # CLEAN: pinned staging buffer copied outside the graph
        if out_hw not in self.graphs:
            self._capture(out_hw)
        g, (x, perm, lam) = self.graphs[out_hw]
        g.replay()
        return x.clone(), perm.clone(), lam.clone()


def epoch_resolution(epoch, schedule=((0, (128, 128)), (10, (160, 160)), (25, (224, 224)))):
    hw = schedule[0][1]
    for start, size in schedule:
        if epoch >= start:
            hw = size
    return hw
