"""Streamlit app: monocular depth from webcam snapshots.

streamlit run depth_app.py
The model and its CUDA graph are cached with st.cache_resource so reruns of the script
(every widget change reruns it top to bottom) reuse the same captured graph.
"""
import numpy as np
import streamlit as st
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

H, W = 256, 320
COLORMAPS = {"magma": 0, "viridis": 1, "gray": 2}


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU())
        self.dec = nn.Conv2d(64, 1, 3, padding=1)
        self.register_buffer("lut", torch.rand(3, 256, 3))
        self.cmap_idx = 0

    def forward(self, x):
        d = F.softplus(self.dec(self.enc(x)))
        d = F.interpolate(d, size=(H, W), mode="bilinear", align_corners=False)
        lo, hi = d.amin(), d.amax()  # CLEAN: device reductions, no host read
        if hi - lo < 1e-4:  # HAZARD: dynamic-control-flow
            return torch.zeros(x.shape[0], H, W, 3, device=x.device)
        norm = (d - lo) / (hi - lo + 1e-6)
        idx = (norm * 255).long().clamp(0, 255)
        lut = self.lut[[self.cmap_idx]]  # HAZARD: host-sync
        return lut[0][idx[:, 0]]


@st.cache_resource
def load_runner():
    model = DepthNet().cuda().eval()
    static_in = torch.zeros(1, 3, H, W, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        with torch.no_grad(), torch.cuda.graph(g):
            static_out = model(static_in)
    return {"model": model, "graph": g, "in": static_in, "out": static_out}


def preprocess(img: Image.Image):
    arr = np.asarray(img.convert("RGB").resize((W, H)), dtype=np.float32) / 255.0
    return torch.from_numpy(arr).permute(2, 0, 1).unsqueeze(0).cuda()


st.title("Depth from a snapshot")
cmap = st.selectbox("Colormap", list(COLORMAPS))
shot = st.camera_input("Take a picture")
runner = load_runner()
runner["model"].cmap_idx = COLORMAPS[cmap]

if shot is not None:
    x = preprocess(Image.open(shot))
    if st.session_state.get("mode", "copy") == "copy":
        runner["in"].copy_(x)  # CLEAN: copy_ into the static input
    else:
        runner["in"] = x  # HAZARD: static-address
    runner["graph"].replay()
    rgb = runner["out"][0].float().cpu().numpy()  # CLEAN: host copy after replay
    st.image((rgb * 255).astype(np.uint8), caption="Depth")
    far = float(runner["out"].mean())  # CLEAN: host read after replay
    st.caption(f"mean colour value {far:.3f}")

with st.sidebar:
    st.radio("Input update", ["copy", "assign"], key="mode")
    if st.button("Clear GPU cache"):
        torch.cuda.empty_cache()  # CLEAN: outside the capture
        st.toast("cleared")
