"""FastAPI backend of a "copy text from image" browser extension.

Crops arrive as base64 PNGs; they are resized into one of three width buckets and a CRNN
recogniser is replayed from a per-bucket CUDA graph (all graphs share one memory pool).
"""
import base64
import io

import numpy as np
import torch
import torch.nn as nn
from fastapi import FastAPI
from PIL import Image
from pydantic import BaseModel

app = FastAPI()
BUCKETS = (128, 256, 512)
H = 32
ALPHABET = "-abcdefghijklmnopqrstuvwxyz0123456789 "
STATS = {"requests": 0}


class CRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d((2, 2)),
                                 nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(), nn.MaxPool2d((16, 1)))
        self.rnn = nn.GRU(64, 96, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(192, len(ALPHABET))
        self.aux = torch.cuda.Stream()

    def forward(self, x):
        f = self.cnn(x).squeeze(2).transpose(1, 2)
        h, _ = self.rnn(f)
        logits = self.fc(h)
        blank_bias = torch.tensor([2.0] + [0.0] * (len(ALPHABET) - 1), device=x.device)  # HAZARD: host-sync
        STATS["requests"] += 1  # HAZARD: host-code
        with torch.cuda.stream(self.aux):  # HAZARD: stream
            conf = logits.softmax(-1).amax(-1).mean(-1)
        return (logits - blank_bias).argmax(-1), conf


class Runner:
    def __init__(self):
        self.model = CRNN().cuda().eval()
        self.pool = torch.cuda.graph_pool_handle()  # CLEAN: one pool shared by the bucket graphs
        self.graphs = {}
        for w in BUCKETS:
            static_in = torch.zeros(1, 1, H, w, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s), torch.no_grad():
                for _ in range(3):
                    self.model(static_in)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=self.pool):
                out = self.model(static_in)
            self.graphs[w] = (g, static_in, out)

    def recognise(self, img: Image.Image):
        img = img.convert("L")
        w = min(b for b in BUCKETS if b >= min(int(img.width * H / img.height), BUCKETS[-1]))  # CLEAN: host bucket choice
        g, static_in, (ids, conf) = self.graphs[w]
        arr = np.asarray(img.resize((w, H)), dtype=np.float32) / 255.0
        x = torch.from_numpy(arr)[None, None].cuda()
        if w == BUCKETS[-1]:
            self.graphs[w] = (g, x, (ids, conf))  # HAZARD: static-address
        else:
            static_in.copy_(x)  # CLEAN: copy_ into the static input
        g.replay()
        seq = ids[0].cpu().tolist()  # CLEAN: host read after replay
        text = "".join(ALPHABET[c] for i, c in enumerate(seq) if c != 0 and (i == 0 or c != seq[i - 1]))
        return text, float(conf[0])  # CLEAN: host read after replay


runner = Runner()


class Crop(BaseModel):
    png_b64: str


@app.post("/ocr")
def ocr(crop: Crop):
    img = Image.open(io.BytesIO(base64.b64decode(crop.png_b64)))
    text, conf = runner.recognise(img)
    return {"text": text, "confidence": conf}
