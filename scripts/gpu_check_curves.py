"""Compares the per-step loss curves of two trainer logs (scripts/gpu-check.sh).

Usage: gpu_check_curves.py NAME_A LOG_A NAME_B LOG_B [--from F] [--want N] [--early E]
                           [--rtol_early X] [--rtol Y]
Reads every 'step: N, ... loss:V' line (the trainer logs with --log_interval_steps=1),
compares steps F..N (both logs must have each), prints the table (step, A, B, |A-B|,
relative) on stdout and one figure line on stderr; exits 1 when a step is missing or the
relative difference |A-B| / max(|A|, |B|) exceeds X in the first E compared steps or Y
after them."""
import argparse
import re
import sys

LINE = re.compile(r"step: *(\d+),.* loss:([-+0-9.eEnaif]+)")


def losses(path):
    out = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if m:
                    out[int(m.group(1))] = float(m.group(2))
    except OSError as e:
        sys.exit("cannot read %s: %s" % (path, e.strerror))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name_a")
    ap.add_argument("log_a")
    ap.add_argument("name_b")
    ap.add_argument("log_b")
    ap.add_argument("--from", dest="first", type=int, default=1)
    ap.add_argument("--want", type=int, required=True)
    ap.add_argument("--early", type=int, default=10)
    ap.add_argument("--rtol_early", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=2e-2)
    a = ap.parse_args()
    la, lb = losses(a.log_a), losses(a.log_b)
    steps = list(range(a.first, a.want + 1))
    miss_a = [s for s in steps if s not in la]
    miss_b = [s for s in steps if s not in lb]
    if miss_a or miss_b:
        def say(name, miss, have):
            return "%s lacks %d of steps %d..%d (has %s)" % (
                name, len(miss), a.first, a.want, "%d..%d" % (min(have), max(have)) if have else "none")
        sys.exit("; ".join(say(n, m, h) for n, m, h in ((a.name_a, miss_a, la), (a.name_b, miss_b, lb)) if m))
    print("step %s %s abs_diff rel_diff" % (a.name_a, a.name_b))
    worst = (0.0, a.first, 0.0)  # rel, step, abs
    worst_early = 0.0
    bad = []
    for i, s in enumerate(steps):
        x, y = la[s], lb[s]
        d = abs(x - y)
        r = d / max(abs(x), abs(y), 1e-30)
        if not (r == r):  # NaN
            r = float("inf")
        print("%d %.8g %.8g %.3g %.3g" % (s, x, y, d, r))
        early = i < a.early
        if early:
            worst_early = max(worst_early, r)
        if r > worst[0]:
            worst = (r, s, d)
        if r > (a.rtol_early if early else a.rtol):
            bad.append(s)
    n = a.want
    fig = "steps %d..%d: max rel diff %.2g (step %d, abs %.2g)" % (a.first, n, worst[0], worst[1], worst[2])
    if a.early > 0:
        fig += ", first %d steps %.2g" % (min(a.early, len(steps)), worst_early)
    fig += "; step %d: %s %.6f, %s %.6f (step %d: %.4f)" % (n, a.name_a, la[n], a.name_b, lb[n], a.first, la[a.first])
    if bad:
        fig += "; over tolerance at %d step(s) from step %d" % (len(bad), bad[0])
    print(fig, file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
