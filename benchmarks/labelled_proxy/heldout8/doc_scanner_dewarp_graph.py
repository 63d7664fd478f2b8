"""Document scanning in a mobile-app backend: corner detection + perspective fix.

A light corner regressor finds the four page corners in the photo; a
homography from the output canvas to the photo is solved and the page is
resampled with grid_sample.  The whole scan is one CUDA graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

IN_H, IN_W, H_OUT, W_OUT = 1024, 768, 1100, 850
PAPER = {"a4": 297 / 210, "letter": 11 / 8.5, "receipt": 3.0}


class CornerNet(nn.Module):
    def __init__(self):
        super().__init__()
        c = [3, 32, 64, 128, 256, 256]
        self.body = nn.Sequential(*[nn.Sequential(nn.Conv2d(a, b, 3, 2, 1), nn.BatchNorm2d(b), nn.ReLU6())
                                    for a, b in zip(c[:-1], c[1:])])
        self.head = nn.Linear(256, 8)

    def forward(self, x):
        return torch.sigmoid(self.head(self.body(x).mean((2, 3))))


def dlt_system(src, dst):
    x, y = src.unbind(-1)
    u, v = dst.unbind(-1)
    z, o = torch.zeros_like(x), torch.ones_like(x)
    r1 = torch.stack([x, y, o, z, z, z, -u * x, -u * y], -1)
    r2 = torch.stack([z, z, z, x, y, o, -v * x, -v * y], -1)
    return torch.cat([r1, r2], 1), torch.cat([u, v], 1)


class Scanner:
    def __init__(self, net, paper="a4"):
        self.net = net.cuda().eval()
        self.page_aspect = PAPER[paper]
        self.img = torch.zeros(1, 3, IN_H, IN_W, device="cuda")
        self.unit = torch.tensor([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]], device="cuda").unsqueeze(0)  # CLEAN: built once in __init__
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, H_OUT, device="cuda"),
                                torch.linspace(-1, 1, W_OUT, device="cuda"), indexing="ij")
        self.base_grid = torch.stack([xs, ys, torch.ones_like(xs)], -1).view(1, -1, 3)

    def set_paper(self, paper):
        self.page_aspect = PAPER[paper]

    def _scan(self):
        small = F.interpolate(self.img, size=(256, 192), mode="bilinear", align_corners=False)
        corners = self.net(small).view(-1, 4, 2) * 2 - 1
        aspect = self.page_aspect  # HAZARD: python-scalar
        dst = self.unit.clone()
        dst[..., 0] *= min(1.0, (H_OUT / W_OUT) / aspect)
        A, b = dlt_system(dst, corners)
        h = torch.linalg.solve(A, b)  # HAZARD: host-sync
        H = torch.cat([h, torch.ones_like(h[:, :1])], -1).view(-1, 3, 3)
        g = self.base_grid @ H.transpose(1, 2)
        g = g[..., :2] / g[..., 2:].clamp(min=1e-6)
        page = F.grid_sample(self.img, g.view(1, H_OUT, W_OUT, 2), align_corners=False)  # CLEAN: fixed-size output grid
        H_inv, _ = torch.linalg.inv_ex(H)  # CLEAN: inv_ex keeps the error info on the device
        torch.cuda.empty_cache()  # HAZARD: memory
        return page, H_inv, corners

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._scan()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.out = self._scan()

    def scan(self, photo_u8):
        photo = photo_u8.cuda(non_blocking=True).float().div_(255).unsqueeze(0)
        self.img.copy_(F.interpolate(photo, size=(IN_H, IN_W), mode="area"))  # CLEAN: copy_ into the captured input
        self.graph.replay()
        page, _, corners = self.out
        return (page[0].clamp(0, 1) * 255).byte().cpu(), corners[0].cpu()


if __name__ == "__main__":
    sc = Scanner(CornerNet())
    sc.capture()
    photos = [torch.randint(0, 255, (3, 4032, 3024), dtype=torch.uint8) for _ in range(3)]
    for i, p in enumerate(photos):
        if i == 2:
            sc.set_paper("letter")
        sc.scan(p)
