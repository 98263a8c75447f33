/* bin/decoder: Lingvo's decoder_<dataset> job for any task that decodes (the task's decoder
 * hooks, models/task.h), and --decode_text to decode raw text lines through the task. */
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/file.h"
#include "base/log.h"
#include "lingvoc.h"
#include "runners/cli.h"
#include "runners/decoder.h"
#include "runners/model_export.h"

static const char kUsage[] =
    "usage: decoder --model=mt.bible_en_es.TransformerSmall --logdir=DIR [--dataset=Test] [--once] [flags]\n"
    "       decoder --model=... --logdir=DIR --decode_text=FILE|- [--checkpoint=PREFIX]\n"
    "       decoder --model=asr.bible_tts.LasSmall --logdir=DIR --decode_audio=FILE|-|@LIST [--checkpoint=PREFIX]\n"
    "       decoder --model=lm.bible.RnnLmSmall --logdir=DIR --score_text=FILE|-\n"
    "       decoder --model=lm.bible.RnnLmSmall --logdir=DIR --sample=N [--prefix=TEXT] [--temperature=T]\n"
    "               [--top_k=K] [--seed=S]\n"
    "       decoder --model=image.mnist.LeNet5 --logdir=DIR --decode_images=LIST|-\n"
    "       decoder --model_file=FILE --decode_text=...|--decode_audio=...|--score_text=...|--sample=N|--decode_images=...\n"
    "\n"
    "Decodes the dataset with beam search (task.decoder.beam_search, target_seq_len) for each\n"
    "checkpoint a trainer writes to DIR/train (polling with backoff 1 s x1.5 up to\n"
    "--max_poll_secs) and writes DIR/decoder_<dataset>/decoder_out_%09d (source, reference and\n"
    "top hyps per sentence), score-%08d.txt (corpus_bleu, sacrebleu, ...), events and\n"
    "processed_ckpts.txt; stops after the checkpoint at train.max_steps. --once decodes the\n"
    "latest checkpoint (or --checkpoint=PREFIX) and exits. Text needs input.tokenizer.\n"
    "\n"
    "--decode_text translates the lines of FILE (- = stdin) to stdout, one line per line, through the\n"
    "library (lv_translate; a NUL byte ends a line's text, with a message):\n"
    "empty or invalid-UTF-8 lines give empty lines (the latter with a message on stderr);\n"
    "lines over input.source_max_length pieces are truncated to it (with a message).\n"
    "\n"
    "--decode_audio transcribes an audio file (WAV, FLAC, OGG; any rate, mono or stereo), or\n"
    "each file named by a line of LIST (@LIST; - = the lines of stdin), one `path<TAB>text` line\n"
    "each, in order, and logs the real-time factor. A file that cannot be read (or whose\n"
    "log-mels are not finite: float samples far over 1.0), or a line with a NUL byte, tab or\n"
    "newline (refused), gives an error naming the list, line and file, and an empty line; the\n"
    "others are still transcribed, and the exit status is 2.\n"
    "Files are transcribed --decode_batch_size (8; cut to what the 2 GiB decode budget holds\n"
    "for files of input.source_max_length frames) at a time, padded to the longest of the\n"
    "batch (lines come out batch by batch; as in Lingvo, strided SAME convolutions align a\n"
    "file's frames by the padded length, so a weak model may read a file differently in\n"
    "another batch). Silence\n"
    "(no sample above -60 dBFS) gives `path<TAB>` with no text.\n"
    "\n"
    "A language model: --score_text writes per line log-probability, tokens (incl. </s>) and\n"
    "perplexity, tab-separated, then `corpus: N lines, T tokens, log_pplx X, perplexity Y`;\n"
    "--sample writes N continuations of --prefix (task.decoder.sample_temperature, sample_top_k,\n"
    "sample_seed: sample i draws from stream i of the seed, so a seed repeats its samples).\n"
    "\n"
    "--decode_images=LIST classifies the PNG files LIST names (one a line; - = stdin) with an image\n"
    "classifier (the experiment's input.data_shape, gray or RGB), one `path<TAB>class<TAB>probability`\n"
    "line each, --decode_batch_size at a time, through the library (lv_classify_files).\n"
    "\n"
    "--model_file=FILE (bin/export's) takes the place of --model, --logdir and --checkpoint for\n"
    "the five flags above: params, tokenizer and weights come from the file.\n";

