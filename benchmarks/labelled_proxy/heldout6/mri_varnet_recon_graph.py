"""Accelerated knee MRI reconstruction with an unrolled variational network (E2E-VarNet style).

Each cascade applies soft data consistency in k-space and a CNN regulariser in image
space, using coil sensitivity maps estimated from the auto-calibration lines. The
scanner console reconstructs every slice of a series with one replayed CUDA graph;
a faster preview runs fewer cascades.
"""
import numpy as np
import torch
import torch.nn as nn

COILS, H, W = 15, 320, 320


def fft2c(x):
    return torch.fft.fftshift(torch.fft.fft2(torch.fft.ifftshift(x, dim=(-2, -1)), norm="ortho"), dim=(-2, -1))


def ifft2c(k):
    return torch.fft.fftshift(torch.fft.ifft2(torch.fft.ifftshift(k, dim=(-2, -1)), norm="ortho"), dim=(-2, -1))


class Regulariser(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, ch, 3, padding=1), nn.LeakyReLU(0.1),
                                 nn.Conv2d(ch, ch, 3, padding=1), nn.LeakyReLU(0.1), nn.Conv2d(ch, 2, 3, padding=1))

    def forward(self, img):
        x = torch.view_as_real(img).permute(0, 3, 1, 2)
        return torch.view_as_complex(self.net(x).float().permute(0, 2, 3, 1).contiguous())


class VarNetRecon:
    def __init__(self, n_cascades=12):
        self.regs = nn.ModuleList([Regulariser() for _ in range(n_cascades)]).cuda().eval()
        self.dc_weight = nn.Parameter(torch.ones(n_cascades, device="cuda"))
        self.num_cascades = n_cascades
        self.dc_lambda = 1.0
        self.mask_np = np.zeros((1, 1, W), dtype=np.float32)  # sampling pattern of the current series
        self.kspace = torch.zeros(COILS, H, W, dtype=torch.complex64, device="cuda")
        self.sens = torch.zeros(COILS, H, W, dtype=torch.complex64, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _recon(self):
        mask = torch.from_numpy(self.mask_np).cuda()  # HAZARD: pinned-memory
        k = self.kspace.clone()
        for i in range(self.num_cascades):  # HAZARD: python-scalar
            img = (ifft2c(k) * self.sens.conj()).sum(0, keepdim=True)
            refined = img - self.regs[i](img)
            k_reg = fft2c(refined * self.sens)
            dc = mask * (k - self.kspace) * self.dc_weight[i] * self.dc_lambda  # CLEAN: dc_lambda never changes after capture
            k = k - dc - (k_reg - k)
        torch.cuda.empty_cache()  # HAZARD: memory
        return (ifft2c(k).abs() ** 2).sum(0).sqrt()

    def capture(self):
        s = torch.cuda.Stream()
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self._recon()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(self.graph):
                self.static_image = self._recon()

    def set_preview(self, preview):
        self.num_cascades = 4 if preview else len(self.regs)

    def load_series(self, mask_np):
        self.mask_np = mask_np

    @torch.no_grad()
    def reconstruct(self, kspace, sens_maps):
        self.kspace.copy_(kspace)  # CLEAN: copy_ into the static input
        self.sens.copy_(sens_maps)
        self.graph.replay()
        return self.static_image.cpu()  # CLEAN: host copy after replay


if __name__ == "__main__":
    recon = VarNetRecon()
    mask = np.zeros((1, 1, W), dtype=np.float32)
    mask[..., ::4] = 1.0
    mask[..., W // 2 - 12:W // 2 + 12] = 1.0
    recon.load_series(mask)
    recon.capture()
    recon.set_preview(True)
    for sl in range(3):
        k = torch.randn(COILS, H, W, dtype=torch.complex64, device="cuda")
        s = torch.randn(COILS, H, W, dtype=torch.complex64, device="cuda")
        print(sl, recon.reconstruct(k, s).shape)
