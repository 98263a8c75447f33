"""ConvLayer with time paddings (tests/check_asr_layers.c): Lingvo's speech conv
(core/conv_layers_with_time_padding.py): padded frames zeroed, TF 'SAME' strided conv,
padding-aware batch norm (epsilon 0.001, scale 1 + gamma) over the non-padded output
frames, ReLU, padded output frames zeroed; output paddings = max-pool of the right-padded
(with 1) input paddings, window = stride."""
import math
import sys

import torch
import torch.nn.functional as F

import lvdump

d = lvdump.load(sys.argv[1])
x = d.t("in:act")                      # [B, T, F, C]
pad = d.t("in:paddings", grad=False)   # [B, T]
w = d.t("conv/w/var")                  # [kh, kw, C, O]
beta = d.t("conv/beta/var")
gamma = d.t("conv/gamma/var")
sh, sw = int(d.attr("stride_t")), int(d.attr("stride_f"))
B, T, Fq, C = x.shape
kh, kw = w.shape[0], w.shape[1]

xin = x * (1.0 - pad)[:, :, None, None]


def same(n, k, s):
    total = max((math.ceil(n / s) - 1) * s + k - n, 0)
    return total // 2, total - total // 2


pt, pb = same(T, kh, sh)
pl, pr = same(Fq, kw, sw)
xc = F.pad(xin.permute(0, 3, 1, 2), (pl, pr, pt, pb))
y = F.conv2d(xc, w.permute(3, 2, 0, 1), stride=(sh, sw)).permute(0, 2, 3, 1)  # [B, T', F', O]

# Output paddings.
ext = (T + sh - 1) // sh * sh - T
p = torch.cat([pad, torch.ones(B, ext, dtype=pad.dtype)], 1)
op = p.reshape(B, -1, sh).max(dim=2).values
d.check("out:paddings", op)

m = (1.0 - op)[:, :, None, None].expand(B, y.shape[1], y.shape[2], 1)
n = torch.clamp(m.sum(), min=1.0)
mean = (y * m).sum(dim=(0, 1, 2)) / n
var = (((y - mean) ** 2) * m).sum(dim=(0, 1, 2)) / n
y = (y - mean) * torch.rsqrt(var + 0.001) * (1.0 + gamma) + beta
y = torch.relu(y * m) * m
d.check("out:act", y)
d.backward({"act": y})
d.check("grad:in:act", x.grad)
for name, t in (("w", w), ("beta", beta), ("gamma", gamma)):
    d.check("grad:conv/%s/var" % name, t.grad)
d.finish()