/* --model_file's params: the file's, its assets in a private directory, the overrides. */
static lv_status model_file_params(const lv_cli *c, const char *path, lv_model_file **mf, char *assets, size_t n,
                                   lv_params **p) {
  LV_TRY(lv_model_file_read(path, mf));
  LV_TRY(lv_model_file_assets_dir(*mf, assets, n));
  return lv_model_file_params(*mf, assets, c->model_params_override, c->model_params_file_override, c->flag_params,
                              c->num_threads, p);
}

/* The library's log lines on bin/decoder's stderr, as its own (the global level filters). */
static void api_log(void *user, int level, const char *message) {
  (void)user;
  lv_log_sink prev = lv_log_thread_sink_set((lv_log_sink){0});
  lv_log_thread_sink_restore((lv_log_sink){.active = false}); /* this thread: stderr, as outside the library */
  lv_log((lv_log_level)level, "%s", message);
  lv_log_thread_sink_restore(prev);
}

/* The model through the library, from the flags: --model_file, or the experiment. */
static lv_status api_load(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                          lv_model **m) {
  lv_load_options o;
  lv_load_options_init(&o);
  o.params_override = c->model_params_override;
  o.params_file_override = c->model_params_file_override;
  o.num_threads = (int)c->num_threads;
  o.log = api_log;
  o.log_level = LV_LOG_DEBUG;
  if (*model_file) return lv_model_load_file(model_file, &o, m);
  o.model = c->model, o.logdir = c->logdir, o.checkpoint = checkpoint, o.experiments_dir = c->experiments_dir;
  o.dataset = dataset;
  return lv_model_load(&o, m);
}

/* --decode_text through the library: each line of path (- = stdin) to its best
 * translation (lv_translate), one output line each, flushed per line. */
static lv_status translate_lines(const lv_cli *c, const char *model_file, const char *checkpoint, const char *dataset,
                                 const char *path) {
  FILE *in = NULL;
  LV_TRY(lv_decoder_open_input("text", path, &in));
  lv_model *m = NULL;
  lv_nbest *r = NULL;
  lv_status s = api_load(c, model_file, checkpoint, dataset, &m);
  if (!s) s = lv_status_wrap(lv_translate(m, NULL, NULL, 0, 1, &r), "--decode_text"); /* the kind, before any input */
  lv_nbest_free(r);
  const char *name = strcmp(path, "-") ? path : "stdin";
  char *line = NULL;
  size_t cap = 0;
  for (int64_t lineno = 1; !s; lineno++) {
    ssize_t len = 0;
    bool cut = false;
    s = lv_decoder_read_line(in, name, &line, &cap, &len, &cut);
    if (s || len < 0) break;
    if (cut)
      lv_warn("decode_text: line %lld: longer than %zu bytes: only its first %zu are decoded", (long long)lineno,
              LV_DECODER_MAX_LINE_BYTES, LV_DECODER_MAX_LINE_BYTES);
    const char *nul = memchr(line, 0, (size_t)len);
    if (nul)
      lv_warn("decode_text: line %lld: a NUL byte at byte %zu: only the text before it is translated (the library "
              "takes C strings)", (long long)lineno, (size_t)(nul - line));
    const char *src[1] = {line};
    r = NULL;
    s = lv_translate(m, NULL, src, 1, 1, &r);
    if (s) s = lv_status_wrap(s, "--decode_text=%s line %lld", path, (long long)lineno);
    if (!s) s = lv_decoder_write_line("text", stdout, r->n[0] ? r->text[0][0] : "", lineno);
    lv_nbest_free(r);
  }
  free(line);
  if (in != stdin) fclose(in);
  lv_model_free(m);
  return s;
}

