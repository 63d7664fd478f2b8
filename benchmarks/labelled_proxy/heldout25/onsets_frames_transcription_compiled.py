"""Piano transcription (Onsets and Frames), ported from the Magenta TF implementation.

Acoustic stacks for onsets / frames / velocity, then a BiLSTM per head like
`magenta.models.onsets_frames_transcription.model`. The practice app transcribes a
recording chunk by chunk (20 s chunks) and shows the piano roll.
"""
import numpy as np
import torch
import torch.nn as nn

N_MELS, N_KEYS, CHUNK = 229, 88, 625   # 625 frames = 20 s at 31.25 fps


class AcousticStack(nn.Module):
    def __init__(self, out=N_KEYS, ch=48):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU(), nn.MaxPool2d((1, 2)),
            nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(), nn.MaxPool2d((1, 2)))
        self.fc = nn.Linear(2 * ch * (N_MELS // 4), 512)
        self.lstm = nn.LSTM(512, 128, batch_first=True, bidirectional=True)
        self.out = nn.Linear(256, out)

    def forward(self, mel):
        h = self.conv(mel.unsqueeze(1))
        h = self.fc(h.permute(0, 2, 1, 3).flatten(2))
        h, _ = self.lstm(h)
        return self.out(h)


class OnsetsAndFrames(nn.Module):
    def __init__(self):
        super().__init__()
        self.onset = AcousticStack()
        self.frame = AcousticStack()
        self.combine = nn.LSTM(2 * N_KEYS, 128, batch_first=True, bidirectional=True)
        self.frame_out = nn.Linear(256, N_KEYS)

    def forward(self, mel):
        onset = torch.sigmoid(self.onset(mel))
        frame_act = torch.sigmoid(self.frame(mel))
        h, _ = self.combine(torch.cat([onset.detach(), frame_act], -1))
        frames = torch.sigmoid(self.frame_out(h))
        frames = torch.where(onset > 0.5, torch.ones_like(frames), frames)  # CLEAN: onset forces frame on, device-side select
        starts = (onset > 0.5).nonzero()  # HAZARD: dynamic-shape
        print("chunk onsets:", starts.shape[0])  # HAZARD: host-code
        return onset, frames


def transcribe(model, mel, device="cuda"):
    model = model.to(device).eval()
    fast = torch.compile(model, mode="reduce-overhead")
    rolls = []
    with torch.no_grad():
        for start in range(0, mel.shape[0], CHUNK):
            chunk = torch.from_numpy(mel[start:start + CHUNK]).to(device)[None]
            onset, frames = fast(chunk)  # HAZARD: dynamic-shape
            rolls.append(frames)  # HAZARD: static-address
    return torch.cat(rolls, 1)[0]


def transcribe_padded(model, mel, device="cuda"):
    fast = torch.compile(model.to(device).eval(), mode="reduce-overhead")
    n = mel.shape[0]
    padded = np.pad(mel, ((0, (-n) % CHUNK), (0, 0)))
    rolls = []
    with torch.no_grad():
        for start in range(0, padded.shape[0], CHUNK):
            chunk = torch.from_numpy(padded[start:start + CHUNK]).to(device)[None]
            _, frames = fast(chunk)  # CLEAN: every call has the same padded shape
            rolls.append(frames.clone())  # CLEAN: cloned before the next replay
    return torch.cat(rolls, 1)[0, :n]


def roll_to_notes(roll, thr=0.5):
    active = (roll > thr).cpu().numpy()  # CLEAN: eager post-processing, outside any compiled region
    notes = []
    for key in range(N_KEYS):
        edges = np.diff(np.concatenate([[0], active[:, key].astype(np.int8), [0]]))
        on, off = np.where(edges == 1)[0], np.where(edges == -1)[0]
        notes += [(key + 21, a / 31.25, b / 31.25) for a, b in zip(on, off)]
    return sorted(notes, key=lambda n: n[1])
