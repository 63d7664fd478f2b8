"""Sketch-RNN doodle generator for the drawing game's "AI finishes your sketch" mode.

Port of the Magenta TF sketch_rnn decoder (HyperLSTM replaced by a plain LSTMCell):
stroke-5 format, a mixture of 20 bivariate Gaussians for (dx, dy) and 3 pen states.
The per-stroke decode step is compiled; temperature decreases as the sketch fills up.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

M = 20


class SketchDecoder(nn.Module):
    def __init__(self, z_dim=128, hidden=512):
        super().__init__()
        self.init_state = nn.Linear(z_dim, 2 * hidden)
        self.cell = nn.LSTMCell(5 + z_dim, hidden)
        self.out = nn.Linear(hidden, 6 * M + 3)

    def initial(self, z):
        h, c = torch.tanh(self.init_state(z)).chunk(2, -1)
        return h.contiguous(), c.contiguous()


def sample_gmm(params, temperature):
    pi, mux, muy, sx, sy, rho = params.split(M, -1)
    pi = F.softmax(pi / temperature, -1)  # HAZARD: python-scalar
    k = torch.multinomial(pi, 1)
    pick = lambda t: t.gather(-1, k).squeeze(-1)  # CLEAN: gather with a CUDA index tensor
    sx, sy = pick(sx).exp() * temperature ** 0.5, pick(sy).exp() * temperature ** 0.5
    r = torch.tanh(pick(rho))
    e1, e2 = torch.randn_like(sx), torch.randn_like(sy)
    dx = pick(mux) + sx * e1
    dy = pick(muy) + sy * (r * e1 + (1 - r ** 2).sqrt() * e2)
    return dx, dy


@torch.compile(mode="reduce-overhead")
def decode_step(dec, z, stroke, h, c, temperature):
    h, c = dec.cell(torch.cat([stroke, z], -1), (h, c))
    y = dec.out(h)
    dx, dy = sample_gmm(y[:, :6 * M], temperature)
    pen = torch.multinomial(F.softmax(y[:, 6 * M:] / temperature, -1), 1).squeeze(-1)
    if pen[0] == 2:  # HAZARD: dynamic-control-flow
        dx, dy = dx * 0, dy * 0
    nxt = torch.stack([dx, dy, (pen == 0).float(), (pen == 1).float(), (pen == 2).float()], -1)
    return nxt, h, c


@torch.compile(mode="reduce-overhead")
def export_stroke(nxt):
    pts = nxt[:, :2].tolist()  # HAZARD: host-sync
    return pts, nxt[:, 2:].argmax(-1)


def finish_sketch(dec, z, prefix, live, max_len=250, t0=0.65):
    dec = dec.cuda().eval()
    with torch.no_grad():
        h, c = dec.initial(z)
        stroke = prefix[-1:].cuda()
        out = []
        for i in range(max_len):
            temperature = max(0.1, t0 * (1.0 - i / max_len))
            stroke, h, c = decode_step(dec, z, stroke, h, c, temperature)  # HAZARD: static-address
            out.append(stroke.clone())  # CLEAN: cloned before the next call
            live.draw(*export_stroke(out[-1]))
            if out[-1][0, 4].item() > 0.5:  # CLEAN: eager end-of-sketch check outside the compiled step
                break
        seq = torch.cat(out).cpu().numpy()
    return np.concatenate([prefix.numpy(), seq])


def to_svg(seq, scale=0.5):
    x, y, path = 0.0, 0.0, []
    for dx, dy, p1, p2, p3 in seq:
        x, y = x + dx * scale, y + dy * scale
        path.append(("L" if p1 > 0.5 else "M") + f"{x:.1f},{y:.1f}")
        if p3 > 0.5:
            break
    return "<path d='" + " ".join(path) + "'/>"
