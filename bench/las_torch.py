"""PyTorch twin of asr.bible_tts.LasSmall (experiments/asr/bible_tts.cfg) for bench/bench_las.sh.

Runs with Debian's PyTorch: /usr/bin/python3 (python3-torch, 1.13) -- not a venv's python.

The model, as lingvoc computes Lingvo's asr.model.AsrModel (src/models/asr.c,
src/layers/asr_encoder.c, src/layers/atten_lstm_decoder.c; reference/lingvo_asr_lm.md
§1.2, §4, §5, §7), written the way a PyTorch user would:

- input (AsrInput): frames [B, T, 80] zero-padded, one extra all-zero unpadded frame after
  each utterance (append_eos_frame); targets through Lingvo's AsciiTokenizer (76 ids,
  <s> 1, </s> 2, lower-cased), ids [<s> chars], labels [chars </s>], padded with </s> to
  the batch's longest (the experiment's pad_to_max_length false), at most 400;
- AsrEncoder: pad_steps 6 (zero frames, paddings 1); 2 conv layers 3x3 stride 2x2 (1->16,
  16->16; TF 'SAME' padding, no bias) each with padding-aware batch norm (moments over the
  unpadded positions, scale 1 + gamma, epsilon 1e-3, moving statistics with decay 0.99)
  and ReLU, the input frames zeroed where padded and the output where the stride-2
  max-pooled paddings are 1; [B, T/4, 20 x 16 = 320] time-major; 3 bidirectional LSTM
  layers of 128 per direction (two nn.LSTM over the padded batch, the backward one over
  each utterance reversed within its length, so that it starts at the last real frame as
  Lingvo's does, whose padded steps keep the state; packed sequences were 6x slower in
  backward on this CPU build: a full-size zero fill and add per step); after
  layers 0 and 1 a projection 256 -> 256 (no bias) with padding-aware batch norm and
  ReLU; the output zeroed at padded frames;
- AsrDecoder: embedding 76 x 76; one LSTM cell of 256 over [embedding, previous
  context] (input feeding); AdditiveAttention (hidden 128: source_var [256, 128],
  query_var [256, 128], hidden_var [128]; padded source frames masked), the initial
  context that of an all-zero query; padded target steps keep the state; softmax
  [cell output, context] (512) -> 76 with bias;
- loss: per-token average cross-entropy, sum(xent * w) / (sum(w) + 1e-6); no label
  smoothing (the experiment sets none; Lingvo's default is None);
- learner: l2_regularizer_weight 1e-6 added to the gradients, global-norm clipping to
  1.0 (clip_gradient_norm_to_value) with the step's gradients zeroed when the norm is over
  100 (grad_norm_to_clip_to_zero), Adam (0.9, 0.999, epsilon 1e-6) at 1e-3 (AsrModel's
  defaults, PiecewiseConstant schedule 1.0 before step 350k).

Inits follow Lingvo's (LSTM Uniform(0.1), conv Gaussian(0.001), projection
TruncatedGaussian(0.1), embedding Uniform(1), attention UniformSqrtDim(sqrt(3)), softmax
Uniform(0.1)). Differences that do not change the work per step: nn.LSTM's second bias
(b_hh) is held at zero and frozen (LSTMCellSimple has one bias; the parameter count
counts the trainable ones), LSTMCellSimple's cell_value_cap (10) is not applied by
nn.LSTM, and the gate order differs.

Data: the TFRecord files given (parsed here: TFRecord framing and tf.Example by hand),
read in order (bench_las.sh has lingvoc read the same files in the same order:
file_buffer_size 1, file_parallelism 1), bucketed as the experiment's AsrInput
(key T + 1, first bucket whose bound >= key, a bucket emitted when it holds its limit,
keys over the last bound dropped), repeated for ever. The STEPS batches are built
before the timed loop (lingvoc builds them in its input threads).

Prints "torch_las train N steps X steps/s loss A -> B", "torch_las batches" (each step's
B x T x L and target tokens, to compare with lingvoc's), "torch_las params N" and
"torch_las rss_train M MB" (ru_maxrss after training).

usage: las_torch.py THREADS STEPS WARMUP FILE...
"""
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "lib"))
from pbwire import fields  # noqa: E402

THREADS, STEPS, WARMUP = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
FILES = sys.argv[4:]
if not FILES or not (0 <= WARMUP < STEPS):
    sys.exit("usage: las_torch.py THREADS STEPS WARMUP FILE... (0 <= WARMUP < STEPS)")
torch.set_num_threads(THREADS)
torch.manual_seed(1234)

