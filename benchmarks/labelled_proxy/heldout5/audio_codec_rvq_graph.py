"""Neural audio codec encoder (SEANet-style conv encoder + residual VQ) served through a CUDA graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SEANetEncoder(nn.Module):
    def __init__(self, ch=32, dim=128, strides=(2, 4, 5, 8)):
        super().__init__()
        layers = [nn.Conv1d(1, ch, 7, padding=3)]
        for s in strides:
            layers += [nn.ELU(), nn.Conv1d(ch, ch * 2, 2 * s, stride=s, padding=s // 2)]
            ch *= 2
        layers += [nn.ELU(), nn.Conv1d(ch, dim, 3, padding=1)]
        self.net = nn.Sequential(*layers)

    def forward(self, wav):
        return self.net(wav)


class ResidualVQ(nn.Module):
    def __init__(self, n_q=8, bins=1024, dim=128):
        super().__init__()
        self.register_buffer("codebooks", torch.randn(n_q, bins, dim))
        self.register_buffer("usage", torch.zeros(n_q, bins))
        self.code_hist = [[0] * bins for _ in range(n_q)]

    def encode(self, z, n_q):
        residual, codes = z.transpose(1, 2), []
        for q in range(n_q):
            cb = self.codebooks[q]
            d = residual.pow(2).sum(-1, keepdim=True) - 2 * residual @ cb.t() + cb.pow(2).sum(-1)
            idx = d.argmin(-1)
            residual = residual - F.embedding(idx, cb)
            self.usage[q].index_add_(0, idx.flatten(), torch.ones_like(idx.flatten(), dtype=self.usage.dtype))  # CLEAN: usage counter stays on the device
            codes.append(idx)
        return torch.stack(codes, 1)


class CodecEncoder(nn.Module):
    BANDWIDTH_TO_NQ = {1.5: 2, 3.0: 4, 6.0: 8}

    def __init__(self):
        super().__init__()
        self.encoder = SEANetEncoder()
        self.rvq = ResidualVQ()
        self.bandwidth = 6.0
        self.meter_stream = torch.cuda.Stream()
        self.aux_stream = torch.cuda.Stream()

    def forward(self, wav):  # (B, 1, T) at 24 kHz
        z = self.encoder(wav)
        n_q = self.BANDWIDTH_TO_NQ[self.bandwidth]  # HAZARD: python-scalar
        codes = self.rvq.encode(z, n_q)
        hist = codes.transpose(0, 1).flatten(1).tolist()  # HAZARD: host-sync
        for q, row in enumerate(hist):
            for c in row:
                self.rvq.code_hist[q][c] += 1
        with torch.cuda.stream(self.meter_stream):  # HAZARD: stream
            self.loudness = 10 * torch.log10(wav.pow(2).mean(-1) + 1e-10)
        self.aux_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.aux_stream):  # CLEAN: side stream forked from and joined back to the capture stream
            self.frame_energy = z.pow(2).mean(1)
        torch.cuda.current_stream().wait_stream(self.aux_stream)
        return codes


class CodecServer:
    def __init__(self, model, chunk=24000, batch=16):
        self.model = model.cuda().eval()
        self.wav = torch.zeros(batch, 1, chunk, device="cuda")
        self.capture_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def build(self):
        self.capture_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.capture_stream):
            for _ in range(3):
                self.model(self.wav)
        torch.cuda.current_stream().wait_stream(self.capture_stream)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.graph(self.graph, stream=self.capture_stream):  # CLEAN: explicit side stream for the capture
                self.codes = self.model(self.wav)

    def set_bandwidth(self, kbps):
        self.model.bandwidth = kbps

    @torch.no_grad()
    def encode(self, wav):
        self.wav.copy_(wav)
        self.graph.replay()
        return self.codes.cpu()  # CLEAN: device-to-host copy after replay, outside the graph


if __name__ == "__main__":
    server = CodecServer(CodecEncoder())
    server.build()
    server.set_bandwidth(1.5)
    print(server.encode(torch.randn(16, 1, 24000, device="cuda")).shape)
