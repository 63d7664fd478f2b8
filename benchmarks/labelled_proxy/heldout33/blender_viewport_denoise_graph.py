"""Blender add-on: "Neural Viewport Denoise".

Registers a frame_change_post handler that grabs the render result, denoises it with a
small U-Net replayed from a CUDA graph, and writes it back into an image datablock.
"""
bl_info = {"name": "Neural Viewport Denoise", "blender": (4, 1, 0), "category": "Render"}

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import bpy
except ImportError:
    bpy = None

H, W = 540, 960


class DenoiseUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 32, 3, 2, 1)
        self.mid = nn.Conv2d(32, 32, 3, padding=1)
        self.up = nn.ConvTranspose2d(32, 3, 4, 2, 1)
        self.exposure = 0.0

    def forward(self, x):
        h = F.relu(self.mid(F.relu(self.down(x))))
        y = x + self.up(h)
        gain = 2.0 ** self.exposure  # HAZARD: python-scalar
        return (y * gain).clamp(0, 1)


class _Runtime:
    model = None
    graph = None
    static_in = None
    static_out = None
    frame_buf = None


def _build(scene):
    rt = _Runtime
    rt.model = DenoiseUNet().cuda().eval()
    rt.static_in = torch.zeros(1, 3, H, W, device="cuda")
    rt.frame_buf = torch.empty(H, W, 4, dtype=torch.float32).pin_memory()  # CLEAN: pinned staging, setup time
    with torch.no_grad():
        for _ in range(3):
            rt.model(rt.static_in)
    torch.cuda.synchronize()  # CLEAN: outside the capture
    rt.graph = torch.cuda.CUDAGraph()
    with torch.no_grad():
        rt.graph.capture_begin()  # HAZARD: stream
        pixels = np.zeros((H, W, 4), dtype=np.float32)
        upload = torch.from_numpy(pixels).to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        rt.static_in.add_(upload[..., :3].permute(2, 0, 1)[None])
        rt.static_out = rt.model(rt.static_in)
        torch.cuda.synchronize()  # HAZARD: host-sync
        rt.graph.capture_end()


def denoise_frame(scene, depsgraph=None):
    rt = _Runtime
    if rt.graph is None:
        _build(scene)
    rt.model.exposure = scene.view_settings.exposure
    img = bpy.data.images.get("Render Result")
    if img is None or tuple(img.size) != (W, H):
        return
    flat = np.empty(H * W * 4, dtype=np.float32)
    img.pixels.foreach_get(flat)
    rt.frame_buf.copy_(torch.from_numpy(flat.reshape(H, W, 4)))
    rt.static_in.copy_(rt.frame_buf.to("cuda", non_blocking=True)[..., :3].permute(2, 0, 1)[None])  # CLEAN: pinned upload before replay, copy_ into the static input
    rt.graph.replay()
    out = rt.static_out[0].permute(1, 2, 0).cpu().numpy()  # CLEAN: host copy after replay
    rgba = np.concatenate([out, np.ones((H, W, 1), np.float32)], -1)
    target = bpy.data.images.get("Denoised") or bpy.data.images.new("Denoised", W, H, float_buffer=True)
    target.pixels.foreach_set(rgba.ravel())


def register():
    if denoise_frame not in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.append(denoise_frame)


def unregister():
    if denoise_frame in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.remove(denoise_frame)
    _Runtime.graph = None
    torch.cuda.empty_cache()  # CLEAN: outside any capture
