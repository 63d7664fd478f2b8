"""ComfyUI custom node "RIFE-lite Interpolate (CUDA Graph)": inserts in-between frames into
an IMAGE batch. One graph per resolution, all in one memory pool, captured on demand.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

NODE_STATE = {"t": 0.5}


class FlowNetLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(6, 32, 3, 2, 1), nn.PReLU(32), nn.Conv2d(32, 32, 3, 1, 1), nn.PReLU(32))
        self.flow = nn.ConvTranspose2d(32, 4, 4, 2, 1)

    def forward(self, a, b):
        f = self.flow(self.enc(torch.cat([a, b], 1)))
        t = NODE_STATE["t"]  # HAZARD: python-scalar
        fa, fb = f[:, :2] * t, f[:, 2:] * (1 - t)
        n, _, h, w = a.shape
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, h, device=a.device),
                                torch.linspace(-1, 1, w, device=a.device), indexing="ij")
        base = torch.stack([xx, yy], -1)[None].expand(n, h, w, 2)
        wa = F.grid_sample(a, base + fa.permute(0, 2, 3, 1), align_corners=True)  # CLEAN: grid_sample is capturable
        wb = F.grid_sample(b, base + fb.permute(0, 2, 3, 1), align_corners=True)
        return (1 - t) * wa + t * wb


class _Graphs:
    model = None
    pool = None
    by_size = {}


def _graph_for(h, w, warm=True):
    st = _Graphs
    if st.model is None:
        st.model = FlowNetLite().cuda().eval()
        st.pool = torch.cuda.graph_pool_handle()  # CLEAN: one pool for all resolutions
    if (h, w) not in st.by_size:
        a = torch.zeros(1, 3, h, w, device="cuda")
        b = torch.zeros(1, 3, h, w, device="cuda")
        if warm:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s), torch.no_grad():
                for _ in range(3):
                    st.model(a, b)
            torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g, pool=st.pool):  # HAZARD: api-misuse
            out = st.model(a, b)
            torch.cuda.empty_cache()  # HAZARD: memory
        st.by_size[(h, w)] = (g, a, b, out)
    return st.by_size[(h, w)]


class RifeLiteInterpolate:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",), "multiplier": ("INT", {"default": 2, "min": 2, "max": 8}),
                             "fast_first_frame": ("BOOLEAN", {"default": False})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "interpolate"
    CATEGORY = "video"

    def interpolate(self, images, multiplier, fast_first_frame):
        frames = images.permute(0, 3, 1, 2).cuda()  # CLEAN: eager upload before any replay
        h, w = frames.shape[-2:]
        g, a, b, out = _graph_for(h, w, warm=not fast_first_frame)
        result = []
        for i in range(frames.shape[0] - 1):
            a.copy_(frames[i:i + 1])  # CLEAN: copy_ into the static inputs
            b.copy_(frames[i + 1:i + 2])
            result.append(frames[i:i + 1])
            for k in range(1, multiplier):
                NODE_STATE["t"] = k / multiplier
                g.replay()
                result.append(out)  # HAZARD: static-address
        result.append(frames[-1:])
        return (torch.cat(result).permute(0, 2, 3, 1).cpu(),)


NODE_CLASS_MAPPINGS = {"RifeLiteInterpolate": RifeLiteInterpolate}
