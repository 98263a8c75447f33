/* Params tree, text format and class registry (reference/lingvo.md §3.5 vectors adapted
 * to a typed C tree). */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_util.h"
#include "base/file.h"
#include "params/params.h"


/* ---- test classes ---- */

static lv_params *softmax_ctor(void) {
  lv_params *p = lv_params_new_cls("test.Softmax");
  lv_params_define_string(p, "name", "", "Layer name.");
  lv_params_define_int(p, "input_dim", 0, "Dimension of the input.");
  lv_params_define_int(p, "num_classes", 0, "Number of classes.");
  lv_params_define_none(p, "chunk_size", LV_PV_INT, "Chunk the logits computation.");
  return p;
}

static lv_params *softmax_b_ctor(void) {
  lv_params *p = lv_params_new_cls("test.SoftmaxB");
  lv_params_define_string(p, "name", "", "Layer name.");
  lv_params_define_int(p, "input_dim", 0, "Dimension of the input.");
  lv_params_define_int(p, "num_classes", 0, "Number of classes.");
  lv_params_define_float(p, "label_smoothing", 0.0, "Uniform label smoothing.");
  return p;
}

static lv_params *fc_ctor(void) {
  lv_params *p = lv_params_new_cls("test.FCLayer");
  lv_params_define_string(p, "name", "", "Layer name.");
  lv_params_define_int(p, "input_dim", 0, "Input depth.");
  lv_params_define_int(p, "output_dim", 0, "Output depth.");
  lv_params_define_string(p, "activation", "RELU", "Activation function.");
  lv_params_define_bool(p, "has_bias", true, "Adds a bias.");
  return p;
}

static lv_params *adam_ctor(void) {
  lv_params *p = lv_params_new_cls("test.Adam");
  lv_params_define_float(p, "beta1", 0.9, "Decay of the first moment.");
  lv_params_define_float(p, "beta2", 0.999, "Decay of the second moment.");
  lv_params_define_float(p, "epsilon", 1e-6, "Added to the denominator.");
  return p;
}

static lv_params *schedule_ctor(void) {
  lv_params *p = lv_params_new_cls("test.PiecewiseConstantSchedule");
  lv_params_define_list(p, "boundaries", NULL, "Step boundaries.");
  lv_params_define_list(p, "values", NULL, "Values between boundaries.");
  return p;
}

static lv_params *model_ctor(void) {
  lv_params *p = lv_params_new_cls("test.ModelV1");
  lv_params_define_string(p, "name", "", "Task name.");
  const int64_t f0[] = {5, 5, 1, 20}, f1[] = {5, 5, 20, 50};
  lv_pvalue *fs = lv_pvalue_list();
  lv_pvalue_append(fs, lv_pvalue_ints(4, f0));
  lv_pvalue_append(fs, lv_pvalue_ints(4, f1));
  lv_params_define_list(p, "filter_shapes", fs, "Conv filter shapes.");
  lv_pvalue *ws = lv_pvalue_list();
  lv_pvalue_append(lv_pvalue_append(ws, lv_pvalue_append(lv_pvalue_append(lv_pvalue_tuple(), lv_pvalue_int(2)),
                                                         lv_pvalue_int(2))),
                   lv_pvalue_append(lv_pvalue_append(lv_pvalue_tuple(), lv_pvalue_int(2)), lv_pvalue_int(2)));
  lv_params_define_list(p, "window_shapes", ws, "Pooling windows.");
  lv_params_define_float(p, "dropout_prob", 0.0, "Dropout after each pool.");
  lv_params_define_params(p, "softmax", softmax_ctor(), "Softmax layer.");
  lv_params_define_params(p, "fc", fc_ctor(), "Fully connected layer.");
  lv_params *train = lv_params_define_params(p, "train", lv_params_new(), "Training params.");
  lv_params_define_float(train, "learning_rate", 0.0, "Learning rate.");
  lv_params_define_int(train, "max_steps", 4000000, "Training max steps.");
  lv_params_define_none(train, "save_interval_steps", LV_PV_INT, "Save every N steps.");
  lv_params_define_none(train, "l2_regularizer_weight", LV_PV_FLOAT, "L2 weight.");
  lv_params_define_params(train, "optimizer", adam_ctor(), "Optimizer.");
  lv_params_define_params(train, "lr_schedule", NULL, "Learning rate schedule.");
  lv_params_define_string(p, "notes", "", "Free text.");
  return p;
}

static lv_params *experiment(void) {
  lv_params *p = lv_params_new();
  lv_params *task;
  lv_status s = lv_registry_instantiate("test.ModelV1", &task);
  ck_assert_ptr_null(s);
  lv_params_define_params(p, "task", task, "The task.");
  lv_params *train = lv_params_define_params(p, "train", lv_params_new(), "Model-level train params.");
  lv_params_define_int(train, "max_steps", 4000000, "Max steps.");
  lv_params_define_float(train, "save_interval_seconds", 600, "Checkpoint cadence.");
  lv_params_define_bool(train, "async_checkpointing", true, "Async saves.");
  lv_params_define_params(p, "input", NULL, "Input generator.");
  return p;
}

/* ---- tree basics ---- */

START_TEST(test_define_get_set) {
  lv_params *p = lv_params_new();
  lv_params_define_int(p, "foo", 1, "An int.");
  lv_params_define_float(p, "rate", 0.5, "A float.");
  lv_params_define_bool(p, "flag", false, "A bool.");
  lv_params_define_string(p, "name", "abc", "A string.");
  lv_params_define_list(p, "dims", lv_pvalue_ints(2, (const int64_t[]){3, 4}), "A list.");
  lv_params *inner = lv_params_define_params(p, "inner", lv_params_new(), "Nested.");
  lv_params_define_int(inner, "bar", 2, "Inner int.");
  ck_assert_int_eq(lv_params_num_keys(p), 6);
  ck_assert_str_eq(lv_params_key(p, 0), "foo");
  ck_assert_str_eq(lv_params_key(p, 5), "inner");
  ck_assert_int_eq(lv_params_int(p, "inner.bar"), 2);
  ck_assert_str_eq(lv_params_desc(p, "inner.bar"), "Inner int.");
  ck_assert_int_eq(lv_params_kind(p, "dims"), LV_PV_LIST);
  ck_assert_int_eq(lv_params_kind(p, "inner"), LV_PV_PARAMS);
  ck_assert_ptr_eq(lv_params_sub(p, "inner"), inner);

  EXPECT_OK(lv_params_set_int(p, "inner.bar", 7));
  EXPECT_OK(lv_params_set_float(p, "rate", 0.25));
  EXPECT_OK(lv_params_set_int(p, "rate", 3)); /* an int is fine for a float */
  EXPECT_OK(lv_params_set_bool(p, "flag", true));
  EXPECT_OK(lv_params_set_string(p, "name", "xyz"));
  EXPECT_OK(lv_params_set_list(p, "dims", lv_pvalue_floats(1, (const double[]){1.5})));
  ck_assert_int_eq(lv_params_int(p, "inner.bar"), 7);
  ck_assert_double_eq(lv_params_float(p, "rate"), 3.0);
  ck_assert_int_eq(lv_params_kind(p, "rate"), LV_PV_FLOAT);
  ck_assert(lv_params_bool(p, "flag"));
  ck_assert_str_eq(lv_params_str(p, "name"), "xyz");
  double d[4];
  ck_assert_int_eq(lv_pvalue_to_floats(lv_params_list(p, "dims"), d, 4), 1);
  ck_assert_double_eq(d[0], 1.5);
  int64_t iv[4];
  ck_assert_int_eq(lv_pvalue_to_ints(lv_params_list(p, "dims"), iv, 4), -1);

  EXPECT_ERR(lv_params_set_float(p, "foo", 2.5), LV_ERR_INVALID, "foo: expected int, found float 2.5");
  EXPECT_ERR(lv_params_set_string(p, "flag", "yes"), LV_ERR_INVALID, "flag: expected bool, found string 'yes'");
  EXPECT_ERR(lv_params_set_int(p, "inner", 1), LV_ERR_INVALID, "inner: expected params");
  EXPECT_ERR(lv_params_set_none(p, "foo"), LV_ERR_INVALID, "foo: expected int, found None");
  EXPECT_ERR(lv_params_set_params(p, "foo", lv_params_new()), LV_ERR_INVALID, "foo: expected int");
  ck_assert_int_eq(lv_params_int(p, "foo"), 1);

  ck_assert(lv_params_has(p, "inner.bar"));
  ck_assert(!lv_params_has(p, "inner.baz"));
  ck_assert(!lv_params_has(p, "foo.bar"));
  lv_params_define_none(p, "maybe", LV_PV_FLOAT, "Nullable float.");
  ck_assert(lv_params_has(p, "maybe"));
  ck_assert(!lv_params_is_set(p, "maybe"));
  EXPECT_OK(lv_params_set_int(p, "maybe", 2));
  ck_assert(lv_params_is_set(p, "maybe"));
  ck_assert_double_eq(lv_params_float(p, "maybe"), 2.0);
  EXPECT_OK(lv_params_set_none(p, "maybe"));
  ck_assert(!lv_params_is_set(p, "maybe"));

  EXPECT_OK(lv_params_set_params(p, "inner", NULL));
  ck_assert(!lv_params_is_set(p, "inner"));
  ck_assert_ptr_null(lv_params_sub(p, "inner"));
  lv_params_free(p);
}
END_TEST

