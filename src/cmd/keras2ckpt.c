/* keras2ckpt: converts a Keras dataset from its local cache into a TensorFlow checkpoint
 * with tensors x_train, y_train, x_test, y_test (Keras' dtypes and shapes), as Lingvo's
 * keras2ckpt tool does. There is no network access: the data must already be on disk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/file.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/path.h"
#include "io/bundle.h"
#include "io/dataset_files.h"

static const char kUsage[] =
    "Usage: keras2ckpt --dataset=mnist|fashion_mnist [--out=PREFIX] [--source=DIR]\n"
    "Writes the dataset's x_train, y_train, x_test, y_test into the TensorFlow checkpoint\n"
    "PREFIX (default /tmp/NAME/NAME). Reads Keras' cache (~/.keras/datasets), --source, or\n"
    "for fashion_mnist Debian's /usr/share/datasets/fashion-mnist.";

static const char *const kNames[4] = {"x_train", "y_train", "x_test", "y_test"};
static const char *const kIdx[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

typedef struct {
  char tried[8][LV_PATH_MAX];
  int ntried;
} search_log;

static void note(search_log *sl, const char *what) {
  if (sl->ntried < 8) snprintf(sl->tried[sl->ntried++], sizeof sl->tried[0], "%s", what);
}

/* DIR/NAME.gz or DIR/NAME (gzopen reads both): *exists says whether out names a file. */
static lv_status idx_path(const char *dir, const char *name, char *out, size_t n, bool *exists) {
  LV_TRY(lv_path_fmt(out, n, "%s/%s.gz", dir, name));
  *exists = lv_file_exists(out);
  if (*exists) return NULL;
  LV_TRY(lv_path_fmt(out, n, "%s/%s", dir, name));
  *exists = lv_file_exists(out);
  return NULL;
}

/* Loads the four arrays from dir if it holds them (npz name or the IDX files). Sets
 * *found=false, OK, if the directory does not have them. */
static lv_status try_dir(const char *dir, const char *npz, lv_ndarray a[4], bool *found,
                         search_log *sl, char *source, size_t source_n) {
  *found = false;
  char path[LV_PATH_MAX];
  if (npz) {
    LV_TRY(lv_path_fmt(path, sizeof path, "%s/%s", dir, npz));
    note(sl, path);
    if (lv_file_exists(path)) {
      LV_TRY(lv_path_fmt(source, source_n, "%s", path));
      *found = true;
      return lv_npz_read(path, kNames, 4, a);
    }
  }
  char paths[4][LV_PATH_MAX];
  for (int i = 0; i < 4; i++) {
    bool exists = false;
    LV_TRY(idx_path(dir, kIdx[i], paths[i], sizeof paths[i], &exists));
    if (!exists) {
      LV_TRY(lv_path_fmt(path, sizeof path, "%s/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]", dir));
      note(sl, path);
      return NULL;
    }
  }
  LV_TRY(lv_path_fmt(source, source_n, "%s", dir));
  *found = true;
  for (int i = 0; i < 4; i++) {
    lv_status s = lv_idx_read(paths[i], &a[i]);
    if (s) {
      for (int j = 0; j < i; j++) lv_ndarray_free(&a[j]);
      return s;
    }
  }
  return NULL;
}

/* Keras' shapes: images uint8 [N,28,28], labels uint8 [N] with values 0..9. */
static lv_status check_mnist(const lv_ndarray a[4], const char *source) {
  for (int k = 0; k < 2; k++) {
    const lv_ndarray *x = &a[2 * k], *y = &a[2 * k + 1];
    if (x->dtype != LV_U8 || x->shape.rank != 3 || x->shape.d[1] != 28 || x->shape.d[2] != 28)
      return lv_status_make(LV_ERR_CORRUPT, "%s: %s is %s %dD, expected uint8 [N,28,28]", source,
                            kNames[2 * k], lv_dtype_names[x->dtype], x->shape.rank);
    if (y->dtype != LV_U8 || y->shape.rank != 1 || y->shape.d[0] != x->shape.d[0])
      return lv_status_make(LV_ERR_CORRUPT, "%s: %s is %s %dD, expected uint8 [%lld]", source,
                            kNames[2 * k + 1], lv_dtype_names[y->dtype], y->shape.rank,
                            (long long)x->shape.d[0]);
    const uint8_t *lab = y->data;
    for (int64_t i = 0; i < y->shape.d[0]; i++)
      if (lab[i] > 9)
        return lv_status_make(LV_ERR_CORRUPT, "%s: %s[%lld] = %u, expected a class 0..9", source,
                              kNames[2 * k + 1], (long long)i, lab[i]);
  }
  return NULL;
}

