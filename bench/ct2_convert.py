"""lingvoc mt.bible_en_es.TransformerSmall checkpoint -> CTranslate2 model directory
(bench/bench_ct2.sh; issue 46's CTranslate2 comparison).

Usage: ct2_convert.py CKPT_PREFIX WPM_VOCAB OUT_DIR [--heads=N]
  CKPT_PREFIX  a lingvoc (TensorFlow V2) checkpoint of mt.model.TransformerModel, e.g.
               /tmp/q/transformer/train/ckpt-00002218 (read here without TensorFlow);
  WPM_VOCAB    the WpmTokenizer vocabulary (/tmp/bible/wpm.voc): its pieces, in id order,
               become both CTranslate2 vocabularies, so CTranslate2's token ids are
               lingvoc's ids (feed it lingvoc's pieces; join its output pieces as
               WpmTokenizer decodes: '▁' -> ' ');
  --heads      attention heads (default: the checkpoint's params, else 4).
Run with the peers venv's python (ctranslate2 4.5, numpy): ~/.cache/lingvoc/peers/bin/python.
Also: ct2_convert.py --encode WPM_VOCAB < text  prints each line's pieces + </s> (the
source tokens lingvoc's --decode_text feeds its encoder), and --decode < pieces prints
the text WpmTokenizer gives them.

The mapping (lingvoc src/layers/transformer.c, attention.c, embedding.c, layer_norm.c;
Lingvo's layers_with_attention.py) onto CTranslate2's pre-norm TransformerSpec:
  token_emb var_0..var_{n-1}  the vocabulary sharded 'mod' (id i is row i / n of shard
                              i % n) -> embeddings [V, D]; x sqrt(D) = CTranslate2's
                              scale_embeddings (both multiply by sqrt(256) = 16);
  position_emb                Lingvo's sinusoids ([sin | cos], timescales 1..1e4, the
                              increment log(1e4) / (D/2 - 1)) computed as lingvoc does in
                              float32, stored as CTranslate2's position_encodings table
                              (rows 0..MAX_POS-1; step t of either side uses row t);
  LayerNorm scale, bias       gamma = 1 + scale (Lingvo stores scale - 1), beta = bias,
                              epsilon 1e-6 (config layer_norm_epsilon);
  query_proj (+ _b)           [in, out] -> transposed, each column times
                              softplus(per_dim_scale) / ln 2 (Lingvo's per-dim query scale;
                              CTranslate2 multiplies by the remaining 1 / sqrt(d_head));
  source_proj (+ _b)          the key projection;
  (no value projection)       Lingvo's MultiHeadedAttention attends over the vectors
                              themselves (enable_ctx_pre_proj False): identity, bias 0;
  ctx_post_proj (+ _b)        the output projection;
  fflayer_0, fflayer_1        FFN linear_0 (ReLU), linear_1; fflayer_ln its layer norm;
  softmax weight_0, bias_0    the decoder's output projection (not tied);
  no final layer norm         neither Lingvo stack has one: no_final_norm.
The one thing CTranslate2 cannot express: Lingvo's TransformerAttentionLayer with
add_unnormalized_input False (Lingvo's default, and TransformerSmall's) adds the
*normalized* input to the attention output, LN(x) + Atten(LN(x)); CTranslate2's pre-norm
attention adds x, x + Atten(LN(x)) (the feed-forward layers agree: x + FFN(LN(x))). No
CTranslate2 layer replaces the residual stream by its layer norm, so no weight setting
of the same width computes that model: the converter then writes the nearest CTranslate2
model and says so on stderr, and that model is not the same function (on the step-2,218
TransformerSmall it degenerates into runs of "." up to max_decoding_length). It reads
add_unnormalized_input from the checkpoint's params (_lingvoc/params_txt). With
add_unnormalized_input True in both stacks (--model_params_override=
'task.encoder.transformer_stack.transformer_tpl.tr_atten_tpl.add_unnormalized_input: true;
task.decoder.trans_tpl.tr_atten_tpl.add_unnormalized_input: true') the mapping is exact:
a 10-step mt.bible_en_es.TinyTest so trained (vocabulary 8000), greedy (num_hyps_per_beam
1 / beam 1), gave the same text as bin/decoder --decode_text on each of 5 Test lines.
"""
import math
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "lib"))
from pbwire import fields, varint  # noqa: E402

