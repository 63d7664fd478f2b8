"""Policy server for a Unity game: NPCs send observations over a TCP socket every frame,
the server answers with actions. The policy is compiled with mode="reduce-overhead".

Protocol: 4-byte length + float32 observation vector, reply: int32 action per NPC.
"""
import socket
import struct

import numpy as np
import torch
import torch.nn as nn

OBS_DIM, N_ACT, MAX_NPC = 48, 9, 32
CONFIG = {"epsilon": 0.05}


class NPCPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM, 128), nn.Tanh(), nn.Linear(128, N_ACT))
        self.register_buffer("obs_mean", torch.zeros(OBS_DIM))
        self.register_buffer("obs_std", torch.ones(OBS_DIM))

    def forward(self, obs):
        obs.sub_(self.obs_mean).div_(self.obs_std)  # HAZARD: static-address
        logits = self.net(obs)
        CONFIG["last_max_logit"] = logits.max().item()  # HAZARD: host-sync
        if np.random.rand() < CONFIG["epsilon"]:  # HAZARD: host-code
            logits = torch.rand_like(logits)
        return logits.argmax(-1)

    def forward_clean(self, obs):
        x = (obs - self.obs_mean) / self.obs_std  # CLEAN: out-of-place normalisation
        return self.net(x).argmax(-1)


policy = NPCPolicy().cuda().eval()
act_fast = torch.compile(policy, mode="reduce-overhead")
act_clean = torch.compile(policy.forward_clean, mode="reduce-overhead")
replay_log = []


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError
        buf += chunk
    return buf


@torch.no_grad()
def serve(port=5055, use_clean=False):
    srv = socket.socket()
    srv.bind(("127.0.0.1", port))
    srv.listen(1)
    conn, _ = srv.accept()
    padded = torch.zeros(MAX_NPC, OBS_DIM, device="cuda")
    while True:
        (n_bytes,) = struct.unpack("<I", read_exact(conn, 4))
        obs_np = np.frombuffer(read_exact(conn, n_bytes), dtype=np.float32).reshape(-1, OBS_DIM)
        n = obs_np.shape[0]
        padded.zero_()
        padded[:n] = torch.from_numpy(obs_np).cuda()
        if use_clean:
            actions = act_clean(padded)  # CLEAN: fixed MAX_NPC shape, no input mutation
        else:
            actions = act_fast(padded.clone())
        replay_log.append(actions)  # HAZARD: static-address
        first = actions[0].item()  # CLEAN: eager read of the latest output
        out = actions[:n].to(torch.int32).cpu().numpy()  # CLEAN: host copy right after the call
        conn.sendall(struct.pack("<I", n) + out.tobytes())
        if first < 0:
            break


def update_normaliser(mean_np, std_np):
    policy.obs_mean.copy_(torch.from_numpy(mean_np))  # CLEAN: buffer updated in place
    policy.obs_std.copy_(torch.from_numpy(std_np))


if __name__ == "__main__":
    serve()
