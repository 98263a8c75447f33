"""Driver for bench_lenet5.sh: runs lingvoc's trainer/evaler and the PyTorch baseline
alternately, collects examples/s and peak RSS (wait4), prints medians and ratios."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def run_rss(cmd):
    """Runs cmd, returns (output, peak RSS MiB) using wait4's rusage."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), out[-3000:]))
    return out, ru.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lingvoc-bench-")
    data = os.path.join(tmp, "fm")
    run_rss(["bin/keras2ckpt", "--dataset=fashion_mnist", "--out=" + data])
    res = {"lingvoc_train": [], "lingvoc_eval": [], "torch_train": [], "torch_eval": [],
           "lingvoc_rss": [], "torch_rss": []}
    for r in range(a.runs):
        logdir = os.path.join(tmp, "log%d" % r)
        ov = ('input.ckpt: "%s"; train.max_steps: %d; train.save_interval_steps: 100000; '
              'train.summary_interval_steps: 100000; cluster.num_threads: %d' % (data, a.steps, a.threads))
        out, rss = run_rss(["bin/trainer", "--model=image.mnist.LeNet5", "--logdir=" + logdir,
                            "--log_interval_steps=10", "--model_params_override=" + ov])
        rates = [float(x) for x in re.findall(r"examples/sec: ([0-9.]+)", out)]
        res["lingvoc_train"].append(statistics.median(rates[1:]) if len(rates) > 2 else rates[-1])
        res["lingvoc_rss"].append(rss)
        out, _ = run_rss(["bin/evaler", "--model=image.mnist.LeNet5", "--logdir=" + logdir, "--once",
                          "--model_params_override=" + ov])
        m = re.search(r"\((\d+) examples, ([0-9.]+) s\)", out)
        res["lingvoc_eval"].append(int(m.group(1)) / float(m.group(2)))
        out, rss = run_rss(["/usr/bin/python3", "bench/lenet5_torch.py", "--threads", str(a.threads),
                            "--train_steps", str(a.steps)])
        j = json.loads(out.strip().splitlines()[-1])
        res["torch_train"].append(j["train_examples_per_sec"])
        res["torch_eval"].append(j["eval_examples_per_sec"])
        res["torch_rss"].append(rss)
    med = {k: statistics.median(v) for k, v in res.items()}
    print("LeNet5, batch 256, %d threads, %d runs (medians):" % (a.threads, a.runs))
    print("  training: lingvoc %8.0f examples/s  PyTorch %8.0f examples/s  ratio %.2fx" %
          (med["lingvoc_train"], med["torch_train"], med["lingvoc_train"] / med["torch_train"]))
    print("  eval:     lingvoc %8.0f examples/s  PyTorch %8.0f examples/s  ratio %.2fx" %
          (med["lingvoc_eval"], med["torch_eval"], med["lingvoc_eval"] / med["torch_eval"]))
    print("  peak RSS: lingvoc trainer %.0f MiB  PyTorch %.0f MiB" % (med["lingvoc_rss"], med["torch_rss"]))
    print(json.dumps({k: [round(x, 1) for x in v] for k, v in res.items()}))


if __name__ == "__main__":
    main()
