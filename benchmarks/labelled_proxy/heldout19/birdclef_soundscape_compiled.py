"""BirdCLEF 2023 -- inference on 10-minute soundscapes in 5 s windows, 264 species.

Log-mel front end + EfficientNet-B0 classifier, both compiled through a reduce-overhead
`functools.partial`.  Also has a local-validation helper that scores whole train_audio clips.
"""
import functools
import glob
import time

import numpy as np
import pandas as pd
import soundfile as sf
import timm
import torch
import torch.nn as nn
import torchaudio

SR, WIN, N_WIN, N_MELS = 32000, 5 * 32000, 120, 128
DATA = "/kaggle/input/birdclef-2023"
rcompile = functools.partial(torch.compile, mode="reduce-overhead")
SITE_TEMPERATURE = {"default": 1.0, "kenya_north": 1.3}


class BirdNet(nn.Module):
    def __init__(self, n_classes=264):
        super().__init__()
        self.cnn = timm.create_model("tf_efficientnet_b0_ns", pretrained=False, in_chans=1, num_classes=n_classes)

    def forward(self, spec):
        return self.cnn(spec)


class Pipeline:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.melspec = torchaudio.transforms.MelSpectrogram(SR, n_fft=2048, hop_length=512, n_mels=N_MELS,
                                                            f_min=50, f_max=14000).cuda()
        self.db = torchaudio.transforms.AmplitudeToDB(top_db=80).cuda()
        self.temperature = 1.0
        self.frontend_ms = 0.0
        self.frontend = rcompile(self._mel)
        self.classify = rcompile(self._classify)

    def _mel(self, wave):                                         # wave: B x samples
        t0 = time.perf_counter()  # HAZARD: host-code
        s = self.db(self.melspec(wave))
        s = (s - s.mean((1, 2), keepdim=True)) / (s.std((1, 2), keepdim=True) + 1e-6)
        self.frontend_ms = (time.perf_counter() - t0) * 1e3
        return s.unsqueeze(1)

    def _classify(self, spec):
        t = self.temperature  # HAZARD: python-scalar
        return torch.sigmoid(self.model(spec) / t)

    @torch.no_grad()
    def soundscape(self, path, site="default"):
        self.temperature = SITE_TEMPERATURE.get(site, 1.0)
        wave, _ = sf.read(path, dtype="float32")
        wave = np.pad(wave[:N_WIN * WIN], (0, max(0, N_WIN * WIN - len(wave))))
        chunks = torch.from_numpy(wave.reshape(N_WIN, WIN)).cuda()  # CLEAN: every soundscape cut/padded to 120 windows, one input shape
        spec = self.frontend(chunks)
        probs = self.classify(spec.clone())  # CLEAN: hand-over cloned before the classifier runs
        probs_np = probs.cpu().numpy()  # CLEAN: read right after classify, before any other compiled call
        loudness = spec.flatten(1).amax(1)  # HAZARD: static-address
        return probs_np, loudness.cpu().numpy()

    @torch.no_grad()
    def validate_clip(self, path):
        wave, _ = sf.read(path, dtype="float32")
        spec = self.frontend(torch.from_numpy(wave).cuda()[None])  # HAZARD: dynamic-shape
        return self.classify(spec.clone())[0].cpu().numpy()


if __name__ == "__main__":
    meta = pd.read_csv(f"{DATA}/train_metadata.csv")
    species = sorted(meta.primary_label.unique())
    model = BirdNet(len(species))
    model.load_state_dict(torch.load("/kaggle/input/bc23-b0/b0_fold0.pt", map_location="cpu"))
    pipe = Pipeline(model)
    rows = []
    for path in sorted(glob.glob(f"{DATA}/test_soundscapes/*.ogg")):
        sid = path.split("/")[-1][:-4]
        site = "kenya_north" if sid.startswith("soundscape_4") else "default"
        probs, loud = pipe.soundscape(path, site)
        probs[loud < -1.5] *= 0.5                                  # damp near-silent windows
        for i, p in enumerate(probs):
            rows.append([f"{sid}_{(i + 1) * 5}"] + p.tolist())
    pd.DataFrame(rows, columns=["row_id"] + species).to_csv("submission.csv", index=False)
    val = meta.sample(200, random_state=0)
    hits = [np.argmax(pipe.validate_clip(f"{DATA}/train_audio/{f}")) == species.index(lab)
            for f, lab in zip(val.filename, val.primary_label)]
    print("clip top-1", np.mean(hits), f"(front end {pipe.frontend_ms:.1f} ms)")
