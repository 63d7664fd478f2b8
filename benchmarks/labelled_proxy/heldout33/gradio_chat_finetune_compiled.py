"""Gradio "train your own chatbot" Space: fine-tunes a tiny LM on the user's uploaded chat log.
The LR slider and the "regularise" checkbox are live: they apply from the next step.

Model and optimizer step are compiled with mode="reduce-overhead".
"""
import gradio as gr
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D, MAXLEN = 4096, 256, 128
LIVE = {"lr": 3e-4, "regularise": False}


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.rnn = nn.GRU(D, D, batch_first=True)
        self.out = nn.Linear(D, VOCAB)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h)


def lm_loss(logits, targets):
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=0)
    if torch.isnan(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    return loss


def batches(lines, bs=16, pad_to_max=False):
    ids = [[hash(w) % (VOCAB - 1) + 1 for w in l.split()][:MAXLEN + 1] for l in lines if l.strip()]
    for i in range(0, len(ids), bs):
        chunk = ids[i:i + bs]
        L = MAXLEN + 1 if pad_to_max else max(len(c) for c in chunk)
        t = torch.zeros(bs, L, dtype=torch.long)
        for j, c in enumerate(chunk):
            t[j, :len(c)] = torch.tensor(c)
        yield t.cuda()  # CLEAN: eager upload


def train(file, epochs, lr, regularise, pad):
    LIVE.update(lr=lr, regularise=regularise)
    lines = open(file.name, encoding="utf-8").read().splitlines()
    model = TinyLM().cuda()
    cmodel = torch.compile(model, mode="reduce-overhead")
    closs = torch.compile(lm_loss, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    opt_step = torch.compile(opt.step, mode="reduce-overhead")
    history = []
    for ep in range(int(epochs)):
        for batch in batches(lines, pad_to_max=pad):
            logits = cmodel(batch[:, :-1])  # HAZARD: dynamic-shape
            loss = closs(logits, batch[:, 1:])  # HAZARD: dynamic-shape
            loss_val = loss.detach().clone()  # CLEAN: cloned before backward and the optimizer step
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
            for g in opt.param_groups:
                g["lr"] = LIVE["lr"]  # HAZARD: optimizer
                g["weight_decay"] = 0.01 if LIVE["regularise"] else 0.0  # HAZARD: optimizer
            history.append(loss_val)
        yield f"epoch {ep}: loss {torch.stack(history[-20:]).mean().item():.3f}"  # CLEAN: eager host read of clones


def set_lr(v):
    LIVE["lr"] = v


def set_reg(v):
    LIVE["regularise"] = v


with gr.Blocks() as demo:
    f = gr.File(label="chat.txt")
    epochs = gr.Number(value=3, label="Epochs")
    lr = gr.Slider(1e-5, 1e-3, value=3e-4, label="Learning rate")
    reg = gr.Checkbox(label="Regularise (weight decay)")
    pad = gr.Checkbox(label="Pad batches to 128 tokens", value=False)
    status = gr.Textbox()
    lr.change(set_lr, lr, None)
    reg.change(set_reg, reg, None)
    gr.Button("Train").click(train, [f, epochs, lr, reg, pad], status)

if __name__ == "__main__":
    demo.queue().launch()
