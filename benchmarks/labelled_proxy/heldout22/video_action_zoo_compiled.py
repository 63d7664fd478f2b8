"""Kinetics-400 action recognition: a torchvision-style zoo of (2+1)D / X3D-like video nets and a multi-view
tester whose prediction function is compiled with mode="max-autotune" (CUDA graphs); fine-tuning uses a
max-autotune-no-cudagraphs compile of the same model."""
import torch
import torch.nn as nn
import torch.nn.functional as F

class R2Plus1dBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        mid = (c_in + c_out) // 2
        self.spatial = nn.Conv3d(c_in, mid, (1, 3, 3), (1, stride, stride), (0, 1, 1))
        self.temporal = nn.Conv3d(mid, c_out, (3, 1, 1), (stride, 1, 1), (1, 0, 0))
        self.bn1, self.bn2 = nn.BatchNorm3d(mid), nn.BatchNorm3d(c_out)
        self.skip = nn.Conv3d(c_in, c_out, 1, (stride, stride, stride))

    def forward(self, x):
        return F.relu(self.bn2(self.temporal(F.relu(self.bn1(self.spatial(x))))) + self.skip(x))

class VideoNet(nn.Module):
    def __init__(self, widths=(32, 64, 128, 256), num_classes=400, dropout=0.5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(3, widths[0], (3, 7, 7), (1, 2, 2), (1, 3, 3)), nn.BatchNorm3d(widths[0]), nn.ReLU())
        self.stages = nn.Sequential(*[R2Plus1dBlock(a, b, 2) for a, b in zip(widths[:-1], widths[1:])])
        self.dropout, self.fc = nn.Dropout(dropout), nn.Linear(widths[-1], num_classes)

    def forward(self, clips):
        return self.fc(self.dropout(self.stages(self.stem(clips)).mean((2, 3, 4))))

MODEL_ZOO = {
    "r2plus1d_lite_16x4": dict(widths=(32, 64, 128, 256), clip_len=16, crop=112),
    "x3d_xs_lite_4x12": dict(widths=(24, 48, 96, 192), clip_len=4, crop=160),
}

def build(name):
    spec = dict(MODEL_ZOO[name])
    clip_len, crop = spec.pop("clip_len"), spec.pop("crop")
    return VideoNet(**spec), clip_len, crop

def sample_views(video, clip_len, crop, n_views=None):
    T = video.shape[1]
    n = n_views or max(1, T // (2 * clip_len))
    starts = torch.linspace(0, max(T - clip_len, 0), n).long().tolist()
    clips = [video[:, s:s + clip_len, :crop, :crop] for s in starts]
    return torch.stack(clips).cuda(non_blocking=True)

class MultiViewTester:
    def __init__(self, name, abstain=0.2):
        self.model, self.clip_len, self.crop = build(name)
        self.model = self.model.cuda().eval()
        self.abstain = abstain
        self.test_fn = torch.compile(self._predict, mode="max-autotune")
        self.train_fn = torch.compile(self.model, mode="max-autotune-no-cudagraphs")
        self.last_top1 = -1

    def _predict(self, views):
        probs = self.model(views).softmax(-1).mean(0)
        if probs.max() < self.abstain:  # HAZARD: dynamic-control-flow
            return torch.zeros_like(probs)
        self.last_top1 = probs.argmax().item()  # HAZARD: host-sync
        return probs

    @torch.no_grad()
    def test_video(self, video):
        return self.test_fn(sample_views(video, self.clip_len, self.crop)).clone()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def test_video_fixed(self, video):
        return self.test_fn(sample_views(video, self.clip_len, self.crop, n_views=10)).clone()  # CLEAN: always 10 views

    @torch.no_grad()
    def test_set(self, videos):
        all_probs = []
        for video in videos:
            all_probs.append(self.test_fn(sample_views(video, self.clip_len, self.crop, n_views=10)))  # HAZARD: static-address
        return torch.stack(all_probs)

    def finetune_step(self, clips, labels, opt):
        self.model.train()
        loss = F.cross_entropy(self.train_fn(clips), labels)  # CLEAN: compiled without CUDA graphs
        loss.backward()
        opt.step()
        opt.zero_grad()
        self.model.eval()
        return loss.item()  # CLEAN: eager read, no CUDA graph involved

if __name__ == "__main__":
    tester = MultiViewTester("r2plus1d_lite_16x4")
    videos = [torch.rand(3, t, 128, 171) for t in (64, 300, 250, 64)]
    p_var = [tester.test_video(v) for v in videos]
    p_fix = [tester.test_video_fixed(v) for v in videos]
    p_set = tester.test_set(videos)
