# lingvoc build. `make` builds build/liblingvoc.a and bin/*; `make test` runs every Check
# suite and shell test; `make asan` does the same under ASan+UBSan in build-asan/;
# `make bench` runs the benchmarks; `make fuzz` runs each fuzz target briefly.
# `make V=1` prints each compile and link command in full; the default (V=0) prints one
# short line per file ("CC src/base/log.c"). Warnings and errors print either way.
#
# Sources are found by globbing: a new .c file under src/<module>/ joins the library, a
# new src/cmd/<tool>.c becomes bin/<tool>, a new tests/check_<name>.c becomes a suite, a
# new src/io/proto/*.proto is compiled with protoc-c. No list to edit.

# CUDA=1 (the CUDA backend, src/kernels/cuda) builds into its own tree: objects built
# with and without LV_HAVE_CUDA never mix.
ifeq ($(CUDA),1)
BUILD    ?= build-cuda
BINDIR   ?= build-cuda/bin
endif
BUILD    ?= build
BINDIR   ?= bin
CC       ?= cc
# x86-64-v3 (AVX2, FMA, BMI2, F16C, MOVBE) where the building machine has it, else v2:
# the kernels' loops run 8 floats wide instead of 4. The binaries then need such a CPU
# (any x86-64 since 2013-15); `make X86_LEVEL=x86-64-v2` builds binaries for older ones.
# -std=c11 keeps -ffp-contract=off, so no FMA is formed and elementwise results keep
# their bits at either level; only the lane order of vectorized sums differs.
ifeq ($(origin X86_LEVEL),undefined)
X86_LEVEL := $(shell $(CC) -march=native -E -dM - </dev/null 2>/dev/null | \
               grep -cE '__(AVX2|BMI2|F16C|FMA|LZCNT|MOVBE)__' | \
               awk '{ print ($$1 == 6 ? "x86-64-v3" : "x86-64-v2") }')
endif
export X86_LEVEL # `make test` and `make asan` run make again: detect once
# -fno-trapping-math lets loops with conditionals (clamps, NaN tests) vectorize, and
# -fno-math-errno inlines sqrtf and friends; nothing here reads FP exceptions or errno of
# a math function (PyTorch builds its kernels with the same two flags).
OPT      ?= -O2 -march=$(X86_LEVEL) -mtune=generic -fno-trapping-math -fno-math-errno
SAN      ?=
CFLAGS   ?=
CFLAGS   += -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Werror -fopenmp $(SAN) \
            -Isrc -Iinclude -I$(BUILD)/gen $(shell pkg-config --cflags libconfig libprotobuf-c)
# One set of objects serves the static archive, the executables and the shared library:
# -fPIC for the latter, -fno-semantic-interposition so that calls inside the library stay
# direct and inlinable as in the executables' default PIE (liblingvoc.so exports only
# include/lingvoc.h's functions, so nothing in it can be interposed anyway).
CFLAGS   += -fPIC -fno-semantic-interposition
LDLIBS   += $(shell pkg-config --libs libconfig libprotobuf-c) -lopenblas -lsnappy -lz -lpng -lm -lpthread
# Speech (src/audio/): FFTW's float FFT for the log-mel frontend, libsndfile to decode
# WAV/FLAC/OGG, libsoxr to resample to 16 kHz, libarchive to read LibriSpeech tarballs.
CFLAGS   += $(shell pkg-config --cflags fftw3f sndfile soxr libarchive)
LDLIBS   += $(shell pkg-config --libs fftw3f sndfile soxr libarchive)
LDFLAGS  += -fopenmp $(SAN)
# MPI (Open MPI from Debian, installed by scripts/install-deps.sh): the trainer's
# replicas under mpirun (src/comm/). MPI=0 builds without it: one process only.
MPI      ?= 1
ifeq ($(MPI),1)
CFLAGS   += -DLV_HAVE_MPI $(shell pkg-config --cflags ompi-c)
LDLIBS   += $(shell pkg-config --libs ompi-c)
endif
# NCCL between GPU processes (src/comm/comm_nccl.c) comes with CUDA=1 and needs MPI=1.
ifeq ($(CUDA)$(MPI),11)
CUDA_HOME ?= /usr/local/cuda
CFLAGS   += -DLV_HAVE_NCCL -I$(CUDA_HOME)/include
LDLIBS   += -lnccl
endif
CHECK_LIBS = $(shell pkg-config --libs check)

# V=0: `$(call say,CC,FILE)` before a command prints "  CC      FILE" instead of it
# (nothing under make -s, as Linux's kbuild does).
V        ?= 0
ifeq ($(V),0)
ifeq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
say       = @printf '  %-7s %s\n' '$(1)' '$(2)';
else
say       = @
endif
else
say       =
endif