MAX_POS = 1024


# ---- TensorFlow V2 checkpoint (tensor bundle) reader, no TensorFlow ----

def _unsnappy(b):
    n, i = varint(b, 0)
    out = bytearray()
    while i < len(b):
        t = b[i]
        i += 1
        kind = t & 3
        if kind == 0:  # literal
            ln = t >> 2
            if ln >= 60:
                nb = ln - 59
                ln = int.from_bytes(b[i:i + nb], "little")
                i += nb
            ln += 1
            out += b[i:i + ln]
            i += ln
            continue
        if kind == 1:
            ln, off = ((t >> 2) & 7) + 4, ((t >> 5) << 8) | b[i]
            i += 1
        elif kind == 2:
            ln, off = (t >> 2) + 1, int.from_bytes(b[i:i + 2], "little")
            i += 2
        else:
            ln, off = (t >> 2) + 1, int.from_bytes(b[i:i + 4], "little")
            i += 4
        for _ in range(ln):
            out.append(out[-off])
    if len(out) != n:
        raise ValueError("bad snappy block")
    return bytes(out)


def _block(buf, off, size):
    """The (key, value) entries of one LevelDB table block (prefix-compressed keys)."""
    d = buf[off:off + size]
    if buf[off + size] == 1:
        d = _unsnappy(d)
    elif buf[off + size] != 0:
        raise ValueError("unknown block compression %d" % buf[off + size])
    nrest = struct.unpack_from("<I", d, len(d) - 4)[0]
    end, i, key, out = len(d) - 4 - 4 * nrest, 0, b"", []
    while i < end:
        shared, i = varint(d, i)
        unshared, i = varint(d, i)
        vlen, i = varint(d, i)
        key = key[:shared] + d[i:i + unshared]
        i += unshared
        out.append((key, d[i:i + vlen]))
        i += vlen
    return out


def read_checkpoint(prefix):
    """{name: float32 array} of the float tensors of PREFIX.index / PREFIX.data-*, and
    {name: bytes} of its scalar strings (lingvoc's _lingvoc/params_txt)."""
    buf = open(prefix + ".index", "rb").read()
    foot = buf[-48:]
    _, i = varint(foot, 0)
    _, i = varint(foot, i)
    io, i = varint(foot, i)
    isz, i = varint(foot, i)
    entries = []
    for _, handle in _block(buf, io, isz):
        off, j = varint(handle, 0)
        size, j = varint(handle, j)
        entries += _block(buf, off, size)
    d = os.path.dirname(prefix) or "."
    datas, out = {}, {}
    for key, v in entries:
        if not key:
            continue  # the BundleHeaderProto
        dtype, shape, shard, off, size = 1, [], 0, 0, 0
        for f, _, x in fields(v):
            if f == 1:
                dtype = x
            elif f == 2:
                shape = [{g: d for g, _, d in fields(dim)}.get(1, 0) for g, _, dim in fields(x) if g == 2]
            elif f == 3:
                shard = x
            elif f == 4:
                off = x
            elif f == 5:
                size = x
        if dtype not in (1, 7):  # DT_FLOAT, DT_STRING
            continue
        if shard not in datas:
            base = os.path.basename(prefix) + ".data-%05d-of-" % shard
            name = [f for f in os.listdir(d) if f.startswith(base)][0]
            datas[shard] = open(os.path.join(d, name), "rb")
        datas[shard].seek(off)
        raw = datas[shard].read(size)
        if dtype == 7:
            if not shape:  # a scalar: its length (varint), a 4-byte checksum, the bytes
                n, i = varint(raw, 0)
                out[key.decode()] = raw[i + 4:i + 4 + n]
            continue
        out[key.decode()] = np.frombuffer(raw, dtype="<f4").reshape(shape).copy()
    return out


# ---- WpmTokenizer (lingvoc src/input/tok_wpm.c) ----

BOW = "\u2581"


