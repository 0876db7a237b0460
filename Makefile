# nest - a tensor graph compiler that prints loop-nest C.
#
#   make            libraries (build/lib) and bin/nestc
#   make test       install missing Debian packages (or say how), build, run the test suite
#                   (the C tests, then the Python front end's with pytest)
#   make python-test  the Python front end's tests alone (pytest)
#   make run-onnx   the ONNX cases alone, with a table of what nest refuses at import
#   make sanitize   the test suite built with -fsanitize=address,undefined, run
#   make tsan       tests/test_threads.c under ThreadSanitizer
#   make valgrind   the unit suites and the JIT path under valgrind memcheck
#   make demo       compile and run the samples, show the generated C
#   make bench      nest against numpy, numexpr, Eigen, OpenBLAS, hand-fused C and PyTorch, and
#                   whole models against PyTorch (make bench-models: that table alone)
#   make docs       the pictures of docs/img (Graphviz): layers, sample graphs before and after fusion
#   make fuzz       every fuzz target below, one after the other
#   make fuzz-random  random graphs, JIT against the interpreter: NEST_FUZZ_COUNT graphs
#                   (default 20000) from seed NEST_FUZZ_SEED (default: the time)
#   make fuzz-parse the text-form parser under libFuzzer for FUZZ_TIME seconds (default 60)
#   make fuzz-npy   the .npy reader under libFuzzer, as long
#   make fuzz-onnx  the ONNX reader under libFuzzer, as long
#   make fuzz-build the C API's builders under libFuzzer, as long
#   make fuzz-jit   random graphs drawn from libFuzzer's bytes, JIT against the interpreter
#   make deps       install the Debian packages nest needs (as root) or print the command
#   make install    PREFIX=/usr/local, DESTDIR= for a staged install; make uninstall
#   make clean
#   make help       this text
# V=1 shows full command lines. Every target first checks the Debian packages it needs
# (tools/deps.sh) and, when one is missing, prints the apt-get command instead of failing later.

CC      ?= cc
CXX     ?= c++
PREFIX  ?= /usr/local
B       ?= build
BINDIR  ?= bin
LLVM    ?= /usr/lib/llvm-14
PYTHON  ?= /usr/bin/python3
# where `make install` puts the Python package (Debian's path for PREFIX's Python 3 packages)
PYTHONDIR ?= $(PREFIX)/lib/python$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages

# The version is the header's (include/nest.h); the shared library's soname carries its major.
VERSION := $(shell sed -n 's/^\#define NEST_VERSION "\(.*\)"/\1/p' include/nest.h)
SONAME  := libnest.so.$(firstword $(subst ., ,$(VERSION)))

ifeq ($(V),1)
Q :=
else
Q := @
endif

WARN     := -Wall -Wextra -Werror -pedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS   ?= -O2 -g
NCFLAGS  := -std=c11 -D_GNU_SOURCE -fPIC $(WARN) -Iinclude -Icommon -Icompiler -Iruntime -Idriver \
            $(SANFLAGS)
LDLIBS   := -lprotobuf-c -lm -ldl -lpthread

# The ONNX schema (Debian's libonnx-dev) becomes C with protoc-c at build time.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
GEN        := $(B)/gen

# The source, by stage: common/ below everything; the compiler turns graphs into C text (graph/,
# front/, passes/, emit/); the runtime turns C text into code; the driver joins the two.
COMMON_SRC   := common/util.c
COMPILER_SRC := compiler/graph/types.c compiler/graph/ir.c compiler/graph/dims.c \
                compiler/graph/bind.c compiler/graph/collapse.c compiler/graph/outer.c \
                compiler/graph/window.c \
                compiler/graph/print.c compiler/graph/interp.c compiler/graph/interp_window.c \
                compiler/graph/prune.c compiler/graph/state.c compiler/graph/grad.c \
                compiler/front/api.c compiler/front/parse.c \
                compiler/front/onnx_read.c compiler/front/onnx_ops.c compiler/front/onnx_math.c \
                compiler/front/onnx_shape.c compiler/front/onnx_nn.c compiler/front/onnx_conv.c \
                compiler/passes/layout.c compiler/passes/walk.c compiler/passes/fuse.c \
                compiler/passes/merge.c compiler/passes/conv.c compiler/passes/prepack.c \
                compiler/passes/rows.c compiler/passes/flatten.c compiler/passes/tile.c \
                compiler/passes/memplan.c \
                compiler/emit/emit_text.c compiler/emit/emit_loops.c compiler/emit/emit_topk.c \
                compiler/emit/emit_tile.c compiler/emit/emit_conv.c \
                compiler/emit/emit_conv_kernels.c \
                compiler/emit/emit_c.c compiler/emit/emit_dims.c \
                compiler/emit/emit_state.c compiler/passes/inplace.c \
                compiler/pipeline.c
RUNTIME_SRC  := runtime/loader.c runtime/cache.c runtime/jit.c runtime/aot.c
DRIVER_SRC   := driver/driver.c driver/state.c
NESTC_SRC    := driver/cli.c driver/npy.c driver/run.c driver/nestc.c
TEST_NAMES   := test_ir test_parse test_parse_errors test_parse_ops test_interp test_interp_ops \
                test_runtime test_fuse test_diff test_diff_abi test_diff_ops test_random test_onnx \
                test_oom test_faults test_threads test_sizes test_npy test_nestc test_state test_grad \
                test_scale test_conv test_dims test_dims_train test_dims_axes test_denormals