START_TEST(test_similar_keys) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "activation", "RELU", "Act.");
  lv_params_define_list(p, "activations", NULL, "Acts.");
  lv_params_define_int(p, "cheesecake", 0, "Cake.");
  lv_params_define_int(p, "tofu", 0, "Tofu.");
  lv_params *inner = lv_params_define_params(p, "inner", lv_params_new(), "Inner.");
  lv_params_define_int(inner, "alpha", 1, "Alpha.");
  EXPECT_ERR(lv_params_set_int(p, "actuvation", 1), LV_ERR_INVALID,
             "actuvation (did you mean: [activation,activations])");
  EXPECT_ERR(lv_params_set_int(p, "zzzzzz", 1), LV_ERR_INVALID,
             "zzzzzz (keys are ['activation', 'activations', 'cheesecake', 'inner', 'tofu'])");
  /* Missing leaf of a nested tree: the message starts with the dotted name. */
  EXPECT_ERR(lv_params_set_int(p, "inner.gamma", 5), LV_ERR_INVALID, "unknown key inner.gamma (keys are ['alpha'])");
  EXPECT_ERR(lv_params_set_int(p, "innr.alpha", 5), LV_ERR_INVALID, "unknown key innr (did you mean: [inner])");
  EXPECT_ERR(lv_params_set_int(p, "tofu.alpha", 5), LV_ERR_INVALID, "tofu is of type int, not a nested params (in tofu.alpha)");
  EXPECT_OK(lv_params_set_params(p, "inner", NULL));
  EXPECT_ERR(lv_params_set_int(p, "inner.alpha", 5), LV_ERR_INVALID, "inner is None");
  lv_params_free(p);
}
END_TEST

static const char *const legal_names[] = {"foo_bar", "foo9", "_foo", "cls"};
static const char *const illegal_names[] = {"", "Foo", "1foo", "foo$", "foo.bar"};

START_TEST(test_legal_names) {
  lv_params *p = lv_params_new();
  for (size_t i = 0; i < sizeof legal_names / sizeof *legal_names; i++) lv_params_define_int(p, legal_names[i], 1, "x");
  ck_assert_int_eq(lv_params_num_keys(p), 4);
  lv_params_free(p);
}
END_TEST

/* The abort tests below expect SIGABRT; the assertion text would only clutter the log. */
static void quiet(void) { ck_assert_ptr_nonnull(freopen("/dev/null", "w", stderr)); }

/* Each illegal name is a programmer error: the process aborts (Check sees SIGABRT). */
START_TEST(test_illegal_name_aborts) {
  quiet();
  lv_params *p = lv_params_new();
  lv_params_define_int(p, illegal_names[_i], 1, "x");
}
END_TEST

START_TEST(test_redefine_aborts) {
  quiet();
  lv_params *p = lv_params_new();
  lv_params_define_int(p, "foo", 1, "x");
  lv_params_define_float(p, "foo", 1, "x");
}
END_TEST

START_TEST(test_missing_description_aborts) {
  quiet();
  lv_params *p = lv_params_new();
  lv_params_define_int(p, "foo", 1, "");
}
END_TEST

START_TEST(test_get_undefined_aborts) {
  quiet();
  lv_params *p = lv_params_new();
  lv_params_define_int(p, "foo", 1, "x");
  (void)lv_params_int(p, "bar");
}
END_TEST

START_TEST(test_get_none_aborts) {
  quiet();
  lv_params *p = lv_params_new();
  lv_params_define_none(p, "foo", LV_PV_INT, "x");
  (void)lv_params_int(p, "foo");
}
END_TEST

START_TEST(test_define_frozen_aborts) {
  quiet();
  lv_params *p = lv_params_new();
  lv_params_freeze(p);
  lv_params_define_int(p, "foo", 1, "x");
}
END_TEST

