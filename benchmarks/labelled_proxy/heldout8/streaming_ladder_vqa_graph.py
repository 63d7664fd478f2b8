"""Per-title encoding-ladder check for a video streaming service.

For every rung of the bitrate ladder a full-reference quality net compares
saliency-sampled 64x64 patches of the decoded rung (upscaled to 1080p) with
the source, giving a MOS estimate and MOS-per-log-bitrate.  Rungs are warmed
up first and then captured.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

RUNGS = [(1920, 1080, 6000), (1280, 720, 3000), (960, 540, 1800), (640, 360, 700)]
PATCH, N_PATCH = 64, 256


class PatchVQA(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.feat = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.ReLU(), nn.Conv2d(c, 2 * c, 3, 2, 1), nn.ReLU(),
                                  nn.Conv2d(2 * c, 4 * c, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.reg = nn.Sequential(nn.Linear(12 * c, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, ref, dis):
        fr, fd = self.feat(ref), self.feat(dis)
        return 1 + 4 * torch.sigmoid(self.reg(torch.cat([fr, fd, (fr - fd).abs()], -1))).squeeze(-1)


class LadderEvaluator:
    def __init__(self, net, seed=1234):
        self.net = net.cuda().eval()
        self.seed = seed
        self.kbps_np = np.array([r[2] for r in RUNGS], dtype=np.float32)
        self.pool = torch.cuda.graph_pool_handle()
        self.graph = torch.cuda.CUDAGraph()
        self.states = {}

    def _alloc(self, rung):
        return {"rung": rung, "ref": torch.zeros(1, 3, 1080, 1920, device="cuda"),
                "dis": torch.zeros(1, 3, RUNGS[rung][1], RUNGS[rung][0], device="cuda"),
                "broken": torch.zeros((), device="cuda")}

    def _evaluate(self, st):
        torch.manual_seed(self.seed + st["rung"])  # HAZARD: rng
        dis = F.interpolate(st["dis"], size=(1080, 1920), mode="bicubic", align_corners=False)
        ref_p = F.unfold(st["ref"], PATCH, stride=PATCH)[0].T
        dis_p = F.unfold(dis, PATCH, stride=PATCH)[0].T
        sal = ref_p.reshape(-1, 3, PATCH * PATCH).std(-1).mean(-1) + 1e-3
        idx = torch.multinomial(sal, N_PATCH, replacement=False)  # CLEAN: multinomial on the default generator is capturable
        with torch.random.fork_rng(devices=[torch.cuda.current_device()]):  # CLEAN: same RNG state restored inside the capture
            dither = torch.rand(N_PATCH, 3, PATCH, PATCH, device="cuda") / 255
        mos = self.net(ref_p[idx].view(-1, 3, PATCH, PATCH), dis_p[idx].view(-1, 3, PATCH, PATCH) + dither).mean()
        kbps = torch.from_numpy(self.kbps_np).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        if mos < 1.5:  # HAZARD: dynamic-control-flow
            st["broken"].fill_(1.0)
        return mos, mos / torch.log(kbps[st["rung"]])

    @torch.no_grad()
    def warmup_all(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for r in range(len(RUNGS)):
                self.states[r] = self._alloc(r)
                for _ in range(2):
                    self._evaluate(self.states[r])
        torch.cuda.current_stream().wait_stream(s)

    @torch.no_grad()
    def capture_all(self):
        for r, st in self.states.items():
            with torch.cuda.graph(self.graph, pool=self.pool):  # HAZARD: api-misuse
                st["out"] = self._evaluate(st)

    def evaluate_title(self, source, decoded_rungs):
        report = []
        for r, dec in enumerate(decoded_rungs):
            st = self.states[r]
            st["ref"].copy_(source)  # CLEAN: copy_ into the captured inputs
            st["dis"].copy_(dec)
            self.graph.replay()
            mos, eff = st["out"]
            report.append((RUNGS[r][2], mos.item(), eff.item()))
        return report


if __name__ == "__main__":
    ev = LadderEvaluator(PatchVQA())
    ev.warmup_all()
    ev.capture_all()
    src = torch.rand(1, 3, 1080, 1920, device="cuda")
    decoded = [F.interpolate(src, size=(h, w), mode="area") for w, h, _ in RUNGS]
    print(ev.evaluate_title(src, decoded))
