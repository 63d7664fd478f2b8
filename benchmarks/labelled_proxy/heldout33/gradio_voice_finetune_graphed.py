"""Gradio app: "Fine-tune the voice" -- the user uploads a few clips, the app fine-tunes
the mel decoder of a tiny TTS for a few hundred steps and streams the loss to a plot.

The decoder and the postnet are graphed with torch.cuda.make_graphed_callables.
"""
import gradio as gr
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_MEL, D, T = 80, 256, 200
APP = {"speed": 1.0, "losses": []}


class MelDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(D, D)
        self.conv = nn.Conv1d(D, N_MEL, 5, padding=2)

    def forward(self, h):
        rate = APP["speed"]  # HAZARD: python-scalar
        h = F.relu(self.pre(h)) * rate
        mel = self.conv(h.transpose(1, 2))
        if mel.abs().max() > 20:  # HAZARD: dynamic-control-flow
            mel = mel.clamp(-20, 20)
        return mel


class PostNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(N_MEL, N_MEL, 5, padding=2)

    def forward(self, mel):
        res = self.conv(torch.tanh(mel))
        APP["energy"] = mel.pow(2).mean().cpu()  # HAZARD: host-sync
        return mel + res


def build(batch=4):
    dec, post = MelDecoder().cuda(), PostNet().cuda()
    post.register_forward_hook(lambda m, i, o: APP.setdefault("post_calls", 0))  # HAZARD: api-misuse
    h = torch.randn(batch, T, D, device="cuda")
    mel = torch.randn(batch, N_MEL, T, device="cuda", requires_grad=True)
    dec, post = torch.cuda.make_graphed_callables((dec, post), ((h,), (mel,)))
    params = list(dec.parameters()) + list(post.parameters())
    opt = torch.optim.Adam(params, lr=2e-4)  # CLEAN: eager optimizer, outside the graphs
    return dec, post, opt


def finetune(files, steps, speed):
    APP["speed"] = speed
    APP["losses"].clear()
    dec, post, opt = build()
    feats = torch.randn(len(files) or 1, 4, T, D)
    targets = torch.randn(len(files) or 1, 4, N_MEL, T)
    for i in range(int(steps)):
        k = i % feats.shape[0]
        h = feats[k].cuda(non_blocking=False)  # CLEAN: eager upload before the graphed call
        tgt = targets[k].cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: cache-free autocast at call time
            out = post(dec(h))
        loss = F.l1_loss(out.float(), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % 20 == 0:
            APP["losses"].append(loss.item())  # CLEAN: eager host read between graphed calls
            yield np.array(APP["losses"])
    dec.eval()
    with torch.no_grad():
        sample = dec(feats[0].cuda())  # CLEAN: eval mode runs the original forward
    yield np.array(APP["losses"])


with gr.Blocks() as demo:
    files = gr.File(file_count="multiple", label="Voice clips")
    steps = gr.Slider(20, 1000, value=200, step=20, label="Steps")
    speed = gr.Slider(0.5, 2.0, value=1.0, label="Speaking rate")
    plot = gr.LinePlot()
    gr.Button("Fine-tune").click(lambda f, s, r: finetune(f or [], s, r), [files, steps, speed], plot)

if __name__ == "__main__":
    demo.queue().launch()