START_TEST(test_freeze_copy_equal_delete) {
  lv_params *p = experiment();
  lv_params *c = lv_params_copy(p);
  ck_assert(lv_params_equal(p, c));
  EXPECT_OK(lv_params_set_int(c, "task.softmax.num_classes", 10));
  ck_assert(!lv_params_equal(p, c));
  ck_assert_int_eq(lv_params_int(p, "task.softmax.num_classes"), 0); /* copies are independent */
  EXPECT_OK(lv_params_set_int(c, "task.softmax.num_classes", 0));
  ck_assert(lv_params_equal(p, c));
  /* list values too */
  lv_pvalue *l = lv_pvalue_copy(lv_params_list(c, "task.filter_shapes"));
  EXPECT_OK(lv_params_set_list(p, "task.filter_shapes", lv_pvalue_ints(2, (const int64_t[]){1, 2})));
  ck_assert(lv_pvalue_equal(lv_params_list(c, "task.filter_shapes"), l));
  ck_assert(!lv_params_equal(p, c));
  EXPECT_OK(lv_params_set_list(p, "task.filter_shapes", l));
  ck_assert(lv_params_equal(p, c));
  /* a tuple is not a list, as in Python */
  lv_pvalue *t = lv_pvalue_append(lv_pvalue_append(lv_pvalue_tuple(), lv_pvalue_int(1)), lv_pvalue_int(2));
  lv_pvalue *li = lv_pvalue_ints(2, (const int64_t[]){1, 2});
  ck_assert(!lv_pvalue_equal(t, li));
  lv_pvalue_free(t);
  lv_pvalue_free(li);
  /* None vs set */
  EXPECT_OK(lv_params_set_int(c, "task.train.save_interval_steps", 100));
  ck_assert(!lv_params_equal(p, c));
  EXPECT_OK(lv_params_set_none(c, "task.train.save_interval_steps"));
  ck_assert(lv_params_equal(p, c));

  lv_params_freeze(p);
  ck_assert(lv_params_is_frozen(p));
  ck_assert(lv_params_is_frozen(lv_params_sub(p, "task.softmax"))); /* recursive */
  EXPECT_ERR(lv_params_set_int(p, "task.softmax.num_classes", 3), LV_ERR_INVALID, "immutable");
  EXPECT_ERR(lv_params_set_int(lv_params_sub(p, "task"), "softmax.num_classes", 3), LV_ERR_INVALID, "immutable");
  EXPECT_ERR(lv_params_set_none(p, "task.train.save_interval_steps"), LV_ERR_INVALID, "immutable");
  EXPECT_ERR(lv_params_from_text(p, "train.max_steps : 3", "x"), LV_ERR_INVALID, "immutable");
  EXPECT_ERR(lv_params_set_class(p, "task.softmax", "test.SoftmaxB"), LV_ERR_INVALID, "immutable");
  /* a frozen subtree of a mutable tree stays read-only through every path */
  lv_params *half = experiment();
  lv_params_freeze(lv_params_sub(half, "task.softmax"));
  EXPECT_ERR(lv_params_from_text(half, "task.softmax.num_classes : 3", "t"), LV_ERR_INVALID, "t:1:", "immutable");
  EXPECT_ERR(lv_params_from_text(half, "task.softmax.cls : test.SoftmaxB", "t"), LV_ERR_INVALID, "immutable");
  /* the slot belongs to the mutable parent: emptying it is allowed */
  EXPECT_OK(lv_params_from_text(half, "task.softmax : NoneType", "t"));
  EXPECT_OK(lv_params_from_text(half, "task.name : ok", "t"));
  lv_params_free(half);
  lv_params *pc = lv_params_copy(p);
  ck_assert(!lv_params_is_frozen(pc));
  ck_assert(lv_params_equal(p, pc));
  EXPECT_OK(lv_params_set_int(pc, "task.softmax.num_classes", 3));

  lv_params_delete(c, "task.notes");
  ck_assert(!lv_params_has(c, "task.notes"));
  ck_assert(!lv_params_equal(p, c));
  lv_params_delete(c, "input");
  ck_assert_int_eq(lv_params_num_keys(c), 2);
  lv_params_free(p);
  lv_params_free(c);
  lv_params_free(pc);
}
END_TEST

/* ---- ToText ---- */

static lv_params *totext_tree(void) {
  lv_params *outer = lv_params_new();
  lv_params_define_int(outer, "foo", 1, "d");
  lv_params *inner = lv_params_new();
  lv_params_define_float(inner, "bar", 2.71, "d");
  lv_params_define_string(inner, "baz", "hello", "d");
  lv_params_define_params(outer, "inner", inner, "d");
  lv_params_define_bool(outer, "tau", false, "d");
  lv_params_define_list(outer, "seqlen", lv_pvalue_ints(3, (const int64_t[]){10, 20, 30}), "d");
  lv_params_define_list(outer, "tuple", lv_pvalue_append(lv_pvalue_append(lv_pvalue_tuple(), lv_pvalue_int(1)), NULL),
                        "d");
  lv_params_define_none(outer, "optional_bool", LV_PV_BOOL, "d");
  lv_pvalue *nested = lv_pvalue_list();
  lv_pvalue_append(nested, lv_pvalue_ints(4, (const int64_t[]){5, 5, 1, 20}));
  lv_pvalue_append(nested, lv_pvalue_ints(4, (const int64_t[]){5, 5, 20, 50}));
  lv_params_define_list(outer, "nested_lists", nested, "d");
  lv_params_define_list(outer, "empty_list", NULL, "d");
  lv_params_define_float(outer, "scale", 1e-4, "d");
  lv_params_define_float(outer, "third", 3.0, "d");
  lv_params_define_params(outer, "none_params", NULL, "d");
  lv_params_define_params(outer, "empty_params", lv_params_new(), "d");
  return outer;
}

START_TEST(test_to_text) {
  lv_params *outer = totext_tree();
  char *t = lv_params_to_text(outer);
  ck_assert_str_eq(t,
                   "empty_list : []\n"
                   "foo : 1\n"
                   "inner.bar : 2.71\n"
                   "inner.baz : 'hello'\n"
                   "nested_lists : [[5, 5, 1, 20], [5, 5, 20, 50]]\n"
                   "none_params : NoneType\n"
                   "optional_bool : NoneType\n"
                   "scale : 0.0001\n"
                   "seqlen : [10, 20, 30]\n"
                   "tau : False\n"
                   "third : 3.0\n"
                   "tuple : (1, None)\n");
  free(t);

  /* hyperparams_test testToText's FromText part, adapted. */
  EXPECT_OK(lv_params_from_text(outer,
                                "  inner.baz : 'world'\n"
                                "# foo : 123\n"
                                "  optional_bool : true\n"
                                "  seqlen : [1, 2.0, '3', [4]]\n"
                                "  tau : true\n"
                                "  tuple : (2, 3)\n",
                                "test"));
  t = lv_params_to_text(outer);
  ck_assert_str_eq(t,
                   "empty_list : []\n"
                   "foo : 1\n"
                   "inner.bar : 2.71\n"
                   "inner.baz : 'world'\n"
                   "nested_lists : [[5, 5, 1, 20], [5, 5, 20, 50]]\n"
                   "none_params : NoneType\n"
                   "optional_bool : True\n"
                   "scale : 0.0001\n"
                   "seqlen : [1, 2.0, '3', [4]]\n"
                   "tau : True\n"
                   "third : 3.0\n"
                   "tuple : (2, 3)\n");
  /* and the text loads back into a fresh default tree to an equal tree */
  lv_params *fresh = totext_tree();
  ck_assert(!lv_params_equal(fresh, outer));
  EXPECT_OK(lv_params_from_text(fresh, t, "dump"));
  ck_assert(lv_params_equal(fresh, outer));
  free(t);
  lv_params_free(fresh);
  lv_params_free(outer);
}
END_TEST

static lv_params *escaping_tree(void) {
  lv_params *p = lv_params_new();
  lv_params_define_string(p, "bs_end_quote", "Single\\", "d");
  lv_params_define_string(p, "embedded_newlines", "Split\nAcross\nLines", "d");
  lv_params_define_string(p, "empty", "", "d");
  lv_params_define_string(p, "empty_first_line", "\nNext", "d");
  lv_params_define_string(p, "end_escape_quote", "\"\"Split'\nLine", "d");
  lv_params_define_string(p, "escaping_single", "In \"quotes\"", "d");
  lv_params_define_string(p, "escaping_double", "In \\'quotes'", "d");
  return p;
}

START_TEST(test_string_escaping) {
  lv_params *p = escaping_tree();
  char *t = lv_params_to_text(p);
  ck_assert_str_eq(t,
                   "bs_end_quote : 'Single\\\\'\n"
                   "embedded_newlines : 'Split\nAcross\nLines'\n"
                   "empty : ''\n"
                   "empty_first_line : '\nNext'\n"
                   "end_escape_quote : '\"\"Split\\'\nLine'\n"
                   "escaping_double : \"In \\\\'quotes'\"\n"
                   "escaping_single : 'In \"quotes\"'\n");
  lv_params *q = lv_params_new();
  const char *names[] = {"bs_end_quote", "embedded_newlines", "empty", "empty_first_line",
                         "end_escape_quote", "escaping_single", "escaping_double"};
  for (int i = 0; i < 7; i++) lv_params_define_string(q, names[i], "x", "d");
  EXPECT_OK(lv_params_from_text(q, t, "escaping"));
  for (int i = 0; i < 7; i++) ck_assert_str_eq(lv_params_str(q, names[i]), lv_params_str(p, names[i]));
  ck_assert(lv_params_equal(p, q));
  free(t);
  lv_params_free(p);
  lv_params_free(q);
}
END_TEST

