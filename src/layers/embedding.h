/* Embedding layers (Lingvo layers.SimpleEmbeddingLayer, EmbeddingLayer,
 * PositionalEmbeddingLayer): token ids to vectors, and the Transformer's sinusoidal
 * position signal.
 *
 * - SimpleEmbeddingLayer: one table `wm` [vocab_size, embedding_dim]; a lookup is
 *   lv_op_gather (its backward scatter-adds into wm's gradient, rows of the ids only).
 * - EmbeddingLayer: the table split into n = min(max_num_shards,
 *   ceil(vocab_size * embedding_dim / (1024 * 256))) shards `var_0` ... `var_{n-1}`, each
 *   [ceil(vocab_size / n), embedding_dim], partitioned as tf.nn.embedding_lookup's
 *   default "mod" strategy: id lives in shard id % n at row id / n.
 * - PositionalEmbeddingLayer: [sin(p * inv_t) | cos(p * inv_t)] halves concatenated
 *   (not interleaved), inv_t = min_timescale * exp(-i * log(max/min) / max(1, D/2 - 1)),
 *   positions from 0 (or given). No variables unless trainable_scaling (`scale` [1],
 *   init 0, the signal multiplied by trainable_scaling_init + scale).
 *
 * Generic fprop keys: the embeddings read "ids" (int32 [...]) and write "act"
 * ([..., embedding_dim]); PositionalEmbeddingLayer reads "position" ([B, T] int32 or
 * float32) and writes "act" [B, T, embedding_dim]. */
#ifndef LV_LAYERS_EMBEDDING_H
#define LV_LAYERS_EMBEDDING_H

#include "layers/layer.h"

/* EmbeddingLayer.MIN_PARAMS_PER_SHARD. */
#define LV_EMB_MIN_PARAMS_PER_SHARD (1024 * 256)

typedef struct lv_embedding_layer {
  lv_layer base;
  int64_t vocab_size, embedding_dim;
  int num_shards;          /* 1 for SimpleEmbeddingLayer */
  int64_t ids_per_shard;   /* rows of each shard */
  bool scale_sqrt_depth;
  lv_var **shards;         /* [num_shards]: wm, or var_0 ... var_{n-1} */
} lv_embedding_layer;

lv_params *lv_simple_embedding_layer_params(void);
lv_params *lv_embedding_layer_params(void);
/* The number of shards EmbeddingLayer makes for these params (Lingvo's _actual_shards). */
int lv_embedding_num_shards(int64_t vocab_size, int64_t embedding_dim, int64_t max_num_shards);
/* ids int32 [...] -> [..., embedding_dim] (times sqrt(embedding_dim) with
 * scale_sqrt_depth). An id outside [0, vocab_size) is a graph error naming the layer.
 * Sharded lookups read the ids on the host (a sync point on a device). */
lv_tensor *lv_embedding_layer_lookup(lv_embedding_layer *l, lv_graph *g, lv_tensor *ids);
/* ids int32 [B, T] (with paddings [B, T] of the same shape) -> time-major embeddings
 * [T, B, E]; NULL with the graph's error set. */
lv_tensor *lv_embedding_layer_lookup_time_major(lv_embedding_layer *l, lv_graph *g, lv_tensor *ids,
                                                lv_tensor *paddings);

typedef struct lv_positional_embedding_layer {
  lv_layer base;
  int64_t embedding_dim;
  double min_timescale, max_timescale, trainable_scaling_init;
  lv_var *scale; /* NULL unless trainable_scaling */
} lv_positional_embedding_layer;

lv_params *lv_positional_embedding_layer_params(void);
/* FProp(seq_length): [seq_length, embedding_dim] for positions 0 .. seq_length-1. */
lv_tensor *lv_positional_embedding_fprop(lv_positional_embedding_layer *l, lv_graph *g, int64_t seq_length);
/* FPropWithPosition: position [B, T] (int32 or float32) -> [B, T, embedding_dim]. */
lv_tensor *lv_positional_embedding_fprop_with_position(lv_positional_embedding_layer *l, lv_graph *g,
                                                       lv_tensor *position);

#endif
