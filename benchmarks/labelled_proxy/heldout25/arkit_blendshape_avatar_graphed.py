"""VTuber avatar driver: webcam face landmarks (468 points) -> 52 ARKit-style blendshape
coefficients. The regressor is fine-tuned per streamer for a few minutes at start-up
(landmarks paired with a calibration recording); its forward/backward are graphed.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_LM, N_BS = 468, 52
EYE_IDX = [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]   # eyeBlink/eyeLook/eyeSquint/eyeWide L+R


class BlendshapeNet(nn.Module):
    def __init__(self, hidden=512):
        super().__init__()
        self.register_buffer("neutral", torch.zeros(N_LM, 3))
        self.register_buffer("eye_idx_t", torch.tensor(EYE_IDX))
        self.mlp = nn.Sequential(nn.Linear(N_LM * 3, hidden), nn.GELU(),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, N_BS))
        self.eye_gain = nn.Parameter(torch.ones(len(EYE_IDX)))

    def forward(self, lm):
        if torch.isnan(lm).any():  # HAZARD: dynamic-control-flow
            lm = torch.nan_to_num(lm)
        x = (lm - self.neutral).flatten(1)
        coeffs = torch.sigmoid(self.mlp(x))
        eyes = coeffs[:, EYE_IDX] * self.eye_gain  # HAZARD: host-sync
        eyes_fast = coeffs.index_select(1, self.eye_idx_t)  # CLEAN: index_select with a CUDA index buffer
        return coeffs + F.pad(eyes - eyes_fast, (8, N_BS - 22))


class AvatarCalibrator:
    def __init__(self, net, batch=64):
        self.net = net.cuda()
        sample = torch.randn(batch, N_LM, 3, device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.graphed = torch.cuda.make_graphed_callables(self.net, (sample,))
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=3e-4)

    def calibrate_neutral(self, rest_frames):
        calib = torch.as_tensor(np.stack(rest_frames), device="cuda")  # CLEAN: eager upload, outside the graphs
        self.net.neutral = calib.mean(0)  # HAZARD: static-address

    def reset_neutral(self):
        self.net.neutral.zero_()  # CLEAN: in-place reset keeps the captured buffer

    def finetune(self, loader, steps=600):
        self.net.train()
        for step, (lm, target) in zip(range(steps), loader):
            lm = lm.cuda(non_blocking=True)  # CLEAN: eager upload before the graphed call
            pred = self.graphed(lm)
            loss = F.mse_loss(pred, target.cuda())
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            if step % 100 == 0:
                print(f"calib step {step}: {loss.item():.4f}")  # CLEAN: eager logging outside the graph


def live(calibrator, tracker, avatar):
    calibrator.net.eval()                      # eval flag differs: original forward runs eagerly
    with torch.no_grad():
        for lm in tracker.stream():
            coeffs = calibrator.net(torch.as_tensor(lm, device="cuda")[None])
            avatar.set_blendshapes(coeffs[0].cpu().numpy())
