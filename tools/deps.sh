#!/bin/sh
# The Debian packages nest needs, by what needs them. Installs the missing ones as root, or says
# how to.
#
#   tools/deps.sh [--check] [SET...]
#
# SETs: build (libnest and nestc, with the ONNX reader), jit (the in-process compiler,
# libnest_jit.so), test (the test suite: the ONNX cases use onnx and torch; the Python front
# end's tests pytest and sklearn's digits), bench (make bench and its peers: numpy,
# numexpr, PyTorch, Eigen, OpenBLAS), docs (make docs),
# fuzz (the libFuzzer targets), valgrind (make valgrind).
# Without a SET: build jit test, what `make` and `make test` need.
# Missing packages are installed with apt-get when running as root, unless --check is given;
# otherwise the exact apt-get command is printed on standard error and the script fails, before
# anything is compiled. Without dpkg-query (not Debian) nothing is checked.
set -eu

check=0
if [ "${1:-}" = --check ]; then
    check=1
    shift
fi
[ $# -gt 0 ] || set -- build jit test

pkgs=""
what=""
for set in "$@"; do
    case "$set" in
        build) p="make gcc libprotobuf-c-dev protobuf-c-compiler libonnx-dev"
               w="building libnest and nestc" ;;
        jit)   p="g++ clang-14 llvm-14-dev libclang-14-dev libclang-cpp14-dev libomp-14-dev"
               w="the in-process compiler (libnest_jit.so)" ;;
        test)  p="libcmocka-dev python3 python3-numpy pkg-config groff-base python3-onnx"
               p="$p python3-torch python3-torchvision python3-pytest python3-sklearn zlib1g-dev"
               w="the test suite" ;;
        bench) p="g++ clang-14 python3 python3-numpy python3-numexpr python3-matplotlib"
               p="$p python3-torch libeigen3-dev libopenblas-dev hyperfine"; w="make bench" ;;
        docs)  p="graphviz"; w="make docs" ;;
        fuzz)  p="clang-14 libclang-rt-14-dev"; w="the fuzz targets" ;;
        valgrind) p="valgrind"; w="make valgrind" ;;
        *)     echo "deps.sh: unknown set '$set' (build jit test bench docs fuzz valgrind)" >&2; exit 2 ;;
    esac
    pkgs="$pkgs $p"
    what="$what${what:+, }$w"
done

command -v dpkg-query >/dev/null 2>&1 || exit 0

# one query for all of them (tens of milliseconds); a package dpkg has never heard of is missing
installed=$(dpkg-query -W -f='${Package} ${Status}\n' $pkgs 2>/dev/null |
            sed -n 's/ install ok installed$//p') || true
missing=""
for p in $pkgs; do
    case " $missing " in *" $p "*) continue ;; esac
    if ! printf '%s\n' "$installed" | grep -qx "$p"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$check" = 0 ] && [ "$(id -u)" = 0 ]; then
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends $missing
else
    echo "nest: missing Debian packages (for $what):$missing" >&2
    echo "nest: install them as root:  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
