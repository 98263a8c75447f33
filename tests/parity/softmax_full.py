"""SimpleFullSoftmax (tests/check_parity_embedding.c): 2 class shards concatenated on the
class axis, UniformLabelSmoother targets (on 1-u, off u/(C-1)), per-token weights."""
import sys

import torch

import lvdump

d = lvdump.load(sys.argv[1])
u = d.attr("label_smoothing")
x = d.t("in:act")
cw = d.t("in:class_weights", grad=False)
ids = d.t("in:class_ids")
ws = [d.t("sm/weight_0/var"), d.t("sm/weight_1/var")]
bs = [d.t("sm/bias_0/var"), d.t("sm/bias_1/var")]
w = torch.cat(ws, dim=1)
b = torch.cat(bs, dim=0)
C = w.shape[1]
logits = x @ w + b
log_probs = torch.log_softmax(logits, dim=-1)
target = torch.full(logits.shape, u / (C - 1), dtype=torch.float64)
target.scatter_(-1, ids.unsqueeze(-1), 1.0 - u)
xent = -(target * log_probs).sum(-1)
total_xent = (xent * cw).sum()
total_weight = cw.sum()
avg_xent = total_xent / torch.clamp(total_weight, min=1e-6)
argmax = logits.argmax(-1)
d.check("out:per_example_argmax", argmax, rtol=0)
d.check("out:total_weight", total_weight)
outs = {"per_example_xent": xent, "total_xent": total_xent, "avg_xent": avg_xent}
if d.has("out:logits"):  # absent when chunked
    outs.update(logits=logits, log_probs=log_probs)
for k, v in outs.items():
    d.check("out:" + k, v)
d.backward(outs)
d.check("grad:in:act", x.grad)
for i in range(2):
    d.check("grad:sm/weight_%d/var" % i, ws[i].grad)
    d.check("grad:sm/bias_%d/var" % i, bs[i].grad)
d.finish()