LIB_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(COMMON_SRC) $(COMPILER_SRC) $(RUNTIME_SRC) $(DRIVER_SRC)) \
             $(B)/obj/gen/onnx.pb-c.o
NESTC_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(NESTC_SRC))
TESTS     := $(addprefix $(B)/tests/,$(TEST_NAMES))
HEADERS   := include/nest.h common/util.h compiler/internal.h compiler/ops.def compiler/emit/emit.h \
             compiler/emit/state_code.h driver/driver.h $(wildcard runtime/*.h) driver/cli.h

# The JIT shim (runtime/jit.cpp, clang and LLVM) is a library of its own, loaded by libnest on
# first use. It is never built with sanitizers: `make sanitize` (B=build/san) uses this one.
JITLIB    := build/lib/libnest_jit.so
JITFLAGS  := -isystem $(LLVM)/include $(shell $(LLVM)/bin/llvm-config --cxxflags 2>/dev/null) \
             -std=c++17 -fPIC -O2 -fvisibility=hidden -fvisibility-inlines-hidden -Wall -Wextra \
             -Iinclude -Iruntime -DNEST_LLVM_DIR='"$(LLVM)"'
JITLIBS   := -L$(LLVM)/lib -lclang-cpp -lLLVM-14 -Wl,-rpath,$(LLVM)/lib -Wl,--no-undefined

PHONY_ONNX := run-onnx fuzz-onnx
.PHONY: $(PHONY_ONNX) all test sanitize tsan valgrind demo bench bench-models docs fuzz \
        fuzz-parse fuzz-npy fuzz-build fuzz-jit fuzz-random deps install uninstall clean help \
        run-tests python-test
.DELETE_ON_ERROR:

all: $(B)/lib/libnest.a $(B)/lib/libnest.so $(B)/lib/$(SONAME) $(BINDIR)/nestc $(JITLIB)

# The Debian packages, by what needs them (tools/deps.sh names the sets). `make deps`, and the
# front doors `make test`, `make demo`, `make sanitize`, `make bench` and `make docs`, install
# what is missing when run as root (CI) and otherwise print the apt-get command; every rule that
# compiles checks its set first (deps-SET, order-only: tens of milliseconds, nothing installed).
DEPS_SETS := build jit test bench docs fuzz valgrind
.PHONY: $(addprefix deps-,$(DEPS_SETS))

deps:
	@tools/deps.sh

# The comment at the top of this file: a new target gets its line there.
help:
	@sed -n '1,/^$$/s/^#\( \|$$\)//p' $(firstword $(MAKEFILE_LIST))

$(addprefix deps-,$(DEPS_SETS)): deps-%:
	@tools/deps.sh --check $*

$(B)/obj/%.o: %.c $(HEADERS) | deps-build
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -c $< -o $@

# compiler/emit/state_code.h is C the library compiles (driver/state.c) and text the emitter
# prints (emit_state.c): this makes the text, one string per line.
$(GEN)/state_code.inc: compiler/emit/state_code.h
	@mkdir -p $(dir $@)
	$(Q)sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n",/' $< > $@

$(B)/obj/compiler/emit/emit_state.o: $(GEN)/state_code.inc
$(B)/obj/compiler/emit/emit_state.o: NCFLAGS += -I$(GEN)

# The schema is a file of libonnx-dev: when it is missing, the check says which packages to get.
$(ONNX_PROTO): | deps-build

$(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h: $(ONNX_PROTO) | deps-build
	@mkdir -p $(GEN)
	@$(if $(Q),echo "  PROTOC  $<")
	$(Q)cp $< $(GEN)/onnx.proto && protoc-c --proto_path=$(GEN) --c_out=$(GEN) $(GEN)/onnx.proto

$(B)/obj/gen/onnx.pb-c.o: $(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -I$(GEN) -c $< -o $@

$(B)/obj/compiler/front/onnx_%.o: NCFLAGS += -I$(GEN)
ONNX_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(filter compiler/front/onnx_%,$(COMPILER_SRC)))
$(ONNX_OBJ): compiler/front/onnx.h compiler/front/onnx_ops.def $(GEN)/onnx.pb-c.h

# The loader falls back to the shim where this build put it.
$(B)/obj/runtime/loader.o: NCFLAGS += -DNEST_JIT_PATH="\"$(abspath $(JITLIB))\""

$(JITLIB): runtime/jit.cpp runtime/rt.h include/nest.h | deps-jit
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $@")
	$(Q)$(CXX) $(JITFLAGS) -shared -o $@ $< $(JITLIBS)

$(B)/lib/libnest.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# The shared library exports the API of nest.h alone (tools/libnest.map); libnest.so and the
# soname are links to the versioned file.
$(B)/lib/libnest.so.$(VERSION): $(LIB_OBJ) tools/libnest.map
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(SANFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=tools/libnest.map \
	    -o $@ $(LIB_OBJ) $(LDLIBS)

$(B)/lib/libnest.so $(B)/lib/$(SONAME): $(B)/lib/libnest.so.$(VERSION)
	$(Q)ln -sf $(notdir $<) $@

$(BINDIR)/nestc: $(NESTC_OBJ) $(B)/lib/libnest.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SANFLAGS) -o $@ $^ $(LDLIBS)

# A test links libnest.a and the objects it lists as prerequisites of its own.
$(B)/tests/%: tests/%.c tests/testutil.h $(B)/lib/libnest.a $(HEADERS) | deps-test
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -Wno-missing-prototypes -Itests -o $@ $< $(filter %.o,$^) \
	    $(B)/lib/libnest.a -lcmocka $(LDLIBS)

# The differential tests share their harness (tests/diffcase.c).
DIFF_TESTS := $(B)/tests/test_diff $(B)/tests/test_diff_abi $(B)/tests/test_diff_ops
$(DIFF_TESTS): $(B)/obj/tests/diffcase.o tests/diffcase.h

$(B)/obj/tests/diffcase.o: tests/diffcase.c tests/diffcase.h tests/testutil.h $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -Itests -c $< -o $@

$(B)/tests/test_npy $(B)/tests/test_nestc: $(B)/obj/driver/npy.o

# The fault tests route every allocation and write of libnest.a through tests/faults.c, which
# fails them on request (the k-th allocation, a write past n bytes): the library's sources are
# built as they ship.
FAULT_WRAP  := malloc calloc realloc aligned_alloc posix_memalign strdup strndup write
FAULT_TESTS := $(B)/tests/test_oom $(B)/tests/test_faults
$(FAULT_TESTS): $(B)/tests/%: tests/%.c tests/faults.c tests/faults.h tests/testutil.h \
                $(B)/lib/libnest.a $(HEADERS) | deps-test
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -Wno-missing-prototypes -Itests -o $@ $< tests/faults.c \
	    $(B)/lib/libnest.a $(foreach f,$(FAULT_WRAP),-Wl,--wrap=$(f)) -lcmocka $(LDLIBS)

$(TESTS): $(JITLIB)
# The random graph generator (tests/randgraph.c and its steps) is included by the suites using it.
RANDGRAPH := tests/randgraph.c tests/random_steps.c tests/random_ops.c tests/random_window.h
$(B)/tests/test_random $(B)/tests/test_grad: $(RANDGRAPH)
$(B)/tests/test_parse $(B)/tests/test_parse_errors: tests/parseutil.h
$(B)/tests/test_onnx: NCFLAGS += -I$(GEN)
$(B)/tests/test_onnx: $(GEN)/onnx.pb-c.h

# The ONNX case runner (tests/onnx_cases.c) and the cases: the ONNX backend node tests, made by
# python3-onnx's generators (tests/onnx_gen.py), and whole models exported from PyTorch
# (tests/onnx_models.py).
$(B)/tests/onnx_cases: tests/onnx_cases.c $(B)/lib/libnest.a include/nest.h $(GEN)/onnx.pb-c.h \
                      | deps-test
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -I$(GEN) -o $@ $< $(B)/lib/libnest.a $(LDLIBS)

$(B)/onnx/node/.done: tests/onnx_gen.py | deps-test
	@rm -rf $(B)/onnx/node && mkdir -p $(B)/onnx
	@echo "  GEN     $(B)/onnx/node (the ONNX backend node tests)"
	$(Q)/usr/bin/python3 tests/onnx_gen.py $(B)/onnx >$(B)/onnx/gen.log 2>&1 || \
	    { cat $(B)/onnx/gen.log; exit 1; }
	@touch $@

$(B)/onnx/models/.done: tests/onnx_models.py | deps-test
	@rm -rf $(B)/onnx/models && mkdir -p $(B)/onnx/models
	@echo "  GEN     $(B)/onnx/models (models exported from PyTorch)"
	$(Q)/usr/bin/python3 tests/onnx_models.py $(B)/onnx/models >$(B)/onnx/models.log 2>&1 || \
	    { cat $(B)/onnx/models.log; exit 1; }
	@touch $@

# Whole models: torch's outputs to 1e-4 relative (1e-5 absolute near 0).
ONNX_MODELS_TOL := --rtol 1e-4 --atol 1e-5

run-onnx: $(B)/tests/onnx_cases $(B)/onnx/node/.done $(B)/onnx/models/.done $(JITLIB)
	$(Q)$(B)/tests/onnx_cases --required --table $(B)/onnx/node-table.md $(B)/onnx/node
	$(Q)$(B)/tests/onnx_cases --all $(ONNX_MODELS_TOL) $(B)/onnx/models

# Tests that are programs of their own: the layers against the includes and the calls, the
# package checks, numpy against `nestc run`, the manual page against nestc, a staged install
# (skipped under sanitizers).
SCRIPT_TESTS := tests/test_layers.sh tests/test_deps.sh tests/test_run.py tests/test_docs.sh \
                tests/test_install.sh

run-tests: $(TESTS) $(BINDIR)/nestc $(JITLIB) $(B)/tests/onnx_cases $(B)/onnx/node/.done \
           $(B)/onnx/models/.done $(B)/samples/train
	@failed=0; for t in $(TESTS) $(SCRIPT_TESTS); do \
	    echo "== $$t"; NESTC=$(BINDIR)/nestc B=$(B) BINDIR=$(BINDIR) SANFLAGS="$(SANFLAGS)" \
	        $$t || failed=1; \
	done; \
	echo "== ONNX backend node tests (every case of the issue's operators; make run-onnx lists the skipped)"; \
	$(B)/tests/onnx_cases --quiet --required --table $(B)/onnx/node-table.md $(B)/onnx/node || failed=1; \
	echo "== ONNX models exported from PyTorch"; \
	$(B)/tests/onnx_cases --quiet --all $(ONNX_MODELS_TOL) $(B)/onnx/models || failed=1; \
	echo "== training the digits MLP and CNN of samples/ against PyTorch"; \
	/usr/bin/python3 tests/test_train.py $(B)/samples/train samples/mlp.nest || failed=1; \
	/usr/bin/python3 tests/test_train.py $(B)/samples/train samples/cnn.nest || failed=1; \
	if [ $$failed = 0 ]; then echo "all tests passed"; else echo "SOME TESTS FAILED"; exit 1; fi

test:
	@tools/deps.sh build jit test
	$(Q)$(MAKE) --no-print-directory run-tests
	$(Q)$(MAKE) --no-print-directory python-test

# The Python front end (python/nest) against numpy, over this build's libnest.so.
python-test: $(B)/lib/libnest.so $(JITLIB) $(B)/samples/train | deps-test
	@echo "== tests/python (pytest)"
	$(Q)NEST_LIBRARY=$(abspath $(B)/lib/libnest.so) NEST_TRAIN=$(abspath $(B)/samples/train) \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/python

# LeakSanitizer's tracking of dynamic TLS (gcc 12's libsanitizer with this glibc) reads garbage
# ranges for threads of a dlopened library that uses TLS (libomp's workers, in JIT'd OpenMP
# code) and crashes at exit: leave dynamic TLS blocks to be scanned as the heap blocks they are.
sanitize:
	@tools/deps.sh build jit test
	$(Q)ASAN_OPTIONS="$${ASAN_OPTIONS:+$$ASAN_OPTIONS:}intercept_tls_get_addr=0" \
	    $(MAKE) --no-print-directory B=build/san BINDIR=build/san/bin \
	    SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	    CFLAGS="-O1 -g" run-tests

# ThreadSanitizer on tests/test_threads.c (8 threads parsing, emitting, compiling with the cache
# shared, calling one kernel at once, and calling, saving and loading state objects shared by
# pairs of threads), the library and the JIT shim both built with
# -fsanitize=thread. clang and LLVM inside the shim are not instrumented: TSan sees their locks
# (pthread calls are intercepted wherever they come from) but not their memory accesses. The JIT'd
# kernels are not instrumented either: the test checks their results against the interpreter.
TSAN_JITLIB := build/tsan/lib/libnest_jit.so
$(TSAN_JITLIB): runtime/jit.cpp runtime/rt.h include/nest.h | deps-jit
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $@")
	$(Q)$(CXX) $(JITFLAGS) -fsanitize=thread -g -shared -o $@ $< $(JITLIBS)

tsan: $(TSAN_JITLIB)
	$(Q)$(MAKE) --no-print-directory B=build/tsan BINDIR=build/tsan/bin SANFLAGS="-fsanitize=thread" \
	    CFLAGS="-O1 -g" build/tsan/tests/test_threads
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/tsan.supp) $${TSAN_OPTIONS:-}" \
	    NEST_JIT_LIB=$(abspath $(TSAN_JITLIB)) \
	    build/tsan/tests/test_threads

# Valgrind memcheck on the unit suites and the JIT path (test_threads: loading the shim, 8
# threads compiling through the cache, loading and calling one kernel): no error and no leak.
# tests/valgrind.supp holds the one suppression (ld.so's strncmp), justified there.
# NEST_TEST_VALGRIND makes the tests skip bounds on time.
VALGRIND_TESTS := test_ir test_parse test_parse_errors test_interp test_threads
VALGRIND       := valgrind -q --error-exitcode=9 --leak-check=full \
                  --show-leak-kinds=definite,indirect,possible \
                  --errors-for-leak-kinds=definite,indirect,possible \
                  --suppressions=tests/valgrind.supp --child-silent-after-fork=yes

valgrind:
	@tools/deps.sh build jit test valgrind
	$(Q)$(MAKE) --no-print-directory $(addprefix $(B)/tests/,$(VALGRIND_TESTS)) $(BINDIR)/nestc $(JITLIB)
	@failed=0; for t in $(VALGRIND_TESTS); do \
	    echo "== valgrind $(B)/tests/$$t"; \
	    NEST_TEST_VALGRIND=1 NESTC=$(BINDIR)/nestc $(VALGRIND) $(B)/tests/$$t || failed=1; \
	done; \
	if [ $$failed = 0 ]; then echo "valgrind: no errors"; else echo "VALGRIND FOUND ERRORS"; exit 1; fi

# The text-form parser under libFuzzer, built with clang against the compiler sources (not the
# runtime): any bytes parse or fail with a positioned error, and what parses prints, parses back
# and prints the same. New inputs go to $(B)/fuzz/corpus-parse, crashing ones to $(B)/fuzz/.
FUZZ_CC    ?= clang-14
FUZZ_TIME  ?= 60
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all $(WARN) -Iinclude -Icommon -Icompiler

# The targets of the text form, of ONNX and of graph building compile the compiler's sources, with
# the C of the ONNX schema.
FUZZ_SRC   := $(COMMON_SRC) $(COMPILER_SRC) $(GEN)/onnx.pb-c.c

$(B)/fuzz/fuzz_parse: tests/fuzz_parse.c $(FUZZ_SRC) $(HEADERS) $(GEN)/state_code.inc | deps-fuzz
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(GEN) -o $@ tests/fuzz_parse.c $(FUZZ_SRC) -lprotobuf-c -lm

# The .npy reader of nestc run under libFuzzer: any bytes give an array that keeps its promises
# and writes and reads back the same, or an error with a message.
$(B)/fuzz/fuzz_npy: tests/fuzz_npy.c driver/npy.c compiler/graph/types.c $(HEADERS) | deps-fuzz
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -Idriver -o $@ tests/fuzz_npy.c driver/npy.c \
	    compiler/graph/types.c

fuzz-npy: $(B)/fuzz/fuzz_npy
	@mkdir -p $(B)/fuzz/corpus-npy
	$(B)/fuzz/fuzz_npy -max_total_time=$(FUZZ_TIME) -dict=tests/fuzz_npy.dict \
	    -artifact_prefix=$(B)/fuzz/ $(B)/fuzz/corpus-npy tests/corpus/npy

fuzz-parse: $(B)/fuzz/fuzz_parse
	@mkdir -p $(B)/fuzz/corpus-parse
	$(B)/fuzz/fuzz_parse -max_total_time=$(FUZZ_TIME) -dict=tests/fuzz_parse.dict \
	    -artifact_prefix=$(B)/fuzz/ $(B)/fuzz/corpus-parse tests/corpus/parse

# The ONNX reader under libFuzzer: any bytes import or fail with an error naming the source and
# nothing to emit; the corpus is the ONNX backend node tests' models.
$(B)/fuzz/fuzz_onnx: tests/fuzz_onnx.c $(FUZZ_SRC) $(HEADERS) $(GEN)/state_code.inc | deps-fuzz
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(GEN) -o $@ tests/fuzz_onnx.c $(FUZZ_SRC) -lprotobuf-c -lm

fuzz-onnx: $(B)/fuzz/fuzz_onnx $(B)/onnx/node/.done
	@mkdir -p $(B)/fuzz/corpus-onnx $(B)/fuzz/seed-onnx
	$(Q)for d in $(B)/onnx/node/*/; do cp $$d/model.onnx $(B)/fuzz/seed-onnx/$$(basename $$d).onnx; done
	$(B)/fuzz/fuzz_onnx -max_total_time=$(FUZZ_TIME) -max_len=65536 -artifact_prefix=$(B)/fuzz/ \
	    $(B)/fuzz/corpus-onnx $(B)/fuzz/seed-onnx tests/corpus/onnx

# The C API's builders under libFuzzer (tests/fuzz_build.c): bytes become builder calls, valid
# or not; failures carry errors, values are what they say, results print, parse back and emit.
$(B)/fuzz/fuzz_build: tests/fuzz_build.c $(FUZZ_SRC) $(HEADERS) $(GEN)/state_code.inc | deps-fuzz
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(GEN) -o $@ tests/fuzz_build.c $(FUZZ_SRC) -lprotobuf-c -lm

fuzz-build: $(B)/fuzz/fuzz_build
	@mkdir -p $(B)/fuzz/corpus-build
	$(B)/fuzz/fuzz_build -max_total_time=$(FUZZ_TIME) -artifact_prefix=$(B)/fuzz/ \
	    $(B)/fuzz/corpus-build tests/corpus/build

# Compile and compare under libFuzzer: tests/test_random.c's generator drawing its choices from
# the input's bytes (NEST_LIBFUZZER), each graph compiled in process and compared with the
# interpreter. The compiler and runtime are instrumented; clang and LLVM (the JIT shim) are not.
$(B)/fuzz/fuzz_jit: tests/test_random.c $(RANDGRAPH) tests/testutil.h $(COMMON_SRC) $(COMPILER_SRC) $(RUNTIME_SRC) \
                    $(DRIVER_SRC) $(GEN)/onnx.pb-c.c $(HEADERS) $(JITLIB) $(GEN)/state_code.inc | deps-fuzz
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -Wno-missing-prototypes -Wno-unused-function -DNEST_LIBFUZZER -Iruntime -Itests -I$(GEN) \
	    -DNEST_JIT_PATH="\"$(abspath $(JITLIB))\"" -o $@ tests/test_random.c $(COMMON_SRC) \
	    $(COMPILER_SRC) $(RUNTIME_SRC) $(DRIVER_SRC) $(GEN)/onnx.pb-c.c -lcmocka $(LDLIBS)

fuzz-jit: $(B)/fuzz/fuzz_jit
	@mkdir -p $(B)/fuzz/corpus-jit
	ASAN_OPTIONS="$${ASAN_OPTIONS:+$$ASAN_OPTIONS:}intercept_tls_get_addr=0" \
	    $(B)/fuzz/fuzz_jit -max_total_time=$(FUZZ_TIME) -timeout=60 -rss_limit_mb=4096 \
	    -artifact_prefix=$(B)/fuzz/ $(B)/fuzz/corpus-jit tests/corpus/jit

# Random graphs (tests/test_random.c) through the JIT against the reference interpreter; a
# failing graph prints its seed and text form (NEST_FUZZ_SEED=<seed> NEST_FUZZ_COUNT=1 reruns it).
fuzz-random: $(B)/tests/test_random $(JITLIB)
	NEST_FUZZ_COUNT=$${NEST_FUZZ_COUNT:-20000} $(B)/tests/test_random

fuzz: fuzz-parse fuzz-npy fuzz-onnx fuzz-build fuzz-jit fuzz-random

# The samples: l2 through the C API and the JIT, dense ahead of time through its header, train
# (the digits of scikit-learn, read with zlib) through modules with state.
$(B)/samples/train: samples/train.c $(B)/lib/libnest.a include/nest.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -Werror $(SANFLAGS) -Iinclude -o $@ $< $(B)/lib/libnest.a \
	    -lz $(LDLIBS)

$(B)/samples/l2: samples/l2.c $(B)/lib/libnest.a include/nest.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -o $@ $< $(B)/lib/libnest.a $(LDLIBS)

$(B)/samples/dense.so $(B)/samples/dense.h: samples/dense.nest $(BINDIR)/nestc
	@mkdir -p $(B)/samples
	$(Q)$(BINDIR)/nestc $< -o $(B)/samples/dense.so

$(B)/samples/dense_main: samples/dense_main.c $(B)/samples/dense.so $(B)/samples/dense.h
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -Werror -I$(B)/samples -o $@ $< $(B)/samples/dense.so \
	    -Wl,-rpath,$(abspath $(B)/samples) -lm

# ONNX: a classifier exported from PyTorch, compiled by nestc, called from C and from Python.
$(B)/samples/onnx/classifier.so $(B)/samples/onnx/classifier.h: samples/onnx_export.py $(BINDIR)/nestc
	@mkdir -p $(B)/samples/onnx
	$(Q)/usr/bin/python3 samples/onnx_export.py $(B)/samples/onnx
	$(Q)$(BINDIR)/nestc $(B)/samples/onnx/classifier.onnx -o $(B)/samples/onnx/classifier.so

$(B)/samples/onnx/main: samples/onnx_main.c $(B)/samples/onnx/classifier.so
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -Werror -I$(B)/samples/onnx -o $@ $< \
	    $(B)/samples/onnx/classifier.so -Wl,-rpath,$(abspath $(B)/samples/onnx) -lm

demo:
	@tools/deps.sh build jit test
	$(Q)$(MAKE) --no-print-directory all $(B)/samples/l2 $(B)/samples/dense_main
	@echo "== samples/l2.nest, the squared L2 distance of x - y:"
	@cat samples/l2.nest
	@echo
	@echo "== its generated C (bin/nestc --emit=c samples/l2.nest):"
	$(Q)$(BINDIR)/nestc --emit=c samples/l2.nest
	@echo "== the reference interpreter on it (bin/nestc --run samples/l2.nest):"
	$(Q)$(BINDIR)/nestc --run samples/l2.nest
	@echo "== compiled in process and run (bin/nestc --run --jit -v samples/l2.nest):"
	$(Q)$(BINDIR)/nestc --run --jit -v samples/l2.nest
	@echo
	@echo "== samples/l2.c: the same graph built with the C API, compiled in process, called:"
	$(Q)$(B)/samples/l2
	@echo
	@echo "== samples/dense.nest compiled ahead of time (bin/nestc samples/dense.nest -o dense.so)"
	@echo "   and called from samples/dense_main.c through dense.h:"
	$(Q)$(B)/samples/dense_main
	@echo "== and from Python with ctypes (samples/dense.py):"
	$(Q)if command -v python3 >/dev/null; then python3 samples/dense.py $(B)/samples/dense.so; \
	    else echo "(python3 is not installed: skipped)"; fi
	@echo "== an ONNX model exported from PyTorch (samples/onnx_export.py), compiled by"
	@echo "   bin/nestc classifier.onnx -o classifier.so, called from C and from Python:"
	$(Q)$(MAKE) --no-print-directory $(B)/samples/onnx/main
	$(Q)$(B)/samples/onnx/main $(B)/samples/onnx
	$(Q)/usr/bin/python3 samples/onnx_run.py $(B)/samples/onnx
	@echo
	@echo "== the Python front end, named axes (PYTHONPATH=python $(PYTHON) samples/python/tour.py):"
	$(Q)PYTHONPATH=python NEST_LIBRARY=$(abspath $(B)/lib/libnest.so) $(PYTHON) samples/python/tour.py
	@echo "== samples/mlp.nest: a perceptron whose step (forward, grad, SGD with momentum, in"
	@echo "   place) is one kernel, trained on scikit-learn's digits by samples/train.c:"
	$(Q)$(MAKE) --no-print-directory $(B)/samples/train
	$(Q)$(B)/samples/train samples/mlp.nest
	@echo "== samples/cnn.nest: a small convolutional net (two 3x3 convolutions with ReLU and max"
	@echo "   pooling, a dense layer), its gradients through the pools and convolutions:"
	$(Q)$(B)/samples/train samples/cnn.nest

# The benchmark (bench/, docs/performance.md). The hand-fused C loops are built with the flags
# nest's JIT uses (runtime/jit.c); Eigen with -O3 -march=native. Writes build/bench.md, and its
# ratio tables as plots into docs/img/bench-*.svg (bench/plot.py, linked from the report).
BENCH_CC      ?= clang-14
BENCH_CXX     ?= clang++-14
BENCH_JITFLAGS := -O3 -march=native -mtune=generic -fPIC -fopenmp-simd -fopenmp -fno-math-errno \
                  -fveclib=libmvec
BENCH_BIN     := $(B)/bench/bench $(B)/bench/trivial_plain $(B)/bench/trivial_nest \
                 $(B)/bench/crosscheck $(B)/bench/ops $(B)/bench/train $(B)/bench/scale \
                 $(B)/bench/conv $(B)/bench/models_run $(B)/bench/dims

# the training table: nest's step kernels against PyTorch eager (bench/train_peers.py)
$(B)/bench/train: bench/train.c bench/peer.h bench/benchutil.h bench/blascore.h $(B)/bench/peer.o \
                  $(B)/bench/benchutil.o $(B)/bench/blascore.o $(B)/lib/libnest.a include/nest.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(NCFLAGS) -O2 -o $@ $< $(B)/bench/peer.o $(B)/bench/benchutil.o \
	    $(B)/bench/blascore.o $(B)/lib/libnest.a $(LDLIBS)

$(B)/bench/handfused.o: bench/handfused.c bench/handfused.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(BENCH_CC) -std=c11 $(BENCH_JITFLAGS) $(WARN) -c $< -o $@

$(B)/bench/eigen.o: bench/eigen.cpp bench/eigen.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $<")
	$(Q)$(BENCH_CXX) -std=c++17 -O3 -march=native -DNDEBUG -Wall -Wextra -Werror \
	    -isystem /usr/include/eigen3 -c $< -o $@

$(B)/bench/blascore.o: bench/blascore.c bench/blascore.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) -O2 -c $< -o $@

