#!/bin/sh
# The layers of docs/architecture.md, held against the #include lines of the source and the calls
# between the objects of the build: the
# dependencies run one way (common <- compiler, runtime <- driver <- nestc), the runtime knows no
# graph, the compiler knows no runtime, and the private headers of the emitter and of the ONNX
# reader stay in their folders, and no file is past 1,500 lines.
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
# state_code.inc is state_code.h as text (one string per line), made at build time
allowed "compiler/emit/*.c compiler/emit/*.h" nest.h util.h internal.h ops.def emit.h state_code.inc
allowed "runtime/*.c runtime/*.h" nest.h util.h rt.h
# the state objects (state.c) compile the state's C that the generated code prints
allowed "driver/driver.c driver/state.c driver/driver.h" nest.h util.h internal.h rt.h driver.h \
    emit/state_code.h
allowed "driver/cli.c driver/nestc.c driver/run.c driver/npy.c driver/cli.h" nest.h util.h internal.h cli.h
# jit.cpp includes clang's and LLVM's headers by quoted names too: only its own are checked
for h in $(sed -n 's/^#include "\([^"/]*\)"$/\1/p' runtime/jit.cpp); do
    case "$h" in nest.h|rt.h) ;; *) echo "test_layers: runtime/jit.cpp includes \"$h\""; fail=1 ;; esac
done

# The calls, from the library's and nestc's objects of this build ($B/obj; not the tests'): a
# name an object uses must be defined in its own layer or one below it (nm and join, a few hundred
# milliseconds). Layers, bottom up: common; the compiler's graph, passes (on graph), emit (on
# passes), front (on graph and the ONNX schema's C), pipeline.c (on all of them); the runtime (on
# common alone); driver.c (on the compiler and the runtime); nestc's files (on everything).
B=${B:-build}
if [ -d "$B/obj/compiler" ]; then
    tmp=$(mktemp -d)
    (cd "$B/obj" && find common gen compiler runtime driver -name '*.o' 2>/dev/null | sort) > "$tmp/objs"
    while read -r o; do
        nm -g --defined-only "$B/obj/$o" | awk -v o="$o" 'NF == 3 { print $3, o }'
    done < "$tmp/objs" | sort -k1,1 > "$tmp/defs"
    while read -r o; do
        nm -u "$B/obj/$o" | awk -v o="$o" '{ print $2, o }'
    done < "$tmp/objs" | sort -k1,1 > "$tmp/uses"
    # "symbol user definer" for each use of a name that some object of the build defines
    join "$tmp/uses" "$tmp/defs" | awk '
        function layer(o) {
            if (o ~ /^common\//) return "common"
            if (o ~ /^gen\//) return "gen"
            if (o ~ /^compiler\/(graph|passes|emit|front)\//) { split(o, p, "/"); return p[2] }
            if (o == "compiler/pipeline.o") return "pipeline"
            if (o ~ /^runtime\//) return "runtime"
            if (o == "driver/driver.o" || o == "driver/state.o") return "driver"
            if (o ~ /^driver\//) return "nestc"
            return "?"
        }
        BEGIN {
            may["common"] = "common"
            may["gen"] = "gen"
            may["graph"] = "graph common"
            may["passes"] = "passes graph common"
            may["emit"] = "emit passes graph common"
            may["front"] = "front graph gen common"
            may["pipeline"] = "pipeline emit passes front graph gen common"
            may["runtime"] = "runtime common"
            may["driver"] = "driver pipeline emit passes front graph gen runtime common"
            may["nestc"] = "nestc " may["driver"]
        }
        {
            from = layer($2); to = layer($3)
            if (index(" " may[from] " ", " " to " ") == 0) {
                printf "test_layers: %s (%s) calls %s of %s (%s), above or beside it\n", $2, from, $1, $3, to
                bad = 1
            }
        }
        END { exit bad }' || fail=1
    rm -rf "$tmp"
else
    echo "test_layers: $B/obj holds no objects: the calls are not checked"
    fail=1
fi

# one subject per file: no source, script, Makefile or document past 1,500 lines (split a file by
# what it does, as the emitter and the big suites are split); build outputs are not looked at
big=$(find . \( -path ./.git -o -path ./build -o -path ./bin -o -path "./$B" -o -name __pycache__ \) \
           -prune -o -type f \( -name '*.[ch]' -o -name '*.cpp' -o -name '*.py' -o -name '*.sh' \
           -o -name '*.def' -o -name '*.md' -o -name Makefile \) -print |
      xargs wc -l | awk '$2 != "total" && $1 > 1500 { print "  " $2 ": " $1 " lines" }')
if [ -n "$big" ]; then
    echo "test_layers: files past 1,500 lines:"; printf '%s\n' "$big"; fail=1
fi

[ $fail = 0 ] && echo "test_layers: the includes and the calls follow the layers; no file is past 1,500 lines"
exit $fail
