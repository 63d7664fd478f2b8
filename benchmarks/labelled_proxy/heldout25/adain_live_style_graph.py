"""Arbitrary style transfer (AdaIN) for the live webcam / streaming overlay.

Written against the 2018 AdaIN reference code (Variable, .cuda(), numpy frames from
OpenCV). The camera thread writes BGR frames into `self.frame_np`; the render thread
replays one captured graph per frame. Style strength is a slider in the overlay UI.
"""
import cv2
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable


def calc_mean_std(feat, eps=1e-5):
    n, c = feat.size()[:2]
    var = feat.view(n, c, -1).var(dim=2) + eps
    return feat.view(n, c, -1).mean(dim=2).view(n, c, 1, 1), var.sqrt().view(n, c, 1, 1)


def adain(content, style_mean, style_std):
    c_mean, c_std = calc_mean_std(content)
    return (content - c_mean) / c_std * style_std + style_mean


class OverlayUI:
    style_strength = 1.0
    scene_cut_thresh = 0.35


class LiveStylizer:
    def __init__(self, encoder, decoder, ui, h=480, w=640):
        self.encoder = encoder.cuda().eval()
        self.decoder = decoder.cuda().eval()
        self.ui = ui
        self.frame_np = np.zeros((h, w, 3), dtype=np.uint8)
        self.style_mean = torch.zeros(1, 512, 1, 1).cuda()
        self.style_std = torch.ones(1, 512, 1, 1).cuda()
        self.prev_feat = torch.zeros(1, 512, h // 8, w // 8).cuda()
        self.out = None

    def set_style(self, style_bgr):
        img = cv2.cvtColor(style_bgr, cv2.COLOR_BGR2RGB).astype(np.float32) / 255.0
        style = torch.from_numpy(img).permute(2, 0, 1)[None].pin_memory()
        style = Variable(style.cuda(non_blocking=True), volatile=True)  # CLEAN: eager upload from pinned memory, outside the capture
        with torch.no_grad():
            m, s = calc_mean_std(self.encoder(style))
        self.style_mean.copy_(m)  # CLEAN: statistics copied into tensors the graph reads
        self.style_std.copy_(s)

    @torch.no_grad()
    def stylize(self):
        frame = torch.from_numpy(self.frame_np).cuda()  # HAZARD: pinned-memory
        x = frame.permute(2, 0, 1)[None].float().flip(1) / 255.0
        feat = self.encoder(x)
        if (feat - self.prev_feat).abs().mean() > self.ui.scene_cut_thresh:  # HAZARD: dynamic-control-flow
            feat = 0.5 * feat + 0.5 * self.prev_feat
        self.prev_feat.copy_(feat)  # CLEAN: temporal state updated in place
        alpha = self.ui.style_strength  # HAZARD: python-scalar
        t = adain(feat, self.style_mean, self.style_std)
        t = alpha * t + (1 - alpha) * feat
        return self.decoder(t).clamp(0, 1)

    def start(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(3):
                    self.stylize()
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = self.stylize()

    def render(self):
        self.graph.replay()
        img = self.out[0].permute(1, 2, 0).float().cpu().numpy()  # CLEAN: eager readback after replay
        return (img[..., ::-1] * 255).astype(np.uint8)


def main_loop(styl, cam, window):
    styl.start()
    while True:
        ok, frame = cam.read()
        if not ok:
            break
        styl.frame_np[...] = frame
        window.show(styl.render())
        styl.ui.style_strength = window.slider("strength") / 100.0
