"""Files other tools read (issue 43 part 5): checks that TensorBoard, TensorFlow, Lingvo's
scorers, sacrebleu and jiwer read lingvoc's files as lingvoc means them. Run with the peers'
Python (scripts/peers.sh prints its path; docs/peers.md has the figures); each check prints
a line per figure and a last line `check_files CMD: N checks, M disagreements`; exit 1 on
any disagreement, 2 on bad arguments.

  check_files.py events LOGDIR [--train_log=[RUN:]FILE ...] [--http]
      Every run folder under LOGDIR (a folder with events.out.tfevents.* files: train/,
      eval_*/, decoder_*/, or any other) is decoded here from the raw bytes (TFRecord
      framing and the protobuf wire format, no TensorFlow code), and read by TensorBoard's
      EventAccumulator (size_guidance 0: keep everything); both must hold the same tags and
      the same (step, value) of every scalar, the same PNG bytes of every image (a PNG whose
      IHDR size is the event's), the same histogram (min, max, num, sum, buckets adding up to
      num) and the same text. Then lingvoc's own record of the values: the trainer's log
      (--train_log=RUN:FILE, RUN the run folder relative to LOGDIR, default train; every
      metric of a summary step's log line, %.8g) for trainer runs, the score-*.txt files for
      eval_*/ and decoder_*/, the params file for the trainer_params.txt text.
      --http also starts the `tensorboard` command (--load_fast=false, a free port) on
      LOGDIR and reads the same scalars, images, histograms and texts back from its HTTP
      API (the scalars, images, histograms and text plugins).
  check_files.py histogram RUN_DIR TAG VALUES_FILE
      The one histogram TAG of RUN_DIR's events against TensorFlow's
      tf.compat.v1.summary.histogram of the same values (VALUES_FILE: numbers, read as
      float32): min, max, num, sum, sum_squares, bucket limits and counts all equal.
  check_files.py bleu DECODER_OUT SCORE_FILE
      An MT decoder's decoder_out_* (ref / hyp 0 of each example) and its score file:
      corpus_bleu must equal Lingvo's own scorers.BleuScorer (lingvo 0.14.0, white-space
      tokens, a fraction) and sacrebleu sacrebleu.corpus_bleu (13a tokens, x100); where
      every n-gram order has a match, corpus_bleu must also be sacrebleu's tokenize none,
      smooth none score / 100.
  check_files.py sacrebleu BIN_DIR HYP REF[,REF2...]
      BIN_DIR/sacrebleu_score against sacrebleu.metrics.BLEU for each option set lingvoc
      supports (tokenize 13a/none, smooth exp/floor/add-k/none, effective order with either
      tokenizer, max order 2): the score to 1e-9 and the printed line (str(BLEUScore)) byte for byte.
  check_files.py wer DECODER_OUT SCORE_FILE
      An ASR decoder's decoder_out_* and score file: norm_wer, error_rates/wer and the
      case-insensitive wer must equal jiwer.wer on the same (ref, hyp 0) pairs; the
      ins/sub/del split must equal Lingvo's levenshtein_distance.LevenshteinDistance (jiwer
      may split the same total otherwise: its alignment breaks ties another way, see
      docs/peers.md); sacc must be the share of exact hypotheses and
      ter the character edit distance (jiwer.cer's numerator) over the reference
      characters plus one </s> per utterance; corpus_bleu must equal Lingvo's
      BleuScorer. (Lingvo's <noise> and <epsilon> filters are not applied here: keep such
      tokens out of the check's data.)"""
import glob
import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from pbwire import fields  # noqa: E402

N_CHECKS = 0
PROBLEMS = []


def check(ok, what):
    global N_CHECKS
    N_CHECKS += 1
    if not ok:
        PROBLEMS.append(what)
        print("DISAGREE: " + what)
    return ok


def close(a, b, rel=2.5e-7, ab=1e-12):
    """A %.8g record of a double against a float32 event value: within a float32 ulp."""
    return abs(a - b) <= rel * max(abs(a), abs(b)) + ab


