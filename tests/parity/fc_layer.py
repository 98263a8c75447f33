"""FCLayer (tests/check_parity_embedding.c): act = tanh(x . w + b) on [B, T, D]."""
import sys

import torch

import lvdump

d = lvdump.load(sys.argv[1])
x = d.t("in:act")
w = d.t("fc/w/var")
b = d.t("fc/b/var")
y = torch.tanh(x @ w + b)
d.check("out:act", y)
d.backward({"act": y})
d.check("grad:in:act", x.grad)
d.check("grad:fc/w/var", w.grad)
d.check("grad:fc/b/var", b.grad)
d.finish()