$(B)/bench/%.o: bench/%.c bench/benchutil.h bench/blascore.h bench/peer.h bench/handfused.h bench/eigen.h \
                include/nest.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) -O2 -c $< -o $@

$(B)/bench/bench: $(B)/bench/bench.o $(B)/bench/benchutil.o $(B)/bench/blascore.o \
                  $(B)/bench/handfused.o \
                  $(B)/bench/eigen.o $(B)/bench/peer.o $(B)/lib/libnest.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(BENCH_CXX) -fopenmp -o $@ $^ -Wl,-rpath,$(LLVM)/lib -lmvec $(LDLIBS)

$(B)/bench/conv: $(B)/bench/conv.o $(B)/bench/benchutil.o $(B)/bench/peer.o $(B)/bench/blascore.o \
                 $(B)/lib/libnest.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS)

$(B)/bench/crosscheck: bench/crosscheck.c bench/handfused.h $(B)/bench/handfused.o $(B)/lib/libnest.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(NCFLAGS) -O2 -Ibench -o $@ $< $(B)/bench/handfused.o $(B)/lib/libnest.a \
	    -L$(LLVM)/lib -lomp -Wl,-rpath,$(LLVM)/lib -lmvec $(LDLIBS)

# The compile-scale table: large generated graphs through the parser, the passes, the emitter
# and clang, stage by stage (links the compiler's internals).
$(B)/bench/scale: bench/scale.c bench/graphgen.c bench/graphgen.h bench/benchutil.h \
                  $(B)/bench/benchutil.o $(B)/lib/libnest.a $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(NCFLAGS) -O2 -Ibench -o $@ bench/scale.c bench/graphgen.c $(B)/bench/benchutil.o \
	    $(B)/lib/libnest.a $(LDLIBS)

