/* AsrInput (lingvo/tasks/asr/input_generator.py; reference/lingvo_asr_lm.md §1.2): TFRecord
 * files of the tf.Examples bin/create_asr_features writes (uttid, transcript, frames as a
 * flat [T * frame_size] float list).
 *
 * Per record: frames reshaped to [T, frame_size] (a length that is not a multiple is an
 * error naming the file and offset, or with skip_corrupt_records a skipped record),
 * src paddings zeros [T], bucket key T + 1 with append_eos_frame (else T); a record
 * without exactly one uttid and one transcript is an error the same way.
 *
 * Batch (BuildInputBatch, _MaybePadSourceInputs):
 *   src.src_inputs [B, T, frame_size, 1]  frames, zero-padded along T
 *   src.paddings   [B, T]  with append_eos_frame one extra all-zero unpadded frame after
 *                  each utterance: T = max(T_batch, max_i L_i + 1), paddings 1 from
 *                  L_i + 1 on
 *   tgt.ids / tgt.labels [B, L] int32, tgt.paddings / tgt.weights [B, L]: the
 *                  transcripts through the tokenizer's StringsToIds(target_max_length)
 *                  (AsciiTokenizer by default, Lingvo's 76-symbol grapheme set; a
 *                  WpmTokenizer for word pieces); weights = 1 - paddings
 *   sample_ids [B] string (the utterance ids), tgt.transcripts [B] string (lingvoc: the
 *                  transcripts as stored, for the decoder's references), bucket_keys [B]
 *   With pad_to_max_seq_length, T is source_max_length and L target_max_length (a longer
 *   utterance is an error naming it).
 * Lingvo pads tgt paddings of rows of different widths with 0 (its padding constants
 * list); every tokenizer whose pad_to_max_length is on (the default) gives equal widths,
 * and the batch-wide StringsToIds here pads with 1 otherwise.
 *
 * Waveform augmentation (training stream only; audio/augment.h): with any of
 * speed_perturb_factors, reverb_rt60_range, noise_snr_db_range, gain_db_range set (or
 * frontend_noise_scale > 0) a training record must hold its samples, feature `pcm16` (one
 * bytes value: 16 kHz mono int16 little-endian, `create_asr_features --write_pcm`); they are
 * perturbed and turned into log-mel frames again by create_asr_features' frontend
 * (lv_mel_frontend_opts_librispeech, with frontend_noise_scale as its dither), and the
 * stored frames are not used. The draws of a record are a function of (augment_seed, or
 * file_random_seed when 0; the record's file name, offset and epoch) only: the same
 * batches for a seed, whatever the threads or prefetch, and a resumed run (resume_replay
 * reads the same records in the same epochs) draws exactly what an uninterrupted one
 * drew. Evaluation reads the stored frames, unchanged. With augmentation off the input is
 * bit-identical to what it was without these params.
 *
 * Training, resume, evaluation and sharding: stream_input.h. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "audio/augment.h"
#include "audio/mel_frontend.h"
#include "base/mem.h"
#include "base/rng.h"
#include "input/stream_input.h"
#include "input/tokenizer.h"
#include "io/example.h"

typedef struct asr_input {
  lv_stream_input st;
  lv_tokenizer *tok;
  int64_t frame_size;
  bool eos_frame;
  bool pad_to_max;
  int64_t smax, tmax;
  /* waveform augmentation (training stream only) */
  bool augment;
  lv_augment_opts aug;
  uint64_t aug_seed;
  int64_t augment_start_epoch;
  int64_t short_epochs, short_max; /* short_first_epochs, short_first_max_frames */
  lv_mel_frontend *fe; /* the training stream's: one batcher thread at a time, fe_mu for safety */
  pthread_mutex_t fe_mu;
} asr_input;

enum { F_UTTID, F_TRANSCRIPT, F_FRAMES, F_SRC_PADDINGS, F_COUNT };

