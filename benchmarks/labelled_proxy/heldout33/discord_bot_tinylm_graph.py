"""Discord bot that chats with a tiny character LM.

One decode step is captured into a CUDA graph at startup; each message is answered by
replaying the graph token by token. Per-server settings are changed with /temp and /topk.
"""
import asyncio
import os
import random

import discord
import torch
import torch.nn as nn

VOCAB, D, CTX = 256, 384, 256
intents = discord.Intents.default()
intents.message_content = True
client = discord.Client(intents=intents)
SERVER_CFG = {"temperature": 0.8, "top_k": 40, "persona_bias": 0.0}


class CharLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.rnn = nn.GRUCell(D, D)
        self.out = nn.Linear(D, VOCAB)

    def forward(self, tok, h):
        h_new = self.rnn(self.emb(tok), h)
        logits = self.out(h_new)
        if random.random() < 0.1:  # HAZARD: host-code
            logits = logits + SERVER_CFG["persona_bias"]
        return logits, h_new


class GraphedDecoder:
    def __init__(self):
        self.model = CharLM().cuda().eval()
        self.tok = torch.zeros(1, dtype=torch.long, device="cuda")
        self.h = torch.zeros(1, D, device="cuda")
        self.gen = torch.Generator(device="cuda").manual_seed(1234)
        self.graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.no_grad(), torch.cuda.graph(self.graph):  # CLEAN: warmed up on a side stream
            self.next_tok = self._step()

    def _step(self):
        logits, h_new = self.model(self.tok, self.h)
        self.h.copy_(h_new)  # CLEAN: in-place state update inside the graph
        k = SERVER_CFG["top_k"]  # HAZARD: python-scalar
        vals, idx = logits.topk(k, dim=-1)  # CLEAN: topk is capturable
        probs = torch.softmax(vals / SERVER_CFG["temperature"], -1)  # HAZARD: python-scalar
        choice = torch.multinomial(probs, 1, generator=self.gen)  # HAZARD: rng
        return idx.gather(-1, choice).view(1)

    @torch.no_grad()
    def reply(self, prompt: str, n=120):
        self.h.zero_()  # CLEAN: in-place reset of the static state
        for ch in prompt.encode()[-CTX:]:
            self.tok.fill_(ch)  # CLEAN: in-place write into the static input
            self.graph.replay()
        out = []
        for _ in range(n):
            self.tok.copy_(self.next_tok)
            self.graph.replay()
            out.append(self.next_tok)  # HAZARD: static-address
        return bytes(int(t) for t in torch.cat(out).tolist()).decode(errors="ignore")


decoder = None
lock = asyncio.Lock()


@client.event
async def on_ready():
    global decoder
    decoder = GraphedDecoder()
    print(f"logged in as {client.user}")


@client.event
async def on_message(message):
    if message.author == client.user:
        return
    if message.content.startswith("/temp "):
        SERVER_CFG["temperature"] = float(message.content.split()[1])
        return await message.channel.send("temperature set")
    if message.content.startswith("/topk "):
        SERVER_CFG["top_k"] = int(message.content.split()[1])
        return await message.channel.send("top-k set")
    async with lock:
        text = await asyncio.to_thread(decoder.reply, message.content)
    await message.channel.send(text or "...")

if __name__ == "__main__":
    client.run(os.environ["DISCORD_TOKEN"])