# The op set of real models (softmax, batch_dot) against numpy and PyTorch (bench/ops_peers.py).
$(B)/bench/ops: bench/ops.c bench/benchutil.h bench/peer.h bench/blascore.h $(B)/bench/benchutil.o \
                $(B)/bench/peer.o $(B)/bench/blascore.o $(B)/lib/libnest.a include/nest.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(NCFLAGS) -O2 -o $@ $< $(B)/bench/benchutil.o $(B)/bench/peer.o $(B)/bench/blascore.o \
	    $(B)/lib/libnest.a $(LDLIBS)

# The models table (bench/models.py): nest's side, a server that imports, compiles and times.
$(B)/bench/models_run: bench/models.c bench/blascore.h $(B)/bench/blascore.o $(B)/lib/libnest.a \
                       include/nest.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(NCFLAGS) -O2 -Ibench -o $@ $< $(B)/bench/blascore.o $(B)/lib/libnest.a $(LDLIBS)

# Symbolic dims: one kernel for every N against the kernel for that N (bench/dims.c).
$(B)/bench/dims: bench/dims.c bench/benchutil.h $(B)/bench/benchutil.o $(B)/lib/libnest.a \
                 include/nest.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(NCFLAGS) -O2 -o $@ $< $(B)/bench/benchutil.o $(B)/lib/libnest.a $(LDLIBS)

