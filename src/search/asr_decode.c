/* The decoder job of asr.model.AsrModel (see asr.h): beam search over lv_asr_decode_ops
 * (search/seq_decode.h's lv_seq_beam_decode), Lingvo's ASR decoder metrics (metrics/wer.h)
 * and --decode_audio. The decode state (search params, tokenizer, the frontend and the
 * buffers of a transcribed file) is the task's decode_state, owned by it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio_file.h"
#include "audio/mel_frontend.h"
#include "base/log.h"
#include "base/mem.h"
#include "input/tokenizer.h"
#include "models/asr.h"
#include "metrics/metrics.h"
#include "search/seq_decode.h"
#include "metrics/wer.h"

/* The sample rate of create_asr_features' features, which the model was trained on. */
enum { kAsrSampleRate = 16000 };
/* -60 dBFS in the int16 range of lv_audio's samples. */
static const float kSilencePeak = 32768.0f / 1000.0f;

/* A line of --decode_audio: its path and, when it has something to decode, its log-mel
 * frames [T0, F] and its row in the batch (-1 for none). */
typedef struct asr_file {
  char *path;
  float *frames;
  int64_t T0, T; /* frames, and with AsrInput's eos frame */
  int row;
  bool blank; /* an empty line or an unreadable file: an empty output line */
  lv_code error_code; /* an unreadable file: why (malloc'd), for decode_out_nbest */
  char *error;
  double secs; /* of audio read */
} asr_file;

typedef struct asr_decoder {
  lv_beam_search_params bp;
  int vocab;
  lv_tokenizer *tok;
  /* --decode_audio */
  int64_t frame_size; /* input.frame_size: mel bins per frame */
  bool eos_frame;     /* input.append_eos_frame */
  int64_t max_frames; /* input.source_max_length, eos frame included (0: no limit) */
  lv_mel_frontend *fe;
  float *frames; /* [cap] the batch's frames [B, T, F, 1] */
  float *pads;   /* [cap_t] [B, T] */
  size_t cap, cap_t;
  lv_tensor frames_view, pads_view;
  asr_file *file;       /* [nfiles] the lines of the batch being transcribed */
  int nfiles, cap_files;
  double start;         /* lv_now_monotonic() at the first line */
  double audio_secs;    /* of the files read */
  int64_t files, failed;
} asr_decoder;

static void files_clear(asr_decoder *d);

static void asr_decoder_free(void *state) {
  asr_decoder *d = state;
  lv_tokenizer_destroy(d->tok);
  lv_mel_frontend_free(d->fe);
  free(d->frames);
  free(d->pads);
  files_clear(d);
  free(d->file);
  free(d);
}

static asr_decoder *decoder_of(lv_task *t) {
  LV_ASSERTF(t->decode_state && t->decode_state_free == asr_decoder_free, "%s: decoder_setup has not run",
             t->cls->cls);
  return t->decode_state;
}

lv_status lv_asr_decoder_setup(lv_task *t, const lv_params *cfg) {
  lv_task_free_decode_state(t);
  asr_decoder *d = calloc(1, sizeof *d);
  LV_ASSERT(d);
  t->decode_state = d;
  t->decode_state_free = asr_decoder_free;
  LV_TRY(lv_seq_search_params(cfg, &d->bp));
  d->vocab = (int)t->cls->seq_decode->vocab_size(t);
  LV_TRY(lv_status_wrap(lv_beam_search_params_validate(&d->bp, d->vocab), "task.decoder.beam_search"));
  const lv_params *ip = lv_params_sub(cfg, "input");
  if (!ip || !lv_params_has(ip, "tokenizer") || !lv_params_sub(ip, "tokenizer") || !lv_params_has(ip, "frame_size"))
    return lv_status_make(LV_ERR_INVALID, "%s decoder: input must be an AsrInput dataset with a tokenizer (input.cls "
                          "is %s)", t->cls->cls, ip ? lv_params_str(ip, "cls") : "missing");
  LV_TRY(lv_status_wrap(lv_tokenizer_create(lv_params_sub(ip, "tokenizer"), &d->tok), "input.tokenizer"));
  const lv_params *tp = lv_params_sub(ip, "tokenizer");
  int64_t tv = lv_params_has(tp, "vocab_size") ? lv_params_int(tp, "vocab_size") : 0;
  if (tv > d->vocab)
    return lv_status_make(LV_ERR_INVALID, "input.tokenizer.vocab_size = %lld is larger than the model's vocabulary "
                          "(%d, task.decoder.softmax.num_classes)", (long long)tv, d->vocab);
  d->frame_size = lv_params_int(ip, "frame_size");
  d->eos_frame = lv_params_has(ip, "append_eos_frame") && lv_params_bool(ip, "append_eos_frame");
  d->max_frames = lv_params_has(ip, "source_max_length") ? lv_params_int(ip, "source_max_length") : 0;
  return NULL;
}