# experiments/asr/bible_tts.cfg, LasSmall.
FRAME, PAD_STEPS, CONV = 80, 6, [(1, 16), (16, 16)]
CELL, LAYERS, DEC, ATT, V = 128, 3, 256, 128, 76
BOUNDS, LIMITS = [300, 500, 800, 1200, 3000], [32, 20, 12, 8, 4]
TGT_MAX, BN_DECAY, BN_EPS = 400, 0.99, 1e-3
LR, CLIP, CLIP_TO_ZERO, L2 = 1e-3, 1.0, 100.0, 1e-6

# ---- data ---------------------------------------------------------------------------


def records(path):
    """TFRecord framing: u64 length, u32 crc, data, u32 crc (the crcs are not checked)."""
    with open(path, "rb") as f:
        while True:
            h = f.read(12)
            if not h:
                return
            if len(h) < 12:
                sys.exit("%s: truncated record header" % path)
            (n,) = struct.unpack("<Q", h[:8])
            d = f.read(n + 4)
            if len(d) < n + 4:
                sys.exit("%s: truncated record" % path)
            yield d[:n]


def example(b):
    """tf.Example -> {key: bytes (the single bytes value) or float32 array}."""
    out = {}
    for fn, _, feats in fields(b):
        if fn != 1:
            continue
        for en, _, entry in fields(feats):
            if en != 1:
                continue
            key, feat = None, None
            for n, _, v in fields(entry):
                if n == 1:
                    key = v.decode()
                elif n == 2:
                    feat = v
            for kind, _, lst in fields(feat or b""):
                vals = [v for n, t, v in fields(lst) if n == 1]
                if kind == 1:
                    out[key] = vals[0] if len(vals) == 1 else vals
                elif kind == 2:
                    # packed (wire type 2) or one float per field (wire type 5)
                    out[key] = np.frombuffer(b"".join(vals), dtype="<f4")
    return out


# Lingvo's AsciiTokenizer (core/ops/ascii_tokenizer.cc): ids 0..4 special, space 3, then these.
CHARS = "abcdefghijklmnopqrstuvwxyz.'-:!~`;0123456789\"#$%&()*+,/<=>?@[\\]^_{|}"
CMAP = {c: 5 + i for i, c in enumerate(CHARS)}
CMAP[" "] = 3


def utterances():
    for path in FILES:
        for r in records(path):
            e = example(r)
            fr = e["frames"]
            if fr.size % FRAME:
                sys.exit("%s: %d frame values are not a multiple of %d" % (path, fr.size, FRAME))
            yield fr.reshape(-1, FRAME), e["transcript"].decode("utf-8", "replace")


def batches():
    """AsrInput's bucketing of the records in order, repeated."""
    buckets = [[] for _ in BOUNDS]
    any_batched = False
    while True:
        for fr, tr in utterances():
            key = fr.shape[0] + 1
            for i, ub in enumerate(BOUNDS):
                if key <= ub:
                    any_batched = True
                    buckets[i].append((fr, tr))
                    if len(buckets[i]) == LIMITS[i]:
                        yield tensors(buckets[i])
                        buckets[i] = []
                    break
        if not any_batched:
            sys.exit("las_torch.py: no utterance of %s fits bucket_upper_bound %s" % (FILES, BOUNDS))


def tensors(batch):
    B = len(batch)
    T = max(fr.shape[0] for fr, _ in batch) + 1  # the eos frame
    x = torch.zeros(B, T, FRAME)
    pad = torch.ones(B, T)
    # As the experiment's tokenizer (pad_to_max_length false): as long as the batch's
    # longest target (its characters and </s>), at most target_max_length.
    L = min(TGT_MAX, max(len(tr) for _, tr in batch) + 1)
    ids = torch.full((B, L), 2, dtype=torch.long)
    lab = torch.full((B, L), 2, dtype=torch.long)
    w = torch.zeros(B, L)
    for b, (fr, tr) in enumerate(batch):
        x[b, : fr.shape[0]] = torch.from_numpy(fr.copy())
        pad[b, : fr.shape[0] + 1] = 0
        toks = [CMAP.get(c, 0) for c in tr.lower()][: TGT_MAX - 1]
        n = len(toks)
        ids[b, 0] = 1
        if n:
            ids[b, 1 : n + 1] = torch.tensor(toks)
            lab[b, :n] = torch.tensor(toks)
        w[b, : n + 1] = 1
    return x, pad, ids, lab, w


# ---- model --------------------------------------------------------------------------