/* Writes the batch's `path<TAB>class<TAB>probability` lines (the most likely class). */
static lv_status classify_batch(lv_model *m, char **paths, int n) {
  lv_class_probs *r = NULL;
  LV_TRY(lv_classify_files(m, NULL, (const char *const *)paths, n, &r));
  for (int i = 0; i < n; i++) {
    const float *p = r->probs + (size_t)i * (size_t)r->num_classes;
    int best = 0;
    for (int k = 1; k < r->num_classes; k++)
      if (p[k] > p[best]) best = k;
    printf("%s\t%d\t%.6f\n", paths[i], best, p[best]);
  }
  lv_class_probs_free(r);
  return lv_file_flush_check(stdout, "stdout");
}

/* --decode_images=LIST: the PNGs LIST names (one path a line; - = stdin), batch at a time. */
static lv_status classify_list(lv_model *m, const char *list, int batch) {
  FILE *in = stdin;
  if (strcmp(list, "-")) LV_TRY(lv_file_fopen_regular(list, "--decode_images", &in));
  char **paths = calloc((size_t)batch, sizeof *paths);
  LV_ASSERT(paths);
  int n = 0;
  lv_status s = NULL;
  char *line = NULL;
  size_t cap = 0;
  for (ssize_t len; !s && (len = getline(&line, &cap, in)) >= 0;) {
    line[strcspn(line, "\r\n")] = 0;
    if (!*line) continue;
    paths[n] = strdup(line);
    LV_ASSERT(paths[n]);
    if (++n == batch) {
      s = classify_batch(m, paths, n);
      for (int i = 0; i < n; i++) free(paths[i]);
      n = 0;
    }
  }
  if (!s && ferror(in)) s = lv_status_make(LV_ERR_IO, "--decode_images=%s: read error", list);
  if (!s && n) s = classify_batch(m, paths, n);
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);
  free(line);
  if (in != stdin) fclose(in);
  return s;
}

