#!/bin/sh
# make install into a staging directory (DESTDIR), as a package build would: the files land where
# they should, libnest.so has its soname and exports only the API, a program built outside the
# tree with `pkg-config --cflags --libs nest` compiles in process with the installed JIT library,
# the installed nestc runs and builds a .so, the Python package computes, the man page renders,
# and make uninstall leaves nothing behind.
#   B=build BINDIR=bin tests/test_install.sh      (from the top of the tree; not under sanitizers)
set -eu
B=${B:-build}
BINDIR=${BINDIR:-bin}
if [ -n "${SANFLAGS:-}" ]; then
    echo "test_install: skipped in a sanitizer build"
    exit 0
fi
top=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
prefix=/opt/nest-test
root=$stage$prefix
version=$(sed -n 's/^#define NEST_VERSION "\(.*\)"/\1/p' include/nest.h)
major=${version%%.*}
fail=0
no() { echo "test_install: $*"; fail=1; }

make --no-print-directory -s install DESTDIR="$stage" PREFIX="$prefix" B="$B" BINDIR="$BINDIR" \
    >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; no "make install failed"; exit 1; }

# the files, and nothing else (the docs are what docs/ holds)
want="bin/nestc
include/nest.h
lib/libnest.a
lib/libnest.so
lib/libnest.so.$major
lib/libnest.so.$version
lib/nest/libnest_jit.so
lib/pkgconfig/nest.pc
share/doc/nest/README.md
share/man/man1/nestc.1"
for f in docs/*.md; do
    want="$want
share/doc/nest/${f##*/}"
done
pydir=lib/python$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
for f in python/nest/*.py; do
    want="$want
$pydir/nest/${f##*/}"
done
want=$(printf '%s\n%s\n' "$want" "$pydir/nest/_install.py" | sort)
got=$(cd "$root" && find . \( -type f -o -type l \) ! -path './share/doc/nest/img/*' |
      sed 's|^\./||' | sort)
[ "$got" = "$want" ] || no "installed files differ:
$(printf '%s\n' "$want" > "$tmp/want"; printf '%s\n' "$got" | diff "$tmp/want" - || true)"
for f in docs/img/*.svg; do
    [ -e "$f" ] || continue
    cmp -s "$f" "$root/share/doc/nest/img/${f##*/}" || no "docs/img/${f##*/} is not installed"
done
[ "$(readlink "$root/lib/libnest.so")" = "libnest.so.$major" ] || no "libnest.so is not a link to the soname"
[ "$(readlink "$root/lib/libnest.so.$major")" = "libnest.so.$version" ] || no "the soname link is wrong"
soname=$(readelf -d "$root/lib/libnest.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libnest.so.$major" ] || no "the soname is '$soname', not libnest.so.$major"
others=$(nm -D --defined-only "$root/lib/libnest.so.$version" | awk '{print $3}' | grep -v '^nest_' || true)
[ -z "$others" ] || no "libnest.so exports more than the API: $(echo $others | head -c 300)"

# a program outside the tree, built and linked with what pkg-config says
export PKG_CONFIG_PATH="$root/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
[ "$(pkg-config --modversion nest)" = "$version" ] || no "pkg-config --modversion nest is not $version"
mkdir "$tmp/app"
cp samples/l2.c "$tmp/app/"
cd "$tmp/app"
# shellcheck disable=SC2046
cc -std=c11 -O2 -Wall -Wextra -Werror l2.c $(pkg-config --cflags --libs nest) -o l2 ||
    no "samples/l2.c does not build with pkg-config --cflags --libs nest"
if [ -x l2 ]; then
    LD_LIBRARY_PATH="$root/lib" LD_DEBUG=files XDG_CACHE_HOME="$tmp/cache" ./l2 >out 2>debug ||
        { cat out; no "the program built against the staged install fails"; }
    grep -q "calling init: $root/lib/libnest.so.$major" debug || no "the program did not load the staged libnest.so"
    grep -qF -e "file=$root/lib/nest/libnest_jit.so " debug ||
        no "nest_compile did not load the staged lib/nest/libnest_jit.so"
fi
# statically, as docs/api.md says: the JIT library is then looked for in ../lib/nest of the
# program, so this one (outside the prefix) is pointed at it
cc -std=c11 -O2 -Wall -Wextra -Werror l2.c $(pkg-config --cflags nest) \
    "$(pkg-config --variable=libdir nest)/libnest.a" -lprotobuf-c -lm -ldl -lpthread -o l2s ||
    no "samples/l2.c does not build with libnest.a"
if [ -x l2s ]; then
    NEST_JIT_LIB="$root/lib/nest/libnest_jit.so" XDG_CACHE_HOME="$tmp/cache" ./l2s >out 2>&1 ||
        { cat out; no "the program linked with libnest.a fails"; }
    ! ldd l2s | grep -q libnest || no "the static program needs a libnest shared library"
fi
cd "$top"

# the installed nestc: its version, a run (it finds the JIT library in ../lib/nest), a .so
"$root/bin/nestc" --version | grep -q "^nestc $version\$" || no "the installed nestc --version"
LD_DEBUG=files XDG_CACHE_HOME="$tmp/cache" "$root/bin/nestc" run samples/l2.nest --random --check \
    >"$tmp/run.out" 2>"$tmp/run.debug" || { cat "$tmp/run.out"; no "the installed nestc run fails"; }
grep -qF -e "file=$root/bin/../lib/nest/libnest_jit.so " "$tmp/run.debug" ||
    no "the installed nestc did not load the staged JIT library"
"$root/bin/nestc" samples/dense.nest -o "$tmp/dense.so" || no "the installed nestc -o fails"
[ -s "$tmp/dense.h" ] || no "the installed nestc -o wrote no header"

# the Python package: found on the path Debian's python3 searches, it finds libnest.so where
# _install.py says (here moved by DESTDIR, so NEST_LIBRARY points into the stage)
grep -qx "LIBDIR = \"$prefix/lib\"" "$root/$pydir/nest/_install.py" ||
    no "nest/_install.py does not name $prefix/lib"
PYTHONPATH="$root/$pydir" NEST_LIBRARY="$root/lib/libnest.so.$major" XDG_CACHE_HOME="$tmp/cache" \
    /usr/bin/python3 -c '
import numpy as np, nest as ng
assert ng.__file__.startswith("'"$root"'"), ng.__file__
N = ng.make_axis(length=5, name="N")
a, b = ng.placeholder([N]), ng.placeholder([N])
f = ng.computation(ng.dot(a - b, a - b), a, b)
x, y = np.arange(5, dtype=np.float32), np.ones(5, dtype=np.float32)
assert float(f(x, y)) == 15.0, f(x, y)    # 1 + 0 + 1 + 4 + 9
' || no "the installed Python package does not compute"

# the man page, through man
MANWIDTH=80 man -l "$root/share/man/man1/nestc.1" 2>&1 | grep -q "nestc run FILE" ||
    no "man -l does not render the installed nestc.1"

# and back out
make --no-print-directory -s uninstall DESTDIR="$stage" PREFIX="$prefix" B="$B" BINDIR="$BINDIR" \
    >"$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log"; no "make uninstall failed"; }
left=$(find "$stage" \( -type f -o -type l \) | sed "s|^$stage||")
[ -z "$left" ] || no "make uninstall left: $left"

[ $fail = 0 ] && echo "test_install: a staged install of nest $version builds, links and runs a program with pkg-config"
exit $fail