static lv_status run(const char *dataset, const char *out, const char *source_dir) {
  bool mnist = strcmp(dataset, "mnist") == 0, fashion = strcmp(dataset, "fashion_mnist") == 0;
  if (strcmp(dataset, "cifar10") == 0)
    return lv_status_make(LV_ERR_INVALID,
                          "--dataset=cifar10 is not supported: Keras caches CIFAR-10 as Python "
                          "pickles (cifar-10-batches-py), which keras2ckpt does not read; "
                          "supported: mnist, fashion_mnist");
  if (!mnist && !fashion)
    return lv_status_make(LV_ERR_INVALID,
                          "--dataset=\"%s\" is unknown; supported: mnist, fashion_mnist", dataset);
  char home[LV_PATH_MAX], def_out[LV_PATH_MAX];
  const char *dirs[4];
  int ndirs = 0;
  /* Keras' cache, ~/.keras/datasets ("~" stays when $HOME is not set). */
  const char *home_env = getenv("HOME");
  if (source_dir && *source_dir) {
    dirs[ndirs++] = source_dir;
  } else {
    LV_TRY(lv_status_wrap(lv_path_fmt(home, sizeof home, "%s/.keras/datasets%s", home_env ? home_env : "~",
                                      mnist ? "" : "/fashion-mnist"), "$HOME"));
    dirs[ndirs++] = home;
    if (fashion) dirs[ndirs++] = "/usr/share/datasets/fashion-mnist";
  }
  if (!out || !*out) {
    LV_TRY(lv_path_fmt(def_out, sizeof def_out, "/tmp/%s/%s", dataset, dataset));
    out = def_out;
  }
  /* "/tmp/" would write /tmp/.index: a prefix must end in a file name. */
  const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
  if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
    return lv_status_make(LV_ERR_INVALID, "--out=%s: expected a checkpoint prefix DIR/NAME (it writes NAME.index and "
                          "NAME.data-00000-of-00001 in DIR), not a directory", out);
  search_log sl = {0};
  lv_ndarray a[4];
  bool found = false;
  char source[LV_PATH_MAX] = "";
  for (int i = 0; i < ndirs && !found; i++)
    LV_TRY(try_dir(dirs[i], mnist ? "mnist.npz" : NULL, a, &found, &sl, source, sizeof source));
  if (!found) {
    char msg[8 * (LV_PATH_MAX + 4)] = "";
    size_t k = 0;
    for (int i = 0; i < sl.ntried; i++)
      k += (size_t)snprintf(msg + k, sizeof msg - k, "\n  %s", sl.tried[i]);
    return lv_status_make(
        LV_ERR_NOT_FOUND,
        "no %s data found; looked for:%s\nkeras2ckpt has no network access. %s",
        dataset, msg,
        fashion ? "Install Debian's copy with `apt-get install dataset-fashion-mnist`, or put "
                  "the four IDX .gz files in ~/.keras/datasets/fashion-mnist/ or --source=DIR."
                : "Copy Keras' mnist.npz into ~/.keras/datasets/ (from a machine where "
                  "tf.keras.datasets.mnist.load_data() ran), or put the four IDX files "
                  "(train-images-idx3-ubyte.gz, ...) in --source=DIR.");
  }
  lv_status s = check_mnist(a, source);
  lv_bundle_writer *w = NULL;
  if (!s) s = lv_bundle_writer_open(out, &w);
  for (int i = 0; i < 4 && !s; i++) s = lv_bundle_writer_add(w, kNames[i], a[i].dtype, &a[i].shape, a[i].data);
  if (w) {
    if (s) lv_bundle_writer_abort(w);
    else s = lv_bundle_writer_finish(w);
  }
  if (!s) {
    printf("read %s\nwrote %s.index and %s.data-00000-of-00001:\n", source, out, out);
    for (int i = 0; i < 4; i++) {
      char sh[128];
      printf("  %s (%s) %s\n", kNames[i], lv_dtype_tf_names[a[i].dtype],
             lv_shape_str(&a[i].shape, sh, sizeof sh));
    }
  }
  for (int i = 0; i < 4; i++) lv_ndarray_free(&a[i]);
  return s;
}

int main(int argc, char **argv) {
  lv_env_init();
  const char *dataset = "", *out = "", *source = "";
  lv_flag flags[] = {
      LV_FLAG_STR("dataset", &dataset, "Keras dataset: mnist, fashion_mnist (cifar10 is not supported)."),
      LV_FLAG_STR("out", &out, "Checkpoint prefix to write (default /tmp/NAME/NAME)."),
      LV_FLAG_STR("source", &source,
                  "Directory holding the data (mnist.npz or the four IDX files); replaces the "
                  "default places."),
  };
  const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  bool help = false;
  lv_status s = lv_flags_parse(flags, (int)LV_ARRAY_LEN(flags), argc, argv, kUsage, &help);
  if (s || help) return lv_status_report(prog, s);
  if (!*dataset)
    return lv_status_report(prog, lv_status_make(LV_ERR_INVALID,
                                                 "--dataset is required (mnist or fashion_mnist); "
                                                 "run with --help"));
  return lv_status_report(prog, run(dataset, out, source));
}
