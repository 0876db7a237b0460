#!/bin/sh
# On a machine without the Debian packages, make stops before compiling anything and prints the
# apt-get command that installs what is missing. The machine is faked: a dpkg-query that knows
# only the packages in $INSTALLED comes first on PATH.
#   tests/test_deps.sh          (from the top of the tree)
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
no() { echo "test_deps: $*"; fail=1; }

mkdir "$tmp/bin"
cat > "$tmp/bin/dpkg-query" <<'FAKE'
#!/bin/sh
# dpkg-query -W -f=FORMAT PKG...: "PKG install ok installed" for the packages in $INSTALLED
shift 2
for p in "$@"; do
    case " $INSTALLED " in
        *" $p "*) echo "$p install ok installed" ;;
        *) echo "dpkg-query: no packages found matching $p" >&2 ;;
    esac
done
FAKE
chmod +x "$tmp/bin/dpkg-query"

# nothing installed: plain make stops at the first check, before any compiler runs
out=$(INSTALLED="" PATH="$tmp/bin:$PATH" MAKEFLAGS= make --no-print-directory B="$tmp/b" \
      BINDIR="$tmp/b/bin" all 2>&1) && no "make succeeded without packages"
build="make gcc libprotobuf-c-dev protobuf-c-compiler libonnx-dev"
printf '%s\n' "$out" | grep -q "^nest: install them as root:  apt-get update && apt-get install -y $build\$" ||
    no "make does not print the apt-get line for the compiler: $out"
printf '%s\n' "$out" | grep -q "error:" && no "make ran a compiler: $out"
[ -e "$tmp/b/obj" ] && no "make compiled something"

# the compiler there, LLVM not: the JIT library's check names exactly LLVM's packages
out=$(INSTALLED="$build" PATH="$tmp/bin:$PATH" tools/deps.sh --check jit 2>&1) &&
    no "deps.sh --check jit succeeded without LLVM"
printf '%s\n' "$out" | grep -q "apt-get install -y g++ clang-14 llvm-14-dev libclang-14-dev libclang-cpp14-dev libomp-14-dev\$" ||
    no "deps.sh --check jit says: $out"
out=$(INSTALLED="$build g++ clang-14 llvm-14-dev libclang-14-dev libclang-cpp14-dev libomp-14-dev" \
      PATH="$tmp/bin:$PATH" tools/deps.sh --check build jit 2>&1) || no "deps.sh with everything there fails: $out"
[ -z "$out" ] || no "deps.sh with everything there says: $out"
out=$(INSTALLED="" PATH="$tmp/bin:$PATH" tools/deps.sh --check docs 2>&1) || true
printf '%s\n' "$out" | grep -q "(for make docs): graphviz" || no "deps.sh --check docs says: $out"
tools/deps.sh --check nonsense 2>/dev/null && no "deps.sh takes an unknown set"

[ $fail = 0 ] && echo "test_deps: make names the missing packages before it compiles"
exit $fail
