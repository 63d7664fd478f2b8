"""sd-webui extension script: "Fast Lineart Preprocessor".

Adds an accordion to txt2img/img2img. When enabled, the control image is run through a
small lineart net captured once into a CUDA graph and then replayed per generation.
"""
import time

import numpy as np
import torch
import torch.nn as nn

try:
    import modules.scripts as scripts
    import gradio as gr
    from modules import shared
except ImportError:  # running the unit tests outside the webui
    scripts, gr, shared = None, None, None

BaseScript = scripts.Script if scripts is not None else object


class LineartNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.out = nn.Conv2d(16, 1, 1)
        self.last_ms = 0.0

    def forward(self, x):
        t0 = time.time()  # HAZARD: host-code
        edges = torch.sigmoid(self.out(self.enc(x)))
        thin = torch.where(edges > 0.5, edges, torch.zeros_like(edges))  # CLEAN: three-argument where
        strong = (thin > 0.9).nonzero()  # HAZARD: dynamic-shape
        self.n_strong = strong.shape[0]
        self.last_ms = (time.time() - t0) * 1e3
        return thin


class _GraphState:
    net = None
    graph = None
    static_in = None
    static_out = None


def _ensure_graph(h, w):
    st = _GraphState
    if st.net is None:
        st.net = LineartNet().cuda().eval()
    if st.graph is None:
        st.static_in = torch.zeros(1, 3, h, w, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():  # CLEAN: forked warm-up on a side stream
            for _ in range(3):
                st.net(st.static_in)
        torch.cuda.current_stream().wait_stream(side)
        st.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(st.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            st.static_out = st.net(st.static_in)
            torch.cuda.empty_cache()  # HAZARD: memory
    return st


class Script(BaseScript):
    def title(self):
        return "Fast Lineart Preprocessor"

    def show(self, is_img2img):
        return scripts.AlwaysVisible

    def ui(self, is_img2img):
        with gr.Accordion("Fast Lineart", open=False):
            enabled = gr.Checkbox(label="Enable", value=False)
            image = gr.Image(label="Control image", type="numpy")
        return [enabled, image]

    def process(self, p, enabled, image):
        if not enabled or image is None:
            return
        h, w = 512, 512
        st = _ensure_graph(h, w)
        arr = np.ascontiguousarray(image[:h, :w, :3], dtype=np.float32) / 255.0
        x = torch.from_numpy(arr).permute(2, 0, 1).unsqueeze(0).cuda()
        st.static_in.copy_(x)  # CLEAN: copy_ into the static input
        st.graph.replay()
        lineart = st.static_out[0, 0].cpu().numpy()  # CLEAN: host copy after replay
        p.extra_generation_params["Fast Lineart"] = f"{st.net.last_ms:.1f}ms"
        torch.cuda.empty_cache()  # CLEAN: outside any capture
        p.control_image = (lineart * 255).astype(np.uint8)
