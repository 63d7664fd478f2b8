# CSRNet crowd counting (2018 code base: VGG-16 front end, dilated back end). Deployed on station
# cameras; each camera resolution gets a CUDA graph captured in fp16.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import models


def make_layers(cfg, in_ch=3, dilation=False):
    d, layers = (2 if dilation else 1), []
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(in_ch, v, 3, padding=d, dilation=d), nn.ReLU(inplace=True)]
            in_ch = v
    return nn.Sequential(*layers)


class CSRNet(nn.Module):
    def __init__(self, load_weights=False):
        super().__init__()
        self.frontend = make_layers([64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512])
        self.backend = make_layers([512, 512, 512, 256, 128, 64], in_ch=512, dilation=True)
        self.output_layer = nn.Conv2d(64, 1, 1)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        if load_weights:
            vgg = models.vgg16(pretrained=True)
            for i, (k, v) in enumerate(list(self.frontend.state_dict().items())):
                v.data[:] = list(vgg.state_dict().items())[i][1].data[:]
        self.scale_factor = 1.0
        self.alarm_level = 4.0

    def forward(self, x):
        x = (x - self.mean) / self.std  # CLEAN: registered buffers, same storage on every replay
        x = self.output_layer(self.backend(self.frontend(x)))
        density = F.relu(x) * self.scale_factor  # HAZARD: python-scalar
        return density


class StationCounter:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.cams = {}

    def add_camera(self, cam_id, h, w, calib=1.0):
        self.model.scale_factor = calib
        frame = torch.zeros(1, 3, h, w, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(3):
                self._count(frame)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.amp.autocast(dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.graph(g):
                out = self._count(frame)
        self.cams[cam_id] = (g, frame, out)

    def _count(self, frame):
        density = self.model(frame)
        torch.cuda.empty_cache()  # HAZARD: memory
        if density.max() > self.model.alarm_level:  # HAZARD: dynamic-control-flow
            density = F.avg_pool2d(density, 3, 1, 1)  # smooth hot spots before they are reported
        crowd = density.sum()
        return density, crowd

    def recalibrate(self, calib):
        self.model.scale_factor = calib  # operator tweak from the dashboard

    def count(self, cam_id, img):
        g, frame, (density, crowd) = self.cams[cam_id]
        frame.copy_(img)  # CLEAN: copy_ into the camera's static frame
        g.replay()
        n = crowd.item()  # CLEAN: host read after replay, outside the capture
        if n > 500:  # CLEAN: Python float after the replay, not a tensor branch in the graph
            print("cam %s: dense crowd (%.0f)" % (cam_id, n))
        return n, density.clone()
