"""Tiled VAE decoding for high-resolution diffusion outputs (diffusers-style tiling).

Each latent tile (64x64 latents -> 512x512 pixels, 25% overlap) is decoded by a
CUDA graph captured per tile shape with capture_begin/capture_end; tiles are then
blended on overlapping rows/columns.
"""
import numpy as np
import torch


class TiledVAEDecoder:
    def __init__(self, vae, tile_latent=64, overlap=0.25, device="cuda"):
        self.vae, self.device = vae.eval(), device
        self.scaling_factor = vae.config.scaling_factor
        self.tile = tile_latent
        self.stride = int(tile_latent * (1 - overlap))
        self.blend_px = int(tile_latent * 8 * overlap)
        self.graphs, self.static_in, self.static_out = {}, {}, {}
        ramp = torch.linspace(0, 1, self.blend_px, device=device)
        self.ramp_v, self.ramp_h = ramp.view(1, 1, -1, 1), ramp.view(1, 1, 1, -1)  # CLEAN: blend ramps built once on the device

    def _decode_tile(self, z):
        shift = torch.from_numpy(np.asarray(self.vae.config.shift_factor or 0.0, dtype=np.float32)).to(self.device)  # HAZARD: pinned-memory
        dec = self.vae.decoder(self.vae.post_quant_conv(z / self.scaling_factor + shift))
        if torch.isnan(dec).any():  # HAZARD: dynamic-control-flow
            dec = self.vae.decoder.float()(self.vae.post_quant_conv.float()(z.float() / self.scaling_factor + shift)).half()
        return (dec / 2 + 0.5).clamp(0, 1)

    @torch.inference_mode()
    def _graph_for(self, shape):
        if shape not in self.graphs:
            static_in = torch.zeros(shape, device=self.device, dtype=torch.float16)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self._decode_tile(static_in)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.empty_cache()  # CLEAN: outside the capture
            g = torch.cuda.CUDAGraph()
            g.capture_begin()  # HAZARD: stream
            torch.cuda.empty_cache()  # HAZARD: memory
            static_out = self._decode_tile(static_in)
            g.capture_end()
            self.graphs[shape], self.static_in[shape], self.static_out[shape] = g, static_in, static_out
        return self.graphs[shape], self.static_in[shape], self.static_out[shape]

    def _blend_v(self, a, b):
        n = min(a.shape[2], b.shape[2], self.blend_px)
        b[:, :, :n] = a[:, :, -n:] * (1 - self.ramp_v[:, :, :n]) + b[:, :, :n] * self.ramp_v[:, :, :n]
        return b

    def _blend_h(self, a, b):
        n = min(a.shape[3], b.shape[3], self.blend_px)
        b[:, :, :, :n] = a[:, :, :, -n:] * (1 - self.ramp_h[..., :n]) + b[:, :, :, :n] * self.ramp_h[..., :n]
        return b

    @torch.inference_mode()
    def decode(self, latents):
        rows = []
        for i in range(0, latents.shape[2], self.stride):
            row = []
            for j in range(0, latents.shape[3], self.stride):
                z = latents[:, :, i: i + self.tile, j: j + self.tile]
                g, static_in, static_out = self._graph_for(tuple(z.shape))
                static_in.copy_(z)  # CLEAN: copy into the static input
                g.replay()
                row.append(static_out.clone())  # CLEAN: cloned before the next replay
            rows.append(row)
        limit = self.stride * 8
        out_rows = []
        for i, row in enumerate(rows):
            tiles = []
            for j, tile in enumerate(row):
                if i > 0:
                    tile = self._blend_v(rows[i - 1][j], tile)
                if j > 0:
                    tile = self._blend_h(row[j - 1], tile)
                tiles.append(tile[:, :, :limit, :limit])
            out_rows.append(torch.cat(tiles, dim=3))
        image = torch.cat(out_rows, dim=2)
        return image.float().cpu()  # CLEAN: host copy after all replays
