"""Parity of TransformerLayer (Lingvo layers_with_attention.py) as encoder and as
decoder (causal self-attention + encoder attention) on padded batches against a PyTorch
float64 reference: output, attention probs and every gradient."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atten_ref  # noqa: E402
import lvdump  # noqa: E402

d = lvdump.load(sys.argv[1])
x = d.t("in:act")
pads = d.t("in:paddings", grad=False)
heads = int(d.attr("num_heads"))
decoder = bool(d.attr("decoder"))
inputs = {"act": x}
aux = aux_pads = None
if decoder:
    aux = d.t("in:aux_vecs")
    aux_pads = d.t("in:aux_paddings", grad=False)
    inputs["aux_vecs"] = aux
out, probs = atten_ref.transformer_layer(d, "tr", x, pads, heads, aux, aux_pads, decoder)
d.check("out:act", out)
d.check("out:probs", probs)
d.backward({"act": out, "probs": probs})
atten_ref.check_all(d, inputs)