lv_status lv_asr_create_decoder_metrics(lv_task *t, lv_metric_set *metrics) {
  (void)decoder_of(t);
  LV_TRY(lv_metric_set_add(metrics, "num_samples_in_batch", lv_metric_average_new()));
  LV_TRY(lv_metric_set_add(metrics, "norm_wer", lv_wer_metric_new()));
  LV_TRY(lv_metric_set_add(metrics, "corpus_bleu", lv_metric_corpus_bleu_new(LV_BLEU_SEP_NONE)));
  return NULL;
}

lv_status lv_asr_decode(lv_task *t, lv_graph *g, const lv_batch *b, lv_decode_out *out) {
  asr_decoder *d = decoder_of(t);
  const lv_tensor *fr = lv_batch_get(b, "src.src_inputs");
  if (!fr || fr->shape.rank != 4)
    return lv_status_make(LV_ERR_INVALID, "%s decodes batches with src.src_inputs [batch, time, bins, 1] (an AsrInput "
                          "dataset)", t->cls->cls);
  const int64_t B = fr->shape.d[0], n = b->size < B ? b->size : B;
  static const char *const kRefKeys[] = {"tgt.labels", "tgt.paddings", "sample_ids", "tgt.transcripts"};
  LV_TRY(lv_seq_keep_batch_keys(out, b, kRefKeys, LV_ARRAY_LEN(kRefKeys)));
  return lv_seq_beam_decode(t, &d->bp, d->vocab, g, b, B, n, out);
}

/* ---- post-processing ---- */

/* Example i's entry (ref and hyp lines into f) and its metrics. */
static lv_status example_entry(asr_decoder *d, const lv_decode_out *o, int64_t i, lv_metric_set *ms, FILE *f) {
  const lv_tensor *ids = lv_decode_out_get(o, "topk_ids"), *lens = lv_decode_out_get(o, "topk_lens");
  const lv_tensor *scores = lv_decode_out_get(o, "topk_scores");
  const lv_tensor *labels = lv_decode_out_get(o, "tgt.labels"), *tpads = lv_decode_out_get(o, "tgt.paddings");
  const int H = d->bp.num_hyps_per_beam, L = (int)ids->shape.d[1], W = (int)labels->shape.d[1];
  const int32_t *ref_ids = lv_i32(labels) + i * W;
  int ref_n = lv_seq_row_len(tpads, i);
  if (ref_n > W) ref_n = W;
  char *ref = NULL, **hyps = calloc((size_t)H, sizeof *hyps), *fhyp = NULL, *fref = NULL;
  LV_ASSERT(hyps);
  lv_status s = lv_seq_row_text(d->tok, ref_ids, W, ref_n, &ref);
  if (!s) fprintf(f, "ref: %s", ref);
  for (int h = 0; !s && h < H; h++) {
    int64_t r = i * H + h;
    s = lv_seq_row_text(d->tok, lv_i32(ids) + r * L, L, lv_i32(lens)[r], &hyps[h]);
    if (!s) fprintf(f, "\nhyp %d: score %.6f: %s", h, lv_f32(scores)[r], hyps[h]);
  }
  if (!s) {
    int hyp_n = lv_i32(lens)[i * H];
    s = lv_wer_stats_add(lv_wer_metric_stats(lv_metric_set_get(ms, "norm_wer")), ref, (const char *const *)hyps, H,
                         ref_ids, ref_n, lv_i32(ids) + i * H * L, hyp_n < L ? hyp_n : L);
  }
  if (!s) {
    /* corpus_bleu reads the top hyp and the reference without <noise> and <epsilon>. */
    char *a = lv_wer_filter_noise(hyps[0]), *b = lv_wer_filter_noise(ref);
    fhyp = a ? lv_wer_filter_epsilon(a) : NULL;
    fref = b ? lv_wer_filter_epsilon(b) : NULL;
    free(a);
    free(b);
    LV_ASSERT(fhyp && fref);
    s = lv_metric_bleu_update(lv_metric_set_get(ms, "corpus_bleu"), fref, fhyp);
  }
  free(fhyp);
  free(fref);
  free(ref);
  for (int h = 0; h < H; h++) free(hyps[h]);
  free(hyps);
  return s;
}

