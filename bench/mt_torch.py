"""The PyTorch side of bench/bench_mt.sh: Lingvo's mt.model.TransformerModel as
mt.bible_en_es.TransformerSmall configures it, written in PyTorch 1.13 the way
lingvoc computes it (src/models/mt.c, src/layers/transformer.c, attention.c):

- token embeddings x sqrt(d) + sinusoidal positions (Lingvo's PositionalEmbeddingLayer:
  [sin | cos], timescales 1 .. 1e4), input dropout;
- pre-LN Transformer layers: attention out = LN(x) + dropout(post(MHA(LN(x)))) (Lingvo adds
  the *normalized* input), MultiHeadedAttention with query/key projections, no value
  projection (values are the attended vectors themselves), per-dim query scale
  softplus(s) / softplus(0) / sqrt(d_head), post projection; FFN out = x +
  dropout(fc1(relu(fc0(LN(x))))); the decoder's layers have causal self-attention, then
  attention over the encoder output, then the FFN;
- SimpleFullSoftmax (x W + b) with UniformLabelSmoother targets (1 - u on the label,
  u / (V - 1) elsewhere), loss averaged over target tokens; Adam (0.9, 0.98, 1e-9) with
  the TransformerSchedule learning rate;
- greedy decoding as a competent PyTorch user writes it: encoder once, the encoder keys
  projected once per layer, per-layer self-attention key/value caches preallocated and
  filled in place, torch.inference_mode.

Same synthetic batch and dims as bench/mt_bench.c. Prints one line:
"torch train_ms=<ms/step> train_tok=<target tokens/step> greedy_ms=<ms> greedy_tok=<n>
params=<trainable parameters>".
Usage: mt_torch.py threads train_steps batch src_len tgt_len dec_batch dec_steps
Environment (scripts/gpu-check.sh): MT_DIMS=model,heads,ffn,layers (default 256,4,1024,3)
and MT_DEVICE=cuda (default cpu); on cuda every step reads its loss back (as on the CPU),
and the searches end with a synchronize."""
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

D, HEADS, FFN, LAYERS = [int(v) for v in os.environ.get("MT_DIMS", "256,4,1024,3").split(",")]
V = 8000
DEV = torch.device(os.environ.get("MT_DEVICE", "cpu"))
DROPOUT, SMOOTHING, SOS, EOS = 0.1, 0.1, 1, 2


def seq_len(T, b):
    return T - (b * 3) % 8


def tok(b, t, salt):
    return 3 + (b * 7919 + t * 104729 + salt * 15485863) % (V - 3)


def make_batch(B, S, T):
    """The batch of bench/mt_bench.c's make_batch (batch-major)."""
    src = torch.zeros(B, S, dtype=torch.long)
    src_pad = torch.ones(B, S)
    tgt_in = torch.zeros(B, T, dtype=torch.long)
    labels = torch.zeros(B, T, dtype=torch.long)
    tgt_pad = torch.ones(B, T)
    for b in range(B):
        ls, lt = seq_len(S, b), seq_len(T, b)
        for t in range(ls):
            src[b, t] = EOS if t == ls - 1 else tok(b, t, 1)
            src_pad[b, t] = 0
        for t in range(lt):
            labels[b, t] = EOS if t == lt - 1 else tok(b, t, 2)
            tgt_in[b, t] = SOS if t == 0 else tok(b, t - 1, 2)
            tgt_pad[b, t] = 0
    return tuple(x.to(DEV) for x in (src, src_pad, tgt_in, labels, tgt_pad))


def sinusoids(T):
    half = D // 2
    inc = math.log(1e4) / max(half - 1, 1)
    inv = torch.exp(torch.arange(half, dtype=torch.float32) * -inc)
    pos = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(pos), torch.cos(pos)], dim=1)


