"""Beat and downbeat tracking for a DJ app's live deck.

Every 46 ms the deck hands over a new log-mel slice; a dilated TCN over the
rolling context gives beat / downbeat activations that drive the sync LEDs
and the beat grid. The per-hop work is captured once and replayed.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_MELS, CONTEXT = 81, 256
# bands the tracker was trained on (drops the sub-bass rumble and the air band)
MEL_SUBSET = list(range(4, 76))


class TCNBlock(nn.Module):
    def __init__(self, ch, dilation):
        super().__init__()
        self.conv = nn.Conv1d(ch, ch, 5, padding=2 * dilation, dilation=dilation)
        self.skip = nn.Conv1d(ch, ch, 1)

    def forward(self, x):
        return x + self.skip(F.elu(self.conv(x)))


class BeatTCN(nn.Module):
    def __init__(self, ch=20):
        super().__init__()
        self.inp = nn.Conv1d(len(MEL_SUBSET), ch, 3, padding=1)
        self.blocks = nn.Sequential(*[TCNBlock(ch, 2 ** i) for i in range(8)])
        self.head = nn.Conv1d(ch, 2, 1)

    def forward(self, spec):
        return torch.sigmoid(self.head(self.blocks(F.elu(self.inp(spec)))))


class LiveDeck:
    def __init__(self, model, low_vram=False):
        self.model = model.cuda().eval()
        self.ctx = torch.zeros(1, N_MELS, CONTEXT, device="cuda")
        self.new_slice = torch.zeros(1, N_MELS, 4, device="cuda")
        self.mel_idx = torch.arange(4, 76, device="cuda")
        self.wave_overview = torch.zeros(1, CONTEXT, device="cuda")
        self.onset_env = torch.zeros(1, CONTEXT, device="cuda")
        self.low_vram = low_vram
        self.ui_stream = torch.cuda.Stream()
        self.aux = torch.cuda.Stream()

    def _hop(self):
        self.ctx.copy_(torch.cat([self.ctx[..., 4:], self.new_slice], dim=-1))
        spec = self.ctx[:, MEL_SUBSET]  # HAZARD: host-sync
        flux_in = self.ctx.index_select(1, self.mel_idx)  # CLEAN: index tensor already on the GPU
        cur = torch.cuda.current_stream()
        self.aux.wait_stream(cur)
        with torch.cuda.stream(self.aux):  # CLEAN: forked from and joined back to the capture stream
            flux = F.relu(flux_in[..., 1:] - flux_in[..., :-1]).mean(1)
            self.onset_env[..., 1:].copy_(flux)
        cur.wait_stream(self.aux)
        act = self.model(spec)
        with torch.cuda.stream(self.ui_stream):  # HAZARD: stream
            self.wave_overview.copy_(self.ctx.mean(1))
        if self.low_vram:
            torch.cuda.empty_cache()  # HAZARD: memory
        beat, downbeat = act[:, 0], act[:, 1]
        return beat * (1.0 + 0.2 * self.onset_env), downbeat

    def capture(self):
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.no_grad():
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        self._hop()
                torch.cuda.current_stream().wait_stream(side)
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.beat, self.downbeat = self._hop()

    def push(self, mel_slice):
        self.new_slice.copy_(mel_slice)
        self.graph.replay()
        return self.beat[0, -8:].clone(), self.downbeat[0, -8:].clone()  # CLEAN: cloned before the next hop


if __name__ == "__main__":
    deck = LiveDeck(BeatTCN(), low_vram=True)
    deck.capture()
    grid = []
    for hop in range(2000):
        beat, down = deck.push(torch.randn(1, N_MELS, 4, device="cuda"))
        if hop % 20 == 0:
            grid.append(int(beat.argmax()))  # CLEAN: host read of a cloned output, outside the graph
