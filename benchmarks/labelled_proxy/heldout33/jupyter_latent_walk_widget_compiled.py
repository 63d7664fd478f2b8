"""Notebook app: latent walk through a small face generator with ipywidgets sliders.

`interact` calls `show_face` on every slider move; the generator is compiled with
mode="max-autotune" (which includes CUDA graphs) so that dragging feels smooth.
"""
import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
import torch.nn as nn

Z = 128
UI = {"psi": 0.7, "frames": []}


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.mapping = nn.Sequential(nn.Linear(Z, 256), nn.LeakyReLU(0.2), nn.Linear(256, 256))
        self.synth = nn.Sequential(nn.Linear(256, 3 * 32 * 32), nn.Tanh())
        self.register_buffer("w_avg", torch.zeros(256))

    def forward(self, z):
        w = self.mapping(z)
        psi = UI["psi"]  # HAZARD: python-scalar
        w = self.w_avg + psi * (w - self.w_avg)
        if w.abs().max() > 50:  # HAZARD: dynamic-control-flow
            w = w.clamp(-50, 50)
        print("synth", w.shape)  # HAZARD: host-code
        return self.synth(w).view(-1, 3, 32, 32)

    def forward_tensor_psi(self, z, psi):
        w = self.mapping(z)
        w = self.w_avg + psi * (w - self.w_avg)  # CLEAN: psi passed as a device tensor
        return self.synth(w).view(-1, 3, 32, 32)


G = Generator().cuda().eval()
gen = torch.compile(G, mode="max-autotune")
gen_psi = torch.compile(G.forward_tensor_psi, mode="max-autotune")
psi_t = torch.full((), 0.7, device="cuda")
anchors = torch.randn(2, Z, device="cuda")


@torch.no_grad()
def show_face(t=0.0, psi=0.7, tensor_psi=False, record=False):
    UI["psi"] = psi
    z = torch.lerp(anchors[0:1], anchors[1:2], t)  # CLEAN: eager interpolation before the call
    if tensor_psi:
        psi_t.fill_(psi)  # CLEAN: in-place update of the device psi
        img = gen_psi(z, psi_t)
    else:
        img = gen(z)
    if record:
        UI["frames"].append(img)  # HAZARD: static-address
    pic = ((img[0].permute(1, 2, 0) + 1) / 2).cpu().numpy()  # CLEAN: host copy right after the call
    plt.figure(figsize=(3, 3))
    plt.imshow(pic)
    plt.axis("off")
    plt.show()


def export_strip():
    strip = torch.cat([f.clone() for f in UI["frames"]], -1)
    return ((strip + 1) * 127.5).byte().cpu()


@torch.no_grad()
def update_w_avg(n=4096):
    w = G.mapping(torch.randn(n, Z, device="cuda")).mean(0)
    G.w_avg.copy_(w)  # CLEAN: buffer updated in place


widgets.interact(
    show_face,
    t=widgets.FloatSlider(min=0.0, max=1.0, step=0.02),
    psi=widgets.FloatSlider(min=0.0, max=1.0, step=0.05, value=0.7),
    tensor_psi=widgets.Checkbox(value=False),
    record=widgets.Checkbox(value=False),
)