lv_status lv_asr_post_process_decode_out(lv_task *t, const lv_decode_out *dec_out, lv_metric_set *metrics,
                                         lv_kv_list *out) {
  asr_decoder *d = decoder_of(t);
  const lv_tensor *labels = lv_decode_out_get(dec_out, "tgt.labels"), *tpads = lv_decode_out_get(dec_out, "tgt.paddings");
  if (!labels || !tpads || labels->shape.rank != 2 || tpads->shape.rank != 2 ||
      labels->shape.d[1] != tpads->shape.d[1])
    return lv_status_make(LV_ERR_INVALID, "%s: the batch gives no tgt.labels / tgt.paddings [batch, length] to score "
                          "against (an AsrInput dataset is needed)", t->cls->cls);
  const lv_tensor *uttids = lv_decode_out_get(dec_out, "sample_ids");
  lv_metric *nsb = lv_metric_set_get(metrics, "num_samples_in_batch");
  const int64_t n = lv_tensor_numel(lv_decode_out_get(dec_out, "topk_lens")) / d->bp.num_hyps_per_beam;
  const int64_t first = (int64_t)lv_metric_total_value(nsb);
  lv_status s = NULL;
  for (int64_t i = 0; !s && i < n; i++) {
    char *text = NULL, key[64];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    LV_ASSERT(f);
    s = example_entry(d, dec_out, i, metrics, f);
    fclose(f);
    /* Lingvo keys the decoder's outputs by utterance id. */
    const char *k = uttids && uttids->dtype == LV_STRING ? lv_tensor_str(uttids, i) : "";
    if (!*k) snprintf(key, sizeof key, "utterance %lld", (long long)(first + i));
    if (!s) s = lv_kv_list_add(out, *k ? k : key, text);
    free(text);
  }
  if (!s) s = lv_metric_average_update(nsb, (double)n, 1.0);
  return s;
}

lv_status lv_asr_decoder_report(lv_task *t, const lv_metric_set *metrics, char **headline, char **detail) {
  (void)decoder_of(t);
  lv_metric *wm = lv_metric_set_get(metrics, "norm_wer");
  const lv_wer_stats *ws = lv_wer_metric_stats(wm);
  double bleu = 0;
  LV_TRY(lv_metric_value(lv_metric_set_get(metrics, "corpus_bleu"), &bleu));
  LV_ASSERT(asprintf(headline, "WER %.2f%% (%lld errors / %lld words), sacc %.4f, ter %.4f, corpus_bleu %.4f over "
                     "%lld utterances", 100.0 * lv_wer_norm_wer(ws), (long long)ws->norm_errors,
                     (long long)ws->norm_words, lv_wer_sacc(ws), lv_wer_ter(ws), bleu, (long long)ws->utterances) >= 0);
  LV_ASSERT(asprintf(detail, "error_rates: ins %lld, sub %lld, del %lld of %lld words (wer %.4f); oracle_norm_wer %.4f",
                     (long long)ws->ed.ins, (long long)ws->ed.subs, (long long)ws->ed.dels, (long long)ws->ed_words,
                     lv_wer_wer(ws), lv_wer_oracle(ws)) >= 0);
  return NULL;
}

/* ---- --decode_audio ---- */

