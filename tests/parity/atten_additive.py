"""Parity of AdditiveAttention (and of the beam layout, query rows n * B) against a
PyTorch float64 reference: ctx, probs and every gradient."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atten_ref  # noqa: E402
import lvdump  # noqa: E402

d = lvdump.load(sys.argv[1])
src, ctx, q = d.t("in:source_vecs"), d.t("in:source_contexts"), d.t("in:query")
pad = d.t("in:source_paddings", grad=False)
S, B = src.shape[0], src.shape[1]
n = q.shape[0] // B
logits = atten_ref.additive_scores(d, "att", src, q.reshape(n, B, -1))     # [n, B, S]
probs = atten_ref.masked_softmax(logits, pad.t().unsqueeze(0))
out = (probs.unsqueeze(-1) * ctx.permute(1, 0, 2).unsqueeze(0)).sum(2).reshape(n * B, -1)
probs = probs.reshape(n * B, S)
d.check("out:ctx", out)
d.check("out:probs", probs)
d.backward({"ctx": out, "probs": probs})
atten_ref.check_all(d, {"source_vecs": src, "source_contexts": ctx, "query": q})