class PadBatchNorm(torch.nn.Module):
    """Lingvo's BatchNormLayer: moments over the unpadded positions (weights m), scale
    1 + gamma, moving statistics m = decay m + (1 - decay) batch."""

    def __init__(self, dim):
        super().__init__()
        self.beta = torch.nn.Parameter(torch.zeros(dim))
        self.gamma = torch.nn.Parameter(torch.zeros(dim))
        self.register_buffer("moving_mean", torch.zeros(dim))
        self.register_buffer("moving_variance", torch.ones(dim))

    def forward(self, x, m, dims, shape, count):
        mean = (x * m).sum(dims) / count
        d = x - mean.view(shape)
        var = (d * d * m).sum(dims) / count
        with torch.no_grad():
            self.moving_mean.mul_(BN_DECAY).add_(mean, alpha=1 - BN_DECAY)
            self.moving_variance.mul_(BN_DECAY).add_(var, alpha=1 - BN_DECAY)
        scale = (1 + self.gamma) * torch.rsqrt(var + BN_EPS)
        return d * scale.view(shape) + self.beta.view(shape)


def same_pad(n, k=3, s=2):
    total = max((-(-n // s) - 1) * s + k - n, 0)
    return total // 2, total - total // 2


class Conv(torch.nn.Module):
    """Lingvo's Conv2DLayer (ConvLayer) with batch norm and ReLU over [B, C, T, F]."""

    def __init__(self, cin, cout):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(cout, cin, 3, 3) * 0.001)
        self.bn = PadBatchNorm(cout)

    def forward(self, x, pad):
        x = x * (1 - pad)[:, None, :, None]
        T = pad.shape[1]
        p = F.pad(pad, (0, T % 2), value=1.0).view(pad.shape[0], -1, 2).amax(2)
        t0, t1 = same_pad(x.shape[2])
        f0, f1 = same_pad(x.shape[3])
        y = F.conv2d(F.pad(x, (f0, f1, t0, t1)), self.w, stride=2)
        m = (1 - p)[:, None, :, None]
        y = self.bn(y, m, (0, 2, 3), (1, -1, 1, 1), m.sum() * y.shape[3])
        return torch.relu(y) * m, p


def lstm(i, o, **kw):
    l = torch.nn.LSTM(i, o, **kw)
    for n, p in l.named_parameters():
        if "bias_hh" in n:  # LSTMCellSimple has one bias
            torch.nn.init.zeros_(p)
            p.requires_grad_(False)
        else:
            torch.nn.init.uniform_(p, -0.1, 0.1)
    return l


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList(Conv(a, b) for a, b in CONV)
        freq = FRAME
        for _ in CONV:
            freq = -(-freq // 2)
        self.in_dim = freq * CONV[-1][1]
        assert self.in_dim % 16 == 0
        self.rnns = torch.nn.ModuleList(
            torch.nn.ModuleList(lstm(self.in_dim if i == 0 else 2 * CELL, CELL) for _ in range(2))
            for i in range(LAYERS))
        self.proj = torch.nn.ParameterList()
        self.proj_bn = torch.nn.ModuleList()
        for _ in range(LAYERS - 1):
            w = torch.empty(2 * CELL, 2 * CELL)
            torch.nn.init.trunc_normal_(w, std=0.1, a=-0.2, b=0.2)
            self.proj.append(torch.nn.Parameter(w))
            self.proj_bn.append(PadBatchNorm(2 * CELL))

    def forward(self, x, pad):
        B = x.shape[0]
        x = torch.cat([x, x.new_zeros(B, PAD_STEPS, FRAME)], 1)[:, None]
        pad = torch.cat([pad, pad.new_ones(B, PAD_STEPS)], 1)
        for c in self.convs:
            x, pad = c(x, pad)
        T = x.shape[2]
        x = x.permute(2, 0, 3, 1).reshape(T, B, self.in_dim)  # [T, B, F * C] as Lingvo's NHWC
        lens = (1 - pad).sum(1).long()
        m = (1 - pad).t()[:, :, None]  # [T, B, 1]
        count = m.sum()
        # The backward direction reads each utterance reversed within its length (padded
        # frames after the real ones, so it starts at the last real frame as Lingvo's).
        t = torch.arange(T)[:, None]
        rev = torch.where(t < lens[None], lens[None] - 1 - t, t)[:, :, None].expand(T, B, self.rnns[0][0].input_size)
        rev2 = rev[:, :, :1].expand(T, B, CELL)
        for i, (fwd, bak) in enumerate(self.rnns):
            f, _ = fwd(x)
            b, _ = bak(x.gather(0, rev if i == 0 else rev[:, :, :1].expand(T, B, 2 * CELL)))
            x = torch.cat([f, b.gather(0, rev2)], 2)
            if i < LAYERS - 1:
                y = self.proj_bn[i](x @ self.proj[i], m, (0, 1), (1, 1, -1), count)
                x = torch.relu(y) * m
        return x * m, pad.t()


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.empty(V, V).uniform_(-1, 1))
        self.cell = torch.nn.LSTMCell(V + 2 * CELL, DEC)
        for n, p in self.cell.named_parameters():
            if "bias_hh" in n:
                torch.nn.init.zeros_(p)
                p.requires_grad_(False)
            else:
                torch.nn.init.uniform_(p, -0.1, 0.1)
        s = math.sqrt(3.0)
        self.source_var = torch.nn.Parameter(torch.empty(2 * CELL, ATT).uniform_(-s / math.sqrt(2 * CELL), s / math.sqrt(2 * CELL)))
        self.query_var = torch.nn.Parameter(torch.empty(DEC, ATT).uniform_(-s / math.sqrt(DEC), s / math.sqrt(DEC)))
        self.hidden_var = torch.nn.Parameter(torch.empty(ATT).uniform_(-s / math.sqrt(ATT), s / math.sqrt(ATT)))
        self.softmax = torch.nn.Linear(DEC + 2 * CELL, V)
        torch.nn.init.uniform_(self.softmax.weight, -0.1, 0.1)
        torch.nn.init.uniform_(self.softmax.bias, -0.1, 0.1)

    def forward(self, enc, epad, ids, tpad):
        S, B, _ = enc.shape
        src_proj = enc @ self.source_var  # [S, B, A]
        enc_b = enc.transpose(0, 1)  # [B, S, D]
        neg = epad * (-0.7 * torch.finfo(torch.float32).max)

        def attend(q):
            e = torch.tanh(src_proj + (q @ self.query_var)[None]) @ self.hidden_var + neg  # [S, B]
            p = torch.softmax(e, 0)
            return torch.bmm(p.t()[:, None, :], enc_b)[:, 0]  # [B, D]

        h = enc.new_zeros(B, DEC)
        c = enc.new_zeros(B, DEC)
        ctx = attend(h)
        emb = F.embedding(ids.t(), self.emb).unbind(0)  # L x [B, E]
        keep = tpad.t()[:, :, None].unbind(0)
        outs = []
        for t in range(ids.shape[1]):
            h1, c1 = self.cell(torch.cat([emb[t], ctx], 1), (h, c))
            h = h1 + keep[t] * (h - h1)  # padded steps keep the state
            c = c1 + keep[t] * (c - c1)
            ctx = attend(h)
            outs.append(torch.cat([h, ctx], 1))
        return self.softmax(torch.stack(outs))  # [L, B, V]


class Las(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()
        self.dec = Decoder()

    def forward(self, x, pad, ids, lab, w):
        enc, epad = self.enc(x, pad)
        logits = self.dec(enc, epad, ids, 1 - w)
        xent = F.cross_entropy(logits.reshape(-1, V), lab.t().reshape(-1), reduction="none")
        return (xent * w.t().reshape(-1)).sum() / (w.sum() + 1e-6)


model = Las()
params = [p for p in model.parameters() if p.requires_grad]
n_train = sum(p.numel() for p in params)
n_stats = sum(b.numel() for b in model.buffers())
opt = torch.optim.Adam(params, lr=LR, betas=(0.9, 0.999), eps=1e-6)

gen = batches()
data = [next(gen) for _ in range(STEPS)]
first = last = None
t0 = None
model.train()
for step, (x, pad, ids, lab, w) in enumerate(data):
    if step == WARMUP:
        t0 = time.perf_counter()
    loss = model(x, pad, ids, lab, w)
    opt.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in params:
            p.grad.add_(p, alpha=L2)
        norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params])))
        scale = 0.0 if (not math.isfinite(norm) or norm > CLIP_TO_ZERO) else min(1.0, CLIP / max(norm, 1e-30))
        if scale != 1.0:
            for p in params:
                p.grad.mul_(scale)
    opt.step()
    last = loss.item()
    if first is None:
        first = last
dt = time.perf_counter() - t0
print("torch_las train %d steps %.4f steps/s loss %.3f -> %.3f" % (STEPS - WARMUP, (STEPS - WARMUP) / dt, first, last))
print("torch_las batches " + " ".join(
    "%dx%dx%d:%d" % (d[0].shape[0], d[0].shape[1], d[2].shape[1], int(d[4].sum())) for d in data))
print("torch_las params %d trainable + %d batch-norm moving statistics = %d" % (n_train, n_stats, n_train + n_stats))
print("torch_las rss_train %.0f MB" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