lv_status lv_asr_line_describe(lv_task *t, const char *kind, const char **verb, const char **note) {
  asr_decoder *d = decoder_of(t);
  if (strcmp(kind, "decode_audio"))
    return lv_status_make(LV_ERR_INVALID, "--%s: %s transcribes audio files (--decode_audio)", kind,
                          t->cls->cls);
  if (!d->fe) {
    lv_mel_frontend_opts o = lv_mel_frontend_opts_librispeech();
    LV_TRY(lv_mel_frontend_create(&o, &d->fe));
    if (lv_mel_frontend_output_dim(d->fe) != d->frame_size)
      return lv_status_make(LV_ERR_INVALID, "--decode_audio: input.frame_size = %lld, but the frontend of "
                            "create_asr_features makes %d log-mel bins per frame", (long long)d->frame_size,
                            lv_mel_frontend_output_dim(d->fe));
  }
  *verb = "transcribing";
  *note = "; each line is an audio file (WAV, FLAC, OGG; resampled to 16 kHz, mixed to mono), written as "
          "path<TAB>text";
  return NULL;
}

/* A file that cannot be transcribed (s says why, naming it): its item's error, which the
 * library API reads back (its caller says which line it was), and the others go on. */
static lv_status file_failed(lv_task *t, asr_decoder *d, asr_file *f, int64_t lineno, lv_status s) {
  (void)t, (void)lineno;
  free(f->error);
  f->error = strdup(lv_status_msg(s));
  f->error_code = lv_status_code(s);
  lv_status_free(s);
  d->failed++;
  f->blank = true;
  return NULL;
}

static lv_status audio_frames(lv_task *t, asr_decoder *d, int i, const lv_audio *a, int64_t lineno);

/* One line's file read into d->file[i]: its frames (NULL when it has nothing to decode:
 * an empty line, an unreadable file, shorter than a frame, or silence: the output line
 * is then empty for the first two and `path<TAB>` for the others). */
static lv_status read_one(lv_task *t, asr_decoder *d, int i, int64_t lineno, const char *line, size_t len) {
  asr_file *f = &d->file[i];
  if (!len) {
    f->blank = true; /* an empty line: an empty output line */
    return NULL;
  }
  /* A NUL would cut the path short (another file read), and a tab or newline make the
   * output's path<TAB>text ambiguous: such a line is refused, not read. */
  const char *bad = memchr(line, 0, len);
  if (!bad) bad = memchr(line, '\t', len);
  if (!bad) bad = memchr(line, '\n', len);
  if (bad)
    return file_failed(t, d, f, lineno, lv_status_make(LV_ERR_INVALID, "a %s byte at column %d of the path (expected "
                                                    "a path without NUL bytes, tabs or newlines)",
                                                    *bad ? *bad == '\t' ? "tab" : "newline" : "NUL",
                                                    (int)(bad - line) + 1));
  lv_audio a = {0};
  lv_status s = lv_audio_read_file(f->path, kAsrSampleRate, &a);
  if (s) return file_failed(t, d, f, lineno, s);
  s = audio_frames(t, d, i, &a, lineno);
  lv_audio_free(&a);
  return s;
}

