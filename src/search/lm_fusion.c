/* Shallow fusion of a language model into beam search: see lm_fusion.h. */
#include "search/lm_fusion.h"

#include <stdlib.h>
#include <string.h>

#include "layers/lm_layers.h"
#include "models/lm.h"
#include "search/seq_decode.h"

lv_params *lv_lm_fusion_params(void) {
  lv_params *p = lv_params_new_cls("ShallowFusion");
  lv_params_define_string(p, "lm_model", "", "lingvoc: the LanguageModel experiment to fuse into beam search (e.g. "
                          "lm.bible.RnnLmSpanishSmall); empty: no fusion.");
  lv_params_define_string(p, "lm_logdir", "", "The LM's log directory: its latest checkpoint in <lm_logdir>/train "
                          "is used (unless lm_checkpoint is set).");
  lv_params_define_string(p, "lm_checkpoint", "", "The LM's checkpoint prefix (or a directory: its latest).");
  lv_params_define_string(p, "lm_model_file", "", "lingvoc: the LM as a model file (bin/export), in place of "
                          "lm_logdir and lm_checkpoint (lm_model then only names it in messages). bin/export of a "
                          "fused model stores the LM's model file inside its own and sets this.");
  lv_params_define_string(p, "lm_params_override", "", "Overrides of the LM's params (as --model_params_override), "
                          "e.g. its vocabulary's path.");
  lv_params_define_float(p, "lm_weight", 0.0, "Weight of the LM's log-probabilities added to the model's.");
  return p;
}

void lv_lm_fusion_define_params(lv_params *decoder_p) {
  lv_params_define_params(decoder_p, "fusion", lv_lm_fusion_params(),
                          "lingvoc: shallow fusion of a language model into beam search.");
}

/* Whether ids [0, V) are the same pieces in both tokenizers (*bad: the first that is not).
 * Each id is decoded alone and twice in a row: decoding trims word-boundary marks at the
 * ends of a line, so only the doubled piece tells "\u2581de" ("de de") from "de" ("dede"). */
static lv_status same_pieces(const lv_tokenizer *a, const lv_tokenizer *b, int64_t V, bool *same, int32_t *bad,
                             char **pa, char **pb) {
  *same = true;
  for (int64_t i = 0; *same && i < 2 * V; i++) {
    const int32_t id = (int32_t)(i / 2), two[2] = {id, id};
    const int len = 1 + (int)(i % 2);
    char *x = NULL, *y = NULL;
    lv_status s = lv_tokenizer_decode(a, two, len, &x);
    if (!s) s = lv_tokenizer_decode(b, two, len, &y);
    if (!s && strcmp(x, y)) {
      *same = false;
      *bad = id;
      *pa = x;
      *pb = y;
      continue;
    }
    free(x);
    free(y);
    if (s) return s;
  }
  return NULL;
}

/* The tokenizer of cfg's input.tokenizer (*tok NULL when it has none). */
static lv_status cfg_tokenizer(const lv_params *cfg, const char *whose, lv_tokenizer **tok) {
  *tok = NULL;
  const lv_params *ip = lv_params_sub(cfg, "input");
  if (!ip || !lv_params_has(ip, "tokenizer") || !lv_params_sub(ip, "tokenizer")) return NULL;
  return lv_status_wrap(lv_tokenizer_create(lv_params_sub(ip, "tokenizer"), tok), "%s input.tokenizer", whose);
}

static lv_status check_tokenizers(const lv_tokenizer *tok, const lv_tokenizer *lm_tok, int64_t vocab) {
  if (tok->num_ids != lm_tok->num_ids)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion: the LM's input.tokenizer has %lld ids, the "
                          "decoder's input.tokenizer %lld: they must be the same vocabulary",
                          (long long)lm_tok->num_ids, (long long)tok->num_ids);
  bool same = true;
  int32_t bad = 0;
  char *pa = NULL, *pb = NULL;
  LV_TRY(same_pieces(tok, lm_tok, vocab, &same, &bad, &pa, &pb));
  if (same) return NULL;
  lv_status s = lv_status_make(LV_ERR_INVALID, "task.decoder.fusion: id %d is \"%s\" in the decoder's "
                               "input.tokenizer but \"%s\" in the LM's: they must be the same vocabulary",
                               bad, pa, pb);
  free(pa);
  free(pb);
  return s;
}

lv_status lv_lm_fusion_check_model(const lv_params *lm_cfg, const char *lm_model) {
  const char *cls = lv_params_is_set(lm_cfg, "task.cls") ? lv_params_str(lm_cfg, "task.cls") : "None";
  if (!strcmp(cls, lv_lm_language_model.cls)) return NULL;
  return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion.lm_model: %s is not a language model (its task.cls is "
                        "%s; expected %s, e.g. lm.bible.RnnLmSpanishSmall)", lm_model, cls,
                        lv_lm_language_model.cls);
}

