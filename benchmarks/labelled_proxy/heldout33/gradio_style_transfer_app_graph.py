"""Gradio demo: real-time style transfer with a CUDA graph.

python app.py  ->  open http://127.0.0.1:7860
"""
import numpy as np
import torch
import torch.nn as nn
from PIL import Image

import gradio as gr

DEVICE = "cuda"
H, W = 384, 384


class StyleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 32, 9, padding=4), nn.InstanceNorm2d(32, affine=True), nn.ReLU(),
                                 nn.Conv2d(32, 32, 3, padding=1), nn.InstanceNorm2d(32, affine=True), nn.ReLU(),
                                 nn.Conv2d(32, 3, 9, padding=4))
        self.strength = 1.0
        self.palette = np.array([0.9, 1.0, 1.1], dtype=np.float32)

    def forward(self, x):
        stylized = torch.sigmoid(self.net(x))
        self.last_mean = float(stylized.mean())  # HAZARD: host-sync
        alpha = self.strength  # HAZARD: python-scalar
        tint = torch.from_numpy(self.palette).to(DEVICE).view(1, 3, 1, 1)  # HAZARD: pinned-memory
        return alpha * stylized * tint + (1 - alpha) * x


model = StyleNet().to(DEVICE).eval()
static_in = torch.zeros(1, 3, H, W, device=DEVICE)
graph = None
history = []


def _capture():
    global graph, static_out
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):  # CLEAN: warmed up, side-stream capture
        static_out = model(static_in)
        mean_px = static_out.mean()  # CLEAN: device reduction, no host read


def to_tensor(img: Image.Image):
    img = img.convert("RGB").resize((W, H))
    arr = np.asarray(img, dtype=np.float32) / 255.0
    return torch.from_numpy(arr).permute(2, 0, 1).unsqueeze(0).pin_memory()


def stylize(img, strength, keep_history):
    if img is None:
        return None, None
    model.strength = strength
    if graph is None:
        _capture()
    static_in.copy_(to_tensor(img), non_blocking=True)  # CLEAN: pinned copy into the static input
    graph.replay()
    if keep_history:
        history.append(static_out)  # HAZARD: static-address
    out = static_out[0].permute(1, 2, 0).cpu().numpy()  # CLEAN: host copy after replay
    gallery = [h[0].permute(1, 2, 0).cpu().numpy() for h in history[-4:]]
    return (out * 255).astype(np.uint8), [(g * 255).astype(np.uint8) for g in gallery]


def reset():
    history.clear()
    torch.cuda.empty_cache()  # CLEAN: outside the capture
    return None, None


with gr.Blocks(title="Style transfer (CUDA graph)") as demo:
    with gr.Row():
        inp = gr.Image(type="pil", label="Input")
        out = gr.Image(label="Stylized")
    strength = gr.Slider(0.0, 1.0, value=1.0, label="Style strength")
    keep = gr.Checkbox(label="Keep history", value=True)
    gallery = gr.Gallery(label="History")
    inp.change(stylize, [inp, strength, keep], [out, gallery])
    strength.change(stylize, [inp, strength, keep], [out, gallery])
    gr.Button("Reset").click(reset, None, [out, gallery])

if __name__ == "__main__":
    demo.queue().launch()