def read_vocab(path):
    with open(path, encoding="utf-8") as f:
        return [line.split("\t")[0].strip() for line in f.read().split("\n") if line.strip()]


def wpm_encode(line, ids):
    """A line's pieces as WpmTokenizer encodes it (merge probability 1)."""
    out = []
    for word in line.split():
        parts = list(BOW + word)
        parts = [p if p in ids else "<unk>" for p in parts]
        while True:
            best, at = None, -1
            for k in range(len(parts) - 1):
                m = ids.get(parts[k] + parts[k + 1])
                if m is not None and (best is None or m < best):
                    best, at = m, k
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        out += parts
    return out


def wpm_decode(pieces):
    return "".join(pieces).replace(BOW, " ").strip(" \t\n\r\f\v")


# ---- the conversion ----

def softplus(x):
    return np.logaddexp(0.0, x.astype(np.float64))


def positions(n, d):
    """lingvoc's positional_signal (src/layers/embedding.c), in float32 as it computes it."""
    nt = d // 2
    incr = np.float32(math.log(1e4 / 1.0)) / np.float32(max(1.0, nt - 1.0))
    inv = np.float32(1.0) * np.exp(np.arange(nt, dtype=np.float32) * -incr)
    st = np.arange(n, dtype=np.float32)[:, None] * inv[None, :].astype(np.float32)
    return np.concatenate([np.sin(st), np.cos(st)], axis=1).astype(np.float32)


