"""Planogram compliance from the shelf-scanning robot.

The robot drives the aisles at night and sends one stitched bay image per
shelf. A density head counts facings per planogram slot; a second head reads
the price-tag crops. Results feed the morning replenishment list.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

PLANOGRAM_SLOTS = {
    "express": [0, 1, 2, 3, 4, 5, 6, 7],
    "hyper": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
}
N_SLOTS = 12


class FacingCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        )
        self.density = nn.Conv2d(64, N_SLOTS, 1)

    def forward(self, bay):
        return F.relu(self.density(self.backbone(bay)))


class TagReader(nn.Module):
    def __init__(self, n_digits=5, n_cls=11):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, n_digits)))
        self.cls = nn.Linear(32, n_cls)

    def forward(self, crops):
        return self.cls(self.net(crops).squeeze(2).transpose(1, 2))


class BayAuditor:
    def __init__(self, counter, reader, store_format="hyper"):
        self.counter, self.reader = counter.cuda().eval(), reader.cuda().eval()
        self.store_format = store_format
        self.bay = torch.zeros(1, 3, 512, 2048, device="cuda")
        self.crops = torch.zeros(24, 3, 32, 96, device="cuda")
        self.expected = torch.zeros(N_SLOTS, device="cuda")
        self.side = torch.cuda.Stream()

    def _audit(self, bay):
        dens = self.counter(bay)
        facings = dens.sum(dim=(2, 3))[0]
        slot_ids = torch.tensor(PLANOGRAM_SLOTS[self.store_format], device="cuda")  # HAZARD: host-sync
        facings = facings.index_select(0, slot_ids)
        if facings.sum() == 0:  # HAZARD: dynamic-control-flow
            facings = torch.full_like(facings, -1.0)
        gaps = (self.expected[: facings.numel()] - facings).clamp(min=0)
        return facings.round().masked_fill(facings < 0.5, 0.0), gaps  # CLEAN: masked_fill keeps the shape fixed

    def capture(self):
        with torch.no_grad():
            for _ in range(3):
                self._audit(self.bay)
                self.reader(self.crops)
            torch.cuda.synchronize()  # CLEAN: between warm-up and capture, not inside it
            self.g_audit = torch.cuda.CUDAGraph()
            self.g_audit.capture_begin()  # HAZARD: stream
            self.out_facings, self.out_gaps = self._audit(self.bay)
            self.g_audit.capture_end()
            self.g_tags = torch.cuda.CUDAGraph()
            with torch.cuda.stream(self.side):
                self.side.wait_stream(torch.cuda.default_stream())
                self.g_tags.capture_begin()  # CLEAN: begun on the side stream inside the stream context
                self.out_tags = self.reader(self.crops).argmax(-1)
                self.g_tags.capture_end()
            torch.cuda.default_stream().wait_stream(self.side)

    def run_aisle(self, bays, crops, expected):
        self.expected.copy_(expected)
        per_bay = []
        for bay, crop in zip(bays, crops):
            self.bay.copy_(bay)
            self.crops.copy_(crop)
            self.g_audit.replay()
            self.g_tags.replay()
            per_bay.append((self.out_gaps, self.out_tags.clone()))  # HAZARD: static-address
        return per_bay


if __name__ == "__main__":
    auditor = BayAuditor(FacingCounter(), TagReader())
    auditor.capture()
    bays = [torch.rand(1, 3, 512, 2048, device="cuda") for _ in range(6)]
    crops = [torch.rand(24, 3, 32, 96, device="cuda") for _ in range(6)]
    report = auditor.run_aisle(bays, crops, torch.full((N_SLOTS,), 4.0, device="cuda"))
    for i, (gaps, tags) in enumerate(report):
        missing = gaps.nonzero().flatten().tolist()  # CLEAN: eager host read after the replays, outside any capture
        print(f"bay {i}: refill slots {missing}, tags {tags[:3].tolist()}")