# ---- raw decoding: TFRecord framing and protobuf wire format --------------------------

def tfrecords(path):
    data = open(path, "rb").read()
    pos = 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        yield data[pos + 12:pos + 12 + n]
        pos += 16 + n
    check(pos == len(data), "%s: %d trailing bytes after the last record" % (path, len(data) - pos))


def doubles(wt, v):
    return list(struct.unpack("<%dd" % (len(v) // 8), v)) if wt == 2 else [struct.unpack("<d", v)[0]]


def decode_value(b):
    """A Summary.Value as (tag, kind, payload)."""
    tag, kind, payload, plugin = "", None, None, ""
    for num, wt, v in fields(b):
        if num == 1:
            tag = v.decode("utf-8")
        elif num == 2:
            kind, payload = "scalar", struct.unpack("<f", v)[0]
        elif num == 4:
            im = {k: 0 for k in ("height", "width", "colorspace")}
            for n2, _, v2 in fields(v):
                if n2 in (1, 2, 3):
                    im[("height", "width", "colorspace")[n2 - 1]] = v2
                elif n2 == 4:
                    im["png"] = v2
            kind, payload = "image", im
        elif num == 5:
            h = {"min": 0.0, "max": 0.0, "num": 0.0, "sum": 0.0, "sum_squares": 0.0, "bucket_limit": [], "bucket": []}
            for n2, wt2, v2 in fields(v):
                if n2 in (1, 2, 3, 4, 5):
                    h[("min", "max", "num", "sum", "sum_squares")[n2 - 1]] = struct.unpack("<d", v2)[0]
                elif n2 in (6, 7):
                    h[("bucket_limit", "bucket")[n2 - 6]] += doubles(wt2, v2)
            kind, payload = "histogram", h
        elif num == 8:
            strings = [v2 for n2, _, v2 in fields(v) if n2 == 8]
            kind, payload = "tensor", strings
        elif num == 9:
            for n2, _, v2 in fields(v):
                if n2 == 1:
                    plugin = "".join(v3.decode() for n3, _, v3 in fields(v2) if n3 == 1)
    if kind == "tensor" and plugin == "text":
        kind, payload = "text", b"".join(payload).decode("utf-8")
    return tag, kind, payload


def read_raw(run_dir):
    """{kind: {tag: [(step, payload), ...]}} of every events file of run_dir, in order."""
    out = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        for n, rec in enumerate(tfrecords(path)):
            step, version, values = 0, None, []
            for num, _, v in fields(rec):
                if num == 2:
                    step = v if v < 1 << 63 else v - (1 << 64)
                elif num == 3:
                    version = v.decode()
                elif num == 5:
                    values += [decode_value(v2) for n2, _, v2 in fields(v) if n2 == 1]
            if n == 0:
                check(version == "brain.Event:2", "%s: first event's file_version %r" % (path, version))
            for tag, kind, payload in values:
                out.setdefault(kind or "other", {}).setdefault(tag, []).append((step, payload))
    return out


def png_size(png):
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", png[16:24])


# ---- TensorBoard's EventAccumulator ---------------------------------------------------

def check_histogram(where, h):
    check(h["num"] > 0 and sum(h["bucket"]) == h["num"] and h["min"] <= h["max"]
          and all(a < b for a, b in zip(h["bucket_limit"], h["bucket_limit"][1:]))
          and len(h["bucket_limit"]) == len(h["bucket"]),
          "%s: histogram buckets add up to %s of num %s (min %s max %s, %d limits)" %
          (where, sum(h["bucket"]), h["num"], h["min"], h["max"], len(h["bucket_limit"])))


def accumulator_vs_raw(run, run_dir, raw):
    from tensorboard.backend.event_processing import event_accumulator as ea
    acc = ea.EventAccumulator(run_dir, size_guidance={k: 0 for k in (ea.SCALARS, ea.IMAGES, ea.HISTOGRAMS,
                                                                      ea.COMPRESSED_HISTOGRAMS, ea.TENSORS)})
    acc.Reload()
    tags = acc.Tags()
    n = {"scalar": 0, "image": 0, "histogram": 0, "text": 0}
    for kind, tb_kind in (("scalar", "scalars"), ("image", "images"), ("histogram", "histograms"),
                          ("text", "tensors")):
        mine = sorted(raw.get(kind, {}))
        check(mine == sorted(tags.get(tb_kind, [])), "%s: %s tags: events %s, TensorBoard %s" %
              (run, kind, mine, sorted(tags.get(tb_kind, []))))
    for tag, evs in raw.get("scalar", {}).items():
        tb = [(e.step, e.value) for e in acc.Scalars(tag)] if tag in tags["scalars"] else []
        n["scalar"] += check(tb == evs, "%s: scalar %s: events %s, TensorBoard %s" % (run, tag, evs[:4], tb[:4]))
    for tag, evs in raw.get("image", {}).items():
        tb = acc.Images(tag) if tag in tags["images"] else []
        ok = [(e.step, e.width, e.height, e.encoded_image_string) for e in tb] == \
             [(s, im["width"], im["height"], im["png"]) for s, im in evs]
        for s, im in evs:
            ok &= png_size(im["png"]) == (im["width"], im["height"]) and im["width"] > 0 and im["height"] > 0
        n["image"] += check(ok, "%s: image %s: %d events, TensorBoard %d, or a PNG of another size" %
                            (run, tag, len(evs), len(tb)))
    for tag, evs in raw.get("histogram", {}).items():
        tb = acc.Histograms(tag) if tag in tags["histograms"] else []
        ok = len(tb) == len(evs)
        for e, (s, h) in zip(tb, evs):
            v = e.histogram_value
            check_histogram("%s: %s@%d" % (run, tag, s), h)
            ok &= (e.step, v.min, v.max, v.num, v.sum, v.sum_squares, list(v.bucket_limit), list(v.bucket)) == \
                  (s, h["min"], h["max"], h["num"], h["sum"], h["sum_squares"], h["bucket_limit"], h["bucket"])
        n["histogram"] += check(ok, "%s: histogram %s differs in TensorBoard" % (run, tag))
    for tag, evs in raw.get("text", {}).items():
        tb = acc.Tensors(tag) if tag in tags["tensors"] else []
        meta = acc.SummaryMetadata(tag).plugin_data.plugin_name if tb else ""
        got = [(e.step, b"".join(e.tensor_proto.string_val).decode("utf-8")) for e in tb]
        n["text"] += check(got == evs and meta == "text", "%s: text %s differs in TensorBoard (plugin %r)" %
                           (run, tag, meta))
    return n


# ---- lingvoc's own record: trainer log, score files, params file --------------------

LOG_LINE = re.compile(r"step: *(\d+), steps/sec: ([-0-9.naif]+), examples/sec: ([-0-9.naif]+)((?: [^ :]+:[^ ]+)*)")


def train_vs_log(run, run_dir, raw, log_path):
    text = open(log_path, errors="replace").read()
    logged = {}
    for m in LOG_LINE.finditer(text):
        d = {k: float(v) for k, v in (kv.split(":", 1) for kv in m.group(4).split())}
        d["global_step/sec"], d["examples/sec"] = float(m.group(2)), float(m.group(3))
        logged[int(m.group(1))] = d
    b = re.search(r"from step \d+ to \d+, batch (\d+)", text)
    batch = int(b.group(1)) if b else None
    n = 0
    for tag, evs in raw.get("scalar", {}).items():
        for step, v in evs:
            rec = logged.get(step, {})
            if tag == "total_samples":
                ok = batch is not None and v == step * batch
                want = "step x batch %s" % batch
            elif tag in ("global_step/sec", "examples/sec"):
                ok, want = tag in rec and abs(v - rec[tag]) <= 0.005 + 1e-6 * abs(v), rec.get(tag)
            else:
                ok, want = tag in rec and close(v, rec[tag]), rec.get(tag)
            n += check(ok, "%s: %s at step %d: event %r, log %r" % (run, tag, step, v, want))
    summary_steps = {s for evs in raw.get("scalar", {}).values() for s, _ in evs}
    for step in summary_steps:
        # allreduce_ms/step: a timing of several replicas' log lines only, never a summary
        missing = sorted(set(logged.get(step, {})) - {"allreduce_ms/step"} -
                         set(t for t, evs in raw["scalar"].items() if any(s == step for s, _ in evs)))
        check(not missing, "%s: step %d: logged but no event: %s" % (run, step, missing))
    params = os.path.join(run_dir, "trainer_params.txt")
    for step, body in raw.get("text", {}).get("trainer_params.txt", []):
        check(os.path.exists(params) and body.replace("  \n", "\n") == open(params).read(),
              "%s: trainer_params.txt summary at step %d is not %s with markdown line breaks" % (run, step, params))
    return n


def scores_vs_events(run, run_dir, raw):
    n, files = 0, sorted(glob.glob(os.path.join(run_dir, "score-*.txt")))
    scalars = raw.get("scalar", {})
    for path in files:
        step = int(re.search(r"score-(\d+)\.txt$", path).group(1))
        lines = dict(l.split(": ", 1) for l in open(path).read().splitlines() if ": " in l)
        for tag, val in lines.items():
            ev = [v for s, v in scalars.get(tag, []) if s == step]
            n += check(len(ev) == 1 and close(ev[0], float(val)), "%s: %s at step %d: score file %s, events %r" %
                       (run, tag, step, val, ev))
        extra = sorted(t for t, evs in scalars.items() if any(s == step for s, _ in evs) and t not in lines)
        check(not extra, "%s: step %d: events not in %s: %s" % (run, step, os.path.basename(path), extra))
    return n, len(files)


# ---- the tensorboard command and its HTTP API ----------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_vs_raw(logdir, raws):
    """The same values through the tensorboard command's HTTP API (its text plugin serves
    a scalar string as the markdown rendered to safe HTML)."""
    from tensorboard.plugin_util import markdown_to_safe_html
    tb_bin = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    port = free_port()
    proc = subprocess.Popen([tb_bin, "--logdir", logdir, "--load_fast=false", "--host", "127.0.0.1",
                             "--port", str(port), "--reload_interval", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port

    def get(path, **q):
        with urllib.request.urlopen(base + path + ("?" + urllib.parse.urlencode(q) if q else ""), timeout=20) as r:
            body = r.read()
        return body if path.endswith("individualImage") else json.loads(body)

    want = {run: sorted(r.get("scalar", {})) for run, r in raws.items()}
    n, t0 = {"scalar": 0, "image": 0, "histogram": 0, "text": 0}, time.time()
    try:
        tags = None
        while time.time() - t0 < 90:
            try:
                tags = get("/data/plugin/scalars/tags")
                if all(sorted(tags.get(run, {})) == w for run, w in want.items() if w):
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        if not check(tags is not None, "tensorboard on %s did not answer (exit %s)" % (logdir, proc.poll())):
            return n
        print("tensorboard: HTTP API up, data loaded after %.1f s" % (time.time() - t0))
        for run, r in raws.items():
            for tag, evs in r.get("scalar", {}).items():
                got = [(s, v) for _, s, v in get("/data/plugin/scalars/scalars", run=run, tag=tag)]
                n["scalar"] += check(got == evs, "http %s: scalar %s: events %s, API %s" % (run, tag, evs[:3], got[:3]))
            for tag, evs in r.get("image", {}).items():
                got = get("/data/plugin/images/images", run=run, tag=tag, sample=0)
                ok = [g["step"] for g in got] == [s for s, _ in evs]
                for g, (_, im) in zip(got, evs):
                    ok &= get("/data/plugin/images/individualImage", **dict(urllib.parse.parse_qsl(g["query"]))) \
                          == im["png"]
                n["image"] += check(ok, "http %s: image %s differs" % (run, tag))
            for tag, evs in r.get("histogram", {}).items():
                got = get("/data/plugin/histograms/histograms", run=run, tag=tag)
                ok = [g[1] for g in got] == [s for s, _ in evs]
                for g, (_, h) in zip(got, evs):
                    ok &= sum(b[2] for b in g[2]) == h["num"]
                    ok &= math.isclose(g[2][0][0], h["min"], rel_tol=1e-6, abs_tol=1e-6)
                    ok &= math.isclose(g[2][-1][1], h["max"], rel_tol=1e-6, abs_tol=1e-6)
                n["histogram"] += check(ok, "http %s: histogram %s: steps/counts/range %s vs %s" %
                                        (run, tag, [(g[1], sum(b[2] for b in g[2])) for g in got],
                                         [(s, h["num"], h["min"], h["max"]) for s, h in evs]))
            for tag, evs in r.get("text", {}).items():
                got = get("/data/plugin/text/text", run=run, tag=tag)
                ok = [(g["step"], g["text"]) for g in got] == [(s, markdown_to_safe_html(t)) for s, t in evs]
                n["text"] += check(ok, "http %s: text %s differs" % (run, tag))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return n


def cmd_events(args):
    logdir, train_logs, http = args[0], {}, False
    for a in args[1:]:
        if a.startswith("--train_log="):
            run, _, path = a.split("=", 1)[1].rpartition(":")
            train_logs[os.path.normpath(run or "train")] = path
        elif a == "--http":
            http = True
        else:
            usage()
    runs = sorted({os.path.relpath(os.path.dirname(p), logdir)
                   for p in glob.glob(os.path.join(logdir, "**", "events.out.tfevents.*"), recursive=True)})
    check(runs, "%s: no events files" % logdir)
    raws = {}
    for run in runs:
        run_dir = os.path.join(logdir, run)
        raw = raws[run] = read_raw(run_dir)
        counts = {k: sum(len(v) for v in raw.get(k, {}).values()) for k in ("scalar", "image", "histogram", "text")}
        check("other" not in raw, "%s: summaries of an unknown kind: %s" % (run, sorted(raw.get("other", {}))))
        for tag, evs in raw.get("histogram", {}).items():
            for s, h in evs:
                check_histogram("%s: %s@%d" % (run, tag, s), h)
        n = accumulator_vs_raw(run, run_dir, raw)
        line = "%s: %d scalar tags (%d values), %d images, %d histograms, %d texts; EventAccumulator reads " \
               "%d/%d scalar tags, %d/%d image tags, %d/%d histogram tags, %d/%d text tags the same" % (
                   run, len(raw.get("scalar", {})), counts["scalar"], counts["image"], counts["histogram"],
                   counts["text"], n["scalar"], len(raw.get("scalar", {})), n["image"], len(raw.get("image", {})),
                   n["histogram"], len(raw.get("histogram", {})), n["text"], len(raw.get("text", {})))
        sizes = sorted({"%dx%dx%d" % (im["width"], im["height"], im["colorspace"])
                        for evs in raw.get("image", {}).values() for _, im in evs})
        if sizes:
            line += "; images (w x h x channels) %s" % ", ".join(sizes)
        for tag, evs in raw.get("histogram", {}).items():
            line += "; histogram %s" % ", ".join("%s@%d num %g min %g max %g sum %g in %d buckets" % (
                tag, st, h["num"], h["min"], h["max"], h["sum"], len(h["bucket"])) for st, h in evs)
        base = os.path.basename(run)
        if run in train_logs:
            line += "; %d scalar values = trainer log" % train_vs_log(run, run_dir, raw, train_logs.pop(run))
        elif base.startswith(("eval_", "decoder_")):
            k, nf = scores_vs_events(run, run_dir, raw)
            check(nf > 0, "%s: no score-*.txt" % run)
            line += "; %d values of %d score files = events" % (k, nf)
        print(line)
    check(not train_logs, "--train_log for runs without events: %s" % sorted(train_logs))
    if http:
        n = http_vs_raw(logdir, raws)
        print("tensorboard --load_fast=false HTTP API: %d scalar tags, %d image tags, %d histogram tags, %d text tags "
              "the same as the events" % (n["scalar"], n["image"], n["histogram"], n["text"]))


# ---- BLEU and WER --------------------------------------------------------------------

def decoder_pairs(path):
    """(key, ref, top hypothesis) of each entry of a decoder_out_* file; the top one is
    "hyp 0", which the MT decoder leaves out when it is empty."""
    out = []
    for blk in re.split(r"\n\n+", open(path, encoding="utf-8").read().strip("\n")):
        lines = blk.split("\n")
        ref = [l[len("ref: "):] for l in lines if l.startswith("ref: ")]
        top = [l.split(": ", 2)[2] if l.count(": ") >= 2 else "" for l in lines if l.startswith("hyp 0: ")]
        check(len(ref) == 1, "%s: entry %r has %d ref lines" % (path, lines[0], len(ref)))
        out.append((lines[0], ref[0] if ref else "", top[0] if top else ""))
    return out


def score_file(path):
    return {k: float(v) for k, v in (l.split(": ", 1) for l in open(path).read().splitlines() if ": " in l)}


def lingvo_bleu(pairs):
    from lingvo.core import scorers
    s = scorers.BleuScorer(4)
    for _, ref, hyp in pairs:
        s.AddSentence(ref, hyp)
    return s.ComputeOverallScore()


def cmd_bleu(args):
    import sacrebleu
    pairs, sc = decoder_pairs(args[0]), score_file(args[1])
    refs, hyps = [r for _, r, _ in pairs], [h for _, _, h in pairs]
    lb = lingvo_bleu(pairs)
    sb = sacrebleu.corpus_bleu(hyps, [refs])
    check(close(sc.get("corpus_bleu", -1), lb, 1e-7), "corpus_bleu: lingvoc %s, lingvo BleuScorer %r" %
          (sc.get("corpus_bleu"), lb))
    check(close(sc.get("sacrebleu", -1), sb.score, 1e-7), "sacrebleu: lingvoc %s, sacrebleu %r" %
          (sc.get("sacrebleu"), sb.score))
    print("BLEU on %d lines: lingvoc corpus_bleu %s, lingvo scorers.BleuScorer %.8f; lingvoc sacrebleu %s, "
          "sacrebleu.corpus_bleu %.6f (%s)" % (len(pairs), sc.get("corpus_bleu"), lb, sc.get("sacrebleu"),
                                              sb.score, sb))
    # The relation of the two: Lingvo's BLEU is sacrebleu's on white-space tokens without
    # smoothing, /100, as long as every order has a match (Lingvo leaves an order without
    # one out of the mean; sacrebleu then gives 0, or smooths it).
    raw = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none").corpus_score(hyps, [refs])
    if all(c > 0 for c in raw.counts):
        check(close(lb, raw.score / 100, 1e-9), "BleuScorer %r, sacrebleu tokenize none smooth none %r / 100" %
              (lb, raw.score))
    print("sacrebleu --tokenize none --smooth-method none: %.6f (%s); every order matched: %s" %
          (raw.score, "/".join(map(str, raw.counts)), all(c > 0 for c in raw.counts)))


def text_lines(path):
    """The segments as sacrebleu's command reads a file: split on "\n", rstrip()ed."""
    lines = open(path, encoding="utf-8").read().split("\n")
    return [l.rstrip() for l in (lines[:-1] if lines[-1] == "" else lines)]


SACREBLEU_OPTIONS = [
    ([], {}),
    (["--tokenize=none"], {"tokenize": "none"}),
    (["--smooth_method=floor"], {"smooth_method": "floor"}),
    (["--smooth_method=floor", "--smooth_value=0.5"], {"smooth_method": "floor", "smooth_value": 0.5}),
    (["--smooth_method=add-k"], {"smooth_method": "add-k"}),
    (["--smooth_method=none"], {"smooth_method": "none"}),
    (["--effective_order"], {"effective_order": True}),
    (["--tokenize=none", "--effective_order"], {"tokenize": "none", "effective_order": True}),
    (["--max_ngram_order=2"], {"max_ngram_order": 2}),
]


def cmd_sacrebleu(args):
    from sacrebleu.metrics import BLEU
    bin_dir, hyp, ref = args
    hyps, refs = text_lines(hyp), [text_lines(r) for r in ref.split(",")]
    for flags, kw in SACREBLEU_OPTIONS:
        tool = os.path.join(bin_dir, "sacrebleu_score")
        cmd = [tool, "--hyp=" + hyp, "--ref=" + ref] + flags
        line = subprocess.run(cmd, capture_output=True, text=True)
        score = subprocess.run(cmd + ["--score_only", "--width=12"], capture_output=True, text=True)
        if not check(line.returncode == 0 and score.returncode == 0, "%s: exit %d: %s" %
                     (" ".join(cmd), line.returncode, line.stderr.strip())):
            continue
        ref_score = BLEU(**kw).corpus_score(hyps, refs)
        check(abs(float(score.stdout) - ref_score.score) <= 1e-9 * max(1, ref_score.score),
              "sacrebleu_score %s: %s, sacrebleu %r" % (" ".join(flags), score.stdout.strip(), ref_score.score))
        check(line.stdout.strip() == str(ref_score), "sacrebleu_score %s prints %r, sacrebleu %r" %
              (" ".join(flags), line.stdout.strip(), str(ref_score)))
        print("sacrebleu %-42s %d lines x %d refs: sacrebleu_score %.6f, sacrebleu %.6f" %
              (" ".join(flags) or "(defaults: 13a, exp)", len(hyps), len(refs), float(score.stdout), ref_score.score))


def cmd_wer(args):
    import jiwer
    from lingvo.tasks.asr import levenshtein_distance
    pairs, sc = decoder_pairs(args[0]), score_file(args[1])
    refs, hyps = [r for _, r, _ in pairs], [h for _, _, h in pairs]
    out = jiwer.process_words(refs, hyps)
    low = jiwer.process_words([r.lower() for r in refs], [h.lower() for h in hyps])
    words = out.hits + out.substitutions + out.deletions
    for name, got, want in (("norm_wer", sc.get("norm_wer"), out.wer), ("error_rates/wer", sc.get("error_rates/wer"), out.wer),
                            ("case_insensitive_error_rates/wer", sc.get("case_insensitive_error_rates/wer"), low.wer)):
        check(got is not None and close(got, want, 1e-7), "%s: lingvoc %s, jiwer.wer %r" % (name, got, want))
    split = [sc.get("error_rates/" + k, -1) * words for k in ("ins", "sub", "del")]
    jsplit = [out.insertions, out.substitutions, out.deletions]
    lsplit = [0, 0, 0]
    for r, h in zip(refs, hyps):
        e = levenshtein_distance.LevenshteinDistance(r.split(), h.split())
        lsplit = [lsplit[0] + e.insertions, lsplit[1] + e.subs, lsplit[2] + e.deletions]
    check(all(abs(a - b) < 1e-6 for a, b in zip(split, lsplit)), "error_rates ins/sub/del x words: lingvoc %s, "
          "lingvo LevenshteinDistance %s" % (split, lsplit))
    check(abs(sum(split) - sum(jsplit)) < 1e-6, "ins+sub+del: lingvoc %s, jiwer %s" % (split, jsplit))
    print("WER on %d utterances (%d reference words): lingvoc norm_wer %s, jiwer.wer %.8f; case-insensitive %s, "
          "jiwer %.8f; ins/sub/del lingvoc %s, lingvo LevenshteinDistance %s, jiwer %s" %
          (len(pairs), words, sc.get("norm_wer"), out.wer, sc.get("case_insensitive_error_rates/wer"), low.wer,
           "/".join("%g" % round(x) for x in split), "/".join(map(str, lsplit)), "/".join(map(str, jsplit))))
    sacc = sum(r.split() == h.split() for r, h in zip(refs, hyps)) / len(pairs)
    check(close(sc.get("sacc", -1), sacc, 1e-7), "sacc: lingvoc %s, exact hypotheses %r" % (sc.get("sacc"), sacc))
    chars = sum(len(r.strip()) for r in refs)
    cer = jiwer.cer(refs, hyps)
    ter = cer * chars / (chars + len(pairs))
    check(close(sc.get("ter", -1), ter, 1e-7), "ter: lingvoc %s, jiwer char edits / (chars + </s>) %r" %
          (sc.get("ter"), ter))
    lb = lingvo_bleu(pairs)
    check(close(sc.get("corpus_bleu", -1), lb, 1e-7), "corpus_bleu: lingvoc %s, lingvo BleuScorer %r" %
          (sc.get("corpus_bleu"), lb))
    print("sacc lingvoc %s, exact %.8f; ter lingvoc %s, jiwer.cer x chars / (chars + utterances) %.8f; corpus_bleu "
          "lingvoc %s, lingvo BleuScorer %.8f" % (sc.get("sacc"), sacc, sc.get("ter"), ter, sc.get("corpus_bleu"), lb))


def cmd_histogram(args):
    """lingvoc's histogram of the values against TensorFlow's own (tf.compat.v1.summary.histogram,
    the C++ Histogram with its default buckets) of the same float32 values."""
    import numpy as np
    import tensorflow as tf
    run_dir, tag, path = args
    vals = np.array([float(l) for l in open(path).read().split()], dtype=np.float32)
    evs = read_raw(run_dir).get("histogram", {}).get(tag, [])
    if not check(len(evs) == 1, "%s: %d histograms %s, expected one" % (run_dir, len(evs), tag)):
        return
    h = evs[0][1]
    with tf.compat.v1.Graph().as_default():
        op = tf.compat.v1.summary.histogram(tag, tf.constant(vals))
        with tf.compat.v1.Session() as sess:
            th = tf.compat.v1.Summary.FromString(sess.run(op)).value[0].histo
    mine = (h["min"], h["max"], h["num"], h["sum"], h["sum_squares"], h["bucket_limit"], h["bucket"])
    tfs = (th.min, th.max, th.num, th.sum, th.sum_squares, list(th.bucket_limit), list(th.bucket))
    check(mine == tfs, "histogram %s: lingvoc %s, TensorFlow %s" % (tag, mine[:5], tfs[:5]))
    print("histogram %s of %d values: lingvoc and TensorFlow %s: min %g max %g num %g sum %.17g sum_squares %.17g, "
          "%d buckets %s" % (tag, len(vals), tf.__version__, th.min, th.max, th.num, th.sum, th.sum_squares,
                             len(th.bucket), "equal" if mine[5:] == tfs[5:] else "DIFFER"))


def usage():
    sys.stderr.write(__doc__)
    sys.exit(2)


def main():
    cmds = {"events": (cmd_events, 1), "bleu": (cmd_bleu, 2), "sacrebleu": (cmd_sacrebleu, 3), "wer": (cmd_wer, 2),
            "histogram": (cmd_histogram, 3)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 < cmds[sys.argv[1]][1]:
        usage()
    cmds[sys.argv[1]][0](sys.argv[2:])
    print("check_files %s: %d checks, %d disagreements" % (sys.argv[1], N_CHECKS, len(PROBLEMS)))
    sys.exit(1 if PROBLEMS else 0)


if __name__ == "__main__":
    main()