class Attention(torch.nn.Module):
    """Lingvo's TransformerAttentionLayer (pre-LN) around MultiHeadedAttention."""

    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(D, eps=1e-6)
        self.q = torch.nn.Linear(D, D)
        self.k = torch.nn.Linear(D, D)
        self.post = torch.nn.Linear(D, D)
        self.per_dim_scale = torch.nn.Parameter(torch.zeros(D // HEADS))

    def scale(self):
        s = F.softplus(self.per_dim_scale) / math.log(2.0) / math.sqrt(D // HEADS)
        return s.repeat(HEADS)

    def heads(self, x):  # [B, T, D] -> [B, H, T, d]
        return x.view(x.shape[0], x.shape[1], HEADS, D // HEADS).transpose(1, 2)

    def attend(self, xn, keys, values, mask):
        """xn [B, Tq, D] normalized queries; keys / values [B, H, S, d]; mask additive."""
        q = self.heads(self.q(xn) * self.scale())
        p = torch.softmax(q @ keys.transpose(-1, -2) + mask, dim=-1)
        ctx = (p @ values).transpose(1, 2).reshape(xn.shape[0], xn.shape[1], D)
        return self.post(ctx)

    def forward(self, x, mask, source=None):
        xn = self.ln(x)
        src = xn if source is None else source
        ctx = self.attend(xn, self.heads(self.k(src)), self.heads(src), mask)
        return xn + F.dropout(ctx, DROPOUT, self.training)


class FeedForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(D, eps=1e-6)
        self.fc0 = torch.nn.Linear(D, FFN)
        self.fc1 = torch.nn.Linear(FFN, D)

    def forward(self, x):
        return x + F.dropout(self.fc1(F.relu(self.fc0(self.ln(x)))), DROPOUT, self.training)


class Layer(torch.nn.Module):
    def __init__(self, decoder):
        super().__init__()
        self.self_atten = Attention()
        self.atten = Attention() if decoder else None
        self.ff = FeedForward()

    def forward(self, x, self_mask, enc=None, enc_mask=None):
        x = self.self_atten(x, self_mask)
        if self.atten is not None:
            x = self.atten(x, enc_mask, enc)
        return self.ff(x)


class TransformerModel(torch.nn.Module):
    def __init__(self, max_len):
        super().__init__()
        self.src_emb = torch.nn.Embedding(V, D)
        self.tgt_emb = torch.nn.Embedding(V, D)
        for e in (self.src_emb, self.tgt_emb):
            torch.nn.init.normal_(e.weight, std=D ** -0.5)
        self.enc = torch.nn.ModuleList([Layer(False) for _ in range(LAYERS)])
        self.dec = torch.nn.ModuleList([Layer(True) for _ in range(LAYERS)])
        self.softmax = torch.nn.Linear(D, V)
        torch.nn.init.normal_(self.softmax.weight, std=D ** -0.5)
        self.register_buffer("pos", sinusoids(max_len))

    def embed(self, emb, ids):
        x = emb(ids) * math.sqrt(D) + self.pos[: ids.shape[1]]
        return F.dropout(x, DROPOUT, self.training)

    def encode(self, src, src_pad):
        key_mask = (src_pad * -1e9)[:, None, None, :]  # [B, 1, 1, S]
        x = self.embed(self.src_emb, src)
        for layer in self.enc:
            x = layer(x, key_mask)
        return x, key_mask

    def loss(self, src, src_pad, tgt_in, labels, tgt_pad):
        enc, enc_mask = self.encode(src, src_pad)
        T = tgt_in.shape[1]
        causal = torch.triu(torch.full((T, T), -1e9, device=DEV), diagonal=1)
        self_mask = causal[None, None] + (tgt_pad * -1e9)[:, None, None, :]
        x = self.embed(self.tgt_emb, tgt_in)
        for layer in self.dec:
            x = layer(x, self_mask, enc, enc_mask)
        logp = torch.log_softmax(self.softmax(x), dim=-1)
        off = SMOOTHING / (V - 1)
        xent = -(1 - SMOOTHING - off) * logp.gather(-1, labels[..., None])[..., 0] - off * logp.sum(-1)
        w = 1 - tgt_pad
        return (xent * w).sum() / w.sum()

    @torch.inference_mode()
    def greedy(self, src, src_pad, steps, full_recompute=False):
        """Greedy decoding of `steps` tokens (</s> masked out before the last step)."""
        enc, enc_mask = self.encode(src, src_pad)
        B = src.shape[0]
        att = [l.atten for l in self.dec]
        enc_k = [a.heads(a.k(enc)) for a in att]
        enc_v = att[0].heads(enc)
        dh = D // HEADS
        k_cache = [torch.empty(B, HEADS, steps, dh, device=DEV) for _ in self.dec]
        v_cache = [torch.empty(B, HEADS, steps, dh, device=DEV) for _ in self.dec]
        ids = torch.full((B,), SOS, dtype=torch.long, device=DEV)
        out = torch.empty(B, steps, dtype=torch.long, device=DEV)
        score = torch.zeros(B, device=DEV)
        no_mask = torch.zeros(1, device=DEV)
        for t in range(steps):
            if full_recompute:  # the reference for the cache: the whole prefix each step
                prefix = torch.cat([torch.full((B, 1), SOS, dtype=torch.long, device=DEV), out[:, :t]], dim=1)
                x = self.tgt_emb(prefix) * math.sqrt(D) + self.pos[: t + 1]
                causal = torch.triu(torch.full((t + 1, t + 1), -1e9, device=DEV), diagonal=1)[None, None]
                for layer in self.dec:
                    x = layer(x, causal, enc, enc_mask)
                x = x[:, -1:]
            else:
                x = (self.tgt_emb(ids) * math.sqrt(D) + self.pos[t])[:, None]  # [B, 1, D]
                for i, layer in enumerate(self.dec):
                    sa = layer.self_atten
                    xn = sa.ln(x)
                    k_cache[i][:, :, t : t + 1] = sa.heads(sa.k(xn))
                    v_cache[i][:, :, t : t + 1] = sa.heads(xn)
                    x = xn + sa.attend(xn, k_cache[i][:, :, : t + 1], v_cache[i][:, :, : t + 1], no_mask)
                    xn = layer.atten.ln(x)
                    x = xn + layer.atten.attend(xn, enc_k[i], enc_v, enc_mask)
                    x = layer.ff(x)
            logp = torch.log_softmax(self.softmax(x[:, 0]), dim=-1)
            if t < steps - 1:
                logp[:, EOS] = -math.inf
            score += logp.max(dim=-1).values
            ids = logp.argmax(dim=-1)
            out[:, t] = ids
        return out, score


def transformer_schedule(step, warmup=1000):
    return D ** -0.5 * min((step + 1) * warmup ** -1.5, (step + 1) ** -0.5)


def main():
    threads, steps, B, S, T, DB, DN = [int(v) for v in sys.argv[1:8]]
    torch.set_num_threads(threads)
    torch.manual_seed(1234)
    model = TransformerModel(max(S, T, DN)).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=0.7, betas=(0.9, 0.98), eps=1e-9)
    batch = make_batch(B, S, T)
    train_tok = int((1 - batch[4]).sum())

    # The cache is right: cached greedy decoding == recomputing the prefix (tiny, untimed).
    model.eval()
    small = make_batch(2, S, T)
    a, _ = model.greedy(small[0], small[1], 6)
    b, _ = model.greedy(small[0], small[1], 6, full_recompute=True)
    assert torch.equal(a, b), "cached greedy decoding differs from full recomputation"

    model.train()
    total = 0.0
    warmup = 2  # steps 0 and 1 warm up, as on lingvoc's side (mt_bench.c's WARMUP)
    for step in range(steps + warmup):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = 0.7 * transformer_schedule(step)
        opt.zero_grad(set_to_none=True)
        loss = model.loss(*batch)
        loss.backward()
        opt.step()
        value = loss.item()
        if step >= warmup:
            total += time.perf_counter() - t0
        assert math.isfinite(value), "loss %r at step %d" % (value, step)

    model.eval()
    dec = make_batch(DB, S, T)
    for rep in range(2):  # rep 0 warms up
        t0 = time.perf_counter()
        out, _ = model.greedy(dec[0], dec[1], DN)
        if DEV.type == "cuda":
            torch.cuda.synchronize()
        greedy = time.perf_counter() - t0
    assert out.shape == (DB, DN)
    params = sum(p.numel() for p in model.parameters())
    print("torch train_ms=%.2f train_tok=%d greedy_ms=%.2f greedy_tok=%d params=%d"
          % (total / steps * 1e3, train_tok, greedy * 1e3, DB * DN, params))


if __name__ == "__main__":
    main()
