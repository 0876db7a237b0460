#!/bin/sh
# The manual page against the program: every option that `nestc --help` and `nestc run --help`
# print is described in docs/nestc.1, every option the code parses is in both, its version is
# nest.h's, it states the exit statuses, and groff renders it without a warning.
#   NESTC=bin/nestc tests/test_docs.sh
set -eu
NESTC=${NESTC:-bin/nestc}
man=docs/nestc.1
fail=0

# rendered wide and without hyphenation, so that no option is broken across lines
warnings=$(mktemp)
trap 'rm -f "$warnings"' EXIT
text=$(groff -man -Tutf8 -ww -rLL=300n -rHY=0 "$man" 2>"$warnings" | sed 's/.\x08//g')
if [ -s "$warnings" ]; then
    echo "test_docs: groff warns about $man:"; cat "$warnings"; fail=1
fi

# each option at the start of a line of the help texts: -o, -O0, --emit=FORM, --run[=FUNC] ...
opts=$( { "$NESTC" --help; "$NESTC" run --help; } |
        sed -n 's/^  \(-[-A-Za-z0-9]*\).*/\1/p' | sort -u)
for o in $opts; do
    if ! printf '%s\n' "$text" | grep -qE -e "(^|[ ,(]|\\[)$o([ =,.]|\\[|\\]|$)"; then
        echo "test_docs: $man does not describe $o"; fail=1
    fi
done
[ -n "$opts" ] || { echo "test_docs: no options found in nestc --help"; fail=1; }

# every option the parsers accept (the literals they compare an argument with, in driver/) is in
# the help texts, so in the manual page as well: an option added to the code without its line in
# the help fails here
help=$( { "$NESTC" --help; "$NESTC" run --help; } )
code_opts=$(grep -ohE '(strn?cmp\(a, |takes_value\(a, )"-[^"=]+' driver/*.c | sed 's/.*"//' | sort -u)
for o in $code_opts; do
    for where in help manual; do
        if [ $where = help ]; then t=$help; else t=$text; fi
        printf '%s\n' "$t" | grep -qE -e "(^|[ ,(]|\\[)$o([ =,.]|\\[|\\]|$)" ||
            { echo "test_docs: nestc accepts $o, which its $where does not describe"; fail=1; }
    done
done
[ -n "$code_opts" ] || { echo "test_docs: no options found in driver/*.c"; fail=1; }

version=$(sed -n 's/^#define NEST_VERSION "\(.*\)"/\1/p' include/nest.h)
grep -q "^\.TH NESTC 1 .* \"nest $version\"" "$man" ||
    { echo "test_docs: $man is not for nest $version"; fail=1; }
for s in 0 1 2; do
    printf '%s\n' "$text" | sed -n '/^EXIT STATUS/,/^ENVIRONMENT/p' | grep -q "^       $s  " ||
        { echo "test_docs: $man does not give exit status $s"; fail=1; }
done

[ $fail = 0 ] && echo "test_docs: the manual page describes $(echo $opts | wc -w) options of nestc $version"
exit $fail