/* d->file[i]'s frames from its audio a (16 kHz mono, int16 range; a stays the caller's). */
static lv_status audio_frames(lv_task *t, asr_decoder *d, int i, const lv_audio *a, int64_t lineno) {
  asr_file *f = &d->file[i];
  lv_status s = NULL;
  f->secs = (double)a->n / a->rate;
  d->audio_secs += f->secs;
  /* Silence: no sample reaches kSilencePeak (-60 dBFS; 16-bit dither peaks near -84 dBFS,
   * speech recorded at a usable level far above): nothing to transcribe, and a model
   * never trained on silence would otherwise make words up. */
  float peak = 0;
  for (int64_t k = 0; k < a->n; k++) peak = fabsf(a->samples[k]) > peak ? fabsf(a->samples[k]) : peak;
  if (peak < kSilencePeak) return NULL;
  const int64_t T0 = lv_mel_frontend_num_frames(d->fe, a->n), F = d->frame_size;
  if (T0 == 0) return NULL; /* shorter than one frame: nothing to hear */
  /* Longer than the model takes (the input drops such utterances in training): a long
   * recording would make an encoder graph of its length, and attention trained on
   * utterances of seconds does not transcribe an hour. */
  if (d->max_frames > 0 && T0 + (d->eos_frame ? 1 : 0) > d->max_frames) {
    s = lv_status_make(LV_ERR_INVALID,
                       "%s: %.1f s of audio make %lld frames%s, over input.source_max_length = %lld: split the "
                       "recording into shorter files (or raise input.source_max_length)",
                       f->path, (double)a->n / a->rate, (long long)(T0 + (d->eos_frame ? 1 : 0)),
                       d->eos_frame ? " with the eos frame" : "", (long long)d->max_frames);
    return file_failed(t, d, f, lineno, s);
  }
  void *fv = NULL;
  if ((s = lv_mem_alloc((size_t)(T0 * F), sizeof *f->frames, false, "log-mel frames", &fv)))
    return file_failed(t, d, f, lineno, lv_status_wrap(s, "%s", f->path));
  f->frames = fv;
  s = lv_mel_frontend_compute(d->fe, a->samples, NULL, a->n, f->frames, NULL);
  if (s) {
    /* Samples whose features are not finite (a float file of huge values): this file
     * alone fails, as an unreadable one does. */
    free(f->frames);
    f->frames = NULL;
    return file_failed(t, d, f, lineno, lv_status_wrap(s, "%s", f->path));
  }
  f->T = T0 + (d->eos_frame ? 1 : 0);
  f->T0 = T0;
  return NULL;
}

static void files_clear(asr_decoder *d) {
  for (int i = 0; i < d->nfiles; i++) {
    free(d->file[i].path);
    free(d->file[i].frames);
    free(d->file[i].error);
  }
  d->nfiles = 0;
}

static void files_begin(asr_decoder *d, int n, lv_batch *b, bool *empty);
static lv_status files_batch(asr_decoder *d, lv_batch *b, bool *empty);

lv_status lv_asr_lines_to_batch(lv_task *t, const char *kind, const char *const *lines, const size_t *lens, int n,
                                int64_t first_lineno, lv_batch *b, bool *empty) {
  asr_decoder *d = decoder_of(t);
  const char *verb, *note;
  LV_TRY(lv_asr_line_describe(t, kind, &verb, &note));
  files_begin(d, n, b, empty);
  for (int i = 0; i < n; i++) {
    d->file[i].path = strndup(lines[i], lens[i]);
    LV_ASSERT(d->file[i].path);
  }
  for (int i = 0; i < n; i++) LV_TRY(read_one(t, d, i, first_lineno + i, lines[i], lens[i]));
  return files_batch(d, b, empty);
}

lv_status lv_asr_samples_to_batch(lv_task *t, const float *const *samples, const int64_t *lens, int n, lv_batch *b,
                                  bool *empty) {
  asr_decoder *d = decoder_of(t);
  const char *verb, *note;
  LV_TRY(lv_asr_line_describe(t, "decode_audio", &verb, &note));
  files_begin(d, n, b, empty);
  for (int i = 0; i < n; i++) {
    LV_ASSERT(asprintf(&d->file[i].path, "samples %d", i) >= 0);
    /* As the file reader gives them: int16 range. */
    lv_audio a = {.n = lens[i], .rate = kAsrSampleRate, .samples = malloc(sizeof(float) * (size_t)(lens[i] + 1))};
    LV_ASSERT(a.samples);
    for (int64_t k = 0; k < lens[i]; k++) a.samples[k] = samples[i][k] * 32768.0f;
    lv_status s = audio_frames(t, d, i, &a, i + 1);
    free(a.samples);
    LV_TRY(s);
  }
  return files_batch(d, b, empty);
}

/* The batch of n inputs begins: d->file[0..n) cleared (no frames, no row). */
static void files_begin(asr_decoder *d, int n, lv_batch *b, bool *empty) {
  *empty = true;
  lv_nmap_clear(&b->map);
  b->size = 0;
  if (!d->files) d->start = lv_now_monotonic();
  d->files += n;
  files_clear(d);
  if (d->cap_files < n) {
    free(d->file);
    d->cap_files = n;
    d->file = malloc(sizeof *d->file * (size_t)n);
    LV_ASSERT(d->file);
  }
  d->nfiles = n;
  memset(d->file, 0, sizeof *d->file * (size_t)n);
  for (int i = 0; i < n; i++) d->file[i].row = -1;
}