$(B)/bench/trivial_plain: bench/trivial.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=c11 -O2 $(WARN) -o $@ $<

$(B)/bench/trivial_nest: bench/trivial.c $(B)/lib/libnest.so
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=c11 -O2 $(WARN) -DWITH_NEST -Iinclude -o $@ $< -L$(B)/lib -lnest \
	    -Wl,-rpath,$(abspath $(B)/lib)

bench:
	@tools/deps.sh bench
	$(Q)$(MAKE) --no-print-directory all $(BENCH_BIN)
	$(Q)$(B)/bench/bench -o $(B)/bench.md
	$(Q){ echo; echo '## Cross-check: two threads at 16M, best of 10 calls in turn'; echo; \
	    echo '```'; $(B)/bench/crosscheck; echo '```'; } | tee -a $(B)/bench.md
	$(Q)$(B)/bench/ops -o $(B)/bench.md
	$(Q)$(B)/bench/train -o $(B)/bench.md
	$(Q){ echo; NEST_LIBRARY=$(abspath $(B)/lib/libnest.so) $(PYTHON) bench/python_call.py; } | tee -a $(B)/bench.md
	$(Q)$(B)/bench/conv | tee -a $(B)/bench.md
	$(Q)$(B)/bench/scale -o $(B)/bench.md
	$(Q)$(B)/bench/dims -o $(B)/bench.md
	$(Q)$(MAKE) --no-print-directory bench-models
	$(Q){ echo; cat $(B)/bench-models.md; } >> $(B)/bench.md
	$(Q)/usr/bin/python3 bench/plot.py $(B)/bench.md docs/img

