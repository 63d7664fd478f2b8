"""OpenAI-ES on a batched CartPole written in torch (no gym), one CUDA graph per generation.

Started from a forum answer to "ES is launch-bound for small policies": the whole
generation (antithetic noise, 500-step rollout of 1024 perturbed policies, rank fitness
shaping and the Adam update) is captured once and replayed.
"""
import torch

P, T, HID = 1024, 500, 32
D = 4 * HID + HID + HID + 1


def unflatten(theta):
    W1 = theta[:, : 4 * HID].view(-1, 4, HID)
    b1 = theta[:, 4 * HID: 5 * HID].view(-1, 1, HID)
    W2 = theta[:, 5 * HID: 6 * HID].view(-1, HID, 1)
    b2 = theta[:, 6 * HID:].view(-1, 1, 1)
    return W1, b1, W2, b2


def cartpole_step(s, force):
    x, xd, th, thd = s.unbind(-1)
    g, mc, mp, l, dt = 9.8, 1.0, 0.1, 0.5, 0.02
    ct, st = torch.cos(th), torch.sin(th)
    tmp = (force + mp * l * thd ** 2 * st) / (mc + mp)
    thacc = (g * st - ct * tmp) / (l * (4 / 3 - mp * ct ** 2 / (mc + mp)))
    xacc = tmp - mp * l * thacc * ct / (mc + mp)
    return torch.stack([x + dt * xd, xd + dt * xacc, th + dt * thd, thd + dt * thacc], -1)


class ES:
    def __init__(self, device="cuda"):
        self.dev = device
        self.theta = torch.zeros(D, device=device, requires_grad=True)
        self.opt = torch.optim.Adam([self.theta], lr=0.01)
        self.sigma = 0.1
        self.noise_gen = torch.Generator(device=device)
        self.noise_gen.manual_seed(1)
        self.env_gen = torch.Generator(device=device)
        self.env_gen.manual_seed(2)
        self.mean_return = torch.zeros((), device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _generation(self):
        half = torch.randn(P // 2, D, device=self.dev, generator=self.noise_gen)  # HAZARD: rng
        eps = torch.cat([half, -half])  # CLEAN: antithetic pairs, fixed shape
        sigma = self.sigma  # HAZARD: python-scalar
        W1, b1, W2, b2 = unflatten(self.theta.detach() + sigma * eps)
        s = 0.05 * (2 * torch.rand(P, 4, device=self.dev, generator=self.env_gen) - 1)  # CLEAN: generator registered with the graph in capture()
        alive = torch.ones(P, device=self.dev)
        ret = torch.zeros(P, device=self.dev)
        for _ in range(T):
            a = torch.tanh(torch.bmm(torch.tanh(torch.bmm(s[:, None], W1) + b1), W2) + b2)[:, 0, 0]
            s = cartpole_step(s, 10.0 * a)
            alive = alive * ((s[:, 0].abs() < 2.4) & (s[:, 2].abs() < 0.21)).float()
            ret = ret + alive
            if alive.sum() == 0:  # HAZARD: dynamic-control-flow
                break
        ranks = ret.argsort().argsort().float()
        shaped = ranks / (P - 1) - 0.5
        grad = -(shaped[:, None] * eps).mean(0) / sigma
        self.theta.grad.copy_(grad)  # CLEAN: gradient written into the existing .grad buffer
        self.opt.step()  # HAZARD: optimizer
        self.mean_return.copy_(ret.mean())

    def capture(self):
        self.theta.grad = torch.zeros_like(self.theta)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self._generation()
        torch.cuda.current_stream().wait_stream(s)
        self.graph.register_generator_state(self.env_gen)
        with torch.cuda.graph(self.graph):
            self._generation()

    def train(self, gens=300):
        self.capture()
        for g in range(gens):
            self.graph.replay()
            self.sigma = max(0.02, self.sigma * 0.995)
            if g % 10 == 0:
                print(f"gen {g:4d}  mean return {self.mean_return.item():6.1f}")  # CLEAN: host read between replays
        return self.theta.detach()


if __name__ == "__main__":
    theta = ES().train()
    torch.save(theta.cpu(), "es_cartpole_theta.pt")
