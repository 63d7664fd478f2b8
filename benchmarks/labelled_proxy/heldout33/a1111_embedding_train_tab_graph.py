"""sd-webui extension: "Quick Embedding" tab. Trains a textual-inversion style embedding
against a frozen toy denoiser; the whole training step is captured in one CUDA graph.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

TEMPLATES = ["a photo of {}", "a painting of {}", "a close-up of {}", "{} in the style of anime"]
TRAIN = {"lr": 5e-3, "step": 0, "log": []}


class FrozenDenoiser(nn.Module):
    def __init__(self, d=768):
        super().__init__()
        self.cond = nn.Linear(d, 64)
        self.net = nn.Sequential(nn.Conv2d(4 + 64, 64, 3, padding=1), nn.SiLU(), nn.Conv2d(64, 4, 3, padding=1))
        self.requires_grad_(False)

    def forward(self, z, emb):
        c = self.cond(emb)[:, :, None, None].expand(-1, -1, *z.shape[-2:])
        return self.net(torch.cat([z, c], 1))


class EmbeddingTrainer:
    def __init__(self, latents, d=768):
        self.model = FrozenDenoiser(d).cuda()
        self.vec = nn.Parameter(torch.randn(1, d, device="cuda") * 0.01)
        self.opt = torch.optim.AdamW([self.vec], lr=TRAIN["lr"], capturable=True)  # CLEAN: capturable AdamW
        self.static_z = latents[:1].clone()
        self.graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.graph(self.graph):
                self.static_loss = self._step()

    def _step(self):
        template_w = 1.0 + 0.1 * TEMPLATES.index(random.choice(TEMPLATES))  # HAZARD: host-code
        noise = torch.randn_like(self.static_z)  # CLEAN: default CUDA generator
        pred = self.model(self.static_z + noise, self.vec * template_w)
        loss = F.mse_loss(pred.float(), noise)
        self.opt.zero_grad(set_to_none=False)  # CLEAN: grads zeroed in place
        loss.backward()
        self.opt.step()
        TRAIN["log"].append(f"{loss.item():.4f}")  # HAZARD: host-sync
        return loss.detach()

    def run(self, latents, steps, progress=None):
        for i in range(steps):
            self.static_z.copy_(latents[i % latents.shape[0]:][:1])  # CLEAN: copy_ into the static input
            self.graph.replay()
            TRAIN["step"] = i
            if i == steps // 2:
                for g in self.opt.param_groups:
                    g["lr"] = TRAIN["lr"] * 0.1  # HAZARD: optimizer
            if progress is not None and i % 10 == 0:
                progress(i / steps, desc=f"loss {self.static_loss.item():.4f}")  # CLEAN: host read after replay
        return self.vec.detach().cpu()


def on_ui_tabs():
    import gradio as gr

    def train(n_steps, progress=gr.Progress()):
        latents = torch.randn(8, 4, 32, 32, device="cuda")
        vec = EmbeddingTrainer(latents).run(latents, int(n_steps), progress)
        torch.save({"emb": vec}, "embeddings/quick.pt")
        return f"saved, |v|={vec.norm():.3f}"

    with gr.Blocks(analytics_enabled=False) as tab:
        n = gr.Number(value=200, label="Steps")
        out = gr.Textbox()
        gr.Button("Train").click(train, [n], [out])
    return [(tab, "Quick Embedding", "quick_embedding")]
