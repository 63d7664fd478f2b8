"""Visual servoing policy for tight-clearance peg-in-hole insertion.

A wrist-camera crop (96x96) and the 6-axis force/torque reading are mapped to a
Cartesian twist. The policy is behaviour-cloned from kinesthetic demonstrations
and then run on the robot. The compiled policy (COMPILE_KW, max-autotune) is
handed to the trainer, which compiles its own optimizer step the same way.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

COMPILE_KW = dict(mode="max-autotune", dynamic=False)
F_MAX = 40.0                                              # N, sensor range used for normalisation


class ServoPolicy(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, ch, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(2 * ch, 2 * ch, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Linear(2 * ch + 6, 128), nn.ReLU(), nn.Linear(128, 6))

    def forward(self, img, wrench):
        wrench.clamp_(-F_MAX, F_MAX)  # HAZARD: static-address
        z = torch.cat([self.cnn(img), wrench / F_MAX], 1)
        twist = torch.tanh(self.head(z)) * 0.02              # m/s and rad/s
        gate = torch.where(wrench[:, 2:3].abs() > 25.0, 0.0, 1.0)  # CLEAN: hard stop without a host branch
        if wrench[:, 2].abs().max() > 8.0:  # HAZARD: dynamic-control-flow
            twist = twist * 0.3                               # in contact: slow down
        return twist * gate


class BCTrainer:
    def __init__(self, policy, compiled_policy, lr=3e-4, weight_decay=1e-2, wd_off_epoch=30):
        self.policy, self.fpolicy = policy, compiled_policy
        self.opt = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=weight_decay)
        self.opt_step = torch.compile(self.opt.step, **COMPILE_KW)
        self.wd_off_epoch = wd_off_epoch

    def fit(self, loader, epochs=60):
        for epoch in range(epochs):
            self.policy.train()
            for img, wrench, twist in loader:
                pred = self.fpolicy(img.cuda(non_blocking=True), wrench.cuda(non_blocking=True))
                loss = F.smooth_l1_loss(pred, twist.cuda(non_blocking=True), beta=1e-3)
                loss.backward()
                self.opt_step()
                self.opt.zero_grad(set_to_none=True)
            if epoch == self.wd_off_epoch:
                for group in self.opt.param_groups:
                    group["weight_decay"] = 0.0  # HAZARD: optimizer

    @torch.no_grad()
    def rollout(self, robot, steps=400):
        self.policy.eval()
        twists = []
        obs = robot.observe()
        for _ in range(steps):
            twist = self.fpolicy(obs["img"], obs["wrench"])
            twists.append(twist)  # HAZARD: static-address
            obs = robot.apply_twist(twist[0].cpu().numpy())
            if obs["inserted"]:
                break
        return torch.cat(twists)

    @torch.no_grad()
    def rollout_recorded(self, robot, steps=400):
        self.policy.eval()
        record = []
        obs = robot.observe()
        for _ in range(steps):
            twist = self.fpolicy(obs["img"], obs["wrench"])
            record.append(twist.clone())  # CLEAN: cloned before the next call
            obs = robot.apply_twist(twist[0].cpu().numpy())  # CLEAN: host read right after the call
        return torch.cat(record)


def main(loader, robot):
    policy = ServoPolicy().cuda()
    trainer = BCTrainer(policy, torch.compile(policy, **COMPILE_KW))
    trainer.fit(loader)
    return trainer.rollout(robot)
