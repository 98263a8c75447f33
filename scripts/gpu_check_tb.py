"""Reads lingvoc's event directories with TensorBoard's own reader, EventAccumulator
(scripts/gpu-check.sh), and checks what TensorBoard finds there.

Usage: gpu_check_tb.py NAME:LOGDIR [NAME:LOGDIR ...]
For each LOGDIR (a trainer run whose log is LOGDIR.log):
  train/      scalars loss, learning_rate, global_step/sec, examples/sec; every loss event
              equals the trainer's log line of its step (float32); the trainer_params.txt
              text summary (a tensor with the text plugin) holds the params
  eval_test/  (where the evaler ran) every line of the newest score-*.txt is a scalar at
              that checkpoint's step with that value; the example images decode as PNGs of
              the size the event states
Prints details on stdout, one figure line on stderr; exits 1 on any mismatch."""
import glob
import os
import re
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator as ea

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)
    return ok


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def load(d):
    acc = ea.EventAccumulator(d, size_guidance={ea.SCALARS: 0, ea.IMAGES: 0, ea.TENSORS: 0})
    acc.Reload()
    return acc, acc.Tags()


def check_train(name, logdir):
    d = os.path.join(logdir, "train")
    acc, tags = load(d)
    scalars = set(tags.get("scalars", []))
    print("%s train: scalars %s; tensors %s" % (name, sorted(scalars), sorted(tags.get("tensors", []))))
    for t in ("loss", "learning_rate", "global_step/sec", "examples/sec"):
        check(t in scalars, "%s: no %s scalar in %s" % (name, t, d))
    logged = {}
    with open(logdir + ".log", errors="replace") as f:
        for m in re.finditer(r"step: *(\d+),.* loss:([-+0-9.eE]+)", f.read()):
            logged[int(m.group(1))] = float(m.group(2))
    n = 0
    if "loss" in scalars:
        for e in acc.Scalars("loss"):
            if check(e.step in logged, "%s: loss event at step %d has no log line" % (name, e.step)):
                n += check(abs(e.value - f32(logged[e.step])) <= 1e-6 * abs(logged[e.step]),
                           "%s: loss@%d: event %r, log %r" % (name, e.step, e.value, logged[e.step]))
        check(n > 0, "%s: no loss event matched the log" % name)
    text = "no text"
    if check("trainer_params.txt" in tags.get("tensors", []), "%s: no trainer_params.txt text summary" % name):
        ev = acc.Tensors("trainer_params.txt")
        body = ev[0].tensor_proto.string_val[0] if ev and ev[0].tensor_proto.string_val else b""
        meta = acc.SummaryMetadata("trainer_params.txt")
        check(meta.plugin_data.plugin_name == "text", "%s: trainer_params.txt plugin %r" % (name, meta.plugin_data.plugin_name))
        check(b"task.cls : " in body, "%s: trainer_params.txt lacks task.cls" % name)
        text = "text trainer_params.txt (%d bytes)" % len(body)
    return "train %d scalar tags, %d loss events = log, %s" % (len(scalars), n, text)


def check_eval(name, logdir):
    d = os.path.join(logdir, "eval_test")
    scores = sorted(glob.glob(os.path.join(d, "score-*.txt")))
    if not scores:
        return None
    acc, tags = load(d)
    scalars = set(tags.get("scalars", []))
    step = int(re.search(r"score-(\d+)", scores[-1]).group(1))
    n = 0
    for line in open(scores[-1]).read().splitlines():
        tag, val = line.split(": ")
        if check(tag in scalars, "%s eval: %s of %s not a scalar" % (name, tag, os.path.basename(scores[-1]))):
            e = [e for e in acc.Scalars(tag) if e.step == step]
            n += check(e and abs(e[-1].value - f32(float(val))) <= 1e-6 * max(1.0, abs(float(val))),
                       "%s eval: %s at step %d: %r vs %s" % (name, tag, step, e[-1].value if e else None, val))
    images = sorted(t for t in tags.get("images", []) if t.startswith("examples/image/"))
    check(len(images) == 10, "%s eval: 10 example images, found %d" % (name, len(images)))
    for t in images:
        im = acc.Images(t)[-1]
        png = im.encoded_image_string
        ok = png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (im.width, im.height)
        check(ok and im.width >= 28 and im.height >= 28, "%s eval: %s is not a %dx%d PNG" % (name, t, im.width, im.height))
    print("%s eval_test: scalars %s; images %s" % (name, sorted(scalars), images))
    return "eval_test %d scalars = %s, %d images" % (n, os.path.basename(scores[-1]), len(images))


def main():
    figs = []
    for arg in sys.argv[1:]:
        name, _, logdir = arg.partition(":")
        part = [check_train(name, logdir)]
        ev = check_eval(name, logdir)
        if ev:
            part.append(ev)
        figs.append("%s: %s" % (name, ", ".join(part)))
    fig = "; ".join(figs)
    if problems:
        print("\n".join(problems))
        fig = "%d problem(s): %s; %s" % (len(problems), "; ".join(problems[:3]), fig)
    print(fig, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
