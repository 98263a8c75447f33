"""Parity of MultiHeadedAttention (PackSource + ComputeContextVector; query, source,
ctx_proj and ctx_post_proj projections; DotProductAttention or AdditiveAttention per
head) against a PyTorch float64 reference: ctx, probs and every gradient."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atten_ref  # noqa: E402
import lvdump  # noqa: E402

d = lvdump.load(sys.argv[1])
src, ctx, q = d.t("in:source_vecs"), d.t("in:source_contexts"), d.t("in:query")
pad = d.t("in:source_paddings", grad=False)
B = src.shape[1]
n = q.shape[0] // B
heads = int(d.attr("num_heads"))
inner = "additive" if d.attr("inner_additive") else "dot"
out, probs = atten_ref.mha(d, "mha", src, ctx, pad, q.reshape(n, B, -1), heads, inner=inner,
                           use_src_as_value=bool(d.attr("use_src_as_value")))
out = out.reshape(n * B, -1)
probs = probs.reshape(n * B, -1)
d.check("out:ctx", out)
d.check("out:probs", probs)
d.backward({"ctx": out, "probs": probs})
inputs = {"source_vecs": src, "query": q}
if d.has("grad:in:source_contexts"):  # unused (no gradient) when the values are the keys
    inputs["source_contexts"] = ctx
atten_ref.check_all(d, inputs, dot_keys=inner == "dot")
