/* bin/export: one model file (io/model_file.h) from an experiment and a checkpoint, for
 * the library and bin/decoder --model_file on a machine without the experiments or the
 * log directory. bin/trainer --mode=write_inference_graph writes the same file. */
#include <stdio.h>
#include <string.h>

#include "base/env.h"
#include "runners/cli.h"
#include "runners/model_export.h"

static const char kUsage[] =
    "usage: export --model=mt.bible_en_es.TransformerSmall --logdir=DIR [--checkpoint=PREFIX] [--dataset=Test]\n"
    "              [--model_params_override=...] [--quantize=int8|bf16] --out=FILE\n"
    "\n"
    "Writes one model file: the resolved params (as --mode=inspect_params prints them, input file\n"
    "patterns cleared), the tokenizer's vocabulary or SentencePiece model, and the weights of\n"
    "--checkpoint (default: the latest in DIR/train) -- the moving averages where the model keeps\n"
    "them (task.train.ema_decay > 0), as the decoder reads them -- without optimizer slots.\n"
    "--dataset picks whose input params (tokenizer, shapes) the file keeps. Load it with\n"
    "lv_model_load_file, lingvoc.Model(FILE) or bin/decoder --model_file=FILE.\n"
    "--quantize=int8 stores every weight matrix as int8 with a float scale per output column\n"
    "(embedding tables: per row), symmetric; loading it runs the matmuls on the int8 GEMM\n"
    "(LINGVOC_INT8=avx512|avx2|off picks its code path). --quantize=bf16 rounds every weight\n"
    "matrix to bfloat16 instead: half the file, widened to float32 at load (float32 speed and\n"
    "memory, nearly float32 quality).\n";

static lv_status run(int argc, char **argv) {
  lv_cli c;
  lv_cli_init(&c);
  const char *checkpoint = "", *out = "", *dataset = "Test", *quantize = "";
  lv_flag flags[LV_CLI_MAX_FLAGS];
  int n = lv_cli_add_flags(&c, flags, 0);
  flags[n++] = (lv_flag)LV_FLAG_STR("checkpoint", &checkpoint, "The checkpoint prefix (or a directory: its latest; default: the latest in DIR/train).");
  flags[n++] = (lv_flag)LV_FLAG_STR("out", &out, "The model file to write.");
  flags[n++] = (lv_flag)LV_FLAG_STR("quantize", &quantize, "int8: weight matrices as int8 with per-channel scales; bf16: rounded to bfloat16 (default: float32).");
  flags[n++] = (lv_flag)LV_FLAG_STR("dataset", &dataset, "The dataset whose input params (tokenizer, shapes) the file keeps.");
  bool help = false;
  LV_TRY(lv_flags_parse(flags, n, argc, argv, kUsage, &help));
  if (help) return NULL;
  if (!*c.logdir) return lv_status_make(LV_ERR_INVALID, "--logdir is required (the trainer's log directory)");
  if (!*out) return lv_status_make(LV_ERR_INVALID, "--out is required (the model file to write)");
  c.job = "decoder";
  c.mode = "sync";
  lv_params *p = NULL;
  LV_TRY(lv_cli_build_params(&c, flags, n, dataset, &p));
  lv_export_info info;
  lv_status s = lv_export_model_file(p, checkpoint, quantize, out, &info);
  lv_params_free(p);
  if (!s)
    printf("%s: %llu bytes: %d variables (%d from moving averages, %d quantized) of %s (step %lld), %d asset%s\n",
           out, (unsigned long long)info.bytes, info.n_tensors, info.n_averages, info.n_quantized, info.checkpoint,
           (long long)info.step, info.n_assets, info.n_assets == 1 ? "" : "s");
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  return lv_status_report(lv_cli_prog(argv[0]), run(argc, argv));
}
