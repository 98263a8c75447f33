"""Reads the dumps written by tests/parity.h and compares them with a PyTorch reference.

Usage from a parity script:

    import lvdump
    d = lvdump.load(sys.argv[1])          # name -> numpy array (attr:* are floats)
    w = d.t("layer/wm/var")               # a float64 torch tensor, requires_grad
    ...reference forward in float64...
    d.check("out:act", ref_out)           # ours (the dump) against the reference
    d.backward({"act": ref_out})          # loss = sum(out * dout) over the dumped outputs
    d.check("grad:layer/wm/var", w.grad)
    d.finish()                            # prints the table, exits 1 on any mismatch

Run by /usr/bin/python3 (Debian's python3-torch); the scripts are not meant for another
interpreter unless it has torch and numpy too.
"""
import sys

import numpy as np
import torch

_DT = {"f32": np.float32, "i32": np.int32, "f64": np.float64}


def _read(path):
    out = {}
    with open(path, "rb") as f:
        if f.readline() != b"LVDUMP1\n":
            raise SystemExit("%s: not a parity dump (no LVDUMP1 header)" % path)
        while True:
            line = f.readline()
            if not line:
                break
            parts = line.decode().split()
            name, dt, rank = parts[0], parts[1], int(parts[2])
            shape = tuple(int(x) for x in parts[3:3 + rank])
            n = int(np.prod(shape)) if shape else 1
            a = np.frombuffer(f.read(n * np.dtype(_DT[dt]).itemsize), dtype=_DT[dt])
            if a.size != n:
                raise SystemExit("%s: %s is truncated" % (path, name))
            out[name] = a.reshape(shape)
    return out


class Dump:
    def __init__(self, path, rtol=1e-5):
        self.path = path
        self.a = _read(path)
        self.rtol = rtol
        self.rows = []
        self.failed = False

    def has(self, name):
        return name in self.a

    def np(self, name):
        if name not in self.a:
            raise SystemExit("%s: no entry %s; entries: %s" % (self.path, name, ", ".join(sorted(self.a))))
        return self.a[name]

    def attr(self, key):
        return float(self.np("attr:" + key)[0])

    def t(self, name, grad=True):
        """A float64 tensor (ints stay int64) of a dumped entry."""
        a = self.np(name)
        if a.dtype == np.int32:
            return torch.from_numpy(a.astype(np.int64))
        x = torch.from_numpy(a.astype(np.float64))
        return x.requires_grad_(grad)

    def backward(self, outs):
        """loss = sum over key of sum(outs[key] * dout:key), then backward."""
        loss = 0
        for k, v in outs.items():
            loss = loss + (v * self.t("dout:" + k, grad=False)).sum()
        loss.backward()

    def check(self, name, ref, rtol=None, floor=1e-6):
        """Relative error max|ours - ref| / max(max|ref|, floor) must be <= rtol. A
        gradient that is analytically zero (a key bias under softmax) is compared with
        floor = the scale of a related nonzero quantity, not against float noise."""
        rtol = self.rtol if rtol is None else rtol
        ours = self.np(name).astype(np.float64)
        if ref is None:
            self.rows.append((name, float("inf"), rtol, "reference has no gradient"))
            self.failed = True
            return
        r = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
        r = r.astype(np.float64)
        if r.shape != ours.shape:
            self.rows.append((name, float("inf"), rtol, "shape %s, reference %s" % (ours.shape, r.shape)))
            self.failed = True
            return
        scale = max(float(np.max(np.abs(r))) if r.size else 0.0, floor)
        err = float(np.max(np.abs(ours - r))) / scale if r.size else 0.0
        bad = not np.isfinite(ours).all() or err > rtol
        self.failed |= bad
        self.rows.append((name, err, rtol, "MISMATCH" if bad else "ok"))

    def finish(self):
        w = max([len(r[0]) for r in self.rows] + [10])
        for name, err, tol, what in self.rows:
            print("  %-*s rel err %.2e (tol %.0e) %s" % (w, name, err, tol, what))
        if not self.rows:
            print("%s: nothing was compared" % self.path)
            sys.exit(1)
        sys.exit(1 if self.failed else 0)


def load(path, rtol=1e-5):
    return Dump(path, rtol)