# The models table alone: MLP, LeNet-5, ResNet-18, MobileNetV2 and the transformer encoder
# against PyTorch eager (bench/models.py; build/bench-models.md).
bench-models: all $(B)/bench/models_run
	@tools/deps.sh bench
	$(Q)$(PYTHON) bench/models.py -o $(B)/bench-models.md

# make install [PREFIX=/usr/local] [DESTDIR=/staging]: the libraries (libnest.so.VERSION with
# its soname and libnest.so links, libnest.a), the JIT library in lib/nest/ (where libnest and
# nestc look for it), nest.h, nestc, nest.pc for pkg-config, the man page, the docs, and the
# Python package in PYTHONDIR (with nest/_install.py saying where libnest.so is). `make
# uninstall` with the same PREFIX and DESTDIR removes exactly these files (and the Python
# package's byte code).
PREFIX_   := $(DESTDIR)$(PREFIX)
MANDIR    := $(PREFIX)/share/man
DOCDIR    := $(PREFIX)/share/doc/nest
DOC_FILES := README.md $(wildcard docs/*.md)
DOC_IMG   := $(wildcard docs/img/*.svg)
PY_FILES  := $(filter-out python/nest/_install.py,$(wildcard python/nest/*.py))
INSTALLED := $(PREFIX)/include/nest.h $(PREFIX)/bin/nestc $(PREFIX)/lib/libnest.a \
             $(PREFIX)/lib/libnest.so.$(VERSION) $(PREFIX)/lib/$(SONAME) $(PREFIX)/lib/libnest.so \
             $(PREFIX)/lib/nest/libnest_jit.so $(PREFIX)/lib/pkgconfig/nest.pc \
             $(MANDIR)/man1/nestc.1 $(addprefix $(DOCDIR)/,$(notdir $(DOC_FILES))) \
             $(addprefix $(DOCDIR)/img/,$(notdir $(DOC_IMG))) \
             $(addprefix $(PYTHONDIR)/nest/,$(notdir $(PY_FILES)) _install.py)

# The pictures of docs/ (Graphviz), committed so that the docs show them: the layers
# (docs/layers.dot) and the sample graphs before and after fusion, drawn by nestc --emit=dot for
# a fixed target (x86-64-v3) so that they do not depend on the machine that makes them.
DOC_GRAPHS := l2 dense softmax
DOC_PICS   := docs/img/layers.svg \
              $(foreach g,$(DOC_GRAPHS),docs/img/$(g)-unfused.svg docs/img/$(g)-fused.svg)

docs: $(DOC_PICS)

docs/img/layers.svg: docs/layers.dot | deps-docs
	@mkdir -p $(dir $@)
	$(Q)dot -Tsvg $< -o $@

docs/img/%-fused.svg: samples/%.nest $(BINDIR)/nestc | deps-docs
	@mkdir -p $(dir $@)
	$(Q)$(BINDIR)/nestc --emit=dot --march=x86-64-v3 $< > $@.dot && dot -Tsvg $@.dot -o $@ && rm $@.dot

docs/img/%-unfused.svg: samples/%.nest $(BINDIR)/nestc | deps-docs
	@mkdir -p $(dir $@)
	$(Q)$(BINDIR)/nestc --emit=dot --no-fuse --march=x86-64-v3 $< > $@.dot && \
	    dot -Tsvg $@.dot -o $@ && rm $@.dot

install: all
	install -d $(PREFIX_)/include $(PREFIX_)/bin $(PREFIX_)/lib/nest $(PREFIX_)/lib/pkgconfig \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DOCDIR)/img
	install -m 644 include/nest.h $(PREFIX_)/include/
	install -m 755 $(BINDIR)/nestc $(PREFIX_)/bin/
	install -m 644 $(B)/lib/libnest.a $(PREFIX_)/lib/
	install -m 755 $(B)/lib/libnest.so.$(VERSION) $(PREFIX_)/lib/
	ln -sf libnest.so.$(VERSION) $(PREFIX_)/lib/$(SONAME)
	ln -sf $(SONAME) $(PREFIX_)/lib/libnest.so
	install -m 755 $(JITLIB) $(PREFIX_)/lib/nest/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' tools/nest.pc.in \
	    > $(PREFIX_)/lib/pkgconfig/nest.pc
	install -m 644 docs/nestc.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(DOC_FILES) $(DESTDIR)$(DOCDIR)/
	$(if $(DOC_IMG),install -m 644 $(DOC_IMG) $(DESTDIR)$(DOCDIR)/img/)
	install -d $(DESTDIR)$(PYTHONDIR)/nest
	install -m 644 $(PY_FILES) $(DESTDIR)$(PYTHONDIR)/nest/
	printf '# written by make install: where libnest.so is\nLIBDIR = "%s"\n' '$(PREFIX)/lib' \
	    > $(DESTDIR)$(PYTHONDIR)/nest/_install.py
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then \
	    ldconfig; fi

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rm -rf $(DESTDIR)$(PYTHONDIR)/nest/__pycache__
	rmdir $(PREFIX_)/lib/nest $(DESTDIR)$(DOCDIR)/img $(DESTDIR)$(DOCDIR) \
	    $(DESTDIR)$(PYTHONDIR)/nest 2>/dev/null || true

clean:
	rm -rf build bin
