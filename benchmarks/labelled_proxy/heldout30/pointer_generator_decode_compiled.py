# Pointer-generator summarizer with coverage (See et al. 2017; a 2018 PyTorch port). For the summary
# service the per-token decoder step is compiled with mode="max-autotune"; the encoder with default compile.
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("summarizer")
STOP, START = 3, 2


class Encoder(nn.Module):
    def __init__(self, vocab=50000, emb=128, hid=256):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hid, batch_first=True, bidirectional=True)
        self.W_h = nn.Linear(2 * hid, 2 * hid, bias=False)
        self.reduce_h, self.reduce_c = nn.Linear(2 * hid, hid), nn.Linear(2 * hid, hid)

    def forward(self, x):
        out, (h, c) = self.lstm(self.embedding(x))
        h0 = F.relu(self.reduce_h(torch.cat([h[0], h[1]], -1)))
        c0 = F.relu(self.reduce_c(torch.cat([c[0], c[1]], -1)))
        return out, self.W_h(out), (h0.unsqueeze(0), c0.unsqueeze(0))


class Decoder(nn.Module):
    def __init__(self, vocab=50000, emb=128, hid=256, pointer_gen=True):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.x_context = nn.Linear(2 * hid + emb, emb)
        self.lstm = nn.LSTM(emb, hid, batch_first=True)
        self.decode_proj, self.v, self.W_c = nn.Linear(2 * hid, 2 * hid), nn.Linear(2 * hid, 1, bias=False), nn.Linear(1, 2 * hid, bias=False)
        self.p_gen_linear = nn.Linear(4 * hid + emb, 1)
        self.out1, self.out2 = nn.Linear(3 * hid, hid), nn.Linear(hid, vocab)
        self.pointer_gen = pointer_gen

    def forward(self, y_t, state, c_t, enc_out, enc_feat, enc_mask, ext_ids, extra_zeros, coverage):
        logger.debug("decoder step")  # HAZARD: host-code
        x = self.x_context(torch.cat([c_t, self.embedding(y_t)], 1))
        out, state = self.lstm(x.unsqueeze(1), state)
        s_t = torch.cat([state[0].view(-1, 256), state[1].view(-1, 256)], 1)
        e = self.v(torch.tanh(enc_feat + self.decode_proj(s_t).unsqueeze(1) + self.W_c(coverage.unsqueeze(2)))).squeeze(2)
        attn = F.softmax(e.masked_fill(~enc_mask, -1e9), 1)  # CLEAN: masked_fill keeps the shape
        if (coverage > 5.0).any():  # HAZARD: dynamic-control-flow
            attn = attn * 0.5 + 0.5 * F.softmax(-coverage, 1)
        c_t = torch.bmm(attn.unsqueeze(1), enc_out).squeeze(1)
        vocab_dist = F.softmax(self.out2(self.out1(torch.cat([out.squeeze(1), c_t], 1))), 1)
        if self.pointer_gen:  # CLEAN: Python flag fixed at construction
            p_gen = torch.sigmoid(self.p_gen_linear(torch.cat([c_t, s_t, x], 1)))
            vocab_dist = torch.cat([p_gen * vocab_dist, extra_zeros], 1)
            vocab_dist = vocab_dist.scatter_add(1, ext_ids, (1 - p_gen) * attn)  # CLEAN: scatter_add with CUDA indices
        return vocab_dist, state, c_t, coverage + attn


encoder, decoder = Encoder().cuda().eval(), Decoder().cuda().eval()
encode = torch.compile(encoder)
decode_step = torch.compile(decoder, mode="max-autotune")


@torch.no_grad()
def summarize(art_ids, ext_ids, art_mask, max_art_oovs, max_dec_steps=100):
    B, L = art_ids.shape
    enc_out, enc_feat, state = encode(art_ids)
    c_t = torch.zeros(B, 512, device="cuda")
    coverage = torch.zeros(B, L, device="cuda")
    extra_zeros = torch.zeros(B, max_art_oovs, device="cuda")
    y_t = torch.full((B,), START, dtype=torch.long, device="cuda")
    step_dists, tokens = [], []
    for _ in range(max_dec_steps):
        dist, state, c_t, coverage = decode_step(y_t, state, c_t, enc_out, enc_feat, art_mask, ext_ids, extra_zeros, coverage)  # HAZARD: dynamic-shape
        state, c_t, coverage = tuple(t.clone() for t in state), c_t.clone(), coverage.clone()  # CLEAN: cloned before being fed back
        step_dists.append(dist)  # HAZARD: static-address
        y_t = dist.argmax(1)
        tokens.append(y_t.clone())
        y_t = y_t.masked_fill(y_t >= 50000, 0)
        if bool((y_t == STOP).all()):  # CLEAN: eager check between compiled calls
            break
    return torch.stack(tokens, 1), step_dists
