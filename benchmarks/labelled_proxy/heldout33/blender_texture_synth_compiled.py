"""Blender add-on: "Neural Material" -- synthesises a tileable texture from a few material
sliders (roughness, scale, hue) shown in the Shader editor side panel.

The synthesis function is swapped for a reduce-overhead compiled version at register().
"""
bl_info = {"name": "Neural Material", "blender": (4, 1, 0), "category": "Material"}

import functools

import numpy as np
import torch
import torch.nn as nn

try:
    import bpy
except ImportError:
    bpy = None

PANEL = {"roughness": 0.5, "last_preview": []}
compile_rt = functools.partial(torch.compile, mode="reduce-overhead")


class TexNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(6, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 3))
        self.register_buffer("freqs", torch.tensor([1.0, 2.0, 4.0]))


net = TexNet().cuda().eval()


def synthesize(coords, hue):
    enc = torch.cat([torch.sin(coords[..., :1] * net.freqs), torch.cos(coords[..., 1:] * net.freqs)], -1)
    rgb = torch.sigmoid(net.mlp(enc))
    rough = PANEL["roughness"]  # HAZARD: python-scalar
    rgb = rgb * (1 - rough) + rgb.mean(-1, keepdim=True) * rough
    rgb = torch.roll(rgb, shifts=1, dims=-1) * hue + rgb * (1 - hue)  # CLEAN: hue passed as a device tensor
    print("synthesized", rgb.shape)  # HAZARD: host-code
    return rgb


def synthesize_preview(coords, hue):
    enc = torch.cat([torch.sin(coords[..., :1] * net.freqs), torch.cos(coords[..., 1:] * net.freqs)], -1)
    return torch.sigmoid(net.mlp(enc)) * hue  # CLEAN: only run through default torch.compile


def _grid(res):
    lin = torch.linspace(0, 2 * np.pi, res, device="cuda")
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")
    return torch.stack([xx, yy], -1)


preview_fn = torch.compile(synthesize_preview)


@torch.no_grad()
def bake(res, hue_value, preview=False):
    hue = torch.full((), hue_value, device="cuda")  # CLEAN: device tensor instead of a Python float
    if preview:
        img = preview_fn(_grid(256), hue)
        return img.cpu().numpy()
    img = synthesize(_grid(res), hue)  # HAZARD: dynamic-shape
    PANEL["last_preview"].append(img)  # HAZARD: static-address
    return img.clone().cpu().numpy()  # CLEAN: host copy right after the call


def register():
    global synthesize
    synthesize = compile_rt(synthesize)


class NEURALMAT_OT_bake(bpy.types.Operator if bpy else object):
    bl_idname = "neuralmat.bake"
    bl_label = "Bake Neural Material"

    def execute(self, context):
        props = context.scene.neural_material
        PANEL["roughness"] = props.roughness
        rgb = bake(int(props.resolution), props.hue)
        img = bpy.data.images.new("NeuralMat", rgb.shape[1], rgb.shape[0])
        img.pixels.foreach_set(np.concatenate([rgb, np.ones_like(rgb[..., :1])], -1).ravel())
        return {"FINISHED"}
