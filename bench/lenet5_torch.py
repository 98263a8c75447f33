"""PyTorch baseline for the LeNet5 benchmark: the same architecture as lingvoc's
image.mnist.LeNet5 (conv 5x5x1x20 SAME no bias + ReLU, max-pool 2, dropout 0.2,
conv 5x5x20x50, max-pool 2, dropout, FC 2450->300 ReLU, softmax 300->10), Adam,
per-image standardization, batch 256, on the CPU with a fixed thread count.

Prints one JSON line: train and eval examples/s and peak RSS. Run with Debian's
/usr/bin/python3 (python3-torch)."""
import argparse
import json
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv2d(1, 20, 5, padding=2, bias=False)
        self.conv1 = nn.Conv2d(20, 50, 5, padding=2, bias=False)
        self.fc = nn.Linear(2450, 300)
        self.softmax = nn.Linear(300, 10)

    def forward(self, x):
        x = F.dropout(F.max_pool2d(F.relu(self.conv0(x)), 2), 0.2, self.training)
        x = F.dropout(F.max_pool2d(F.relu(self.conv1(x)), 2), 0.2, self.training)
        x = F.relu(self.fc(x.flatten(1)))
        return self.softmax(x)


def standardize(raw):
    x = raw.float()
    n = x[0].numel()
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    std = x.std(dim=(1, 2, 3), keepdim=True, unbiased=False)
    return (x - mean) / torch.clamp(std, min=1.0 / n ** 0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--train_steps", type=int, default=60)
    ap.add_argument("--eval_batches", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (scripts/gpu-check.sh): timings end with a synchronize")
    ap.add_argument("--eval_forever", action="store_true",
                    help="only run the eval loop, until killed (the co-running evaler of CORUN=1)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    raw = torch.randint(0, 256, (a.batch, 1, 28, 28), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (a.batch,), generator=g)
    dev = torch.device(a.device)
    raw, labels = raw.to(dev), labels.to(dev)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    model = LeNet5().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-6)

    def train_step():
        opt.zero_grad()
        loss = F.cross_entropy(model(standardize(raw)), labels)
        loss.backward()
        opt.step()

    if a.eval_forever:
        model.eval()
        with torch.no_grad():
            while True:
                logits = model(standardize(raw))
                (logits.argmax(1) == labels).float().mean()

    model.train()
    for _ in range(a.warmup):
        train_step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.train_steps):
        train_step()
    sync()
    train_eps = a.train_steps * a.batch / (time.perf_counter() - t0)

    model.eval()
    with torch.no_grad():
        for _ in range(a.warmup):
            model(standardize(raw))
        sync()
        t0 = time.perf_counter()
        for _ in range(a.eval_batches):
            logits = model(standardize(raw))
            (logits.argmax(1) == labels).float().mean()
        sync()
        eval_eps = a.eval_batches * a.batch / (time.perf_counter() - t0)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"torch": torch.__version__, "threads": a.threads, "device": a.device, "train_examples_per_sec": train_eps,
                      "eval_examples_per_sec": eval_eps, "peak_rss_mb": rss_mb}))


if __name__ == "__main__":
    main()
