import torch
import torch.nn as nn


class Callback:
    def on_train_step(self, trainer, loss):
        pass


class LossHistory(Callback):
    def __init__(self, path):
        self.fh = open(path, "a")
        self.history = []

    def on_train_step(self, trainer, loss):
        self.history.append(loss.detach())  # HAZARD: host-code
        self.fh.write(f"step {trainer.global_step}\n")  # HAZARD: host-code


class GraphedStep:
    def __init__(self, fn, warmup=3):
        self.fn, self.warmup = fn, warmup
        self.graph, self.out = None, None

    def capture(self, *static_inputs):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(self.warmup):
                self.fn(*static_inputs)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=s):
            self.out = self.fn(*static_inputs)

    def __call__(self):
        self.graph.replay()
        return self.out


class Trainer:
    def __init__(self, model, lr=1e-3, callbacks=(), batch_shape=(128, 256), precision="fp16"):
        self.model = model.cuda()
        self.opt = torch.optim.NAdam(self.model.parameters(), lr=lr)
        self.loss_fn = nn.CrossEntropyLoss()
        self.callbacks = list(callbacks)
        self.precision = precision
        self.loss_scale = 2.0 ** 16
        self.global_step = 0
        self.static_x = torch.zeros(batch_shape, device="cuda")
        self.static_y = torch.zeros(batch_shape[0], dtype=torch.long, device="cuda")
        self.step = GraphedStep(self._train_step)

    def _train_step(self, x, y):
        self.opt.zero_grad(set_to_none=False)
        scale = self.loss_scale  # HAZARD: python-scalar
        loss = self.loss_fn(self.model(x), y)
        (loss * scale).backward()
        for p in self.model.parameters():
            p.grad.div_(scale)
        self.opt.step()  # HAZARD: optimizer
        self.global_step += 1  # HAZARD: host-code
        for cb in self.callbacks:
            cb.on_train_step(self, loss)
        return loss.detach()

    def fit(self, loader, epochs=1):
        if self.precision == "fp16":  # CLEAN: string comparison on a config value
            with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
                self.step.capture(self.static_x, self.static_y)
        else:
            self.step.capture(self.static_x, self.static_y)
        for epoch in range(epochs):
            for x, y in loader:
                self.static_x.copy_(x, non_blocking=True)
                self.static_y.copy_(y, non_blocking=True)
                loss = self.step()
                if not torch.isfinite(loss):  # CLEAN: host check after replay, outside the region
                    self.loss_scale /= 2
            print(f"epoch {epoch}: loss={self.step.out.item():.4f}")  # CLEAN: .item() after replay, outside the region