static lv_params *asr_params(void) {
  lv_tokenizer_register_all();
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "cls", "AsrInput", "Class that this param object is associated with.");
  lv_params_define_string(p, "name", "input", "Name of this input generator.");
  lv_params_define_int(p, "num_samples", 0, "If non-zero, the dataset size (unused by the streaming reader).");
  int64_t bub = 2560, bbl = 8;
  lv_stream_input_define_params(p, 1, &bub, &bbl);
  lv_params_define_int(p, "source_max_length", 3000, "The maximum length of the source sequence.");
  lv_params_define_int(p, "target_max_length", 300, "The maximum length of the target sequence.");
  lv_params_define_bool(p, "pad_to_max_seq_length", false,
                        "If True, input tensors will be padded to source/target_max_length.");
  lv_params_define_params(p, "tokenizer", lv_tokenizer_class_find("AsciiTokenizer")->params(), "Tokenizer params.");
  lv_params_define_int(p, "frame_size", 40, "The number of coefficients in each frame.");
  lv_params_define_bool(p, "append_eos_frame", true, "Append an all-zero frame.");
  lv_params_define_bool(p, "skip_corrupt_records", false,
                        "lingvoc: skip (and count) corrupt records instead of failing.");
  lv_params_define_list(p, "speed_perturb_factors", lv_pvalue_list(),
                        "lingvoc: speed perturbation (Kaldi's sox speed) of training utterances: one factor of "
                        "the list drawn per utterance, e.g. [0.9, 1.0, 1.1]; empty: off. Needs the records' pcm16.");
  lv_params_define_list(p, "reverb_rt60_range", lv_pvalue_list(),
                        "lingvoc: [lo, hi] seconds: reverberation of training utterances with a synthetic room "
                        "impulse response of RT60 uniform in the range; empty: off. Needs pcm16.");
  lv_params_define_list(p, "noise_snr_db_range", lv_pvalue_list(),
                        "lingvoc: [lo, hi] dB: additive noise of training utterances at an SNR uniform in the "
                        "range; empty: off. Needs pcm16.");
  lv_pvalue *colors = lv_pvalue_list();
  for (int c = 0; c < LV_NOISE_COUNT; c++) lv_pvalue_append(colors, lv_pvalue_string(lv_noise_color_names[c]));
  lv_params_define_list(p, "noise_colors", colors,
                        "lingvoc: colours of the additive noise, one drawn per utterance: white, pink, brown.");
  lv_params_define_list(p, "gain_db_range", lv_pvalue_list(),
                        "lingvoc: [lo, hi] dB: gain of training utterances uniform in the range; empty: off. "
                        "Needs pcm16.");
  lv_params_define_float(p, "augment_prob", 1.0,
                         "lingvoc: probability of each of reverberation, noise and gain per training utterance.");
  lv_params_define_int(p, "augment_seed", 0,
                       "lingvoc: seed of the augmentation draws (0: file_random_seed).");
  lv_params_define_int(p, "augment_start_epoch", 0,
                       "lingvoc: the waveform augmentation above applies to the records of this epoch (0-based) on; "
                       "earlier epochs read the stored frames (a curriculum).");
  lv_params_define_int(p, "short_first_epochs", 0,
                       "lingvoc: curriculum: in the training stream's first short_first_epochs epochs, utterances "
                       "longer than short_first_max_frames (bucket key) are left out (counted as dropped).");
  lv_params_define_int(p, "short_first_max_frames", 0,
                       "lingvoc: the longest utterance (frames, with the eos frame) read while short_first_epochs "
                       "lasts.");
  lv_params_define_float(p, "frontend_noise_scale", 0.0,
                         "lingvoc: MelAsrFrontend noise_scale (Gaussian dither, int16 LSB units) of the features "
                         "recomputed from pcm16 for training; > 0 turns the recomputation on by itself.");
  return p;
}