TOOLS     := $(patsubst src/cmd/%.c,%,$(wildcard src/cmd/*.c))
LIB_SRC   := $(filter-out $(wildcard src/cmd/*.c),$(wildcard src/*/*.c src/kernels/cpu/*.c))
PROTOS    := $(wildcard src/io/proto/*.proto)
PROTO_C   := $(patsubst src/io/proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
PROTO_H   := $(PROTO_C:.c=.h)
LIB_OBJ   := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC)) $(PROTO_C:.c=.o)
LIB       := $(BUILD)/liblingvoc.a
BINS      := $(addprefix $(BINDIR)/,$(TOOLS))

TEST_SRC  := $(wildcard tests/check_*.c)
TESTS     := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
FUZZ_SRC  := $(wildcard fuzz/fuzz_*.c)
# Every benchmark driver bench/NAME.c is built by `all` as $(BUILD)/bench/NAME, linked
# like the executables, so the suite sees a driver that no longer links (bench/*.sh run
# `make $(BUILD)/bench/NAME`, never their own cc line).
BENCH_SRC := $(wildcard bench/*.c)
BENCHES   := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
# The library API's shared library and examples (made below, after `all`).
LV_VERSION := $(shell sed -n 's/^\#define LINGVOC_VERSION "\(.*\)"/\1/p' include/lingvoc.h)
LV_MAJOR   := $(firstword $(subst ., ,$(LV_VERSION)))
SONAME     := liblingvoc.so.$(LV_MAJOR)
SHLIB      := $(BUILD)/liblingvoc.so.$(LV_VERSION)
EXAMPLE_SRC := $(wildcard examples/*.c)
ifneq ($(CUDA),1)
SHLIB_ALL  := $(SHLIB) $(BUILD)/lingvoc.pc
EXAMPLES   := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRC))
endif
PREFIX     ?= /usr/local

# ---- CUDA=1: src/kernels/cuda/*.cu with nvcc (sm_90 code plus compute_90 PTX for newer
# GPUs) into $(BUILD)/liblingvoc_cuda.a, linked into every executable with cuDNN 9 (its
# headers and libcudnn under CUDA_HOME), cuBLAS and the CUDA runtime. Needs no GPU to
# build. ----
ifeq ($(CUDA),1)
.DEFAULT_GOAL := all
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O2 -g -std=c++17 -fmad=false $(CUDA_ARCH) -Isrc -D_GNU_SOURCE -Werror all-warnings \
             -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-parameter
CU_SRC    := $(wildcard src/kernels/cuda/*.cu)
CU_OBJ    := $(patsubst %.cu,$(BUILD)/%.o,$(CU_SRC))
CUDA_LIB  := $(BUILD)/liblingvoc_cuda.a
ifeq ($(wildcard $(CUDA_HOME)/include/cudnn.h),)
$(error CUDA=1 needs cuDNN 9 for CUDA 13: $(CUDA_HOME)/include/cudnn.h not found (CUDA_HOME=))
endif
CFLAGS    += -DLV_HAVE_CUDA
LDLIBS    += $(CUDA_LIB) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart -lstdc++

$(BUILD)/%.o: %.cu $(wildcard src/kernels/cuda/*.cuh src/kernels/cuda/*.h) src/kernels/kernels.def src/kernels/kernels.h src/kernels/kernel_math.h
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(CUDA_LIB): $(CU_OBJ)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(BINS) $(TESTS) $(BENCHES): $(CUDA_LIB)
endif

.PHONY: all test run-tests asan bench bench-programs fuzz clean deps gpu-bundle install
.DELETE_ON_ERROR:
# Keep every intermediate (generated sources, objects of mains and tests) between builds.
.SECONDARY:

all: $(BINS) $(TESTS) $(BENCHES) $(SHLIB_ALL) $(EXAMPLES)

bench-programs: $(BENCHES)

# ---- The library API (include/lingvoc.h): build/liblingvoc.so.MAJOR.MINOR.PATCH with
# soname liblingvoc.so.MAJOR, exporting only the header's LINGVOC_API functions (a
# version script made from the header), lingvoc.pc, the examples linked against it, and
# `make install PREFIX=DIR`. Not with CUDA=1 yet (its .cu objects are not PIC). ----

$(BUILD)/lingvoc.map: include/lingvoc.h
	@mkdir -p $(BUILD)
	$(call say,GEN,$@){ echo 'LINGVOC_$(LV_MAJOR) {'; echo ' global:'; \
	  sed -n 's/^LINGVOC_API .*[ *]\(lv_[a-z0-9_]*\)(.*/  \1;/p' $<; echo ' local: *;'; echo '};'; } >$@

$(SHLIB): $(LIB_OBJ) $(BUILD)/lingvoc.map
	$(call say,LINK,$@)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=$(BUILD)/lingvoc.map \
	  -Wl,--no-undefined $(LDFLAGS) $(LIB_OBJ) $(LDLIBS) -o $@
	@ln -sf $(notdir $@) $(BUILD)/$(SONAME) && ln -sf $(SONAME) $(BUILD)/liblingvoc.so

# lingvoc.pc for a prefix (@PREFIX@ is replaced by install).
$(BUILD)/lingvoc.pc: include/lingvoc.h Makefile
	@mkdir -p $(BUILD)
	$(call say,GEN,$@)printf '%s\n' 'prefix=@PREFIX@' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: lingvoc' 'Description: Lingvo models in C: translate, transcribe, score, sample, classify' \
	  'Version: $(LV_VERSION)' 'Libs: -L$${libdir} -llingvoc' 'Libs.private: -fopenmp $(LDLIBS)' \
	  'Cflags: -I$${includedir}' >$@

# The examples: plain C programs over the header, linked against the shared library.
$(BUILD)/examples/%: examples/%.c include/lingvoc.h $(SHLIB)
	@mkdir -p $(dir $@)
	$(call say,CC+LINK,$@)$(CC) -std=c11 -O2 -Wall -Wextra -Werror $(SAN) -Iinclude $< -L$(BUILD) -llingvoc \
	  -Wl,-rpath,$(abspath $(BUILD)) -o $@

install: $(BINS) $(LIB) $(SHLIB_ALL)
	@scripts/install.sh $(BUILD) $(BINDIR) $(PREFIX) $(DESTDIR)

deps:
	@scripts/install-deps.sh

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: src/io/proto/%.proto
	@mkdir -p $(BUILD)/gen
	$(call say,PROTOC,$<)protoc-c --proto_path=src/io/proto --c_out=$(BUILD)/gen $<

# Objects depend on the compile command: a changed OPT, X86_LEVEL or CFLAGS rebuilds them
# (make alone only sees changed files). The command is rewritten only when it differs.
FLAGS_FILE := $(BUILD)/cflags.txt
COMPILE_CMD = $(CC) $(CFLAGS)
ifneq ($(MAKECMDGOALS),clean)
$(shell mkdir -p $(BUILD) && { echo '$(COMPILE_CMD)' | cmp -s - $(FLAGS_FILE) || \
          echo '$(COMPILE_CMD)' >$(FLAGS_FILE); })
endif
# (`make clean all` removes it after the line above wrote it.)
$(FLAGS_FILE):
	@mkdir -p $(BUILD)
	@echo '$(COMPILE_CMD)' >$@

$(BUILD)/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c $(PROTO_H) $(FLAGS_FILE)
	$(call say,CC,$<)$(CC) $(filter-out -Wextra,$(CFLAGS)) -c $< -o $@

$(BUILD)/%.o: %.c $(PROTO_H) $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(BINDIR)/%: $(BUILD)/src/cmd/%.o $(LIB)
	@mkdir -p $(BINDIR)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) $< $(LIB) $(CHECK_LIBS) $(LDLIBS) -o $@