static lv_status run(int argc, char **argv) {
  lv_cli c;
  lv_cli_init(&c);
  const char *dataset = "Test", *checkpoint = "", *decode_text = "", *decode_audio = "", *score_text = "", *prefix = "";
  int64_t nsample = 0, top_k = -1, seed = -1, batch = 8;
  double temperature = 0;
  bool once = false;
  double max_poll = 300, timeout = 0;
  lv_flag flags[LV_CLI_MAX_FLAGS];
  int n = lv_cli_add_flags(&c, flags, 0);
  flags[n++] = (lv_flag)LV_FLAG_STR("mode", &c.mode, "sync or async (the decoder works the same in both).");
  flags[n++] = (lv_flag)LV_FLAG_STR("dataset", &dataset, "Dataset to decode: Test, Dev, Train or another the experiment defines (e.g. Real) (--job=decoder_<dataset> sets it too).");
  flags[n++] = (lv_flag)LV_FLAG_BOOL("once", &once, "Decode one checkpoint and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("checkpoint", &checkpoint, "With --once, --decode_text, --decode_audio, --score_text or --sample: the checkpoint prefix (or a directory; default: the latest in DIR/train).");
  flags[n++] = (lv_flag)LV_FLAG_F64("max_poll_secs", &max_poll, "Longest wait between polls for a new checkpoint.");
  flags[n++] = (lv_flag)LV_FLAG_F64("timeout_secs", &timeout, "Give up after waiting this long for a new checkpoint (0 = never).");
  flags[n++] = (lv_flag)LV_FLAG_STR("decode_text", &decode_text, "Translate the lines of this file (- = stdin) to stdout and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("decode_audio", &decode_audio, "Transcribe this audio file, the files listed in @LIST, or those of stdin (-), one path<TAB>text line each, and exit.");
  flags[n++] = (lv_flag)LV_FLAG_I64("decode_batch_size", &batch, "With --decode_audio: files transcribed as one batch (padded to the longest).");
  flags[n++] = (lv_flag)LV_FLAG_STR("score_text", &score_text, "A language model: score the lines of this file (- = stdin) and exit.");
  flags[n++] = (lv_flag)LV_FLAG_I64("sample", &nsample, "A language model: write this many continuations of --prefix and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("prefix", &prefix, "With --sample: the text to continue (default: none).");
  flags[n++] = (lv_flag)LV_FLAG_F64("temperature", &temperature, "With --sample: softmax temperature (sets task.decoder.sample_temperature).");
  flags[n++] = (lv_flag)LV_FLAG_I64("top_k", &top_k, "With --sample: draw from the k most likely tokens, 0 = all (task.decoder.sample_top_k).");
  flags[n++] = (lv_flag)LV_FLAG_I64("seed", &seed, "With --sample: the seed (task.decoder.sample_seed).");
  const char *model_file = "", *decode_images = "";
  flags[n++] = (lv_flag)LV_FLAG_STR("decode_images", &decode_images, "Classify the PNG files named by the lines of this file (- = stdin): one path<TAB>class<TAB>probability line each (the most likely class), and exit.");
  flags[n++] = (lv_flag)LV_FLAG_STR("model_file", &model_file, "A model file (bin/export) instead of --model, --logdir and --checkpoint, with --decode_text, --decode_audio, --score_text or --sample.");
  bool help = false;
  LV_TRY(lv_flags_parse(flags, n, argc, argv, kUsage, &help));
  if (help) return NULL;
  if (*model_file && (*c.model || *c.logdir || *checkpoint || *c.experiments_dir || *c.job ||
                      lv_flags_find(flags, n, "dataset")->set))
    return lv_status_make(LV_ERR_INVALID, "--model_file=%s takes the place of --model, --logdir, --checkpoint, "
                          "--experiments_dir, --dataset and --job: give none of them", model_file);
  if (!*model_file && !*c.logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required (the trainer's log directory)");
  if (max_poll <= 0) return lv_status_make(LV_ERR_INVALID, "--max_poll_secs must be > 0");
  if (!*model_file) LV_TRY(lv_cli_decoder_job(&c, lv_flags_find(flags, n, "dataset")->set, &dataset));
  /* Whether each was given: 0, -1 and "" are also values a user can type. */
  const bool sample_set = lv_flags_find(flags, n, "sample")->set, temp_set = lv_flags_find(flags, n, "temperature")->set,
             top_k_set = lv_flags_find(flags, n, "top_k")->set, seed_set = lv_flags_find(flags, n, "seed")->set;
  if (sample_set && (nsample < 1 || nsample > 1000000))
    return lv_status_make(LV_ERR_INVALID, "--sample=%lld: expected a number of samples in [1, 1000000]",
                          (long long)nsample);
  if (!sample_set && (temp_set || top_k_set || seed_set || lv_flags_find(flags, n, "prefix")->set))
    return lv_status_make(LV_ERR_INVALID, "--prefix, --temperature, --top_k and --seed go with --sample=N");
  if (temp_set && !(temperature > 0))
    return lv_status_make(LV_ERR_INVALID, "--temperature=%g: expected a temperature > 0", temperature);
  if (top_k_set && top_k < 0)
    return lv_status_make(LV_ERR_INVALID, "--top_k=%lld: expected >= 0 (0: all tokens)", (long long)top_k);
  if (seed_set && seed < 0) return lv_status_make(LV_ERR_INVALID, "--seed=%lld: expected >= 0", (long long)seed);
  static const char *const kInputFlags[] = {"decode_text", "decode_audio", "score_text", "decode_images"};
  for (size_t k = 0; k < sizeof kInputFlags / sizeof *kInputFlags; k++) {
    const lv_flag *fl = lv_flags_find(flags, n, kInputFlags[k]);
    if (fl->set && !**(const char **)fl->ptr)
      return lv_status_make(LV_ERR_INVALID, "--%s= is empty: expected a file (- = stdin)", kInputFlags[k]);
  }
  if ((*decode_text != 0) + (*decode_audio != 0) + (*score_text != 0) + (nsample != 0) + (*decode_images != 0) > 1)
    return lv_status_make(LV_ERR_INVALID, "--decode_text, --decode_audio, --score_text, --sample and --decode_images "
                          "exclude each other");
  if (batch < 1 || batch > 4096) return lv_status_make(LV_ERR_INVALID, "--decode_batch_size must be in [1, 4096], got %lld", (long long)batch);
  if (!strcmp(decode_audio, "@")) return lv_status_make(LV_ERR_INVALID, "--decode_audio=@: give a list file after @");
  /* The sampling flags are the LM task's decoder params, given as overrides after the user's. */
  char *ovr = NULL;
  if (nsample) {
    size_t len = 0;
    FILE *f = open_memstream(&ovr, &len);
    LV_ASSERT(f);
    if (temp_set) fprintf(f, "task.decoder.sample_temperature: %.17g\n", temperature);
    if (top_k_set) fprintf(f, "task.decoder.sample_top_k: %lld\n", (long long)top_k);
    if (seed_set) fprintf(f, "task.decoder.sample_seed: %lld\n", (long long)seed);
    fclose(f);
    c.flag_params = ovr; /* after --model_params_override or _file_override, whichever is given */
  }
  if (*decode_images) {
    lv_model *m = NULL;
    lv_status s = api_load(&c, model_file, checkpoint, dataset, &m);
    if (!s) s = classify_list(m, decode_images, (int)batch);
    lv_model_free(m);
    free(ovr);
    return s;
  }
  if (*model_file && !*decode_text && !*decode_audio && !*score_text && !nsample) {
    free(ovr);
    return lv_status_make(LV_ERR_INVALID, "--model_file decodes --decode_text, --decode_audio, --score_text, "
                          "--sample or --decode_images (the decoder job follows a log directory: use --model and --logdir)");
  }
  lv_params *p = NULL;
  lv_model_file *mf = NULL;
  char assets[LV_PATH_MAX] = "";
  lv_status bs = *model_file ? model_file_params(&c, model_file, &mf, assets, sizeof assets, &p)
                             : lv_cli_build_params(&c, flags, n, dataset, &p);
  if (bs) {
    lv_model_file_free(mf);
    lv_model_file_assets_remove(assets);
    free(ovr);
    return bs;
  }
  /* --decode_text is the library's client; on a GPU (which the library does not drive
   * yet) the decoder's own loop runs it. */
  if (*decode_text && lv_params_int(p, "cluster.worker.gpus_per_replica") == 0) {
    lv_params_free(p);
    lv_model_file_free(mf);
    lv_model_file_assets_remove(assets);
    free(ovr);
    return translate_lines(&c, model_file, checkpoint, dataset, decode_text);
  }
  const char **lines = NULL;
  if (nsample) {
    lines = malloc(sizeof *lines * (size_t)nsample);
    LV_ASSERT(lines);
    for (int64_t i = 0; i < nsample; i++) lines[i] = prefix;
  }
  lv_decoder_options o = {.dataset = dataset, .once = once, .checkpoint = checkpoint, .max_poll_secs = max_poll,
                          .timeout_secs = timeout, .decode_input = *decode_text ? decode_text : NULL,
                          .decode_kind = "text", .batch_size = (int)batch, .model_file = mf};
  if (*score_text) o.decode_input = score_text, o.decode_kind = "score_text";
  /* --decode_audio=FILE is a one-line input; @LIST and - are files of paths. */
  if (*decode_audio) {
    o.decode_kind = "audio";
    if (decode_audio[0] == '@') o.decode_input = decode_audio + 1;
    else if (!strcmp(decode_audio, "-")) o.decode_input = decode_audio;
    else o.decode_input = decode_audio, o.lines = &decode_audio, o.n_lines = 1;
  }
  if (nsample) o.decode_input = "--sample", o.decode_kind = "sample", o.lines = lines, o.n_lines = (int)nsample;
  lv_status s = lv_decoder_run(p, &o);
  lv_params_free(p);
  lv_model_file_free(mf);
  lv_model_file_assets_remove(assets);
  free(lines);
  free(ovr);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  return lv_status_report(lv_cli_prog(argv[0]), run(argc, argv));
}
