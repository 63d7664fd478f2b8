"""Surgical phase recognition for laparoscopic cholecystectomy (7 phases).

Frame features come from a frozen backbone (2048-d at 1 fps); a dilated
temporal convolution model is trained on 256-frame clips, validated on whole
videos and run online in the OR on a sliding window. A subclass compiles the
phase methods with mode="max-autotune"; the loop dispatches them with getattr.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

N_PHASES, FEAT, CLIP = 7, 2048, 256


class PhaseTCN(nn.Module):
    def __init__(self, ch=64, layers=8):
        super().__init__()
        self.inp = nn.Conv1d(FEAT, ch, 1)
        self.layers = nn.ModuleList([nn.Conv1d(ch, ch, 3, padding=2 ** i, dilation=2 ** i) for i in range(layers)])
        self.out = nn.Conv1d(ch, N_PHASES, 1)

    def forward(self, x):                                  # [B, FEAT, T]
        h = self.inp(x)
        for conv in self.layers:
            h = h + F.relu(conv(h))
        return self.out(h)


class PhaseTrainer:
    def __init__(self, model, lr=5e-4, epochs=50):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr, weight_decay=1e-5)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs)
        self.last_step_wall = 0.0

    def train_step(self, feats, labels):
        logits = self.model(feats)
        ce = F.cross_entropy(logits, labels)
        smooth = F.mse_loss(F.log_softmax(logits[..., 1:], 1), F.log_softmax(logits.detach()[..., :-1], 1)).clamp(max=16.0)
        self.last_step_wall = time.time()  # HAZARD: host-code
        return ce + 0.15 * smooth

    def optimizer_step(self):
        self.opt.step()

    def online_step(self, window):
        last = torch.softmax(self.model(window)[..., -1], 1)
        self.confidence = last.max().item()  # HAZARD: host-sync
        return last.argmax(1)

    def evaluate_video(self, feats):
        return self.model(feats).argmax(1)

    def run(self, phase, *args):
        return getattr(self, phase)(*args)


class CompiledPhaseTrainer(PhaseTrainer):
    PHASES = ("train_step", "optimizer_step", "online_step", "evaluate_video")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.PHASES:
            setattr(self, name, torch.compile(getattr(self, name), mode="max-autotune"))


def fit(train_loader, val_videos, epochs=50):
    trainer = CompiledPhaseTrainer(PhaseTCN(), epochs=epochs)
    for epoch in range(epochs):
        trainer.model.train()
        for feats, labels in train_loader:                  # fixed 256-frame clips
            loss = trainer.run("train_step", feats.cuda(non_blocking=True), labels.cuda(non_blocking=True))  # CLEAN: fixed 256-frame clips
            loss.backward()
            trainer.run("optimizer_step")
            trainer.opt.zero_grad(set_to_none=True)
        trainer.sched.step()  # HAZARD: optimizer
        trainer.model.eval()
        correct = total = 0
        with torch.no_grad():
            for feats, labels in val_videos:                # whole videos, 20-90 minutes each
                pred = trainer.run("evaluate_video", feats.cuda())  # HAZARD: dynamic-shape
                correct += (pred.cpu() == labels).sum().item()  # CLEAN: host read right after the call, outside compiled code
                total += labels.numel()
        print(f"epoch {epoch}: frame accuracy {correct / total:.3f}")
    return trainer


@torch.no_grad()
def live(trainer, frame_features):
    trainer.model.eval()
    window = torch.zeros(1, FEAT, CLIP, device="cuda")
    for f in frame_features:                                # one 2048-d feature per second
        window = torch.roll(window, -1, dims=2)
        window[0, :, -1] = f
        phase = trainer.run("online_step", window)  # CLEAN: fixed 256-frame window
        yield int(phase), trainer.confidence
