#!/usr/bin/env bash
# Docs that cannot rot:
#  1. every ```sh block of docs/tutorials/*.md runs, in order, in one shell per tutorial
#     (set -euo pipefail), from a root whose bin/, scripts/ and experiments/ are this
#     build's, on tiny generated data: each tutorial's capitalised variables (STEPS,
#     VOCAB, BASE, ...) are set small and BASE names the experiment's *TinyTest twin.
#     Plain ``` blocks are shown to the reader, not run (optional tools).
#  2. every relative link of README.md and docs/**/*.md resolves (the file, and the
#     heading for a #anchor);
#  3. every experiment named in them (task.file.Group) is a group of experiments/;
#     every scripts/, bench/, tests/ or src/ path in backticks exists;
#  4. every --flag given to a bin/ executable in them is in that executable's --help
#     (--helpfull); every other --flag in backticks is some executable's or script's;
#  5. every flag each executable's --help lists has a description.
# A line holding <!-- not checked --> (invisible in the rendered page) is left out of 3.
# and 4.: the quoted error message about an unknown experiment.
# Skips a tutorial (the rest still runs) when a tool its tiny data needs is missing.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LV_ROOT"
command -v python3 >/dev/null || skip "python3 not installed (scripts/install-deps.sh)"

# ---- 5. --help of every executable: saved for 4., each flag described ----
mkdir -p "$T/help"
for b in "$LV_BIN"/*; do
  [ -x "$b" ] || continue
  n=$(basename "$b")
  "$b" --helpfull >"$T/help/$n" 2>&1
  check "$n --helpfull exits 0" [ $? -eq 0 ]
  undocumented=$(awk '/^  --[a-z_0-9]+ \(/ { if (f) print f; f = $1; next }
                      f { if ($0 ~ /^      [^ ]/) f = ""; else { print f; f = "" } }
                      END { if (f) print f }' "$T/help/$n")
  check "$n: every flag of --help has a description${undocumented:+ (not: $undocumented)}" [ -z "$undocumented" ]
done

# ---- 2.-4. links, experiments, paths and flags of README.md and docs/ ----
python3 - "$T/help" README.md $(find docs -name '*.md' | sort) >"$T/static.out" 2>&1 <<'PY'
import os, re, sys
helpdir, files = sys.argv[1], sys.argv[2:]
flags = {}
for n in os.listdir(helpdir):
    text = open(os.path.join(helpdir, n)).read()
    fl = set(re.findall(r"^  --([a-z_0-9]+) \(", text, re.M))
    bools = set(re.findall(r"^  --([a-z_0-9]+) \(bool", text, re.M))
    flags[n] = fl | {"no" + b for b in bools} | {"help"}
all_flags = set().union(*flags.values())
# Flags of the other tools the docs show (checked against their own sources where ours).
def script_flags(path):
    return set(re.findall(r"--([a-z_0-9]+)", open(path).read())) if os.path.exists(path) else set()
external = {"mpirun": {"np", "host", "mca", "oversubscribe", "allow-run-as-root", "bind-to"},
            "spm_encode": {"output_format"}, "pip": {"no-index", "no-build-isolation"},
            "venv": {"system-site-packages"},
            # Lingvo's own trainer (scripts/lingvo_peer/run.py), docs/peers.md
            "lingvo": {"inspect_params_dataset_name"}}
ext_all = set().union(*external.values())
for d, _, fs in os.walk("scripts"):
    for s in fs:
        if s.endswith((".sh", ".py")):
            ext_all |= script_flags(os.path.join(d, s))

def slug(h):
    h = re.sub(r"[`*_]", lambda m: "_" if m.group(0) == "_" else "", h.strip().lower())
    return re.sub(r"[^\w\- ]", "", h, flags=re.U).replace(" ", "-")

def anchors(path):
    out, fence = set(), False
    for line in open(path):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out

groups = {}
def has_group(task, f, g):
    p = os.path.join("experiments", task, f + ".cfg")
    if p not in groups:
        groups[p] = set(re.findall(r"^([A-Za-z_]\w*)\s*:\s*\{", open(p).read(), re.M)) if os.path.exists(p) else None
    return groups[p] is not None and g in groups[p]

errors, counts = [], dict(links=0, experiments=0, paths=0, tool_flags=0, flags=0)
def err(f, n, msg):
    errors.append(f"{f}:{n}: {msg}")

for f in files:
    lines = open(f).read().split("\n")
    # join continued command lines so a command's flags stay with its tool
    joined, buf, start = [], "", 0
    for i, l in enumerate(lines):
        if not buf:
            start = i + 1
        if l.endswith("\\"):
            buf += l[:-1] + " "
            continue
        joined.append((start, buf + l))
        buf = ""
    fence = False
    for n, l in joined:
        if "<!-- not checked -->" in l:
            continue  # a quoted error message about a missing experiment
        if l.startswith("```"):
            fence = not fence
            continue
        code = [l] if fence else re.findall(r"`([^`]+)`", l)
        if not fence:
            for target in re.findall(r"\]\(([^)\s]+)\)", l):
                if re.match(r"[a-z]+:", target):
                    continue
                counts["links"] += 1
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
                if not os.path.exists(dest):
                    err(f, n, f"link {target}: no file {dest}")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    err(f, n, f"link {target}: no heading #{anchor} in {dest}")
        for c in code:
            for task, fn, g in re.findall(r"(?<![\w./$-])(image|mt|punctuator|asr|lm)\.([a-z0-9_]+)\.([A-Z]\w*)", c):
                if fn in ("model", "mine"):
                    continue  # class names (mt.model.RNMTModel); the tutorials' own files
                counts["experiments"] += 1
                if not has_group(task, fn, g):
                    err(f, n, f"experiment {task}.{fn}.{g}: no group {g} in experiments/{task}/{fn}.cfg")
            for p in re.findall(r"(?<![\w./$<-])((?:scripts|bench|tests|src|experiments)/[\w./-]*\w)", c):
                if re.search(r"[<*{]", c[c.find(p):c.find(p) + len(p) + 1]):
                    continue
                counts["paths"] += 1
                if not os.path.exists(p):
                    err(f, n, f"path {p} does not exist")
            rest, tool_flags_seen = c, set()
            for m in re.finditer(r"(?:^|[\s(|;&])(?:build-cuda/)?bin/([a-z_0-9]+)((?:[^|;&#]|&(?!&))*)", c):
                tool, args = m.group(1), m.group(2)
                if tool not in flags:
                    err(f, n, f"bin/{tool}: no such executable in the build")
                    continue
                for fl in re.findall(r"(?<![\w-])--([a-z_0-9]+)", args):
                    counts["tool_flags"] += 1
                    tool_flags_seen.add(fl)
                    if fl not in flags[tool]:
                        err(f, n, f"bin/{tool} --{fl}: not in bin/{tool} --helpfull")
            for fl in re.findall(r"(?<![\w-])--([a-z][a-z_0-9-]*)", c):
                if fl in tool_flags_seen:
                    continue
                counts["flags"] += 1
                if fl not in all_flags and fl not in ext_all:
                    err(f, n, f"--{fl}: no executable's --helpfull and no script has it")
print("checked:", ", ".join(f"{v} {k}" for k, v in counts.items()))
for e in errors:
    print("ERROR", e)
sys.exit(1 if errors else 0)
PY
rc=$?
cat "$T/static.out"
check "links, experiment names, paths and flags of README.md and docs/ (exit $rc)" [ $rc -eq 0 ]

# ---- 1. the tutorials on tiny data ----
mkdir -p "$T/root" "$T/data"
ln -s "$LV_BIN" "$T/root/bin"
ln -s "$LV_ROOT/scripts" "$T/root/scripts"
ln -s "$LV_ROOT/experiments" "$T/root/experiments"
cp -r "$LV_ROOT/python" "$T/root/python" # pip builds in the source folder: not in the checkout
rm -rf "$T/root/python/build" "$T/root/python"/*.egg-info
# tutorial NAME VAR=VALUE...: runs docs/tutorials/NAME.md's sh blocks with these variables.
tutorial() {
  local name=$1; shift
  local md=$LV_ROOT/docs/tutorials/$name.md
  awk '/^```sh$/ { on = 1; next } /^```/ { on = 0; next } on' "$md" >"$T/$name.sh"
  local start=$(date +%s)
  (cd "$T/root" && env "$@" WORK="$T/work_$name" timeout 600 bash -euo pipefail "$T/$name.sh") >"$T/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    ok "docs/tutorials/$name.md runs ($(($(date +%s) - start)) s)"
  else
    fail "docs/tutorials/$name.md: exit $rc; last lines: $(tail -5 "$T/$name.log")"
  fi
}
check "every tutorial is run by this test" [ "$(ls docs/tutorials/*.md | xargs -n1 basename | sort | tr '\n' ' ')" = \
  "images.md language-model.md library.md punctuate.md speech.md translate.md " ]

if command -v spm_train >/dev/null; then
  gen_mt_pairs 7 400 "$T/data"
  tutorial translate SRC_TEXT="$T/data/train.en" TGT_TEXT="$T/data/train.es" VOCAB=128 BASE=TinyTest STEPS=20
  gen_punct_text 7 400 >"$T/data/punct.txt"
  tutorial punctuate TEXT="$T/data/punct.txt" VOCAB=128 BASE=TransformerTinyTest STEPS=20
else
  skip_part "translate and punctuate tutorials: spm_train not installed (apt-get install sentencepiece)"
fi

gen_punct_text 9 400 >"$T/data/lm.txt"
tutorial language-model TEXT="$T/data/lm.txt" BASE=RnnLmTinyTest STEPS=20
# The library tutorial takes the language-model tutorial's model, and an install of this
# build (scripts/install.sh, what `make install` runs) in place of its `make install`.
LV_BUILD=${LV_BUILD:-$LV_ROOT/build}
if asan_build; then
  skip_part "library tutorial: an ASan build's liblingvoc.so links only into sanitized programs, and Python cannot load it"
elif [ -d "$T/work_language-model/log/train" ] && scripts_install_ok=$("$LV_ROOT/scripts/install.sh" "$LV_BUILD" "$LV_BIN" "$T/prefix" 2>&1); then
  tutorial library MODEL=lm.mine.Mine LOGDIR="$T/work_language-model/log" PREFIX="$T/prefix" \
    LINGVOC_EXPERIMENTS="$T/work_language-model/experiments"
else
  fail "docs/tutorials/library.md: no model from the language-model tutorial, or the install failed: ${scripts_install_ok:-}"
fi

# Images: three classes of 28x28 PGM files (horizontal bars, vertical bars, a box) with noise.
python3 - "$T/data/img" <<'PY'
import os, random, sys
random.seed(1)
for c, name in enumerate(["hbars", "vbars", "box"]):
    os.makedirs(os.path.join(sys.argv[1], name))
    for i in range(30):
        px = bytearray(random.randrange(60) for _ in range(784))
        for y in range(28):
            for x in range(28):
                on = (y % 6 < 2, x % 6 < 2, 5 < x < 22 and 5 < y < 22 and (x in (6, 21) or y in (6, 21)))[c]
                if on:
                    px[y * 28 + x] = 200 + random.randrange(55)
        open(os.path.join(sys.argv[1], name, "%03d.pgm" % i), "wb").write(b"P5\n# test\n28 28\n255\n" + bytes(px))
PY
tutorial images IMAGES="$T/data/img" STEPS=4

if command -v espeak-ng >/dev/null && command -v sox >/dev/null; then
  mkdir -p "$T/data/rec"
  i=0
  for text in "yes go" "no stop" "up left" "down right" "go up" "stop down" "left yes" "right no" \
    "yes stop" "no go" "up right" "down left" "go down" "stop up" "left no" "right yes" "yes up" \
    "no down" "up go" "down stop"; do
    id=$(printf 'utt%02d' $i)
    espeak-ng -v en-us -s 150 --stdout "$text" | sox -q -t wav - -r 16000 -c 1 -b 16 "$T/data/rec/$id.wav"
    printf '%s.wav\t%s\n' "$id" "$text" >>"$T/data/rec/list.tsv"
    i=$((i + 1))
  done
  tutorial speech LIST="$T/data/rec/list.tsv" BASE=TinyTest STEPS=5
else
  skip_part "speech tutorial: espeak-ng or sox not installed (scripts/install-deps.sh)"
fi
finish