static void check_repr(double v, const char *want) {
  lv_pvalue *x = lv_pvalue_float(v);
  char *t = lv_pvalue_to_text(x);
  ck_assert_msg(strcmp(t, want) == 0, "repr(%.17g) = %s, want %s", v, t, want);
  free(t);
  lv_pvalue_free(x);
}

START_TEST(test_float_repr) {
  check_repr(1e-4, "0.0001");
  check_repr(3.0, "3.0");
  check_repr(2.71, "2.71");
  check_repr(0.1, "0.1");
  check_repr(0.1 + 0.2, "0.30000000000000004");
  check_repr(1.0 / 3, "0.3333333333333333");
  check_repr(1e-5, "1e-05");
  check_repr(1.5e-7, "1.5e-07");
  check_repr(1e16, "1e+16");
  check_repr(1234567890123456.0, "1234567890123456.0");
  check_repr(123456789012345678.0, "1.2345678901234568e+17");
  check_repr(100.0, "100.0");
  check_repr(4e6, "4000000.0");
  check_repr(0.0, "0.0");
  check_repr(-0.0, "-0.0");
  check_repr(-2.5, "-2.5");
  check_repr(1.5e300, "1.5e+300");
  check_repr(5e-324, "5e-324");
  check_repr(1.7976931348623157e308, "1.7976931348623157e+308");
  check_repr(INFINITY, "inf");
  check_repr(-INFINITY, "-inf");
  check_repr(NAN, "nan");
  /* every finite double reads back exactly */
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double d;
    memcpy(&d, &x, sizeof d);
    if (!isfinite(d)) continue;
    lv_pvalue *v = lv_pvalue_float(d);
    char *t = lv_pvalue_to_text(v);
    ck_assert_msg(strtod(t, NULL) == d, "%s does not read back as %.17g", t, d);
    free(t);
    lv_pvalue_free(v);
  }
}
END_TEST

START_TEST(test_list_text) {
  lv_pvalue *l = lv_pvalue_list();
  lv_pvalue_append(l, lv_pvalue_string("it's"));
  lv_pvalue_append(l, lv_pvalue_string("a\nb\\"));
  lv_pvalue_append(l, lv_pvalue_append(lv_pvalue_tuple(), lv_pvalue_float(0.5)));
  lv_pvalue_append(l, lv_pvalue_tuple());
  lv_pvalue_append(l, lv_pvalue_bool(true));
  lv_pvalue_append(l, NULL);
  char *t = lv_pvalue_to_text(l);
  ck_assert_str_eq(t, "[\"it's\", 'a\\nb\\\\', (0.5,), (), True, None]");
  lv_params *p = lv_params_new();
  lv_params_define_list(p, "l", NULL, "d");
  char *line = NULL;
  ck_assert_int_ge(asprintf(&line, "l : %s", t), 0);
  EXPECT_OK(lv_params_from_text(p, line, "t"));
  ck_assert(lv_pvalue_equal(lv_params_list(p, "l"), l));
  ck_assert_ptr_null(lv_pvalue_at(lv_params_list(p, "l"), 5));
  free(line);
  free(t);
  lv_pvalue_free(l);

  EXPECT_ERR(lv_params_from_text(p, "l : [1, 0x10]", "t"), LV_ERR_INVALID, "malformed number at column 6");
  EXPECT_OK(lv_params_from_text(p, "l : [1_000, -2, +3.5e1, .5, 5., 'x;y']; ", "t"));
  t = lv_pvalue_to_text(lv_params_list(p, "l"));
  ck_assert_str_eq(t, "[1000, -2, 35.0, 0.5, 5.0, 'x;y']");
  free(t);
  EXPECT_ERR(lv_params_from_text(p, "l : (7)", "t"), LV_ERR_INVALID, "l: expected list, found '(7)'");
  EXPECT_OK(lv_params_from_text(p, "l : (7,)", "t"));
  ck_assert(lv_pvalue_is_tuple(lv_params_list(p, "l")));
  ck_assert_int_eq(lv_pvalue_len(lv_params_list(p, "l")), 1);
  EXPECT_ERR(lv_params_from_text(p, "l : [1, 2", "src"), LV_ERR_INVALID,
             "src:1: l: expected list, found '[1, 2': expected ',' or ']' at column 6");
  EXPECT_ERR(lv_params_from_text(p, "l : {'a': 1}", "src"), LV_ERR_INVALID, "dicts are not supported");
  EXPECT_ERR(lv_params_from_text(p, "l : 5", "src"), LV_ERR_INVALID, "src:1: l: expected list, found '5'");
  EXPECT_ERR(lv_params_from_text(p, "l : [1 2]", "src"), LV_ERR_INVALID, "expected ',' or ']'");
  EXPECT_ERR(lv_params_from_text(p, "l : ['abc]", "src"), LV_ERR_INVALID, "unterminated string");
  EXPECT_ERR(lv_params_from_text(p, "l : [12abc]", "src"), LV_ERR_INVALID, "malformed number");
  EXPECT_ERR(lv_params_from_text(p, "l : [1, 99999999999999999999]", "src"), LV_ERR_INVALID, "int64 range");
  EXPECT_ERR(lv_params_from_text(p, "l : NoneType", "src"), LV_ERR_INVALID, "l: expected list, found None");
  lv_params_free(p);
}
END_TEST

/* ---- FromText rules ---- */

