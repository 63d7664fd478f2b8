"""Discord bot: "!caption" + an attached image -> a caption from a small captioner.

Image encoder and text decoder are each compiled with mode="reduce-overhead".
"""
import io
import os
import time

import discord
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

VOCAB, D = 8000, 256
BOS, EOS = 1, 2
client = discord.Client(intents=discord.Intents.default())
STATS = {"last_latency": 0.0}


class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, D, 16, 16)
        self.emb = nn.Embedding(VOCAB, D)
        self.dec = nn.GRU(D, D, batch_first=True)
        self.head = nn.Linear(D, VOCAB)

    def encode(self, img):
        return self.patch(img).flatten(2).transpose(1, 2)

    def decode(self, feats, tokens):
        ctx = feats.mean(1, keepdim=True)
        h, _ = self.dec(self.emb(tokens) + ctx)
        logits = self.head(h[:, -1])
        if logits.max() < 1.0:  # HAZARD: dynamic-control-flow
            logits = logits * 2.0
        STATS["t_dec"] = time.time()  # HAZARD: host-code
        return logits.argmax(-1, keepdim=True)


model = Captioner().cuda().eval()
encode = torch.compile(model.encode, mode="reduce-overhead")
decode = torch.compile(model.decode, mode="reduce-overhead")


def load_image(raw: bytes):
    img = Image.open(io.BytesIO(raw)).convert("RGB").resize((224, 224))
    arr = np.asarray(img, dtype=np.float32) / 255.0
    return torch.from_numpy(arr).permute(2, 0, 1)[None].cuda()


@torch.no_grad()
def caption(raw: bytes, max_len=20):
    t0 = time.time()  # CLEAN: eager timing around the compiled calls
    feats = encode(load_image(raw))
    feats_kept = feats.clone()  # CLEAN: cloned before the decoder runs
    tokens = torch.full((1, 1), BOS, device="cuda")
    for _ in range(max_len):
        nxt = decode(feats_kept, tokens)  # HAZARD: dynamic-shape
        tokens = torch.cat([tokens, nxt.clone()], 1)  # CLEAN: cloned feed-back
        if nxt.item() == EOS:  # CLEAN: eager read of the fresh output
            break
    saliency = feats.norm(dim=-1)  # HAZARD: static-address
    STATS["last_latency"] = time.time() - t0
    words = tokens[0, 1:].tolist()  # CLEAN: eager host read
    return " ".join(f"w{w}" for w in words if w != EOS), float(saliency.max())


@client.event
async def on_message(message):
    if message.author == client.user or not message.content.startswith("!caption"):
        return
    if not message.attachments:
        return await message.reply("attach an image")
    raw = await message.attachments[0].read()
    text, sal = caption(raw)
    await message.reply(f"{text} (saliency {sal:.2f}, {STATS['last_latency'] * 1e3:.0f} ms)")


@client.event
async def on_ready():
    print("caption bot ready")


if __name__ == "__main__":
    client.run(os.environ["DISCORD_TOKEN"])
