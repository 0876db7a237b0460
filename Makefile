# nest - a tensor graph compiler that prints loop-nest C.
#
#   make            libraries (build/lib) and bin/nestc
#   make test       install missing Debian packages (or say how), build, run the test suite
#   make sanitize   the test suite built with -fsanitize=address,undefined, run
#   make demo       compile and run the samples, show the generated C
#   make bench      nest against numpy, numexpr, Eigen, OpenBLAS and hand-fused C
#   make fuzz       the long randomized differential run (runs fuzz-parse first)
#   make fuzz-parse the text-form parser under libFuzzer for FUZZ_TIME seconds (default 60)
#   make deps       install the Debian packages nest needs (as root) or print the command
#   make install    PREFIX=/usr/local
#   make clean
# V=1 shows full command lines.

CC      ?= cc
CXX     ?= c++
PREFIX  ?= /usr/local
B       ?= build
BINDIR  ?= bin
LLVM    ?= /usr/lib/llvm-14

ifeq ($(V),1)
Q :=
else
Q := @
endif

WARN     := -Wall -Wextra -Werror -pedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS   ?= -O2 -g
NCFLAGS  := -std=c11 -D_GNU_SOURCE -fPIC $(WARN) -Iinclude -Icompiler -Iruntime $(SANFLAGS)
LDLIBS   := -lm -ldl -lpthread

COMPILER_SRC := compiler/util.c compiler/ir.c compiler/api.c compiler/parse.c compiler/print.c \
                compiler/interp.c
RUNTIME_SRC  :=
NESTC_SRC    := compiler/nestc.c
TEST_NAMES   := test_ir test_parse test_interp test_fuse test_diff

LIB_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(COMPILER_SRC) $(RUNTIME_SRC))
NESTC_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(NESTC_SRC))
TESTS     := $(addprefix $(B)/tests/,$(TEST_NAMES))
HEADERS   := include/nest.h compiler/internal.h compiler/ops.def $(wildcard runtime/*.h)

.PHONY: all test sanitize demo bench fuzz fuzz-parse deps install clean check-deps run-tests
.DELETE_ON_ERROR:

all: $(B)/lib/libnest.a $(B)/lib/libnest.so $(BINDIR)/nestc

deps:
	@tools/deps.sh

# `make test` and `make demo` check the packages first; CI runs as root and installs them.
check-deps:
	@tools/deps.sh

$(B)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -c $< -o $@

$(B)/lib/libnest.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/lib/libnest.so: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared $(SANFLAGS) -o $@ $^ $(LDLIBS)

$(BINDIR)/nestc: $(NESTC_OBJ) $(B)/lib/libnest.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(SANFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/%: tests/%.c tests/testutil.h $(B)/lib/libnest.a $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) $(CFLAGS) -Wno-missing-prototypes -Itests -o $@ $< $(B)/lib/libnest.a -lcmocka $(LDLIBS)

run-tests: $(TESTS) $(BINDIR)/nestc
	@failed=0; for t in $(TESTS); do \
	    echo "== $$t"; NESTC=$(BINDIR)/nestc $$t || failed=1; \
	done; \
	if [ $$failed = 0 ]; then echo "all tests passed"; else echo "SOME TESTS FAILED"; exit 1; fi

test: check-deps
	$(Q)$(MAKE) --no-print-directory run-tests

sanitize: check-deps
	$(Q)$(MAKE) --no-print-directory B=build/san BINDIR=build/san/bin \
	    SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	    CFLAGS="-O1 -g" run-tests

# The text-form parser under libFuzzer, built with clang against the compiler sources (not the
# runtime): any bytes parse or fail with a positioned error, and what parses prints, parses back
# and prints the same. New inputs go to $(B)/fuzz/corpus-parse, crashing ones to $(B)/fuzz/.
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 60
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all $(WARN) -Iinclude -Icompiler

$(B)/fuzz/fuzz_parse: tests/fuzz_parse.c $(COMPILER_SRC) $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz_parse.c $(COMPILER_SRC) -lm

fuzz-parse: $(B)/fuzz/fuzz_parse
	@mkdir -p $(B)/fuzz/corpus-parse
	$(B)/fuzz/fuzz_parse -max_total_time=$(FUZZ_TIME) -dict=tests/fuzz_parse.dict \
	    -artifact_prefix=$(B)/fuzz/ $(B)/fuzz/corpus-parse tests/corpus/parse

fuzz: fuzz-parse

demo: check-deps all
	$(Q)echo "== bin/nestc --emit=ir samples/l2.nest"
	$(Q)$(BINDIR)/nestc --emit=ir samples/l2.nest
	$(Q)echo "== bin/nestc --run samples/l2.nest (reference interpreter)"
	$(Q)$(BINDIR)/nestc --run samples/l2.nest

# The benchmark (bench/, docs/performance.md). The hand-fused C loops are built with the flags
# nest's JIT uses (runtime/jit.c); Eigen with -O3 -march=native. Writes build/bench.md.
BENCH_CC      ?= clang-14
BENCH_CXX     ?= clang++-14
BENCH_JITFLAGS := -O3 -march=native -mtune=generic -fPIC -fopenmp-simd -fopenmp -fno-math-errno \
                  -fveclib=libmvec
BENCH_BIN     := $(B)/bench/bench $(B)/bench/trivial_plain $(B)/bench/trivial_nest

$(B)/bench/handfused.o: bench/handfused.c bench/handfused.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(BENCH_CC) -std=c11 $(BENCH_JITFLAGS) $(WARN) -c $< -o $@

$(B)/bench/eigen.o: bench/eigen.cpp bench/eigen.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $<")
	$(Q)$(BENCH_CXX) -std=c++17 -O3 -march=native -DNDEBUG -Wall -Wextra -Werror \
	    -isystem /usr/include/eigen3 -c $< -o $@

$(B)/bench/bench.o: bench/bench.c bench/handfused.h bench/eigen.h include/nest.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(NCFLAGS) -O2 -c $< -o $@

$(B)/bench/bench: $(B)/bench/bench.o $(B)/bench/handfused.o $(B)/bench/eigen.o $(B)/lib/libnest.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(BENCH_CXX) -fopenmp -o $@ $^ -Wl,-rpath,$(LLVM)/lib -lmvec $(LDLIBS)

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

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/nest.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(B)/lib/libnest.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/lib/libnest.so $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BINDIR)/nestc $(DESTDIR)$(PREFIX)/bin/

clean:
	rm -rf build bin