def convert(prefix, vocab_path, out_dir, heads=None):
    from ctranslate2.specs import common_spec, transformer_spec

    w = read_checkpoint(prefix)
    tokens = read_vocab(vocab_path)
    get = lambda n: w[n]

    def embedding(scope):
        shards = sorted((k for k in w if re.fullmatch(re.escape(scope) + r"/var_\d+/var", k)),
                        key=lambda k: int(k.split("/")[-2][4:]))
        n = len(shards)
        rows = shards and w[shards[0]].shape[0]
        table = np.zeros((rows * n, w[shards[0]].shape[1]), np.float32)
        for s, k in enumerate(shards):
            table[s::n] = w[k]  # 'mod': id i is row i // n of shard i % n
        return table[:len(tokens)]

    def layer_norm(spec, scope):
        spec.gamma = 1.0 + get(scope + "/scale/var")
        spec.beta = get(scope + "/bias/var")

    def attention(spec, scope, self_attention):
        a = scope + "/multihead_atten"
        wq, bq = get(a + "/query_proj/var"), get(a + "/query_proj_b/var")
        wk, bk = get(a + "/source_proj/var"), get(a + "/source_proj_b/var")
        d = wq.shape[0]
        s = np.tile(softplus(get(a + "/inner_att/per_dim_scale/var")) / math.log(2.0), heads)
        q_w, q_b = (wq * s[None, :]).T, bq * s
        eye, zero = np.eye(d, dtype=np.float32), np.zeros(d, np.float32)
        layer_norm(spec.layer_norm, scope + "/atten_ln")
        if self_attention:
            spec.linear[0].weight = np.concatenate([q_w, wk.T, eye]).astype(np.float32)
            spec.linear[0].bias = np.concatenate([q_b, bk, zero]).astype(np.float32)
        else:
            spec.linear[0].weight, spec.linear[0].bias = q_w.astype(np.float32), q_b.astype(np.float32)
            spec.linear[1].weight = np.concatenate([wk.T, eye]).astype(np.float32)
            spec.linear[1].bias = np.concatenate([bk, zero]).astype(np.float32)
        spec.linear[-1].weight = get(a + "/ctx_post_proj/var").T.copy()
        spec.linear[-1].bias = get(a + "/ctx_post_proj_b/var")

    def ffn(spec, scope):
        layer_norm(spec.layer_norm, scope + "/fflayer_ln")
        for i in range(2):
            spec.__getattribute__("linear_%d" % i).weight = get(scope + "/fflayer/fflayer_%d/w/var" % i).T.copy()
            spec.__getattribute__("linear_%d" % i).bias = get(scope + "/fflayer/fflayer_%d/b/var" % i)

    params = w.pop("_lingvoc/params_txt", b"").decode("utf-8", "replace")
    unnorm = re.findall(r"^task\.(?:encoder|decoder)\.\S*add_unnormalized_input : (\w+)", params, re.M)
    exact = bool(unnorm) and all(v == "True" for v in unnorm)
    print("ct2_convert.py: %s: add_unnormalized_input %s: %s" % (
        prefix, "/".join(sorted(set(unnorm))) or "(no params in the checkpoint)",
        "CTranslate2's pre-norm layers compute this model exactly" if exact else
        "Lingvo's normalized residual, which CTranslate2 cannot express: the nearest CTranslate2 model, "
        "NOT the same function (see this file's header)"), file=sys.stderr)
    w = {k: v for k, v in w.items() if not isinstance(v, bytes)}
    if heads is None:
        h = re.findall(r"^task\.encoder\.\S*tr_atten_tpl\.num_attention_heads : (\d+)", params, re.M)
        heads = int(h[0]) if h else 4
    root = sorted({k.split("/")[0] for k in w if k.endswith("/token_emb/var_0/var")})
    if len(root) != 1:
        sys.exit("ct2_convert.py: %s is not one mt.model.TransformerModel checkpoint (roots %s)" % (prefix, root))
    r = root[0]
    n_enc = len({k.split("/")[2] for k in w if k.startswith(r + "/enc/trans_")})
    n_dec = len({k.split("/")[2] for k in w if k.startswith(r + "/dec/trans_layer_")})
    enc = transformer_spec.TransformerEncoderSpec(n_enc, heads, pre_norm=True, no_final_norm=True)
    dec = transformer_spec.TransformerDecoderSpec(n_dec, heads, pre_norm=True, no_final_norm=True)
    spec = transformer_spec.TransformerSpec(enc, dec)
    src_emb, tgt_emb = embedding(r + "/enc/token_emb"), embedding(r + "/dec/token_emb")
    d = src_emb.shape[1]
    enc.embeddings[0].weight = src_emb
    dec.embeddings.weight = tgt_emb
    enc.scale_embeddings = dec.scale_embeddings = True  # x sqrt(d_model), as scale_sqrt_depth
    enc.position_encodings.encodings = positions(MAX_POS, d)
    dec.position_encodings.encodings = positions(MAX_POS, d)
    for i, layer in enumerate(enc.layer):
        attention(layer.self_attention, "%s/enc/trans_%d/multihead_self_atten" % (r, i), True)
        ffn(layer.ffn, "%s/enc/trans_%d/tr_fflayer" % (r, i))
    for i, layer in enumerate(dec.layer):
        attention(layer.self_attention, "%s/dec/trans_layer_%d/multihead_self_atten" % (r, i), True)
        attention(layer.attention, "%s/dec/trans_layer_%d/multihead_atten" % (r, i), False)
        ffn(layer.ffn, "%s/dec/trans_layer_%d/tr_fflayer" % (r, i))
    sm_w = get(r + "/dec/softmax/weight_0/var")
    dec.projection.weight = sm_w.T.copy()
    dec.projection.bias = get(r + "/dec/softmax/bias_0/var")
    if sm_w.shape[1] != len(tokens) or src_emb.shape[0] != len(tokens):
        sys.exit("ct2_convert.py: %d vocabulary pieces, the model has %d classes" % (len(tokens), sm_w.shape[1]))
    spec.config.layer_norm_epsilon = 1e-6
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.validate()
    spec.optimize(quantization=None)  # float32; int8 is CTranslate2's compute_type at load
    os.makedirs(out_dir, exist_ok=True)
    spec.save(out_dir)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    if "encode" in flags:
        tokens = read_vocab(args[0])
        ids = {t: i for i, t in enumerate(tokens)}
        for line in sys.stdin:
            print(" ".join(wpm_encode(line, ids) + ["</s>"]))
        return
    if "decode" in flags:
        for line in sys.stdin:
            print(wpm_decode(line.split()))
        return
    if len(args) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    heads = int(flags["heads"]) if "heads" in flags else None
    convert(args[0], args[1], args[2], heads)


if __name__ == "__main__":
    main()