START_TEST(test_from_text_rules) {
  lv_params *p = lv_params_new();
  lv_params_define_bool(p, "b", false, "d");
  lv_params_define_int(p, "i", 0, "d");
  lv_params_define_float(p, "f", 0, "d");
  lv_params_define_string(p, "s", "", "d");
  lv_params_define_none(p, "scale", LV_PV_FLOAT, "d");
  lv_params_define_none(p, "ns", LV_PV_STRING, "d");

  /* bool: anything but '', 'False' and 'false' is True (Lingvo's rule). */
  const char *truthy[] = {"True", "true", "1", "yes", "0", "'False'"};
  for (size_t k = 0; k < LV_ARRAY_LEN(truthy); k++) {
    char line[64];
    EXPECT_OK(lv_params_from_text(p, "b : False", "t"));
    snprintf(line, sizeof line, "b : %s", truthy[k]);
    EXPECT_OK(lv_params_from_text(p, line, "t"));
    ck_assert_msg(lv_params_bool(p, "b"), "%s should read as True", truthy[k]);
  }
  const char *falsy[] = {"False", "false", ""};
  for (size_t k = 0; k < LV_ARRAY_LEN(falsy); k++) {
    char line[64];
    EXPECT_OK(lv_params_from_text(p, "b : True", "t"));
    snprintf(line, sizeof line, "b : %s", falsy[k]);
    EXPECT_OK(lv_params_from_text(p, line, "t"));
    ck_assert_msg(!lv_params_bool(p, "b"), "'%s' should read as False", falsy[k]);
  }

  /* int: Python int() */
  EXPECT_OK(lv_params_from_text(p, "i : -42", "t"));
  ck_assert_int_eq(lv_params_int(p, "i"), -42);
  EXPECT_OK(lv_params_from_text(p, "i : 1_000_000", "t"));
  ck_assert_int_eq(lv_params_int(p, "i"), 1000000);
  EXPECT_ERR(lv_params_from_text(p, "i : 2.5", "cmd"), LV_ERR_INVALID, "cmd:1: i: expected int, found '2.5'");
  EXPECT_ERR(lv_params_from_text(p, "i : abc", "cmd"), LV_ERR_INVALID, "cmd:1: i: expected int, found 'abc'");
  EXPECT_ERR(lv_params_from_text(p, "i : 4e6", "cmd"), LV_ERR_INVALID, "expected int, found '4e6'");
  EXPECT_ERR(lv_params_from_text(p, "i :", "cmd"), LV_ERR_INVALID, "expected int, found ''");
  EXPECT_ERR(lv_params_from_text(p, "i : 1__0", "cmd"), LV_ERR_INVALID, "expected int");
  EXPECT_ERR(lv_params_from_text(p, "i : 99999999999999999999", "cmd"), LV_ERR_INVALID, "int64 range");
  ck_assert_int_eq(lv_params_int(p, "i"), 1000000);

  /* float: Python float() */
  EXPECT_OK(lv_params_from_text(p, "f : 1", "t"));
  ck_assert_double_eq(lv_params_float(p, "f"), 1.0);
  EXPECT_OK(lv_params_from_text(p, "f:3e-4", "t"));
  ck_assert_double_eq(lv_params_float(p, "f"), 3e-4);
  EXPECT_OK(lv_params_from_text(p, "f : -inf", "t"));
  ck_assert(isinf(lv_params_float(p, "f")));
  EXPECT_ERR(lv_params_from_text(p, "f : abc", "t"), LV_ERR_INVALID, "f: expected float, found 'abc'");
  EXPECT_ERR(lv_params_from_text(p, "f : 0x10", "t"), LV_ERR_INVALID, "f: expected float");

  /* 'scale=2.0' is not key : value; 'scale:2.0' is */
  EXPECT_ERR(lv_params_from_text(p, "scale=2.0", "t"), LV_ERR_INVALID,
             "t:1: expected a line in <key> : <value> format, found 'scale=2.0' (use ':'");
  EXPECT_OK(lv_params_from_text(p, "scale:2.0", "t"));
  ck_assert_double_eq(lv_params_float(p, "scale"), 2.0);
  /* a None default of a declared kind reads that kind (Lingvo needs type_overrides) */
  EXPECT_OK(lv_params_from_text(p, "scale : NoneType", "t"));
  ck_assert(!lv_params_is_set(p, "scale"));
  EXPECT_OK(lv_params_from_text(p, "scale : 1.0", "t"));
  ck_assert_double_eq(lv_params_float(p, "scale"), 1.0);
  EXPECT_ERR(lv_params_from_text(p, "f : NoneType", "t"), LV_ERR_INVALID, "f: expected float, found None");
  /* a string param reads NoneType as text unless it is nullable */
  EXPECT_OK(lv_params_from_text(p, "s : NoneType\nns : NoneType", "t"));
  ck_assert_str_eq(lv_params_str(p, "s"), "NoneType");
  ck_assert(!lv_params_is_set(p, "ns"));

  /* strings: quoted or literal text; '' and an empty value */
  EXPECT_OK(lv_params_from_text(p, "s : hello world ", "t"));
  ck_assert_str_eq(lv_params_str(p, "s"), "hello world");
  EXPECT_OK(lv_params_from_text(p, "s : \"it's\"", "t"));
  ck_assert_str_eq(lv_params_str(p, "s"), "it's");
  EXPECT_OK(lv_params_from_text(p, "s :", "t"));
  ck_assert_str_eq(lv_params_str(p, "s"), "");
  EXPECT_OK(lv_params_from_text(p, "s : '2.1'", "t"));
  ck_assert_str_eq(lv_params_str(p, "s"), "2.1");
  EXPECT_OK(lv_params_from_text(p, "s : /path/to:file", "t")); /* split on the first ':' only */
  ck_assert_str_eq(lv_params_str(p, "s"), "/path/to:file");

  /* comments, blank lines, ';' separators (not inside quotes) */
  EXPECT_OK(lv_params_from_text(p, "\n# i : 5\n\n   # f : 9\ni : 7;  f : 0.5 ;s : 'a;b' ; \n", "t"));
  ck_assert_int_eq(lv_params_int(p, "i"), 7);
  ck_assert_double_eq(lv_params_float(p, "f"), 0.5);
  ck_assert_str_eq(lv_params_str(p, "s"), "a;b");
  /* a quote inside a bare value is a character: the ';' after it still separates */
  EXPECT_OK(lv_params_from_text(p, "s : it's; i : 9", "t"));
  ck_assert_str_eq(lv_params_str(p, "s"), "it's");
  ck_assert_int_eq(lv_params_int(p, "i"), 9);

  /* multi-line strings, with line numbers kept right after them */
  EXPECT_ERR(lv_params_from_text(p, "s : 'first\nsecond\n  third'\ni : x\n", "multi"), LV_ERR_INVALID,
             "multi:4: i: expected int, found 'x'");
  ck_assert_str_eq(lv_params_str(p, "s"), "first\nsecond\n  third");
  EXPECT_ERR(lv_params_from_text(p, "i : 1\ns : 'never closed\n", "u"), LV_ERR_INVALID,
             "u:2: s: unterminated string");
  EXPECT_ERR(lv_params_from_text(p, "s : 'a' junk", "u"), LV_ERR_INVALID, "u:1: s: unexpected text after the closing quote");
  lv_params_free(p);
}
END_TEST

START_TEST(test_from_text_errors_collected) {
  lv_params *p = experiment();
  lv_params *orig = lv_params_copy(p);
  lv_status s = lv_params_from_text(p,
                                    "task.SOME_UNKNOWN_PARAM : 10\n"
                                    "task.softmax.num_clases : 10\n"
                                    "train.max_steps : 1e3\n"
                                    "task.train.learning_rate : fast\n"
                                    "task.name : 'ok'\n"
                                    "task.SOME_UNKNOWN_PARAM=10\n"
                                    "task.train.optimizer.beta1 : 0.5\n",
                                    "--model_params_override");
  ck_assert_ptr_nonnull(s);
  const char *m = lv_status_msg(s);
  ck_assert_msg(strstr(m, "5 errors:"), "%s", m);
  /* listed in line order, though the malformed line 6 is found in an earlier pass */
  ck_assert_msg(strstr(m, ":4: ") < strstr(m, ":6: ") && strstr(m, ":1: ") < strstr(m, ":2: "), "%s", m);
  ck_assert_msg(strstr(m, "--model_params_override:1: unknown key task.SOME_UNKNOWN_PARAM"), "%s", m);
  ck_assert_msg(strstr(m, "--model_params_override:2: unknown key task.softmax.num_clases (did you mean: [num_classes])"),
                "%s", m);
  ck_assert_msg(strstr(m, "--model_params_override:3: train.max_steps: expected int, found '1e3'"), "%s", m);
  ck_assert_msg(strstr(m, "--model_params_override:4: task.train.learning_rate: expected float, found 'fast'"), "%s",
                m);
  ck_assert_msg(strstr(m, "--model_params_override:6: expected a line in <key> : <value> format"), "%s", m);
  lv_status_free(s);
  /* the good lines were applied */
  ck_assert_str_eq(lv_params_str(p, "task.name"), "ok");
  ck_assert_double_eq(lv_params_float(p, "task.train.optimizer.beta1"), 0.5);
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), lv_params_int(orig, "train.max_steps"));
  lv_params_free(p);
  lv_params_free(orig);
}
END_TEST