/* The single value of bytes feature key. */
static lv_status one_bytes(const lv_example *e, const char *key, const uint8_t **v, size_t *n) {
  int count = 0;
  if (!lv_example_get_bytes(e, key, 0, v, n, &count) || count != 1)
    return lv_status_make(LV_ERR_CORRUPT, "feature %s: expected one bytes value, found %d", key, count);
  if (memchr(*v, 0, *n)) return lv_status_make(LV_ERR_CORRUPT, "feature %s holds a NUL byte", key);
  return NULL;
}

/* frames [t, frame_size] (unpadded) into the sample, and the bucket key. */
static void set_frames(const asr_input *in, const float *frames, int64_t t, lv_sample *out, int64_t *key) {
  lv_sample_set(out, F_FRAMES, frames, t);
  float *zeros = calloc((size_t)t + 1, sizeof(float));
  LV_ASSERT(zeros);
  lv_sample_set(out, F_SRC_PADDINGS, zeros, t);
  free(zeros);
  *key = t + (in->eos_frame ? 1 : 0);
}

static lv_status asr_process(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  const asr_input *in = ctx;
  lv_example *e = NULL;
  LV_TRY(lv_example_parse(rec->data, rec->len, &e));
  const uint8_t *id, *tr;
  size_t idn, trn;
  const float *frames = NULL;
  int n = 0;
  lv_status s = one_bytes(e, "uttid", &id, &idn);
  if (!s) s = one_bytes(e, "transcript", &tr, &trn);
  if (!s && !lv_example_get_floats(e, "frames", &frames, &n)) {
    for (int i = 0; i < lv_example_num_features(e); i++)
      if (!strcmp(lv_example_feature_key(e, i), "frames") && lv_example_feature_kind(e, i) != LV_FEATURE_NONE)
        s = lv_status_make(LV_ERR_CORRUPT, "feature frames is a %s list, want float",
                           lv_feature_kind_names[lv_example_feature_kind(e, i)]);
    n = 0;
  }
  if (!s && n == 0)
    s = lv_status_make(LV_ERR_CORRUPT, "utterance %.*s: no frames (feature frames is missing or empty; expected "
                       "T * input.frame_size %lld log-mel values)", (int)idn, (const char *)id, (long long)in->frame_size);
  for (int i = 0; !s && i < n; i++)
    if (!isfinite(frames[i]))
      s = lv_status_make(LV_ERR_CORRUPT, "utterance %.*s: frames value %d (frame %lld, bin %lld) is %g: expected finite "
                         "log-mel values", (int)idn, (const char *)id, i, (long long)(i / in->frame_size),
                         (long long)(i % in->frame_size), (double)frames[i]);
  if (!s && n % in->frame_size)
    s = lv_status_make(LV_ERR_CORRUPT, "utterance %.*s: %d frame values are not a multiple of input.frame_size %lld",
                       (int)idn, (const char *)id, n, (long long)in->frame_size);
  if (!s) {
    lv_sample_set_str(out, F_UTTID, (const char *)id, idn);
    lv_sample_set_str(out, F_TRANSCRIPT, (const char *)tr, trn);
    set_frames(in, frames, n / in->frame_size, out, key);
  }
  lv_example_free(e);
  return s;
}

