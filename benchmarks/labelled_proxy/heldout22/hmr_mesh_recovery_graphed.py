"""HMR-style 3D human mesh recovery: a convolutional backbone plus an iterative SMPL-parameter regressor,
picked from a small model zoo and trained with torch.cuda.make_graphed_callables."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SMPL_MEAN = dict(pose=np.zeros(144, np.float32), shape=np.zeros(10, np.float32),
                 cam=np.array([0.9, 0.0, 0.0], np.float32))

class Backbone(nn.Module):
    def __init__(self, width=64, out_dim=2048):
        super().__init__()
        chans = [3, width, 2 * width, 4 * width, 8 * width]
        self.stages = nn.Sequential(*[nn.Sequential(nn.Conv2d(a, b, 3, 2, 1), nn.BatchNorm2d(b), nn.ReLU())
                                      for a, b in zip(chans[:-1], chans[1:])])
        self.proj = nn.Linear(8 * width, out_dim)

    def forward(self, img):
        return self.proj(self.stages(img).mean((2, 3)))

class IterativeRegressor(nn.Module):
    def __init__(self, feat_dim=2048, n_iter=3, focal_length=5000.0, img_res=224):
        super().__init__()
        n_params = 144 + 10 + 3
        self.fc = nn.Sequential(nn.Linear(feat_dim + n_params, 1024), nn.ReLU(), nn.Dropout(0.5),
                                nn.Linear(1024, n_params))
        init = np.concatenate([SMPL_MEAN["pose"], SMPL_MEAN["shape"], SMPL_MEAN["cam"]])
        self.register_buffer("init_params", torch.from_numpy(init)[None])  # CLEAN: buffer, moved with .cuda() at build time
        self.n_iter, self.focal_length, self.img_res = n_iter, focal_length, img_res

    def forward(self, feat):
        params = self.init_params.expand(feat.shape[0], -1)
        for _ in range(self.n_iter):  # HAZARD: python-scalar
            params = params + self.fc(torch.cat([feat, params], 1))
        cam = params[:, -3:]
        focal = torch.tensor([self.focal_length, self.focal_length], device=feat.device)  # HAZARD: host-sync
        depth = 2 * focal[0] / (self.img_res * cam[:, 0] + 1e-9)
        return params, torch.stack([cam[:, 1], cam[:, 2], depth], -1)

MODEL_ZOO = {
    "hmr-r50": dict(backbone=dict(width=64), regressor=dict(n_iter=3)),
    "hmr-lite": dict(backbone=dict(width=32), regressor=dict(n_iter=1)),
}

def build_hmr(name):
    spec = MODEL_ZOO[name]
    return Backbone(**spec["backbone"]), IterativeRegressor(**spec["regressor"])

class FeatureVisualizer:
    def __init__(self):
        self.last = None

    def hook(self, module, inputs, output):
        self.last = output.detach()

def log_cam_hook(module, inputs, output):
    module.last_cam = output[1].detach()

def smpl_loss(params, cam_t, gt_params, gt_cam):
    return F.mse_loss(params, gt_params) + 0.1 * F.mse_loss(cam_t, gt_cam)

def main(loader, epochs=10, n_iter_schedule={0: 1, 5: 3}):
    backbone, regressor = build_hmr("hmr-lite")
    backbone, regressor = backbone.cuda().train(), regressor.cuda().train()
    vis = FeatureVisualizer()
    backbone.register_forward_hook(vis.hook)  # HAZARD: api-misuse
    img = torch.randn(32, 3, 224, 224, device="cuda")
    feat = torch.randn(32, 2048, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        backbone, regressor = torch.cuda.make_graphed_callables((backbone, regressor), ((img,), (feat,)))
    regressor.register_forward_hook(log_cam_hook)  # CLEAN: hook registered after graphing
    opt = torch.optim.Adam(list(backbone.parameters()) + list(regressor.parameters()), lr=5e-5)
    for epoch in range(epochs):
        if epoch in n_iter_schedule:
            regressor.n_iter = n_iter_schedule[epoch]
        for images, gt_params, gt_cam in loader:
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast without its cache
                params, cam_t = regressor(backbone(images))
            loss = smpl_loss(params.float(), cam_t.float(), gt_params, gt_cam)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        print(f"epoch {epoch}: loss {loss.item():.4f}")  # CLEAN: eager read after the optimizer step

if __name__ == "__main__":
    data = [(torch.randn(32, 3, 224, 224, device="cuda"), torch.randn(32, 157, device="cuda"),
             torch.randn(32, 3, device="cuda")) for _ in range(20)]
    main(data)