/* ---- registry and cls ---- */

START_TEST(test_registry) {
  const char *names[32];
  int n = lv_registry_names(names, 32);
  ck_assert_int_eq(n, 7);
  ck_assert_str_eq(names[0], "test.Adam");
  for (int i = 1; i < n; i++) ck_assert_int_lt(strcmp(names[i - 1], names[i]), 0);
  ck_assert_ptr_eq(lv_registry_find("test.FCLayer"), fc_ctor);
  ck_assert_ptr_null(lv_registry_find("FCLayer"));
  lv_params *p = NULL;
  EXPECT_OK(lv_registry_instantiate("test.FCLayer", &p));
  ck_assert_str_eq(lv_params_str(p, "cls"), "test.FCLayer");
  ck_assert_str_eq(lv_params_key(p, 0), "cls");
  lv_params_free(p);
  EXPECT_ERR(lv_registry_instantiate("test.FCLayr", &p), LV_ERR_NOT_FOUND,
             "unknown class \"test.FCLayr\" (did you mean: [test.FCLayer])");
  EXPECT_ERR(lv_registry_instantiate("Zebra", &p), LV_ERR_NOT_FOUND, "registered classes: [test.Adam,test.FCLayer");
}
END_TEST

START_TEST(test_cls_replacement) {
  lv_params *p = experiment();
  EXPECT_OK(lv_params_set_int(p, "task.softmax.num_classes", 10));
  /* same class: nothing changes */
  EXPECT_OK(lv_params_set_class(p, "task.softmax", "test.Softmax"));
  ck_assert_int_eq(lv_params_int(p, "task.softmax.num_classes"), 10);
  /* another class: the subtree becomes its defaults */
  EXPECT_OK(lv_params_set_class(p, "task.softmax", "test.SoftmaxB"));
  ck_assert_int_eq(lv_params_int(p, "task.softmax.num_classes"), 0);
  ck_assert(lv_params_has(p, "task.softmax.label_smoothing"));
  ck_assert(!lv_params_has(p, "task.softmax.chunk_size"));
  /* a None slot gets the class's defaults */
  ck_assert(!lv_params_is_set(p, "task.train.lr_schedule"));
  EXPECT_OK(lv_params_set_class(p, "task.train.lr_schedule", "test.PiecewiseConstantSchedule"));
  ck_assert(lv_params_has(p, "task.train.lr_schedule.boundaries"));
  EXPECT_ERR(lv_params_set_class(p, "task.softmax", "test.Sofmax"), LV_ERR_NOT_FOUND,
             "task.softmax.cls: unknown class \"test.Sofmax\" (did you mean: [test.Softmax,test.SoftmaxB])");
  EXPECT_ERR(lv_params_set_class(p, "train", "test.Adam"), LV_ERR_INVALID, "unknown key train.cls");
  EXPECT_ERR(lv_params_set_class(p, "task.name", "test.Adam"), LV_ERR_INVALID, "task.name is of type string");

  /* in text, cls lines apply first whatever their position (ToText sorts them after
   * keys like task.softmax.input_dim) */
  EXPECT_OK(lv_params_from_text(p,
                                "task.softmax.input_dim : 300\n"
                                "task.softmax.chunk_size : 16\n"
                                "task.softmax.cls : 'test.Softmax'\n"
                                "task.fc.cls : test.FCLayer\n"
                                "task.fc.output_dim : 300\n"
                                "task.train.lr_schedule.values : [1.0, 0.1]\n"
                                "task.train.lr_schedule.cls : 'test.PiecewiseConstantSchedule'\n",
                                "override"));
  ck_assert_int_eq(lv_params_int(p, "task.softmax.input_dim"), 300);
  ck_assert_int_eq(lv_params_int(p, "task.softmax.chunk_size"), 16);
  ck_assert_int_eq(lv_params_int(p, "task.fc.output_dim"), 300);
  ck_assert_int_eq(lv_pvalue_len(lv_params_list(p, "task.train.lr_schedule.values")), 2);
  /* outer cls before inner cls: replacing task must not undo task.softmax.cls */
  EXPECT_OK(lv_params_from_text(p,
                                "task.softmax.cls : 'test.SoftmaxB'\n"
                                "task.softmax.label_smoothing : 0.1\n"
                                "task.cls : 'test.ModelV2'\n",
                                "override"));
  ck_assert_str_eq(lv_params_str(p, "task.cls"), "test.ModelV2");
  ck_assert_int_eq(lv_params_int(p, "task.fc.output_dim"), 0); /* task was replaced */
  ck_assert_str_eq(lv_params_str(p, "task.softmax.cls"), "test.SoftmaxB");
  ck_assert_double_eq(lv_params_float(p, "task.softmax.label_smoothing"), 0.1);
  /* a slot set to None in text */
  EXPECT_OK(lv_params_from_text(p, "task.train.lr_schedule : NoneType", "o"));
  ck_assert(!lv_params_is_set(p, "task.train.lr_schedule"));
  EXPECT_ERR(lv_params_from_text(p, "task.train.lr_schedule.values : [1.0]", "o"), LV_ERR_INVALID,
             "o:1: task.train.lr_schedule is None: set task.train.lr_schedule.cls");
  /* unknown class: one error, the keys below it are not checked against the old tree */
  EXPECT_ERR(lv_params_from_text(p, "task.fc.cls : 'test.FCLayr'\ntask.fc.bogus : 1\n", "o"), LV_ERR_INVALID,
             "o:1: task.fc.cls: unknown class \"test.FCLayr\" (did you mean: [test.FCLayer])");
  lv_status s = lv_params_from_text(p, "task.fc.cls : 'test.FCLayr'\ntask.fc.bogus : 1\n", "o");
  ck_assert_ptr_null(strstr(lv_status_msg(s), "bogus"));
  lv_status_free(s);
  /* Lingvo's params.txt form of a class: type/<module>/<Name> */
  EXPECT_OK(lv_params_from_text(p, "task.softmax.cls : type/lingvo.core.test/SoftmaxB\n", "o"));
  ck_assert_str_eq(lv_params_str(p, "task.softmax.cls"), "test.SoftmaxB");
  EXPECT_OK(lv_params_from_text(p, "task.softmax.cls : 'type/lingvo.core.layers/test.Softmax'\n", "o"));
  ck_assert_str_eq(lv_params_str(p, "task.softmax.cls"), "test.Softmax");
  EXPECT_ERR(lv_params_from_text(p, "task.softmax.cls : type/lingvo.core.layers/Softmax\n", "o"), LV_ERR_INVALID,
             "unknown class \"type/lingvo.core.layers/Softmax\"");
  EXPECT_ERR(lv_params_from_text(p, "task.softmax.cls : type/lingvo.core.layers/\n", "o"), LV_ERR_INVALID,
             "unknown class \"type/lingvo.core.layers/\"");
  lv_params_free(p);
}
END_TEST

/* A realistic tree, changed all over, dumps to text that loads back into a fresh
 * default tree to an equal tree; the second dump equals the first. */