/* The inputs' frames (d->file) as AsrInput's batch. */
static lv_status files_batch(asr_decoder *d, lv_batch *b, bool *empty) {
  int64_t B = 0, T = 0;
  for (int i = 0; i < d->nfiles; i++) {
    if (!d->file[i].frames) continue;
    d->file[i].row = (int)B++;
    if (d->file[i].T > T) T = d->file[i].T;
  }
  if (!B) return NULL;
  /* AsrInput's batch: each file's frames, its eos frame (zeros, not padded), then padded
   * zero frames up to the longest. */
  const int64_t F = d->frame_size;
  if (d->cap < (size_t)(B * T * F)) {
    free(d->frames);
    d->frames = NULL;
    d->cap = 0;
    void *v = NULL;
    LV_TRY(lv_mem_alloc((size_t)(B * T * F), sizeof *d->frames, false, "decode_audio batch", &v));
    d->frames = v;
    d->cap = (size_t)(B * T * F);
  }
  if (d->cap_t < (size_t)(B * T)) {
    free(d->pads);
    d->pads = NULL;
    d->cap_t = 0;
    void *v = NULL;
    LV_TRY(lv_mem_alloc((size_t)(B * T), sizeof *d->pads, false, "decode_audio batch", &v));
    d->pads = v;
    d->cap_t = (size_t)(B * T);
  }
  memset(d->frames, 0, sizeof *d->frames * (size_t)(B * T * F));
  for (int i = 0; i < d->nfiles; i++) {
    const asr_file *f = &d->file[i];
    if (f->row < 0) continue;
    memcpy(d->frames + f->row * T * F, f->frames, sizeof *f->frames * (size_t)(f->T0 * F));
    for (int64_t k = 0; k < T; k++) d->pads[f->row * T + k] = k < f->T ? 0.0f : 1.0f;
  }
  d->frames_view = lv_tensor_view(LV_F32, lv_shape4(B, T, F, 1), d->frames);
  d->pads_view = lv_tensor_view(LV_F32, lv_shape2(B, T), d->pads);
  LV_TRY(lv_nmap_set(&b->map, "src.src_inputs", &d->frames_view));
  LV_TRY(lv_nmap_set(&b->map, "src.paddings", &d->pads_view));
  b->size = B;
  *empty = false;
  return NULL;
}

int lv_asr_line_batch_limit(lv_task *t, const char *kind) {
  asr_decoder *d = decoder_of(t);
  (void)kind;
  if (d->max_frames <= 0) return 0;
  /* A file's frames, then its copy in the batch; the search is bounded apart (in parts). */
  const int64_t per = d->max_frames * d->frame_size * (int64_t)sizeof(float) * 2;
  const int64_t lim = LV_SEQ_SEARCH_BUDGET_BYTES / (per > 0 ? per : 1);
  return lim < 1 ? 1 : lim > 1 << 20 ? 1 << 20 : (int)lim;
}

lv_status lv_asr_decode_out_nbest(lv_task *t, const lv_decode_out *dec_out, int i, int k, char **texts, float *scores,
                                  int *n) {
  asr_decoder *d = decoder_of(t);
  *n = 0;
  if (i < 0 || i >= d->nfiles) return lv_status_make(LV_ERR_INTERNAL, "decode_out_nbest: item %d of %d", i, d->nfiles);
  if (d->file[i].error) return lv_status_make(d->file[i].error_code, "%s", d->file[i].error);
  return lv_seq_nbest(d->tok, d->bp.num_hyps_per_beam, dec_out, d->file[i].row, k, texts, scores, n);
}

double lv_asr_item_seconds(lv_task *t, int i) {
  asr_decoder *d = decoder_of(t);
  return i >= 0 && i < d->nfiles ? d->file[i].secs : 0;
}
