"""ByteTrack-style multi-object tracker with the Kalman predict, IoU association and update for a fixed track
capacity on the GPU, captured once as a CUDA graph. Per-sequence threshold overrides follow the MOT17 /
MOT20 evaluation scripts."""
import torch

SEQ_OVERRIDES = {"MOT17-05": dict(match_thresh=0.8), "MOT17-13": dict(match_thresh=0.7),
                 "MOT20-06": dict(match_thresh=0.95), "MOT20-08": dict(match_thresh=0.9)}

def box_iou(a, b):
    lt, rb = torch.maximum(a[:, None, :2], b[None, :, :2]), torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp_min(0).prod(-1)
    area = lambda x: (x[:, 2:] - x[:, :2]).clamp_min(0).prod(-1)
    return inter / (area(a)[:, None] + area(b)[None] - inter + 1e-6)

def xyah_to_xyxy(m):
    w = m[:, 2] * m[:, 3]
    return torch.stack([m[:, 0] - w / 2, m[:, 1] - m[:, 3] / 2, m[:, 0] + w / 2, m[:, 1] + m[:, 3] / 2], -1)

def xyxy_to_xyah(b):
    w, h = b[:, 2] - b[:, 0], (b[:, 3] - b[:, 1]).clamp_min(1e-3)
    return torch.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, w / h, h], -1)

class GPUByteTracker:
    def __init__(self, capacity=256, max_dets=128, track_thresh=0.5, match_thresh=0.8, gain=0.6):
        dev = "cuda"
        self.F = torch.eye(8, device=dev)
        self.F[:4, 4:] = torch.eye(4, device=dev)
        self.Q = torch.eye(8, device=dev) * 1e-2
        self.mean = torch.zeros(capacity, 8, device=dev)
        self.cov = torch.eye(8, device=dev).repeat(capacity, 1, 1)
        self.alive = torch.zeros(capacity, dtype=torch.bool, device=dev)
        self.dets = torch.zeros(max_dets, 5, device=dev)
        self.track_thresh, self.match_thresh, self.gain = track_thresh, match_thresh, gain
        self.frame_id = 0
        self.graph = torch.cuda.CUDAGraph()

    def _predict(self):
        mean_pred = self.mean @ self.F.t()
        self.mean = mean_pred  # HAZARD: static-address
        self.cov.copy_(self.F @ self.cov @ self.F.t() + self.Q)  # CLEAN: in-place update keeps the captured address

    def _associate(self):
        iou = box_iou(xyah_to_xyxy(self.mean[:, :4]), self.dets[:, :4])
        high = self.dets[:, 4] > self.track_thresh
        cost = torch.where(high[None] & self.alive[:, None], iou, torch.zeros_like(iou))  # CLEAN: torch.where keeps the shape
        best_iou, best_det = cost.max(1)
        thr = 1.0 - self.match_thresh  # HAZARD: python-scalar
        return best_iou > thr, best_det

    def _update(self, matched, best_det):
        meas = xyxy_to_xyah(self.dets.index_select(0, best_det)[:, :4])  # CLEAN: index_select with a CUDA index
        innov = meas - self.mean[:, :4]
        new_mean = self.mean.clone()
        new_mean[:, :4] += self.gain * innov
        new_mean[:, 4:] += self.gain * 0.1 * innov
        self.mean.copy_(torch.where(matched[:, None], new_mean, self.mean))
        self.alive |= matched
        self.frame_id += 1  # HAZARD: host-code

    def _step(self):
        self._predict()
        matched, best_det = self._associate()
        self._update(matched, best_det)
        return matched, best_det

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.mean.zero_()
        self.alive.zero_()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.static_out = self._step()

    def start_sequence(self, name):
        for key, value in SEQ_OVERRIDES.get(name, {}).items():
            setattr(self, key, value)

    def __call__(self, dets):
        self.dets.zero_()
        self.dets[: len(dets)].copy_(dets)  # CLEAN: copy_ into the captured detections
        self.graph.replay()
        matched, best_det = self.static_out
        return matched.cpu(), best_det.cpu(), self.frame_id

if __name__ == "__main__":
    tracker = GPUByteTracker()
    tracker.capture()
    for seq in ("MOT17-02", "MOT17-05", "MOT20-06"):
        tracker.start_sequence(seq)
        for frame in range(300):
            dets = torch.rand(60, 5, device="cuda") * torch.tensor([1920, 1080, 1920, 1080, 1.0], device="cuda")
            matched, assigned, frame_id = tracker(dets)
