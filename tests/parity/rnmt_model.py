"""PyTorch float64 reference of a whole mt.model.RNMTModel training loss (Lingvo's
MTEncoderBiRNN + MTDecoderV1, lingvo/tasks/mt/encoder.py and decoder.py), written from
Lingvo's code for tests/check_rnmt_task.c; the layers come from the per-layer references
(lstm_frnn.py, atten_ref.py). The dump holds the task's variables (scope "tiny"), the
batch (in:src.ids [B, S], in:src.paddings, in:tgt.ids [B, T], in:tgt.paddings,
in:tgt.labels, in:tgt.weights), attributes (label_smoothing, per_word_avg_loss,
use_prev_atten_ctx, num_heads, residual starts, the cells' cap/fgb/nonlin/eps) and
lingvoc's loss, log_pplx and every variable's gradient of the loss.

Encoder: embedding lookup ("mod" shards), per layer a forward and a reversed LSTM FRNN
concatenated, residual from encoder.residual_start, a projection with bias to
encoder_out_dim (padded steps zeroed). Decoder: FRNNWithAttention (cell input
[emb_t, ctx_{t-1}], query m_t; ctx_0 attends with a zero query), then layers 1.. on
[x, ctx] (ctx_t, or ctx_{t-1} with use_prev_atten_ctx), residual from
decoder.residual_start, softmax on [x, ctx]. Loss: label-smoothed cross entropy, summed
per sequence and averaged over sequences (or averaged per word)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atten_ref  # noqa: E402
import lvdump  # noqa: E402
from lstm_frnn import cell_params, frnn, step  # noqa: E402


def embed(d, scope, ids):
    shards = []
    while d.has("%s/var_%d/var" % (scope, len(shards))):
        shards.append(atten_ref.var(d, "%s/var_%d/var" % (scope, len(shards))))
    n = len(shards)
    rows = [shards[int(i) % n][int(i) // n] for i in ids.reshape(-1)]
    return torch.stack(rows).reshape(tuple(ids.shape) + (shards[0].shape[1],))


def cells(d, scope):
    p = cell_params(d, scope)
    for k in ("wm", "b", "w_proj", "ln_scale"):  # one leaf per variable, shared with check_all
        key = "%s/%s/var" % (scope, k)
        if p[k] is not None:
            p[k] = atten_ref.var(d, key)
    return p


def main():
    # float32 through two LSTM stacks and ten attention steps: 3e-5 rather than 1e-5.
    d = lvdump.load(sys.argv[1], rtol=3e-5)
    heads = int(d.attr("num_heads"))
    src_ids, tgt_ids = d.t("in:src.ids"), d.t("in:tgt.ids")
    src_pad = d.t("in:src.paddings", grad=False).t()  # [S, B]
    tgt_pad = d.t("in:tgt.paddings", grad=False).t()  # [T, B]
    labels, weights = d.t("in:tgt.labels").t(), d.t("in:tgt.weights", grad=False).t()

    # Encoder.
    xs = embed(d, "tiny/enc/emb", src_ids.t())
    i = 0
    while d.has("tiny/enc/L%d_rnn_fwd/wm/var" % i):
        of, _, _ = frnn(cells(d, "tiny/enc/L%d_rnn_fwd" % i), xs, src_pad, False)
        ob, _, _ = frnn(cells(d, "tiny/enc/L%d_rnn_bak" % i), xs, src_pad, True)
        ys = torch.cat([of, ob], -1)
        xs = xs + ys if i >= d.attr("enc_residual_start") else ys
        i += 1
    if d.has("tiny/enc/proj/w/var"):
        keep = (1 - src_pad).unsqueeze(-1)
        xs = (xs @ atten_ref.var(d, "tiny/enc/proj/w/var") + atten_ref.var(d, "tiny/enc/proj/b/var")) * keep
    enc = xs

    # Decoder layer 0 with attention.
    T, B = tgt_ids.shape[1], tgt_ids.shape[0]
    x = embed(d, "tiny/dec/emb", tgt_ids.t())
    a = cells(d, "tiny/dec/atten_rnn")

    def attend(q):
        ctx, _ = atten_ref.mha(d, "tiny/dec/atten", enc, enc, src_pad, q.unsqueeze(0), heads, inner="additive",
                               use_src_as_value=True)
        return ctx[0]

    h = a["wm"].shape[1] // 4
    m = torch.zeros(B, h, dtype=torch.float64)
    c = torch.zeros(B, h, dtype=torch.float64)
    ctx = attend(m)
    ms, ctxs = [], [ctx]
    for t in range(T):
        m, c = step(a, torch.cat([x[t], ctx], 1), m, c, tgt_pad[t].reshape(B, 1))
        ctx = attend(m)
        ms.append(m)
        ctxs.append(ctx)
    xs = torch.stack(ms)
    prev = d.attr("use_prev_atten_ctx") != 0
    atten_ctxs = torch.stack(ctxs[:T] if prev else ctxs[1:])
    i = 1
    while d.has("tiny/dec/rnn%d/wm/var" % i):
        ys, _, _ = frnn(cells(d, "tiny/dec/rnn%d" % i), torch.cat([xs, atten_ctxs], 2), tgt_pad, False)
        xs = xs + ys if i >= d.attr("dec_residual_start") else ys
        i += 1
    xs = torch.cat([xs, atten_ctxs], 2)

    # Softmax and loss.
    w = torch.cat([atten_ref.var(d, "tiny/dec/softmax/weight_%d/var" % k)
                   for k in range(2) if d.has("tiny/dec/softmax/weight_%d/var" % k)], 1)
    b = torch.cat([atten_ref.var(d, "tiny/dec/softmax/bias_%d/var" % k)
                   for k in range(2) if d.has("tiny/dec/softmax/bias_%d/var" % k)], 0)
    log_probs = torch.log_softmax(xs @ w + b, -1)
    u, V = d.attr("label_smoothing"), w.shape[1]
    target = torch.full(log_probs.shape, u / (V - 1), dtype=torch.float64)
    target.scatter_(-1, labels.unsqueeze(-1), 1.0 - u)
    xent = -(target * log_probs).sum(-1)  # [T, B]
    log_pplx = (xent * weights).sum() / weights.sum()
    if d.attr("per_word_avg_loss"):
        loss = log_pplx
    else:
        loss = (xent * weights).sum(0).mean()
    d.check("out:loss", loss)
    d.check("out:log_pplx", log_pplx.reshape(1))
    loss.backward()
    atten_ref.check_all(d, {}, dot_keys=False)


if __name__ == "__main__":
    main()