/* A 64-bit hash of the file's base name (FNV-1a), so that moving the corpus keeps the draws. */
static uint64_t name_hash(const char *path) {
  const char *b = strrchr(path, '/');
  uint64_t h = 14695981039346656037ull;
  for (const char *c = b ? b + 1 : path; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
  return h;
}

/* The training stream's processor with augmentation: asr_process, then the frames again
 * from the record's perturbed samples. */
static lv_status asr_process_augment(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  asr_input *in = ctx;
  LV_TRY(asr_process(ctx, rec, out, key));
  lv_example *e = NULL;
  LV_TRY(lv_example_parse(rec->data, rec->len, &e));
  const uint8_t *pcm = NULL, *id = NULL;
  size_t np = 0, idn = 0;
  int count = 0;
  lv_status s = one_bytes(e, "uttid", &id, &idn);
  if (!s && (!lv_example_get_bytes(e, "pcm16", 0, &pcm, &np, &count) || count != 1 || np % 2 || np < 2))
    s = lv_status_make(LV_ERR_CORRUPT, "utterance %.*s: input augmentation (speed_perturb_factors, reverb_rt60_range, "
                       "noise_snr_db_range, gain_db_range, frontend_noise_scale) needs the samples, one pcm16 bytes "
                       "value of even length (found %d values, %zu bytes): write the records with "
                       "create_asr_features --write_pcm", (int)idn, (const char *)id, count, np);
  float *x = NULL, *y = NULL, *frames = NULL;
  int64_t n = (int64_t)np / 2, m = 0;
  if (!s) s = lv_mem_alloc((size_t)n, sizeof(float), false, "samples", (void **)&x);
  for (int64_t i = 0; !s && i < n; i++) x[i] = (float)(int16_t)(pcm[2 * i] | pcm[2 * i + 1] << 8);
  uint64_t k = lv_rng_mix(lv_rng_mix(in->aug_seed, name_hash(rec->file)),
                          lv_rng_mix(rec->offset, (uint64_t)rec->epoch));
  if (!s) s = lv_augment_apply(&in->aug, k, x, n, &y, &m);
  int64_t t = 0;
  if (!s) {
    pthread_mutex_lock(&in->fe_mu);
    t = lv_mel_frontend_num_frames(in->fe, m);
    if (t < 1)
      s = lv_status_make(LV_ERR_CORRUPT, "utterance %.*s: %lld samples after augmentation: too short for a frame",
                         (int)idn, (const char *)id, (long long)m);
    if (!s) s = lv_mem_alloc((size_t)(t * in->frame_size), sizeof(float), false, "frames", (void **)&frames);
    lv_mel_frontend_seed(in->fe, lv_rng_mix(k, 0x64697468ull)); /* "dith" */
    if (!s) s = lv_mel_frontend_compute(in->fe, y, NULL, m, frames, NULL);
    pthread_mutex_unlock(&in->fe_mu);
    if (s) s = lv_status_wrap(s, "utterance %.*s after augmentation", (int)idn, (const char *)id);
  }
  if (!s) set_frames(in, frames, t, out, key);
  free(frames);
  free(y);
  free(x);
  lv_example_free(e);
  return s;
}

/* The training stream's processor: the curriculum of augment_start_epoch and
 * short_first_epochs, functions of the record's epoch only, so that a resumed run
 * (resume_replay) reads and draws what an uninterrupted one did. */
static lv_status asr_process_train(void *ctx, const lv_record *rec, lv_sample *out, int64_t *key) {
  asr_input *in = ctx;
  bool aug = in->augment && rec->epoch >= in->augment_start_epoch;
  LV_TRY(aug ? asr_process_augment(ctx, rec, out, key) : asr_process(ctx, rec, out, key));
  if (rec->epoch < in->short_epochs && *key > in->short_max) *key = -1;
  return NULL;
}

/* input.<name>: an empty list (off, *on false) or [lo, hi]. */
static lv_status read_range(const lv_params *p, const char *name, bool *on, double r[2]) {
  double v[3];
  int n = lv_pvalue_to_floats(lv_params_list(p, name), v, 3);
  *on = n == 2;
  if (n != 0 && n != 2)
    return lv_status_make(LV_ERR_INVALID, "input.%s: expected [] (off) or [lo, hi], got a list of %d numbers", name, n);
  r[0] = n == 2 ? v[0] : 0;
  r[1] = n == 2 ? v[1] : 0;
  return NULL;
}

static lv_status read_augment(asr_input *in, const lv_params *p) {
  lv_augment_opts *o = &in->aug;
  memset(o, 0, sizeof *o);
  o->rate = 16000;
  o->n_speeds = lv_pvalue_to_floats(lv_params_list(p, "speed_perturb_factors"), o->speeds, LV_AUGMENT_MAX_SPEEDS);
  if (o->n_speeds < 0 || o->n_speeds > LV_AUGMENT_MAX_SPEEDS)
    return lv_status_make(LV_ERR_INVALID, "input.speed_perturb_factors: expected a list of at most %d numbers",
                          LV_AUGMENT_MAX_SPEEDS);
  LV_TRY(read_range(p, "reverb_rt60_range", &o->reverb, o->rt60));
  LV_TRY(read_range(p, "noise_snr_db_range", &o->noise, o->snr_db));
  LV_TRY(read_range(p, "gain_db_range", &o->gain, o->gain_db));
  const lv_pvalue *cl = lv_params_list(p, "noise_colors");
  for (int i = 0; cl && i < lv_pvalue_len(cl); i++) {
    const lv_pvalue *c = lv_pvalue_at(cl, i);
    const char *name = c && lv_pvalue_kind(c) == LV_PV_STRING ? lv_pvalue_as_string(c) : "";
    int k = 0;
    while (k < LV_NOISE_COUNT && strcmp(name, lv_noise_color_names[k])) k++;
    if (k == LV_NOISE_COUNT || o->n_colors == LV_NOISE_COUNT)
      return lv_status_make(LV_ERR_INVALID, "input.noise_colors[%d] '%s': expected up to three of white, pink, brown",
                            i, name);
    o->colors[o->n_colors++] = (lv_noise_color)k;
  }
  o->prob = lv_params_float(p, "augment_prob");
  LV_TRY(lv_augment_check(o));
  double dither = lv_params_float(p, "frontend_noise_scale");
  if (!(dither >= 0 && dither <= 32768))
    return lv_status_make(LV_ERR_INVALID, "input.frontend_noise_scale %g: expected 0..32768", dither);
  in->augment = lv_augment_active(o) || dither > 0;
  int64_t seed = lv_params_int(p, "augment_seed");
  in->aug_seed = (uint64_t)(seed ? seed : (int64_t)in->st.yopts.seed);
  if (!in->augment) return NULL;
  lv_mel_frontend_opts fo = lv_mel_frontend_opts_librispeech();
  fo.noise_scale = dither;
  LV_TRY(lv_mel_frontend_create(&fo, &in->fe));
  if (lv_mel_frontend_output_dim(in->fe) != in->frame_size)
    return lv_status_make(LV_ERR_INVALID, "input augmentation recomputes create_asr_features' %d-bin log-mel frames, "
                          "but input.frame_size is %lld", lv_mel_frontend_output_dim(in->fe),
                          (long long)in->frame_size);
  return NULL;
}

/* The batcher's batch (sample ids, transcripts, frames [B, T, F], src paddings [B, T])
 * -> Lingvo's ASR batch. */
static lv_status asr_finish(void *ctx, const lv_batch *raw, lv_batch_store *out) {
  const asr_input *in = ctx;
  const lv_tensor *ids = lv_batch_get(raw, "sample_ids"), *trs = lv_batch_get(raw, "tgt.transcripts");
  const lv_tensor *fr = lv_batch_get(raw, "frames"), *sp = lv_batch_get(raw, "src_paddings");
  const lv_tensor *keys = lv_batch_get(raw, "bucket_keys");
  LV_ASSERT(ids && trs && fr && sp && keys && fr->shape.rank == 3);
  const int64_t B = raw->size, T0 = fr->shape.d[1], F = in->frame_size;
  /* Unpadded lengths, plus Lingvo's end-of-sentence frame. */
  int64_t *len = malloc(sizeof(int64_t) * (size_t)(B + 1));
  LV_ASSERT(len);
  int64_t T = T0;
  for (int64_t b = 0; b < B; b++) {
    float sum = 0;
    for (int64_t t = 0; t < T0; t++) sum += 1.0f - lv_f32(sp)[b * T0 + t];
    len[b] = (int64_t)sum + (in->eos_frame ? 1 : 0);
    if (len[b] > T) T = len[b];
  }
  lv_status s = NULL;
  if (in->pad_to_max) {
    for (int64_t b = 0; !s && b < B; b++)
      if (len[b] > in->smax)
        s = lv_status_make(LV_ERR_INVALID,
                           "utterance %s: %lld frames (with the eos frame) exceed input.source_max_length %lld",
                           lv_tensor_str(ids, b), (long long)len[b], (long long)in->smax);
    T = in->smax;
  }
  const char **strs = malloc(sizeof(char *) * (size_t)(B + 1));
  LV_ASSERT(strs);
  for (int64_t b = 0; b < B; b++) strs[b] = lv_tensor_str(trs, b);
  lv_tok_batch tb = {0};
  if (!s) {
    s = lv_tokenizer_strings_to_ids(in->tok, strs, NULL, (int)B, (int)in->tmax, -1, &tb);
    if (s) s = lv_status_wrap(s, "input.tokenizer");
  }
  free(strs);
  const int64_t L0 = tb.len, L = in->pad_to_max && in->tmax > L0 ? in->tmax : L0;
  lv_tensor *src, *pad, *tid, *tlab, *tpad, *tw, *bk;
  if (!s) s = lv_batch_store_add(out, "src.src_inputs", LV_F32, lv_shape4(B, T, F, 1), &src);
  if (!s) s = lv_batch_store_add(out, "src.paddings", LV_F32, lv_shape2(B, T), &pad);
  if (!s) s = lv_batch_store_add(out, "tgt.ids", LV_I32, lv_shape2(B, L), &tid);
  if (!s) s = lv_batch_store_add(out, "tgt.labels", LV_I32, lv_shape2(B, L), &tlab);
  if (!s) s = lv_batch_store_add(out, "tgt.paddings", LV_F32, lv_shape2(B, L), &tpad);
  if (!s) s = lv_batch_store_add(out, "tgt.weights", LV_F32, lv_shape2(B, L), &tw);
  if (!s) s = lv_batch_store_add(out, "bucket_keys", LV_I32, lv_shape1(B), &bk);
  if (!s) s = lv_batch_store_add_copy(out, "sample_ids", ids, NULL);
  if (!s) s = lv_batch_store_add_copy(out, "tgt.transcripts", trs, NULL);
  if (!s) {
    float *dst = lv_f32(src);
    memset(dst, 0, sizeof(float) * (size_t)(B * T * F));
    for (int64_t b = 0; b < B; b++) {
      int64_t copy = T0 < T ? T0 : T;
      memcpy(dst + b * T * F, lv_f32(fr) + b * T0 * F, sizeof(float) * (size_t)(copy * F));
      for (int64_t t = 0; t < T; t++)
        lv_f32(pad)[b * T + t] =
            in->eos_frame ? (t < len[b] ? 0.0f : 1.0f) : (t < T0 ? lv_f32(sp)[b * T0 + t] : 1.0f);
      for (int64_t l = 0; l < L; l++) {
        bool in_row = l < L0;
        int32_t *ti = (int32_t *)tid->data, *tl = (int32_t *)tlab->data;
        ti[b * L + l] = in_row ? tb.ids[b * L0 + l] : 0;
        tl[b * L + l] = in_row ? tb.labels[b * L0 + l] : 0;
        float p = in_row ? tb.paddings[b * L0 + l] : 1.0f;
        lv_f32(tpad)[b * L + l] = p;
        lv_f32(tw)[b * L + l] = 1.0f - p;
      }
    }
    memcpy(bk->data, keys->data, sizeof(int32_t) * (size_t)B);
    out->batch.size = B;
  }
  lv_tok_batch_free(&tb);
  free(len);
  return s;
}

static void asr_destroy(lv_input *base) {
  asr_input *in = (asr_input *)base;
  lv_stream_input_fini(&in->st);
  lv_tokenizer_destroy(in->tok);
  lv_mel_frontend_free(in->fe);
  pthread_mutex_destroy(&in->fe_mu);
  free(in);
}

static lv_status asr_create(const lv_params *p, lv_input_shard shard, lv_input **out) {
  *out = NULL;
  asr_input *in = calloc(1, sizeof *in);
  LV_ASSERT(in);
  pthread_mutex_init(&in->fe_mu, NULL);
  lv_status s = lv_stream_input_init(&in->st, "AsrInput", p, shard, lv_params_str(p, "file_pattern"));
  if (!s) s = lv_text_tokenizer_create(p, &in->tok);
  if (!s) s = lv_text_max_length(p, "target_max_length", in->tok, &in->tmax);
  in->frame_size = lv_params_int(p, "frame_size");
  in->eos_frame = lv_params_bool(p, "append_eos_frame");
  in->pad_to_max = lv_params_bool(p, "pad_to_max_seq_length");
  in->smax = lv_params_int(p, "source_max_length");
  if (!s && (in->frame_size < 1 || in->frame_size > 100000))
    s = lv_status_make(LV_ERR_INVALID, "input.frame_size %lld: expected 1..100000", (long long)in->frame_size);
  if (!s && in->pad_to_max && (in->smax <= 0 || in->tmax <= 0))
    s = lv_status_make(LV_ERR_INVALID, "input.pad_to_max_seq_length needs source_max_length and target_max_length > 0");
  if (!s) s = read_augment(in, p);
  in->augment_start_epoch = lv_params_int(p, "augment_start_epoch");
  in->short_epochs = lv_params_int(p, "short_first_epochs");
  in->short_max = lv_params_int(p, "short_first_max_frames");
  if (!s && (in->augment_start_epoch < 0 || in->short_epochs < 0))
    s = lv_status_make(LV_ERR_INVALID, "input.augment_start_epoch %lld and short_first_epochs %lld: expected >= 0",
                       (long long)in->augment_start_epoch, (long long)in->short_epochs);
  if (!s && in->short_epochs > 0 && in->short_max < 1)
    s = lv_status_make(LV_ERR_INVALID, "input.short_first_epochs %lld needs short_first_max_frames >= 1 (got %lld)",
                       (long long)in->short_epochs, (long long)in->short_max);
  if (s) {
    asr_destroy(&in->st.base);
    return s;
  }
  lv_batcher_opts *o = &in->st.bopts;
  o->n_features = F_COUNT;
  o->features[F_UTTID] = (lv_batcher_feature){"sample_ids", LV_STRING, 0, 0, lv_shape0()};
  o->features[F_TRANSCRIPT] = (lv_batcher_feature){"tgt.transcripts", LV_STRING, 0, 0, lv_shape0()};
  o->features[F_FRAMES] = (lv_batcher_feature){"frames", LV_F32, 0, 0, lv_shape1(in->frame_size)};
  o->features[F_SRC_PADDINGS] = (lv_batcher_feature){"src_paddings", LV_F32, 1, 0, lv_shape0()};
  o->process = asr_process;
  o->ctx = in;
  in->st.finish = asr_finish;
  if (in->augment || in->short_epochs > 0) in->st.train_process = asr_process_train;
  *out = &in->st.base;
  return NULL;
}

const lv_input_class lv_asr_input = {.cls = "AsrInput",
                                     .params = asr_params,
                                     .create = asr_create,
                                     .train_batch = lv_stream_input_train_batch,
                                     .reset = lv_stream_input_reset,
                                     .next_eval = lv_stream_input_next_eval,
                                     .num_samples = lv_stream_input_num_samples,
                                     .batch_size = lv_stream_input_batch_size,
                                     .buffer_peak_bytes = lv_stream_input_buffer_peak_bytes,
                                     .destroy = asr_destroy};
