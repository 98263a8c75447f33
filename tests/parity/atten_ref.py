"""PyTorch float64 references of Lingvo's attention and Transformer layers (attention.py,
layers_with_attention.py), written for the parity suites (tests/check_parity_attention.c).
Time-major: sources [S, B, D], paddings [S, B] (1.0 = padded), queries [Bq, D] with
Bq = n * B (row i attends source batch i % B) or [T, B, D]."""
import math

import torch


def var(d, name):
    """The dumped variable `name` as one float64 leaf tensor per dump (requires grad)."""
    cache = d.__dict__.setdefault("_vars", {})
    if name not in cache:
        cache[name] = d.t(name)
    return cache[name]


def check_all(d, inputs, dot_keys=True):
    """Compares the gradient of every dumped variable and of the named inputs
    (tensors made by d.t("in:<key>")), then finishes (exit status). dot_keys: the keys
    feed a dot-product softmax, where a key bias's true gradient is 0."""
    for name in sorted(d.a):
        if name.startswith(("grad:", "in:", "out:", "dout:", "attr:")):
            continue
        if "grad:" + name in d.a:
            v = var(d, name)
            floor = 1e-6
            if dot_keys and name.endswith("/source_proj_b/var"):
                # q . b_k is the same for every source position: the softmax removes it
                # and the true gradient is 0; compare at the scale of source_proj's.
                w = var(d, name[:-len("_b/var")] + "/var")
                floor = float(w.grad.abs().max()) if w.grad is not None else 1e-6
            d.check("grad:" + name, v.grad, floor=floor)
    for key, t in inputs.items():
        d.check("grad:in:" + key, t.grad)
    d.finish()


def layer_norm(d, prefix, x, eps=1e-6):
    """Lingvo LayerNorm: (x - mean) / sqrt(var + eps) * (1 + scale) + bias."""
    scale, bias = var(d, prefix + "/scale/var"), var(d, prefix + "/bias/var")
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * (1 + scale) + bias


def masked_softmax(logits, pad):
    """Softmax over the last axis, padded (pad > 0.5) positions excluded."""
    logits = logits.masked_fill(pad > 0.5, float("-inf"))
    return torch.softmax(logits, -1)


def additive_scores(d, prefix, src, q):
    """Bahdanau logits v . tanh(src . Ws + q . Wq): src [S, B, Ds], q [n, B, Dq] -> [n, B, S]."""
    ws, wq, v = var(d, prefix + "/source_var/var"), var(d, prefix + "/query_var/var"), var(d, prefix + "/hidden_var/var")
    hs = (src @ ws).permute(1, 0, 2)  # [B, S, H]
    hq = q @ wq                       # [n, B, H]
    h = torch.tanh(hs.unsqueeze(0) + hq.unsqueeze(2))  # [n, B, S, H]
    return h @ v


def dot_scale(d, prefix, dim):
    """softplus(per_dim_scale) / softplus(0) / sqrt(dim), or 1/sqrt(dim) without it."""
    name = prefix + "/per_dim_scale/var"
    s = 1.0 / math.sqrt(dim)
    if d.has(name):
        return torch.nn.functional.softplus(var(d, name)) / math.log(2.0) * s
    return torch.tensor(s, dtype=torch.float64)


def mha(d, prefix, src, ctx, pad, q, heads, inner="dot", use_src_as_value=False, causal=False):
    """Lingvo MultiHeadedAttention. src [S, B, Ds], ctx [S, B, C] (values before the
    optional ctx_proj), pad [S, B] or None, q [T, B, Dq] (T: time or beam multiplier).
    Returns ctx [T, B, out] and head-averaged probs [T, B, S]."""
    def proj(x, name):
        w = prefix + "/" + name + "/var"
        if not d.has(w):
            return None
        y = x @ var(d, w)
        b = prefix + "/" + name + "_b/var"
        return y + var(d, b) if d.has(b) else y
    k = proj(src, "source_proj")
    k = src if k is None else k
    if use_src_as_value:
        v = k
    else:
        v = proj(ctx, "ctx_proj")
        v = ctx if v is None else v
    qp = proj(q, "query_proj")
    qp = q if qp is None else qp
    S, B = src.shape[0], src.shape[1]
    T = q.shape[0]
    H = k.shape[-1]
    dh, dv = H // heads, v.shape[-1] // heads
    kh = k.reshape(S, B, heads, dh)
    vh = v.reshape(S, B, heads, dv)
    qh = qp.reshape(T, B, heads, dh)
    ip = prefix + "/inner_att"
    if inner == "dot":
        logits = torch.einsum("tbnd,sbnd->tbns", qh * dot_scale(d, ip, dh), kh)
    else:  # additive per head, the inner weights shared by the heads
        ws, wq, hv = var(d, ip + "/source_var/var"), var(d, ip + "/query_var/var"), var(d, ip + "/hidden_var/var")
        hs = kh @ ws   # [S, B, N, h]
        hq = qh @ wq   # [T, B, N, h]
        logits = torch.tanh(hs.permute(1, 2, 0, 3).unsqueeze(0) + hq.unsqueeze(3)) @ hv  # [T, B, N, S]
    mask = torch.zeros(T, B, 1, S, dtype=torch.float64)
    if pad is not None:
        mask = mask + pad.t().reshape(1, B, 1, S)
    if causal:
        mask = mask + torch.triu(torch.ones(T, S, dtype=torch.float64), 1).reshape(T, 1, 1, S)
    probs = masked_softmax(logits, mask)
    out = torch.einsum("tbns,sbnd->tbnd", probs, vh).reshape(T, B, heads * dv)
    post = proj(out, "ctx_post_proj")
    return (out if post is None else post), probs.mean(2)


def tr_atten(d, prefix, x, pads, heads, src=None, src_pads=None, causal=False):
    """TransformerAttentionLayer (pre-LN, residual adds the normalized input)."""
    xn = layer_norm(d, prefix + "/atten_ln", x)
    if src is None:
        src, src_pads = xn, pads
    ctx, probs = mha(d, prefix + "/multihead_atten", src, src, src_pads, xn, heads, causal=causal)
    return xn + ctx, probs


def tr_ff(d, prefix, x, pads):
    """TransformerFeedForwardLayer: x + fc1(relu(fc0(LN(x)))), projections zeroed at padding."""
    keep = (1 - pads).unsqueeze(-1)
    xn = layer_norm(d, prefix + "/fflayer_ln", x)
    f = prefix + "/fflayer/fflayer_"
    h = torch.relu(xn @ var(d, f + "0/w/var") + var(d, f + "0/b/var")) * keep
    h = (h @ var(d, f + "1/w/var") + var(d, f + "1/b/var")) * keep
    return x + h


def transformer_layer(d, prefix, x, pads, heads, aux=None, aux_pads=None, decoder=False):
    h, probs = tr_atten(d, prefix + "/multihead_self_atten", x, pads, heads, causal=decoder)
    if aux is not None:
        h, probs = tr_atten(d, prefix + "/multihead_atten", h, pads, heads, src=aux, src_pads=aux_pads)
    return tr_ff(d, prefix + "/tr_fflayer", h, pads), probs
