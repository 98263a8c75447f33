"""PyTorch float64 reference for check_lm_layers.c: Lingvo's RnnLm and TransformerLm
(lingvo/tasks/lm/layers.py) at scope "lm", time-major ids [T, B], with the dumped weights.

RnnLm:          x = emb(ids) (x sqrt(dim) with scale_sqrt_depth); layer i: y = FRNN(cell
                lm/rnns_<i>)(x), y += x from layer 1 (skip_start); softmax over the last y.
TransformerLm:  x = emb(ids) * sqrt(d) + [sin(p inv) | cos(p inv)]; causal
                TransformerLayers lm/layer_<i> (pre-LN, residual adds the normalised input,
                no final LN); softmax.
Softmax: logits = x . weight_0 + bias_0; per_example_xent = -log_softmax[label];
avg_xent = sum(xent * w) / max(sum(w), 1e-6), w = 1 - paddings."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atten_ref  # noqa: E402
import lstm_frnn  # noqa: E402
import lvdump  # noqa: E402

d = lvdump.load(sys.argv[1])
ids = d.t("in:ids")
labels = d.t("in:labels")
pads = d.t("in:paddings", grad=False)
T, B = ids.shape
emb = atten_ref.var(d, "lm/emb/var_0/var")
x = emb[ids.reshape(-1)].reshape(T, B, -1)
dim = emb.shape[1]
if d.attr("scale_sqrt_depth"):
    x = x * math.sqrt(dim)
cells = []
if d.attr("transformer"):
    half = dim // 2
    inv = torch.exp(-torch.arange(half, dtype=torch.float64) * math.log(1e4) / max(1, half - 1))
    ang = torch.arange(T, dtype=torch.float64).reshape(T, 1) * inv.reshape(1, half)
    x = x + torch.cat([torch.sin(ang), torch.cos(ang)], 1).reshape(T, 1, dim)
    i = 0
    while d.has("lm/layer_%d/tr_fflayer/fflayer_ln/scale/var" % i):
        pre = "lm/layer_%d" % i
        h, _ = atten_ref.tr_atten(d, pre + "/multihead_self_atten", x, pads, int(d.attr("num_heads")), causal=True)
        x = atten_ref.tr_ff(d, pre + "/tr_fflayer", h, pads)
        i += 1
else:
    i = 0
    while d.has("lm/rnns_%d/wm/var" % i):
        p = lstm_frnn.cell_params(d, "lm/rnns_%d" % i)
        cells.append(p)
        y, _, _ = lstm_frnn.frnn(p, x, pads, False)
        x = y + x if i >= 1 else y
        i += 1
w_sm = atten_ref.var(d, "lm/softmax/weight_0/var")
b_sm = atten_ref.var(d, "lm/softmax/bias_0/var")
logits = x @ w_sm + b_sm
xent = -torch.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
wts = 1 - pads
avg = (xent * wts).sum() / torch.clamp(wts.sum(), min=1e-6)
d.check("out:logits", logits)
d.check("out:per_example_xent", xent)
d.check("out:avg_xent", avg)
d.backward({"logits": logits, "per_example_xent": xent, "avg_xent": avg})
if cells:
    # lstm_frnn.cell_params made the cells' own leaves: compare their gradients.
    for p in cells:
        for k in ("wm", "b", "w_proj"):
            if p[k] is not None:
                d.check("grad:%s/%s/var" % (p["scope"], k), p[k].grad)
    for name in ("lm/emb/var_0/var", "lm/softmax/weight_0/var", "lm/softmax/bias_0/var"):
        d.check("grad:" + name, atten_ref.var(d, name).grad)
    d.finish()
atten_ref.check_all(d, {})
