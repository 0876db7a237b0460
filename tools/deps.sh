#!/bin/sh
# Installs the Debian packages nest needs, or says how to.
#   tools/deps.sh          what building, testing and the JIT need
#   tools/deps.sh bench    also the peers of `make bench`
#   tools/deps.sh valgrind also valgrind, for `make valgrind`
# As root, missing packages are installed with apt-get; otherwise the exact command is printed
# and the script fails.
set -eu

# python3-pytest and python3-sklearn (its digits data): the Python front end's tests
PKGS="make gcc g++ libcmocka-dev clang-14 llvm-14-dev libclang-14-dev libclang-cpp14-dev libomp-14-dev \
      libprotobuf-c-dev protobuf-c-compiler libonnx-dev \
      python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-pytest \
      python3-sklearn"
if [ "${1:-}" = bench ]; then
    PKGS="$PKGS python3-numexpr libeigen3-dev libopenblas-dev hyperfine"
fi
if [ "${1:-}" = valgrind ]; then
    PKGS="$PKGS valgrind"
fi

missing=""
for p in $PKGS; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends $missing
else
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: run as root:  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
