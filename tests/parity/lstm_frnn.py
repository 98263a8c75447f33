"""PyTorch reference for check_parity_rnn.c: an FRNN (layer scope "rnn", cell "rnn/cell")
of Lingvo's LSTMCellSimple or LayerNormalizedLSTMCellSimple (lingvo/core/rnn_cell.py),
time-major, padded steps keeping the previous state. Also imported by frnn_bidi.py.

Cell, as Lingvo computes it:
  xmw = concat([x, m_prev]) . wm                                   [B, 4H]
  LN cell: each gate block of xmw normalized on its own (mean, biased variance,
           rsqrt(var + layer_norm_epsilon)), times ln_scale (no LN bias)
  + b (enable_lstm_bias); gate blocks (i_i, i_g, f_g, o_g)
  c = sigmoid(f_g + forget_gate_bias) * c_prev + sigmoid(i_g) * tanh(i_i)
  c = clip(c, -cell_value_cap, cell_value_cap)
  m = sigmoid(o_g) * tanh(c)   (output_nonlinearity False: sigmoid(o_g) * c)
  m = m . w_proj               (num_hidden_nodes > 0)
  c, m = prev * padding + new * (1 - padding)
"""
import sys

import torch

import lvdump


def cell_params(d, scope):
    def var(name):
        key = "%s/%s/var" % (scope, name)
        return d.t(key) if d.has(key) else None

    p = {k: var(k) for k in ("wm", "b", "w_proj", "ln_scale")}
    p["scope"] = scope
    p["cap"] = d.attr(scope + ".cap")
    p["fgb"] = d.attr(scope + ".fgb")
    p["nonlin"] = d.attr(scope + ".nonlin") != 0
    p["eps"] = d.attr(scope + ".eps") if d.has("attr:%s.eps" % scope) else None
    if (p["ln_scale"] is None) != (p["eps"] is None):
        raise SystemExit("%s: ln_scale and the eps attribute must come together" % scope)
    p["clipped"], p["cells"] = 0, 0
    return p


def hidden_size(p):
    return p["wm"].shape[1] // 4


def output_size(p):
    return p["w_proj"].shape[1] if p["w_proj"] is not None else hidden_size(p)


def step(p, x, m, c, pad):
    h = hidden_size(p)
    xm = torch.cat([x, m], 1) @ p["wm"]
    if p["ln_scale"] is not None:
        r = xm.reshape(-1, 4, h)
        mean = r.mean(-1, keepdim=True)
        var = ((r - mean) ** 2).mean(-1, keepdim=True)
        xm = ((r - mean) * torch.rsqrt(var + p["eps"])).reshape(-1, 4 * h) * p["ln_scale"]
    if p["b"] is not None:
        xm = xm + p["b"]
    i_i, i_g, f_g, o_g = xm.split(h, 1)
    new_c = torch.sigmoid(f_g + p["fgb"]) * c + torch.sigmoid(i_g) * torch.tanh(i_i)
    if p["cap"] > 0:
        p["clipped"] += int((new_c.abs() > p["cap"]).sum())
        p["cells"] += new_c.numel()
        new_c = torch.clamp(new_c, -p["cap"], p["cap"])
    new_m = torch.sigmoid(o_g) * (torch.tanh(new_c) if p["nonlin"] else new_c)
    if p["w_proj"] is not None:
        new_m = new_m @ p["w_proj"]
    return m * pad + new_m * (1 - pad), c * pad + new_c * (1 - pad)


def frnn(p, x, paddings, reverse):
    """x [T, B, D], paddings [T, B] -> outputs [T, B, out], final m, final c."""
    t_len, b = x.shape[0], x.shape[1]
    m = torch.zeros(b, output_size(p), dtype=torch.float64)
    c = torch.zeros(b, hidden_size(p), dtype=torch.float64)
    outs = [None] * t_len
    for k in range(t_len):
        t = t_len - 1 - k if reverse else k
        m, c = step(p, x[t], m, c, paddings[t].reshape(b, 1))
        outs[t] = m
    return torch.stack(outs), m, c


def check_grads(d, params, x):
    d.check("grad:in:act", x.grad)
    for p in params:
        for k in ("wm", "b", "w_proj", "ln_scale"):
            if p[k] is not None:
                d.check("grad:%s/%s/var" % (p["scope"], k), p[k].grad)


def main():
    d = lvdump.load(sys.argv[1])
    p = cell_params(d, "rnn/cell")
    x = d.t("in:act")
    pad = d.t("in:paddings", grad=False)
    act, m, c = frnn(p, x, pad, d.attr("reverse") != 0)
    d.check("out:act", act)
    d.check("out:final_state.m", m)
    d.check("out:final_state.c", c)
    d.backward({"act": act, "final_state.m": m, "final_state.c": c})
    check_grads(d, [p], x)
    if d.has("attr:min_clipped"):
        frac = p["clipped"] / max(p["cells"], 1)
        print("  cell_value_cap %.2f clipped %.1f%% of the cell values" % (p["cap"], 100 * frac))
        if frac < d.attr("min_clipped"):
            print("  cell_value_cap did not bind often enough (want >= %.0f%%)" % (100 * d.attr("min_clipped")))
            d.failed = True
    d.finish()


if __name__ == "__main__":
    main()