START_TEST(test_round_trip) {
  lv_params *p = experiment();
  EXPECT_OK(lv_params_set_string(p, "task.name", "lenet5"));
  EXPECT_OK(lv_params_set_string(p, "task.notes", "multi\nline 'quoted' \"both\" back\\slash; semi # hash"));
  EXPECT_OK(lv_params_set_float(p, "task.dropout_prob", 0.2));
  EXPECT_OK(lv_params_set_int(p, "task.softmax.num_classes", 10));
  EXPECT_OK(lv_params_set_int(p, "task.softmax.chunk_size", 1024));
  EXPECT_OK(lv_params_set_class(p, "task.fc", "test.FCLayer"));
  EXPECT_OK(lv_params_set_string(p, "task.fc.activation", "TANH"));
  EXPECT_OK(lv_params_set_bool(p, "task.fc.has_bias", false));
  EXPECT_OK(lv_params_set_float(p, "task.train.learning_rate", 1e-4));
  EXPECT_OK(lv_params_set_float(p, "task.train.l2_regularizer_weight", 1.0 / 3));
  EXPECT_OK(lv_params_set_int(p, "task.train.save_interval_steps", 500));
  EXPECT_OK(lv_params_set_class(p, "task.train.lr_schedule", "test.PiecewiseConstantSchedule"));
  EXPECT_OK(lv_params_set_list(p, "task.train.lr_schedule.boundaries",
                               lv_pvalue_ints(2, (const int64_t[]){350000, 500000})));
  EXPECT_OK(lv_params_set_list(p, "task.train.lr_schedule.values",
                               lv_pvalue_floats(3, (const double[]){1.0, 0.1, 1e-7})));
  EXPECT_OK(lv_params_set_class(p, "input", "test.Adam")); /* any class fills a None slot */
  EXPECT_OK(lv_params_set_float(p, "input.epsilon", -0.0));
  EXPECT_OK(lv_params_set_int(p, "train.max_steps", INT64_MIN));
  EXPECT_OK(lv_params_set_float(p, "train.save_interval_seconds", 1e300));
  EXPECT_OK(lv_params_set_bool(p, "train.async_checkpointing", false));
  EXPECT_OK(lv_params_set_class(p, "task.softmax", "test.SoftmaxB"));
  EXPECT_OK(lv_params_set_float(p, "task.softmax.label_smoothing", 0.1));

  char *t = lv_params_to_text(p);
  lv_params *fresh = experiment();
  ck_assert(!lv_params_equal(fresh, p));
  EXPECT_OK(lv_params_from_text(fresh, t, "params.txt"));
  ck_assert_msg(lv_params_equal(fresh, p), "round trip differs; text:\n%s", t);
  char *t2 = lv_params_to_text(fresh);
  ck_assert_str_eq(t, t2);
  ck_assert_msg(strstr(t, "task.filter_shapes : [[5, 5, 1, 20], [5, 5, 20, 50]]\n"), "%s", t);
  ck_assert_msg(strstr(t, "task.window_shapes : [(2, 2), (2, 2)]\n"), "%s", t);
  ck_assert_msg(strstr(t, "task.train.learning_rate : 0.0001\n"), "%s", t);
  ck_assert_msg(strstr(t, "task.train.optimizer.epsilon : 1e-06\n"), "%s", t);
  free(t);
  free(t2);
  lv_params_free(fresh);

  /* and back the other way: None where the default has a tree */
  EXPECT_OK(lv_params_set_none(p, "task.fc"));
  t = lv_params_to_text(p);
  fresh = experiment();
  EXPECT_OK(lv_params_from_text(fresh, t, "params.txt"));
  ck_assert(lv_params_equal(fresh, p));
  free(t);
  lv_params_free(fresh);
  lv_params_free(p);
}
END_TEST

START_TEST(test_apply_overrides) {
  lv_params *p = experiment();
  EXPECT_ERR(lv_params_apply_overrides(p, "train.max_steps: 10", "/tmp/x"), LV_ERR_INVALID,
             "Only one of --model_params_override and --model_params_file_override may be specified.");
  EXPECT_OK(lv_params_apply_overrides(p, "train.max_steps: 10;  task.train.learning_rate: 3e-4", NULL));
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 10);
  ck_assert_double_eq(lv_params_float(p, "task.train.learning_rate"), 3e-4);
  EXPECT_ERR(lv_params_apply_overrides(p, "train.max_step: 10", ""), LV_ERR_INVALID,
             "<command line>:1: unknown key train.max_step (did you mean: [max_steps])");
  EXPECT_ERR(lv_params_apply_overrides(p, NULL, "/nonexistent/override.txt"), LV_ERR_NOT_FOUND,
             "/nonexistent/override.txt");
  char path[] = "/tmp/lv_params_override_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  const char *body = "# file override\ntrain.max_steps : 20\ntask.softmax.num_classes : ten\n";
  ck_assert_int_eq(write(fd, body, strlen(body)), (int)strlen(body));
  close(fd);
  lv_status s = lv_params_apply_overrides(p, "", path);
  ck_assert_ptr_nonnull(s);
  char want[128];
  snprintf(want, sizeof want, "%s:3: task.softmax.num_classes: expected int, found 'ten'", path);
  ck_assert_msg(strstr(lv_status_msg(s), want), "%s", lv_status_msg(s));
  lv_status_free(s);
  ck_assert_int_eq(lv_params_int(p, "train.max_steps"), 20);
  unlink(path);
  lv_params_free(p);

  /* A params file that re-states a value (inspect_params output) does not mark it
   * assigned; one that changes it, or an override string, does. */
  p = experiment();
  ck_assert(!lv_params_any_assigned(lv_params_sub(p, "task.softmax")));
  strcpy(path, "/tmp/lv_params_override_XXXXXX");
  fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  char line[64];
  snprintf(line, sizeof line, "task.softmax.num_classes : %d\n", (int)lv_params_int(p, "task.softmax.num_classes"));
  ck_assert_int_eq(write(fd, line, strlen(line)), (int)strlen(line));
  close(fd);
  EXPECT_OK(lv_params_apply_overrides(p, "", path));
  ck_assert(!lv_params_any_assigned(lv_params_sub(p, "task.softmax")));
  line[strlen(line) - 1] = 0;
  EXPECT_OK(lv_params_apply_overrides(p, line, NULL));
  ck_assert(lv_params_any_assigned(lv_params_sub(p, "task.softmax")));
  unlink(path);
  lv_params_free(p);
  p = experiment();
  strcpy(path, "/tmp/lv_params_override_XXXXXX");
  fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  snprintf(line, sizeof line, "task.softmax.num_classes : %d\n", (int)lv_params_int(p, "task.softmax.num_classes") + 2);
  ck_assert_int_eq(write(fd, line, strlen(line)), (int)strlen(line));
  close(fd);
  EXPECT_OK(lv_params_apply_overrides(p, "", path));
  ck_assert(lv_params_any_assigned(lv_params_sub(p, "task.softmax")));
  unlink(path);
  lv_params_free(p);
}
END_TEST

/* Lists nested past LV_PARAMS_MAX_NESTING are an error (100,000 levels used to overflow
 * the stack); an override file must be a regular file (a FIFO used to block, /dev/zero
 * to grow memory without bound). */