# Benchmark drivers linked like the executables (bench/mt_bench.c for the GPU bundle).
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(call say,LINK,$@)$(CC) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

# bench/bench_bn.sh's LINGVOC_BASE=DIR: the same driver compiled against another
# checkout's headers and linked with its library (DIR/build/liblingvoc.a, built there).
BASE_CFLAGS = $(patsubst -Isrc,-I$(LINGVOC_BASE)/src,$(patsubst -I$(BUILD)/gen,-I$(LINGVOC_BASE)/build/gen,$(CFLAGS)))
$(BUILD)/bench/%_base: bench/%.c $(LINGVOC_BASE)/build/liblingvoc.a
	$(call say,CC+LINK,$@)$(CC) $(BASE_CFLAGS) $< $(LINGVOC_BASE)/build/liblingvoc.a $(LDFLAGS) $(LDLIBS) -o $@

# A directory to carry to a GPU machine that has CUDA and PyTorch but none of lingvoc's
# build dependencies: a CUDA build (MPI=0) with its shared libraries, small data subsets
# and scripts/gpu-check.sh (scripts/make-gpu-bundle.sh says what is in it).
gpu-bundle:
	scripts/make-gpu-bundle.sh gpu-bundle

# `make test` first installs what is missing (apt-get, idempotent), then re-reads this
# Makefile (pkg-config flags need the packages) to build, with one progress line and the
# whole output in $(BUILD)/build.log (its tail printed on failure), and run every suite.
test: deps
	+@scripts/quiet-make.sh $(BUILD)/build.log all
	@$(MAKE) --no-print-directory run-tests

# Each suite runs in its own process; the run fails if any suite fails, after all have run.
run-tests: all
	@scripts/run-tests.sh $(BUILD) $(BINDIR) $(TESTS)

asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan BINDIR=build-asan/bin OPT="-O1 -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" run-tests

bench: deps
	@LINGVOC_BENCH=1 scripts/install-deps.sh
	@$(MAKE) --no-print-directory all
	@bench/run-all.sh

fuzz:
	@LINGVOC_FUZZ=1 scripts/install-deps.sh
	@scripts/run-fuzz.sh $(FUZZ_SRC)

clean:
	rm -rf build build-asan build-fuzz build-cuda build-gpu-bundle gpu-bundle bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
