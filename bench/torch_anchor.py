"""The PyTorch anchor of issue 14: MobileNet v1 1.0 224 (the TFLite model's architecture:
convolutions with bias and ReLU6, BatchNorm folded as the converter folds it) on CUDA,
batch 1, eager and as a CUDA graph replay, with TF32 convolutions on (PyTorch's default
for cuDNN) and off (plain fp32, what our OpenCL kernels compute). Host in to host out:
a pinned input copied in, the network, the output copied back, synchronised.

    python bench/torch_anchor.py [--runs 300]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import median_ms  # noqa: E402


def mobilenet_v1():
    import torch.nn as nn

    def block(cin: int, cout: int, stride: int) -> list:
        return [
            nn.Conv2d(cin, cin, 3, stride, 1, groups=cin),
            nn.ReLU6(),
            nn.Conv2d(cin, cout, 1),
            nn.ReLU6(),
        ]

    layers = [nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU6()]
    cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1)]
    cfg += [(256, 512, 2)] + [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
    for cin, cout, s in cfg:
        layers += block(cin, cout, s)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 1000), nn.Softmax(-1)]
    return nn.Sequential(*layers)


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    net = mobilenet_v1().cuda().eval()
    host_in = torch.rand(1, 3, 224, 224).pin_memory()
    host_out = torch.empty(1, 1000).pin_memory()
    x = torch.empty(1, 3, 224, 224, device="cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| TF32 | eager ms | graph replay ms (device) | graph host in to host out ms |")
    print("| --- | --- | --- | --- |")
    for tf32 in (True, False):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        with torch.no_grad():

            def eager():
                x.copy_(host_in, non_blocking=True)
                host_out.copy_(net(x), non_blocking=True)
                torch.cuda.synchronize()

            eager_ms = median_ms(eager, a.runs)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    y = net(x)
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                y = net(x)

            def replay(graph=graph):
                graph.replay()
                torch.cuda.synchronize()

            def replay_host(graph=graph, y=y):
                x.copy_(host_in, non_blocking=True)
                graph.replay()
                host_out.copy_(y, non_blocking=True)
                torch.cuda.synchronize()

            print(
                f"| {'on' if tf32 else 'off'} | {eager_ms:.3f} | {median_ms(replay, a.runs):.3f} "
                f"| {median_ms(replay_host, a.runs):.3f} |"
            )


if __name__ == "__main__":
    main()