START_TEST(test_override_limits) {
  lv_params *p = experiment();
  size_t deep = 100000;
  char *text = malloc(2 * deep + 64);
  ck_assert_ptr_nonnull(text);
  int n = sprintf(text, "task.filter_shapes: ");
  memset(text + n, '[', deep);
  memset(text + n + deep, ']', deep);
  text[n + 2 * deep] = 0;
  EXPECT_ERR(lv_params_from_text(p, text, "deep.txt"), LV_ERR_INVALID, "deep.txt:1: task.filter_shapes: expected list",
             "lists nested more than 64 deep at column 65");
  /* Exactly the limit loads. */
  n = sprintf(text, "task.filter_shapes: ");
  memset(text + n, '[', LV_PARAMS_MAX_NESTING);
  memset(text + n + LV_PARAMS_MAX_NESTING, ']', LV_PARAMS_MAX_NESTING);
  text[n + 2 * LV_PARAMS_MAX_NESTING] = 0;
  EXPECT_OK(lv_params_from_text(p, text, "deep.txt"));
  free(text);
  EXPECT_ERR(lv_params_apply_overrides(p, NULL, "/dev/zero"), LV_ERR_INVALID,
             "--model_params_file_override /dev/zero is a character device; expected a regular file");
  EXPECT_ERR(lv_params_apply_overrides(p, NULL, "/tmp"), LV_ERR_INVALID, "/tmp is a directory");
  char dir[64], fifo[96];
  lv_test_mkdtemp(dir, sizeof dir, "lv_params_fifo");
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  EXPECT_ERR(lv_params_apply_overrides(p, NULL, fifo), LV_ERR_INVALID, "is a FIFO; expected a regular file");
  /* The size cap (64 MiB for override files) on a small file and a small cap. */
  char big[128], *data = NULL;
  size_t len = 0;
  snprintf(big, sizeof big, "%s/big.txt", dir);
  FILE *f = fopen(big, "w");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 100; i++) fputc('x', f);
  fclose(f);
  EXPECT_ERR(lv_file_read_regular(big, 64, "override file", &data, &len), LV_ERR_INVALID,
             "big.txt is more than the limit of 64 bytes");
  EXPECT_OK(lv_file_read_regular(big, 100, "override file", &data, &len));
  ck_assert_uint_eq(len, 100);
  free(data);
  lv_test_rmtree(dir);
  lv_params_free(p);
}
END_TEST

/* Lists of params (Lingvo's p.layers = [FC.Params(), FC.Params()]): API, copy, freeze,
 * equality, text. */
START_TEST(test_params_list) {
  lv_params *p = lv_params_new();
  lv_params *items[2] = {fc_ctor(), fc_ctor()};
  lv_params_define_params_list(p, "layers", items, 2, "A layer stack.");
  ck_assert_int_eq(lv_params_kind(p, "layers"), LV_PV_PARAMS_LIST);
  ck_assert_int_eq(lv_params_params_list_len(p, "layers"), 2);
  EXPECT_OK(lv_params_set_int(p, "layers[1].output_dim", 10));
  ck_assert_int_eq(lv_params_int(lv_params_params_list_at(p, "layers", 1), "output_dim"), 10);
  ck_assert_ptr_eq(lv_params_sub(p, "layers[1]"), lv_params_params_list_at(p, "layers", 1));
  EXPECT_ERR(lv_params_set_int(p, "layers[2].output_dim", 1), LV_ERR_INVALID,
             "layers[2]: index 2 out of range: layers has 2 items");
  EXPECT_ERR(lv_params_set_int(p, "layers.output_dim", 1), LV_ERR_INVALID, "layers is a list of params");
  EXPECT_ERR(lv_params_set_int(p, "layers[1].output_dm", 1), LV_ERR_INVALID,
             "unknown key layers[1].output_dm (did you mean: [output_dim])");
  EXPECT_ERR(lv_params_set_int(p, "layers[x].output_dim", 1), LV_ERR_INVALID, "malformed key");
  EXPECT_ERR(lv_params_set_none(p, "layers"), LV_ERR_INVALID, "cannot be None");
  char *text = lv_params_to_text(p);
  ck_assert_str_eq(text,
                   "layers[0].activation : 'RELU'\nlayers[0].cls : 'test.FCLayer'\nlayers[0].has_bias : True\n"
                   "layers[0].input_dim : 0\nlayers[0].name : ''\nlayers[0].output_dim : 0\n"
                   "layers[1].activation : 'RELU'\nlayers[1].cls : 'test.FCLayer'\nlayers[1].has_bias : True\n"
                   "layers[1].input_dim : 0\nlayers[1].name : ''\nlayers[1].output_dim : 10\n");
  /* Copy, equality, freeze. */
  lv_params *c = lv_params_copy(p);
  ck_assert(lv_params_equal(p, c));
  EXPECT_OK(lv_params_params_list_append(c, "layers", fc_ctor()));
  ck_assert(!lv_params_equal(p, c));
  /* FromText grows the list (append at the end via cls) and `key : []` empties it. */
  lv_params *q = lv_params_new();
  lv_params_define_params_list(q, "layers", NULL, 0, "A layer stack.");
  EXPECT_OK(lv_params_from_text(q, text, "t"));
  ck_assert(lv_params_equal(p, q));
  EXPECT_OK(lv_params_from_text(q, "layers : []\nlayers[0].cls : 'test.Softmax'", "t"));
  ck_assert_int_eq(lv_params_params_list_len(q, "layers"), 1);
  ck_assert_str_eq(lv_params_str(q, "layers[0].cls"), "test.Softmax");
  EXPECT_OK(lv_params_set_params_list(q, "layers", NULL, 0));
  char *empty = lv_params_to_text(q);
  ck_assert_str_eq(empty, "layers : []\n");
  free(empty);
  lv_params_freeze(c);
  EXPECT_ERR(lv_params_set_int(c, "layers[0].output_dim", 1), LV_ERR_INVALID, "immutable");
  ck_assert(lv_params_is_frozen(lv_params_params_list_at(c, "layers", 2)));
  free(text);
  lv_params_free(c);
  lv_params_free(q);
  lv_params_free(p);
}
END_TEST

static Suite *params_suite(void) {
  Suite *s = suite_create("params");
  TCase *tc = tcase_create("tree");
  tcase_add_test(tc, test_define_get_set);
  tcase_add_test(tc, test_similar_keys);
  tcase_add_test(tc, test_legal_names);
  tcase_add_loop_test_raise_signal(tc, test_illegal_name_aborts, SIGABRT, 0, (int)LV_ARRAY_LEN(illegal_names));
  tcase_add_test_raise_signal(tc, test_redefine_aborts, SIGABRT);
  tcase_add_test_raise_signal(tc, test_missing_description_aborts, SIGABRT);
  tcase_add_test_raise_signal(tc, test_get_undefined_aborts, SIGABRT);
  tcase_add_test_raise_signal(tc, test_get_none_aborts, SIGABRT);
  tcase_add_test_raise_signal(tc, test_define_frozen_aborts, SIGABRT);
  tcase_add_test(tc, test_freeze_copy_equal_delete);
  suite_add_tcase(s, tc);
  tc = tcase_create("text");
  tcase_add_test(tc, test_to_text);
  tcase_add_test(tc, test_string_escaping);
  tcase_add_test(tc, test_float_repr);
  tcase_add_test(tc, test_list_text);
  tcase_add_test(tc, test_from_text_rules);
  tcase_add_test(tc, test_from_text_errors_collected);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_apply_overrides);
  tcase_add_test(tc, test_override_limits);
  suite_add_tcase(s, tc);
  tc = tcase_create("registry");
  tcase_add_test(tc, test_registry);
  tcase_add_test(tc, test_cls_replacement);
  tcase_add_test(tc, test_params_list);
  suite_add_tcase(s, tc);
  return s;
}


int main(void) {
  lv_registry_add("test.ModelV1", model_ctor);
  lv_registry_add("test.Softmax", softmax_ctor);
  lv_registry_add("test.SoftmaxB", softmax_b_ctor);
  lv_registry_add("test.FCLayer", fc_ctor);
  lv_registry_add("test.Adam", adam_ctor);
  lv_registry_add("test.PiecewiseConstantSchedule", schedule_ctor);
  lv_registry_add("test.ModelV2", model_ctor);
  return lv_test_run(params_suite());
}