struct fusion_search {
  lv_lm_search *s;
  int n; /* rows */
};

static lv_status fusion_begin(const lv_scorer *sc, int64_t vocab, int n, void **state) {
  const lv_lm_fusion *f = sc->self;
  *state = NULL;
  lv_lm *lm = lv_lm_task_lm(f->lm);
  LV_ASSERTF(lm && lm->softmax->num_classes == vocab, "shallow fusion: the LM was not checked (vocab %lld)",
             (long long)vocab);
  struct fusion_search *fs = calloc(1, sizeof *fs);
  LV_ASSERT(fs);
  fs->n = n;
  lv_status s = lv_lm_search_begin(lm, f->g, &fs->s);
  if (s) {
    free(fs);
    return lv_status_wrap(s, "shallow fusion");
  }
  *state = fs;
  return NULL;
}

static lv_status fusion_step(void *state, int t, const int32_t *step_ids, const int32_t *parent, float *log_probs,
                             float *atten_probs) {
  (void)atten_probs;
  struct fusion_search *fs = state;
  /* At t = 0 every row starts from <s> (parent[i] = i), as the model's. */
  return lv_status_wrap(lv_lm_search_step(fs->s, fs->n, step_ids, t ? parent : NULL, log_probs), "shallow fusion");
}

static void fusion_end(void *state) {
  struct fusion_search *fs = state;
  if (!fs) return;
  lv_lm_search_end(fs->s);
  free(fs);
}

lv_status lv_lm_fusion_check(const lv_task *t, const lv_params *cfg, const lv_params *lm_cfg, const char *name,
                             lv_lm_fusion *f) {
  if (!t->cls->seq_decode)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion: %s does not decode with lingvoc's beam search "
                          "(search/seq_decode.h), into which the LM is fused", t->cls->cls);
  const int64_t vocab = t->cls->seq_decode->vocab_size((lv_task *)t);
  lv_lm *lm = lv_lm_task_lm(f->lm);
  if (!lm)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion.lm_model: the LM's task is %s, not an "
                          "lm.model.LanguageModel over token ids", f->lm->cls->cls);
  const int64_t lv = lm->softmax->num_classes;
  if (lv != vocab)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion: the LM %s has %lld classes "
                          "(task.lm.softmax.num_classes) but %s's decoder has %lld: shallow fusion adds the "
                          "LM's log-probs id by id, so both must use the target side's vocabulary",
                          lv_params_str(lm_cfg, "model"), (long long)lv, t->cls->cls, (long long)vocab);
  lv_tokenizer *tok = NULL, *lm_tok = NULL;
  lv_status s = cfg_tokenizer(cfg, "the decoder's", &tok);
  if (!s) s = cfg_tokenizer(lm_cfg, "the LM's", &lm_tok);
  if (!s && tok && lm_tok) s = check_tokenizers(tok, lm_tok, vocab);
  /* The LM is fed the search's start token and scores its end token as the ids it was
   * trained with (its tokenizer's <s> and </s>). */
  if (!s && lm_tok && lv_params_has(cfg, "task.decoder.target_sos_id") &&
      lv_params_has(cfg, "task.decoder.target_eos_id")) {
    const int64_t sos = lv_params_int(cfg, "task.decoder.target_sos_id");
    const int64_t eos = lv_params_int(cfg, "task.decoder.target_eos_id");
    if (sos != lm_tok->sos_id || eos != lm_tok->eos_id)
      s = lv_status_make(LV_ERR_INVALID, "task.decoder.fusion: the beam search starts at task.decoder.target_sos_id "
                         "%lld and ends at target_eos_id %lld, but the LM's input.tokenizer has <s> %d and </s> %d: "
                         "they must be the same", (long long)sos, (long long)eos, (int)lm_tok->sos_id,
                         (int)lm_tok->eos_id);
  }
  lv_tokenizer_destroy(tok);
  lv_tokenizer_destroy(lm_tok);
  LV_TRY(s);
  if (!(f->weight >= 0) || f->weight > 1e6)
    return lv_status_make(LV_ERR_INVALID, "task.decoder.fusion.lm_weight = %g: expected a value in [0, 1e6]",
                          f->weight);
  f->scorer = (lv_scorer){.name = name, .weight = f->weight, .self = f, .begin = fusion_begin, .step = fusion_step,
                          .end = fusion_end};
  return NULL;
}
