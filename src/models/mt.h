/* mt.model.TransformerModel (lingvo/tasks/mt/model.py with encoder.TransformerEncoder and
 * decoder.TransformerDecoder): source ids -> token embeddings (x sqrt(d)) + sinusoidal
 * positions -> input dropout -> a stack of TransformerLayers (time-major [S, B, D]); the
 * decoder embeds the target ids the same way and runs causal TransformerLayers with
 * encoder attention, then SimpleFullSoftmax with UniformLabelSmoother targets. No final
 * layer norm (Lingvo's ln_output defaults to False).
 *
 * Variables (task name N): N/enc/token_emb/var_k, N/enc/trans_i/...,
 * N/dec/token_emb/var_k, N/dec/trans_layer_i/..., N/dec/softmax/weight_k,
 * bias_k (position embeddings have none).
 *
 * Metrics, as Lingvo's MTBaseDecoder._ComputeSoftmaxMetrics: `loss` (avg_xent with
 * per_word_avg_loss, weight = sum of target weights; otherwise the batch mean of the
 * per-sequence sums, weight = batch size), `log_pplx` (avg_xent including label smoothing,
 * as Lingvo reports it), and in eval `fraction_of_correct_next_step_preds`.
 *
 * Incremental decoding for beam search (the decoder job: search/seq_decode.h): encode
 * once, then step with per-layer key/value caches. All tensors live in the caller's
 * graph, which must not be reset between the steps of one search. */
#ifndef LV_MODELS_MT_H
#define LV_MODELS_MT_H

#include "layers/full_softmax.h"
#include "models/mt_base.h"
#include "layers/transformer.h"
#include "models/task.h"

extern const lv_task_class lv_mt_transformer_model;

/* Vocabulary size of the decoder's softmax. */
int64_t lv_mt_transformer_vocab_size(const lv_task *t);

/* The encoder: src_ids int32 [B, S], src_paddings [B, S] (1.0 = padded) ->
 * *vecs [S, B, D], *paddings [S, B]. Uses the graph's training flag for dropout. Returns
 * false with the graph's error set. */
bool lv_mt_transformer_encode(lv_task *t, lv_graph *g, lv_tensor *src_ids, lv_tensor *src_paddings,
                              lv_tensor **vecs, lv_tensor **paddings);

/* Teacher-forced decoder log-probs: tgt_ids int32 [B, T], tgt_paddings [B, T] given the
 * encoder's output -> *log_probs [T, B, V]. */
bool lv_mt_transformer_log_probs(lv_task *t, lv_graph *g, lv_tensor *vecs, lv_tensor *paddings,
                                 lv_tensor *tgt_ids, lv_tensor *tgt_paddings, lv_tensor **log_probs);

/* Incremental decoder state of one search over B source sentences. */
typedef struct lv_mt_decode_state {
  lv_task *task;
  lv_graph *g;
  int num_layers;
  int64_t batch;            /* B: source sentences */
  int64_t rows;             /* rows of the last step (N = hyps * B) */
  int step;                 /* steps done */
  lv_atten_packed *packed;  /* [num_layers] encoder output packed per layer */
  /* The self-attention keys/values [step, rows, .], outside the graph; the graph is
   * rewound to `mark` (after the encoder) before each step. */
  lv_tr_step_caches kv;
  int64_t src_len;      /* S: source positions */
  int32_t *src_lens;    /* [batch] unpadded source lengths (host) */
  float *probs_scratch; /* host [rows * S] */
  lv_graph_mark mark;
} lv_mt_decode_state;

/* Packs the encoder output (vecs [S, B, D], paddings [S, B]) for every decoder layer. */
lv_status lv_mt_decode_state_init(lv_task *t, lv_graph *g, lv_tensor *vecs, lv_tensor *paddings,
                                  lv_mt_decode_state *st);
/* One step for n rows (n a multiple of B; row i attends source sentence i % B): the
 * caches are first gathered by parent [n] (rows of the previous step; NULL: row i
 * continues row i, needs the same n), then step_ids [n] are consumed; log_probs [n, V]
 * (host memory) receive log_softmax of the logits. */
lv_status lv_mt_decode_step(lv_mt_decode_state *st, int n, const int32_t *step_ids, const int32_t *parent,
                            float *log_probs);
/* The same, and when atten_probs [n, S] (host) is not NULL, the encoder attention as
 * Lingvo's TransformerDecoder.ExtendStep gives it to beam search (coverage penalty): per
 * layer the head-averaged probs with the weight on the source's last real token (its
 * </s>) removed and renormalized (sum + 1e-6), averaged over the layers. */
lv_status lv_mt_decode_step_probs(lv_mt_decode_state *st, int n, const int32_t *step_ids, const int32_t *parent,
                                  float *log_probs, float *atten_probs);
void lv_mt_decode_state_free(lv_mt_decode_state *st);

#endif
