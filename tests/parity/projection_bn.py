"""ProjectionLayer with batch_norm (tests/check_parity_embedding.c): tanh(bn(x . w))
with Lingvo's padding-aware BatchNormLayer (moments over non-padded rows, epsilon 0.001,
scale 1 + gamma) and padded outputs zeroed."""
import sys

import torch

import lvdump

d = lvdump.load(sys.argv[1])
x = d.t("in:act")
pad = d.t("in:paddings", grad=False).unsqueeze(-1)
w = d.t("proj/w/var")
beta = d.t("proj/beta/var")
gamma = d.t("proj/gamma/var")
m = 1.0 - pad
z = x @ w
n = torch.clamp(m.sum(), min=1.0)
mean = (z * m).sum(dim=(0, 1)) / n
var = (((z - mean) ** 2) * m).sum(dim=(0, 1)) / n
y = (z - mean) * torch.rsqrt(var + 0.001) * (1.0 + gamma) + beta
y = torch.tanh(y * m) * m
d.check("out:act", y)
d.backward({"act": y})
d.check("grad:in:act", x.grad)
for name, t in (("w", w), ("beta", beta), ("gamma", gamma)):
    d.check("grad:proj/%s/var" % name, t.grad)
d.finish()
