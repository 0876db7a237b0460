#!/bin/sh
# The layers of docs/architecture.md, held against the #include lines of the source: the
# dependencies run one way (common <- compiler, runtime <- driver <- nestc), the runtime knows no
# graph, the compiler knows no runtime, and the private headers of the emitter and of the ONNX
# reader stay in their folders.
#   tests/test_layers.sh        (from the top of the tree)
set -eu
fail=0

# allowed FILES HEADER...: the project headers each of FILES may include
allowed() {
    files=$1
    shift
    for f in $files; do
        [ -e "$f" ] || continue
        for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
            ok=0
            for a in "$@"; do
                [ "$h" = "$a" ] && ok=1
            done
            if [ $ok = 0 ]; then
                echo "test_layers: $f includes \"$h\", which its layer may not use"
                fail=1
            fi
        done
    done
}

allowed "include/nest.h"
allowed "common/*.c common/*.h" util.h
allowed "compiler/*.h compiler/*.c compiler/graph/*.c compiler/passes/*.c" \
    nest.h util.h internal.h ops.def
# the ONNX reader's private header, its table of operators and the C protoc-c makes of the ONNX
# schema stay in front/
allowed "compiler/front/*.c compiler/front/*.h" nest.h util.h internal.h ops.def onnx.h onnx.pb-c.h \
    onnx_ops.def
allowed "compiler/emit/*.c compiler/emit/*.h" nest.h util.h internal.h ops.def emit.h
allowed "runtime/*.c runtime/*.h" nest.h util.h rt.h
allowed "driver/driver.c" nest.h util.h internal.h rt.h
allowed "driver/cli.c driver/nestc.c driver/run.c driver/npy.c driver/cli.h" nest.h util.h internal.h cli.h
# jit.cpp includes clang's and LLVM's headers by quoted names too: only its own are checked
for h in $(sed -n 's/^#include "\([^"/]*\)"$/\1/p' runtime/jit.cpp); do
    case "$h" in nest.h|rt.h) ;; *) echo "test_layers: runtime/jit.cpp includes \"$h\""; fail=1 ;; esac
done

[ $fail = 0 ] && echo "test_layers: the includes follow the layers"
exit $fail
