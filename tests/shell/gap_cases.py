"""Command lines agent frameworks send that the shell once got wrong (issue 16, "Shell gaps"),
for the conformance table (same fixture as cases.py; expected output from the host's bash).

Lines whose real answer depends on the machine (`sudo`, `/workspace`, what `which` finds on the
host, timing) are not here: tests/test_shell_gaps.py checks those behaviours directly. The host's
/bin/sh may be dash, so `sh` lines stay within what dash and bash print alike.
"""

from __future__ import annotations

GAP_CASES: list[str] = [
    # bash / sh as programs: a new scope, $0 and $1..., options, paths
    "bash -c 'echo $0 $1 $#' a b c",
    "sh -c 'echo hi; exit 3'; echo $?",
    "bash -lc 'echo login'",
    "sh -lc 'echo $0'",
    "bash -l -c 'echo l-c'",
    "bash -ic 'echo interactive' 2>/dev/null",
    "X=1; bash -c 'echo [$X]'; export X; bash -c 'echo [$X]'",
    "A=1 bash -c 'echo $A'; echo \"[$A]\"",
    "bash -c 'Z=3; cd src; exit 4'; echo $? [$Z] $(basename \"$(pwd)\")",
    "f() { echo outer; }; bash -c 'f' 2>/dev/null; echo $?",
    "bash -c 'f() { echo inner; }; f'; f 2>/dev/null; echo $?",
    "/bin/sh -c 'echo slash $0'",
    "/bin/bash -c 'echo slash2'",
    "/usr/bin/env bash -c 'echo envbash $0'",
    "env FOO=2 bash -c 'echo $FOO'",
    "env -i FOO=1 bash -c 'echo [$FOO] [$USER] [$HOME]'",
    "echo 'echo script $1 $0' > s.sh; bash s.sh arg1; sh s.sh q",
    "echo 'echo run $0 $1' > r.sh; chmod +x r.sh; ./r.sh z",
    "printf '#!/usr/bin/env python3\\nimport sys\\nprint(\"py\", sys.argv[1:])\\n' > p.py; chmod +x p.py; ./p.py 1 2",
    "printf '#!/bin/bash -e\\nfalse\\necho no\\n' > se.sh; chmod +x se.sh; ./se.sh; echo $?",
    "./nope.sh; echo $?",
    "./src; echo $?",
    "/usr/bin/wc -l a.txt; /bin/cat b.txt | /usr/bin/head -n 1",
    "bash -c 'echo out; echo err >&2' 2>&1 | sort",
    "bash -c 'echo a; echo b' > o.txt; cat o.txt",
    "echo x | bash -c 'cat; echo after'",
    "cat a.txt | bash -c 'wc -l'",
    "echo 'echo from stdin $0' | bash",
    "echo 'echo $1 $2' | bash -s a b",
    "bash <<'EOF'\necho heredoc $0\nEOF",
    "bash -e -c 'false; echo no'; echo $?",
    "bash -o pipefail -c 'false | true'; echo $?",
    "bash -xc 'echo traced' 2>/dev/null",
    "bash -c 'echo $0 $1' -x y",
    "bash -c 'echo $#; echo \"$@\"' -- a b",
    "bash -c 'shift; echo $1' zero one two",
    "bash -c 'echo ${0##*/}' /some/path/prog",
    "bash nosuch.sh; echo $?",
    "bash -c; echo $?",
    "bash -n -c 'if'; echo $?",
    "bash -c 'return 3; echo after'; echo $?",
    "bash -c '(exit 3); echo $?'",
    "bash -c 'exec echo inner; echo no'; echo after",
    "exec echo hi; echo no",
    "bash -c 'for i in 1 2 3; do echo $i; done | tail -n 1'",
    "echo a b | xargs bash -c 'echo \"$0|$1\"'",
    "command bash -c 'echo via-command'",
    "command -v bash; type -t bash; type bash",
    # what OpenAI Agents' sandbox session sends
    "sh -lc '[ -r \"$1\" ]' sh a.txt; echo $?; sh -lc '[ -r \"$1\" ]' sh nope; echo $?",
    "sh -c 'mkdir -p \"$(dirname \"$1\")\" && cat > \"$1\"' sh out/x.txt <<< 'hello'; cat out/x.txt",
    "sh -lc 'cat > \"$1\"' sh y.txt < a.txt; cat y.txt",
    "sh -lc 'mkdir -p \"$1\" && printf \"%s\" ok > \"$2\" && shift 2 && exec \"$@\"' sh d1 d1/pid echo ran; cat d1/pid",
    # timeout
    "timeout 1 sleep 3; echo $?",
    "timeout 2 echo hi; echo $?",
    "timeout 0.3 bash -c 'sleep 2; echo no'; echo $?",
    "timeout -s KILL 0.2 sleep 1; echo $?",
    "timeout --preserve-status 0.2 sleep 1; echo $?",
    "timeout -s INT --preserve-status 0.2 sleep 1; echo $?",
    "timeout 1x sleep 1; echo $?",
    "timeout -s FOO 1 true; echo $?",
    "timeout 5; echo $?",
    "timeout 1 nosuchcommand_q; echo $?",
    "timeout 1 cd /; echo $?",
    "timeout 1 bash -c 'exit 3'; echo $?",
    "timeout 0.3 yes | head -n 2",
    "timeout 0.3 python3 -c 'import time; time.sleep(2); print(\"no\")'; echo $?",
    "timeout 5 cat a.txt | wc -l",
    "cat a.txt | timeout 5 wc -l",
    "timeout 1m echo m; timeout 0 echo zero; timeout .5s echo frac",
    "timeout 2 timeout 0.2 sleep 1; echo $?",
    # readlink, realpath, cmp
    "readlink -f a.txt | sed 's#.*/##'; readlink a.txt; echo $?",
    "ln -s a.txt l1; readlink l1; readlink -f l1 | sed 's#.*/##'; readlink -e nope; echo $?",
    "readlink -m /a/../b; readlink -f /nope/x; echo $?; readlink; echo $?",
    "realpath -m /x/y/../z; realpath --relative-to=src src/util.py; realpath -e nope; echo $?",
    "realpath -q nope/x; echo $?",
    "cmp a.txt b.txt; echo $?; cmp -s a.txt b.txt; echo $?; cmp a.txt a.txt; echo $?",
    "cmp -l a.txt b.txt | head -n 3; cmp a.txt nope; echo $?",
    "head -n 2 a.txt > a2.txt; cmp a2.txt a.txt; echo $?; cmp a.txt - < a.txt; echo $?",
    # trap
    "trap 'echo bye' EXIT; echo hi",
    "trap 'echo bye $?' EXIT; exit 3",
    "trap 'echo bye; exit 7' EXIT; exit 3",
    "trap 'echo err $?' ERR; false; echo next",
    "trap 'echo err' ERR; if false; then :; fi; false || true; echo done",
    "set -e; trap 'echo cleanup' EXIT; false; echo no",
    "bash -c 'trap \"echo x\" EXIT INT; trap; trap -p EXIT'",
    "( trap 'echo sub' EXIT; echo in ); echo out",
    "trap 'echo a' EXIT; trap - EXIT; echo b",
    "trap 'x' FOO; echo $?",
    "trap 'echo outer' EXIT; bash -c 'trap \"echo inner\" EXIT; exit 4'; echo $?",
    # grep -Z/-z/--null/--null-data and what Deep Agents' grep sends
    "grep -Z -l TODO notes.txt src/main.py | od -c",
    "grep --null -c TODO notes.txt src/main.py | od -c",
    "grep -rHnFZ --include='*.py' --exclude-dir=sub -e TODO . | tr '\\0' '|' | sort",
    "grep -rHnFZ -e TODO src 2>/dev/null | tr '\\0' '|' | sort || true",
    "grep -rn TODO --include='*.txt' . | sort",
    "grep -r TODO | sort",
    "printf 'x\\0y\\0xy\\0' | grep -z x | od -c",
    "printf 'a\\nb\\n' | grep --null-data a | od -c",
    "grep -L TODO a.txt notes.txt; grep -m1 a words.txt; yes | grep -m2 y",
    "grep -c TODO -r src --include='*.py'",
    "grep -s x nosuchfile; echo $?; grep -q one nosuchfile a.txt; echo $?",
    "grep -e one -e two -n a.txt; grep -x two a.txt; grep -w tw a.txt; echo $?",
    "grep '[' a.txt; echo $?",
    "grep -nA1 --no-group-separator o a.txt; grep -b t a.txt",
    "echo TODO > pats; grep -f pats notes.txt",
    "egrep 'ERROR|WARN' c.log; fgrep -c . data.csv",
    # which, printenv, command -v, type
    "which ls; which nosuchthing_q; echo $?",
    "which -a nosuchthing_q; echo $?; which; echo $?",
    "printenv HOME; printenv NOPE; echo $?; printenv USER HOME",
    "command -v ls; command -v nope; echo $?",
    # $( ) is a subshell; /dev/stdout, /dev/stderr
    "x=$(y=5; cd src; echo $y); echo \"[$y] $x\"; basename \"$(pwd)\"",
    "echo hi | { x=$(cat); echo \"got $x\"; }",
    "echo hi > /dev/stderr; echo out",
    "python3 -c 'import sys; print(\"e\", file=sys.stderr)' 2>/dev/stdout | tr e E",
    "cat /dev/stdin <<< hi; echo x > /dev/stdout",
    # find's expressions
    "find . -name '*.py' -not -path './src/sub/*' | sort",
    "find . -name '*.txt' -print0 | xargs -0 wc -l | tail -n 1",
    "find . -type f -name '*.py' -exec grep -l TODO {} \\; | sort",
    "find src -name '*.py' -exec echo {} + | wc -w",
    "find . -newer nosuchfile; echo $?; find . -mtime -1 -type f -name a.txt",
    "find src -name '*.py' -delete; find src | sort",
    "find . -type d -name sub -prune -o -type f -print | sort",
    "find . \\( -name '*.py' -o -name '*.csv' \\) | sort",
    "find . -type f -size -1k -name 'a*' | sort; find . -empty | sort",
    "find src -name '*.py' -printf '%f %h %d %P\\n' | sort",
    "find nope; echo $?; find . -foo; echo $?",
    "find src/ -maxdepth 1 | sort; find . -maxdepth 0",
    "find src -type f -exec sh -c 'echo \"f: $1\"' _ {} \\; | sort",
    "find . -name a.txt -quit -print; echo q",
    "find . -name '*.py' -o -name '*.csv' -print | sort",
    # bash builtins the library lacked
    "false | true; echo ${PIPESTATUS[0]} ${PIPESTATUS[1]}; true | false | true; echo \"${PIPESTATUS[@]}\"",
    "set -- -a -b val -c file; while getopts 'ab:c' o; do echo \"$o ${OPTARG:-}\"; done; "
    "shift $((OPTIND-1)); echo \"rest $*\"",
    "set -- -ab -x; while getopts ':ab' o; do echo \"$o ${OPTARG:-}\"; done; echo $OPTIND",
    "f() { local OPTIND o; while getopts 'v' o; do echo v; done; }; f -v; f -v",
    "mapfile -t arr < a.txt; echo ${#arr[@]} ${arr[1]}; readarray -t -n 2 -s 1 r < notes.txt; echo \"${r[@]}\"",
    "printf 'a\\nb\\nc\\n' | { mapfile -t x; echo ${x[2]}; }",
    "umask; umask 077; umask; umask -S",
    "shopt -s nullglob; for f in *.zzz; do echo $f; done; echo none; shopt -q nullglob; echo $?",
    "shopt -s globstar; echo src/**/*.py; shopt -s nosuch; echo $?",
    "touch .hid; echo *.txt; shopt -s dotglob; echo * | tr ' ' '\\n' | head -n 2",
    "tac a.txt; printf 'a\\nb' | tac | od -c; tac -s , <<< 'a,b,c' | od -c",
    "sort words.txt > w1; sort -u words.txt > w2; comm -12 w1 w2; comm -3 w1 w2; comm a.txt b.txt; echo $?",
    "shuf -i 1-3 | sort; shuf -e b a | sort; shuf -n 2 words.txt | wc -l",
    "echo -e 'a\\0101b\\x41\\u00e9\\c after'; echo; echo -e '\\e[1m' | od -c | head -n 1",
    # wrappers
    "nohup echo hi 2>/dev/null; nice echo n; stdbuf -oL echo s",
    "time true 2>/dev/null; echo timed",
    "ls -d /root",
    # bytes that are not UTF-8 (printf's and echo -e's \\NNN and \\xHH are bytes)
    "printf '\\x89PNG\\r\\n\\032\\n' > img.bin; od -An -tx1 img.bin; wc -c img.bin",
    "printf 'a\\377b\\n' | od -c | head -n 1; printf '\\303\\251\\n'; printf '\\303\\251' | wc -c",
    "echo -e '\\xff\\xfe\\x00' | base64; echo -ne '\\0377' | od -An -to1",
    "printf '\\377' > f.bin; printf '\\376' >> f.bin; od -An -tx1 f.bin; printf 'x\\200' | sha256sum",
    "x=$(printf '\\303\\251'); echo ${#x} $x; printf '%b' 'q\\xffq\\n' | od -c | head -n 1",
    "printf '\\377' | tee t.bin | od -An -tx1; od -An -tx1 t.bin; printf '\\u00e9 \\U0001F600\\n'",
    "(printf '\\375' >&2) 2> e.bin; (printf '\\374' >&2) 2>> e.bin; od -An -tx1 e.bin",
    # zcat and truncate (the library had neither)
    "printf 'hello\\nworld\\n' | gzip > h.gz; zcat h.gz; zcat < h.gz | wc -l; zcat nope.gz 2>/dev/null; echo $?",
    "echo abcdef > t.txt; truncate -s 3 t.txt; cat t.txt; echo; truncate -s +5 t.txt; wc -c < t.txt; "
    "truncate -s '<2' t.txt; wc -c < t.txt; truncate -s %4 t.txt; wc -c < t.txt; truncate -s /3 t.txt; wc -c < t.txt",
    "truncate -s 1K new.bin; wc -c < new.bin; truncate -c -s 5 absent.bin; ls absent.bin 2>/dev/null; "
    "echo $?; truncate t.txt 2>/dev/null; echo $?; truncate -s 1Q x 2>/dev/null; echo $?; truncate -s 2M big; "
    "wc -c < big",
    "echo 12345 > r.txt; echo x > u.txt; truncate -r r.txt u.txt; wc -c < u.txt; truncate -s +4 -r r.txt u.txt; "
    "wc -c < u.txt",
    # binary data through a `< FILE` redirection and into a file from a command's bytes
    "printf '\\377\\376A' > b.bin; wc -c < b.bin; od -An -tx1 < b.bin; cat < b.bin | od -An -tx1; "
    "python3 -c 'import sys; print(sys.stdin.buffer.read())' < b.bin",
    "printf 'abc' | gzip -c > g.gz; gunzip -c < g.gz; echo; gzip -dc g.gz | od -An -c; "
    "base64 < g.gz | base64 -d | zcat",
    # &>> appends both streams (the library parsed only &>); `>> FILE 2>&1` appends (the library
    # emptied FILE at the 2>&1: `cmd >> log 2>&1` lost the log)
    "echo a &>> both.log; ls nope &>> both.log; { echo b; } &>>both.log; echo d&>>both.log; "
    "cat both.log | sed 's/ls: .*nope.*/ls-error/'; f() { echo err-f >&2; }; f &>> both.log; tail -n 1 both.log",
    "echo x > f; echo y >> f 2>&1; ls nope >> f 2>&1; echo z 2>&1 >> f; sed 's/ls: .*/ls-error/' f; "
    "echo w > g; { ls nope; } >> g 2>&1; wc -l < g",
    # sort -V (GNU's version order; the library's sort had no -V)
    "printf 'v1.10.0\\nv1.2.0\\nv1.9.3\\nv1.2.0-rc1\\nv1.2.0~rc1\\nv10.0\\n.hidden\\nx.tar.gz\\n"
    "x.1.tar.gz\\n' | sort -V",
    "printf 'a-1.10\\na-1.9\\nb-0.1\\na-1.9\\n' > v.txt; sort -V v.txt | tr '\\n' ' '; echo; "
    "sort -rV v.txt | tr '\\n' ' '; echo; sort -uV v.txt | tr '\\n' ' '; echo; sort --version-sort -r v.txt | head -1",
    "printf 'x 1.10\\ny 1.9\\nz 1.10.1\\n' | sort -k2V; printf 'p:3.1\\nq:3.10\\nr:3.2\\n' | sort -t: -k2,2V -r; "
    "printf '2.0\\n1.0\\n' | sort -V -s",
    # `exec` with only redirections redirects the rest of the shell (the library applied them to
    # `exec` alone: `exec >log 2>&1` logged nothing)
    "exec >out.txt; echo hi; echo err >&2; exec >&2; cat out.txt",
    "exec 2>&1; ls /nonexist 2>&1 | sed 's/.*/E/'; ls nope | wc -l; echo done",
    "exec >>log.txt 2>&1; echo a; ls nope; echo b; exec >/dev/tty 2>/dev/null || true; exec >/dev/stderr; echo x",
    "exec 2>/dev/null; ls nope; echo quiet",
    "bash -c 'exec >in.txt; echo inner'; echo outer; cat in.txt",
    "exec 2>&1 >o2.txt; ls nope; echo out; exec 1>&2; echo; cat o2.txt",
    "exec >/dev/null; echo gone; echo kept >&2",
    "echo before; exec 1>f1.txt; echo after; for i in 1 2; do exec >>f1.txt; echo $i; done; exec 1>&2; cat f1.txt",
    "(exec >sub.txt; echo insub); echo main; cat sub.txt",
    # a Python program writes its own `> FILE` as it runs: the file's content and order as bash's,
    # and never twice (a wrapper's or a builtin's redirect is written from its whole output)
    "python3 -c 'print(1)' > p1; python3 -c 'print(2)' >> p1; cat p1",
    "python3 -c 'import sys; print(3); print(4, file=sys.stderr)' > p2 2>&1; cat p2",
    "python3 -c 'import sys; print(5, flush=True); print(6, file=sys.stderr)' > p3 2>&1; cat p3",
    "python3 -c 'import sys; sys.exit(4)' > p4; echo $?; wc -c < p4",
    "python3 -c 'print(7)' > a7 > b7; cat a7 b7; wc -c < a7",
    "python3 -c 'print(8)' > p8 | cat; cat p8",
    "printf '1\\n2\\n' | xargs -I{} python3 -c 'print({})' > p9; cat p9",
    "command python3 -c 'print(10)' > p10; cat p10",
    "timeout 5 python3 -c 'print(11)' > p11; cat p11",
    "f() { python3 -c 'print(12)'; python3 -c 'print(13)'; }; f > p12; cat p12",
    "{ python3 -c 'print(14)'; echo 15; } > p14; cat p14",
    "for i in 1 2; do python3 -c \"print($i)\" >> p16; done; cat p16",
    "python3 -c 'import subprocess; subprocess.run([\"python3\", \"-c\", \"print(17)\"]); print(18)' > p17; cat p17",
    "python3 -c 'print(19)' > . ; echo $?",
    "python3 -c 'print(20)' > /dev/null; echo $?",
    # ... and so does one that `timeout`, `nohup`, `nice` or `stdbuf` runs (theirs is its redirect)
    "timeout 5 python3 -c 'import sys; print(21, flush=True); print(22, file=sys.stderr); print(23)' > p21 2>&1; "
    "cat p21",
    "nohup python3 -c 'import sys; print(24, flush=True); print(25, file=sys.stderr)' > p24 2>&1; cat p24",
    "nice -n 5 python3 -c 'print(26)' >> p24; stdbuf -oL python3 -c 'print(27)' >> p24; tail -n 2 p24",
    "timeout 5 nohup python3 -c 'print(28)' > p28; timeout 0 python3 -c 'print(29)' >> p28; cat p28",
    "timeout 5 bash -c 'python3 -c \"print(30)\" > p30; echo 31' > p31; cat p30 p31",
    # a `timeout` that fires: what its command wrote stays written (a file, a pipe, `$(...)`)
    "timeout 0.5 python3 -c 'import time; print(32, flush=True); time.sleep(30)' > p32; echo $?; cat p32",
    "timeout 0.5 python3 -c 'import time; print(33, flush=True); time.sleep(30)' | cat; "
    "x=$(timeout 0.5 python3 -c 'import time; print(34, flush=True); time.sleep(30)'); echo $? $x",
    "timeout 0.5 bash -c 'echo 35; sleep 30; echo no' > p35; echo $?; cat p35",
    "timeout 0.5 sh -c 'echo 36; python3 -c \"import time; print(37, flush=True); time.sleep(30)\"' > p36 2>&1; "
    "echo $?; cat p36",
    # `2>&1 >FILE | cmd`: the errors alone go down the pipe (the library wrote them past it, or lost them)
    "ls /nonexist 2>&1 >/dev/null | tr a-z A-Z; cat /nonexist 2>&1 >e1 | wc -l; wc -c < e1",
    "bash -c 'echo out; echo err >&2' 2>&1 >/dev/null | tr a-z A-Z",
    "python3 -c 'import sys; print(1); print(2, file=sys.stderr)' 2>&1 >e2 | tr 0-9 a-z; cat e2",
    "echo in | cat - /nonexist 2>&1 >e3 | tr a-z A-Z; cat e3; ls /nonexist a.txt >e4 2>&1 | wc -c; cat e4",
    # a command of redirections alone opens its files: `> f` empties f, `< missing` fails
    "echo abc > r1; > r1; wc -c r1; >> r2; ls r2; 2> r3; ls r3; echo x > r4; > r4 echo y; cat r4",
    "< nosuch; echo $?; > src; echo $?; </dev/null; >/dev/null; echo ok",
    # sed's `\r`, `\f`, `\v`, `\a` are control characters, as GNU sed's (CRLF files made LF)
    "printf 'a\\r\\nb\\r\\n' > crlf; sed -i 's/\\r$//' crlf; od -c crlf | head -1; printf 'p\\fq\\n' | sed 's/\\f/F/'",
    "printf '\\x1b[1mB\\x1b[0m\\n' | sed 's/\\x1b\\[[0-9;]*m//g'; printf 'a.b\\n' | sed 's/\\x2e/D/'",
    # `grep -r` names files when it searches a folder or several operands, not for one file
    "mkdir -p gd && echo def > gd/x; grep -r def gd/x; grep -r def gd; grep -rn def gd/x gd/x; grep -rc def gd/x",
    # `tail -f`/`-F` follows what a file gains until it is stopped (`timeout`, `| head` having enough)
    "seq 20 > tf; timeout 0.5 tail -n 2 -F tf; echo rc=$?; timeout 0.3 tail -f nosuch; echo rc=$?",
    "seq 5 > tg; (sleep 0.3; echo six >> tg; sleep 0.2; echo seven >> tg) & tail -f tg | head -7",
    # `$(< FILE)` is FILE's content
    "printf 'hi\\nthere\\n\\n' > rf; c=$(<rf); echo \"$c\"; f=rf; echo \"$(< $f)\" | wc -l; "
    "x=$(< nosuch); echo rc=$? [$x]",
    # a newline after `&&`, `||` or `|` continues the command
    "echo a > ca; ls ca &&\n  echo done &&\n  false ||\n  echo fallback",
    "seq 5 |\n grep -v 3 |\n  wc -l; ls ca && # note\n echo next; x=$(echo a |\n tr a b); echo $x",
    "if true &&\n true; then echo y; fi; for i in 1 2; do\n  echo $i |\n  tr 12 xy\ndone",
    # a blank in `${v#PATTERN}`, `${v%%PATTERN}`, `${v/PATTERN/...}` is a character of the pattern
    "line='a b c'; echo \"${line%% *}\" \"${line% *}\" \"${line#* }\" \"${line##* }\"; "
    "v='Python 3.1'; echo \"${v#Python }\"",
    "s='k=v w  z'; echo \"${s/ /_}\" \"${s// /_}\" \"${s/v w/VW}\"; p='a b'; t='x a b y'; echo \"${t#x $p}\"",
    # `cat FILE` passes bytes that are not UTF-8 on whole
    "python3 -c 'open(\"bb\", \"wb\").write(bytes(range(256)))'; cat bb | md5sum; cat bb > bc; cmp bb bc && echo same; "
    "cat bb | base64 | tail -c 20",
    # PYTHONPATH's folders are on a program's sys.path, absolute against its folder
    "mkdir -p src/pk1 && echo 'X = 5' > src/pk1/__init__.py && PYTHONPATH=src python3 -c 'import pk1; print(pk1.X)'",
    "mkdir -p lib/pk2 && echo 'print(6)' > lib/pk2/m.py && PYTHONPATH=/nowhere:lib python3 -m pk2.m; echo $?",
    # a program's stderr joined to its stdout (`2>&1` into a pipe, `$(...)`, the caller) keeps their order
    "python3 -c 'import sys; print(1, flush=True); print(2, file=sys.stderr); print(3)' 2>&1 | cat",
    "python3 -c 'print(\"before\", flush=True); import nosuch' 2>&1 | head -2; "
    "x=$(python3 -c 'import sys; print(4, flush=True); print(5, file=sys.stderr)' 2>&1); echo $x",
    # a quoted `~` is a name like any other (an unquoted one is expanded with its word)
    "echo y > '~t'; cat '~t'; ls | grep -c '~t'",
    "mkdir -p '~'; echo z > '~/q'; cat '~/q'; cat ~/q 2>/dev/null || echo not-in-home",
    "echo \"~\" '~/x' ~nosuchuser",
    # a compound's `> FILE 2>&1` (a script, `{ }`, `( )`, a loop, a function) keeps stdout and stderr in order
    "printf 'echo o1\\necho e1 >&2\\necho o2\\nls /nonexist\\necho o3\\n' > oe.sh; bash oe.sh > l1 2>&1; cat l1; "
    "sh oe.sh &> l2; cat l2; timeout 5 bash oe.sh > l3 2>&1; cat l3; nohup bash oe.sh > l4 2>&1; cat l4",
    "{ echo a; echo b >&2; echo c; } > l5 2>&1; cat l5; ( echo d; echo e >&2 ) >> l5 2>&1; cat l5",
    "f() { echo x; echo y >&2; python3 -c 'print(1, flush=True)'; echo z >&2; }; f > l6 2>&1; cat l6; f &> l7; cat l7",
    "for i in 1 2; do echo $i; echo e$i >&2; done &> l8; cat l8; while false; do :; done > l9; wc -c < l9",
    "{ echo a; echo b >&2; } > l10 2> l11; cat l10 l11; { echo hi; } > /nonexist/x; echo $?",
    "g() { echo g1; h > inner; echo g3; }; h() { echo g2; }; g > outer; cat outer inner; "
    "x=$( { echo in; echo err >&2; } 2>&1 > l12 ); echo \"[$x]\"; cat l12",
    "{ printf 'a\\r\\nb\\377\\n'; } > l13; od -c l13 | head -1; "
    "seq 3 | { while read n; do echo $n; done; } > l14; cat l14",
    # a file with CRLF lines keeps its CRs through the utilities that open it by name, and a program's stdin
    "printf 'b\\r\\na\\r\\nb\\r\\n' > dos.txt; head -1 dos.txt | od -c; tail -1 dos.txt | od -c; "
    "cat -n dos.txt | od -c; sort dos.txt | od -c; uniq dos.txt | od -c; "
    "cut -c1-2 dos.txt | od -c; sed -n 2p dos.txt | od -c",
    "printf 'x\\r\\ny\\r\\n' > dos2.txt; nl dos2.txt | od -c; rev dos2.txt | od -c; paste dos2.txt dos2.txt | od -c; "
    "grep -c $'\\r' dos2.txt; python3 -c 'import sys; print(repr(sys.stdin.read()))' < dos2.txt; "
    "cat dos2.txt | python3 -c 'import sys; print(sys.stdin.readlines())'",
    # an uncaught KeyboardInterrupt ends a program as SIGINT does: status 130
    "python3 -c 'raise KeyboardInterrupt' 2>/dev/null; echo $?; python3 -c 'import sys; sys.exit(3)'; echo $?",
    # `seq -f FORMAT`; `xargs -P N` runs the commands (one after another: the same lines)
    "seq -f '%03g' 3; seq -f 'file%02.0f.txt' 2 4; seq -s, -f '%.1f' 0 0.5 2; seq --format=%e 2; seq -f '%g%%' 2; "
    "seq -f %g 5 -2 1; seq -f x 3; echo $?; seq -f '%g %g' 3; echo $?",
    "printf '%s\\n' a b c | xargs -P 2 -n 1 echo | sort; printf '%s\\n' a b | xargs -P4 -I{} echo x{} | sort; "
    "echo q | xargs --max-procs=3 echo; echo z | xargs echo -P 2",
    # FUNCNAME: the functions being run, innermost first, "main" last in a script file
    "g() { echo \"${FUNCNAME[@]} ${#FUNCNAME[@]}\"; }; f() { g; }; f; echo \"[${FUNCNAME[@]}]\"; "
    "log() { echo \"[${FUNCNAME[1]}] $*\"; }; work() { log hi; }; work; h() { echo $FUNCNAME; }; h | cat",
    "printf 'g() { echo \"${FUNCNAME[@]}\"; }\\nf() { g; }\\nf\\n' > fn.sh; bash fn.sh; "
    "r() { if [ $1 -gt 0 ]; then r $(($1-1)); else echo ${FUNCNAME[@]}; fi; }; r 2",
    # /dev (an empty file per device; open() answers them) and dd (guest/declaw_shell/dd.py); dd's
    # transfer time and rate are cut (they differ run to run)
    "test -e /dev/null && echo y; [ -r /dev/urandom ] && echo r; [ -d /dev ] && echo d",
    "ls /dev | grep -x -c -e null -e zero -e urandom -e random -e stdin -e stdout -e stderr",
    "cp /dev/null e.txt; wc -c e.txt; cat /dev/null; echo x > /dev/null; echo $?",
    "head -c 16 /dev/urandom | wc -c; head -c 5 /dev/zero | od -An -tx1",
    "printf 'h\xc3\xa9llo' > u.txt; head -c 2 u.txt | od -An -tx1; head -c 3 u.txt | wc -c; "
    "printf '\xe2\x82\xac' | head -c 1 | od -An -tx1",
    "tr -dc a-z </dev/urandom | head -c 12 | wc -c; cat /dev/urandom | tr -dc 'a-z0-9' | head -c 16 | wc -c",
    "python3 -c 'import os; print(os.path.exists(os.devnull), os.path.exists(\"/dev/nope\"), "
    "os.stat(os.devnull).st_size)'",
    "dd if=/dev/zero of=f.bin bs=1024 count=4 2>&1 | sed -E 's/, [^,]+ s, .*/ T/'; wc -c < f.bin",
    "dd if=/dev/zero of=g.bin bs=1 count=512 2>&1 | sed -E 's/, [^,]+ s, .*/ T/'; wc -c < g.bin",
    "dd if=/dev/zero of=h.bin bs=1000 count=1 2>&1 | sed -E 's/, [^,]+ s, .*/ T/'",
    "dd if=/dev/zero of=m.bin bs=1M count=2 2>&1 | sed -E 's/, [^,]+ s, .*/ T/'; wc -c < m.bin",
    "dd if=a.txt bs=2 skip=1 count=3 2>/dev/null; echo; dd if=a.txt bs=4 count=1 status=none",
    "printf 12345678 > p.txt; printf XY | dd of=p.txt bs=1 seek=3 conv=notrunc 2>/dev/null; cat p.txt; echo",
    "printf 12345678 > q.txt; printf XY | dd of=q.txt bs=1 seek=3 2>/dev/null; cat q.txt; echo",
    "echo hello | dd conv=ucase 2>/dev/null; echo HeLLo | dd conv=lcase status=none",
    "dd if=a.txt ibs=3 obs=2 2>&1 >/dev/null | head -2; dd if=a.txt bs=5 conv=sync 2>/dev/null | od -c",
    "dd if=/nonexistent of=x.bin; echo $?; dd foo; echo $?; dd bs=abc; echo $?",
    "dd conv=bogus; echo $?; dd status=loud; echo $?; dd if=a.txt of=a2.txt status=none; cmp a.txt a2.txt && echo same",
    "yes | dd bs=4 count=2 2>&1 | sed -E 's/, [^,]+ s, .*/ T/'",
    "dd if=a.txt iflag=skip_bytes,count_bytes skip=4 count=3 status=none; echo",
    "dd if=/dev/urandom bs=16 count=1 status=none | wc -c; dd if=a.txt of=/dev/null status=noxfer",
    "dd if=a.txt of=ex.txt status=none; dd if=a.txt of=ex.txt conv=excl; echo $?; "
    "dd if=a.txt of=no.txt conv=nocreat; echo $?",
    "seq 1 1000 | dd bs=100 count=2 status=none | wc -c; printf abcdef | dd conv=swab status=none; echo",
    # a heredoc in an and/or list whose pipeline goes on after it on the same line (the body
    # ended with the rest of the line), read at the end of the input (the variables kept their
    # values: `while read l || [ -n "$l" ]` never ended), rm of `.` and `..` (it removed them)
    "true && cat <<EOF | wc -l\na\nEOF",
    "true && python3 - <<'EOF' | tail -1\nprint(1)\nprint(2)\nEOF",
    "true && cat <<-EOF | tr a-z A-Z && echo done\n\tx\n\tEOF",
    "false || cat <<EOF | sort | head -1\nz\ny\nEOF",
    "printf 'x\\ny' | while read l || [ -n \"$l\" ]; do echo \"$l\"; done",
    "printf 'x\\ny' > nl.txt; while read l || [ -n \"$l\" ]; do echo \"[$l]\"; done < nl.txt",
    "l=old; read l </dev/null; echo \"rc=$? [$l]\"; printf 'a b' | { read x y; read x y; echo \"[$x][$y]\"; }",
    "REPLY=x; read < /dev/null; echo \"[$REPLY]\"; arr=(1 2); read -a arr < /dev/null; echo ${#arr[@]}",
    "mkdir -p d/s && cd d/s && rm -rf ..; echo $?; rm -r .; echo $?; cd ../..; ls -d d/s",
    "mkdir -p w2/x && touch w2/f && cd w2 && rm -rf x . f; echo $?; ls",
    # xargs (guest/declaw_shell/xargs.py) and cp's -a/-p/-u and `cp FILE NAME/`
    "printf 'a\\0b c\\0' | xargs -0 -I{} echo [{}]; printf 'a\\0b c\\0' | xargs -0 echo",
    "true | xargs -r echo none; echo $?; true | xargs echo some",
    "printf 'a b\\nc\\nd e f\\n' | xargs -L 1 echo; printf 'a b\\nc\\nd e f\\n' | xargs -L 2 echo",
    "printf '1 2 3 4 5' | xargs -n 2 echo; seq 3 | xargs -P 2 -n 1 echo | sort",
    "echo x | xargs nosuchcmd_zz 2>/dev/null; echo $?; echo x | xargs false; echo $?",
    "printf 'a\\nb\\n' > list.txt; xargs -a list.txt echo got; printf 'a,b,c' | xargs -d , echo",
    "echo 'a b' | xargs -t echo 2>&1; printf 'one\\ntwo\\n' | xargs -i echo '<{}>'",
    "printf '  sp\\n' | xargs -I % echo '[%]'; echo a b STOP c | xargs -E STOP echo",
    "cp a.txt nodir/; echo $?; ls; cp -r src newdir/ && ls newdir",
    "cp -a src srccopy && ls srccopy; cp -p a.txt ap.txt && cmp a.txt ap.txt && echo same; cp -av a.txt av.txt",
    "cp a.txt u.txt; echo changed > u.txt; cp -u a.txt u.txt; cat u.txt; cp -u a.txt fresh.txt; cat fresh.txt",
    # PIPESTATUS after an and/or list is its last pipeline's (it held the list's status alone)
    "cd . && true | false | true; echo ${PIPESTATUS[@]}; true && false | true && echo x; echo ${PIPESTATUS[@]}",
    "echo a > a1; echo b > b1; true && diff -u a1 b1 | tail -1; echo ${PIPESTATUS[0]} ${PIPESTATUS[1]}",
    # sed, whole (guest/declaw_shell/sed.py): N n D P, the hold space, branches and labels, r R w W,
    # l F z, 0,/re/, the empty regex, -z -s; each of these was "unknown command"
    "printf 'a\\nb\\nc\\n' | sed ':a;N;$!ba;s/\\n/ /g'; printf 'a\\nb\\nc' | sed -e :a -e '$!N;s/\\n/,/;ta'",
    "printf 'a\\na\\nb\\nc\\nc\\n' | sed '$!N;/^\\(.*\\)\\n\\1$/!P;D'; printf '1\\n2\\n3\\n' | sed -n '1!G;h;$p'",
    "printf 'x\\nstart\\ny\\nz\\n' | sed -n '/start/{n;p}'; printf 'x\\nx\\n' | sed '0,/x/s//y/'",
    "printf 'k=v\\nz\\n' | sed -n 'h;s/=.*//;G;s/\\n/ -> /p'; printf '1\\n2\\n3\\n4\\n5\\n' | sed 'n;d'",
    "printf 'a\\nb\\nc\\n' | sed -n 'H;${x;s/\\n/,/g;s/^,//;p}'; printf 'a\\nb\\n' | sed '1!G;h;$!d'",
    "printf '0\\nx\\n1\\ny\\n2\\n' | sed -n '/x/{:a;N;/y/!ba;p}'; "
    "printf 'x\\nz\\n' | sed 's/x/y/;ta;s/$/ no/;b;:a;s/$/ yes/'",
    "printf 'a\\tb\\n' | sed -n l; printf 'a\\nb\\n' | sed = | sed 'N;s/\\n/ /'; "
    "printf 'a\\nb\\n' | sed -z 's/\\n/,/g'; echo",
    "printf 'x\\ny\\n' > r.txt; printf '1\\n2\\n3\\n' | sed 'R r.txt'; "
    "printf '1\\n2\\n' | sed '1r r.txt'; sed -n '$=' r.txt",
    "printf 'a\\nb\\na\\n' | sed -n '/a/w hits.txt'; cat hits.txt; printf 'a\\nb\\n' | sed 's/a/X/w /dev/stdout'",
    "printf '1\\n2\\n' > f1; printf '3\\n4\\n' > f2; sed -s -n '$p' f1 f2; sed -n '$p' f1 f2; sed -s F f1 f2",
    "printf 'a\\n1\\n2\\nb\\n3\\n' | sed -n '/a/,/b/{//!p}'; printf 'ab\\nab\\n' | sed -n '$!N;s/a/X/;P;D'",
    "printf 'a\\nb\\n' | sed 'b nolabel'; echo $?; printf 'a\\n' | sed 's//x/'; echo $?; "
    "printf 'a\\n' | sed 'k'; echo $?",
    "printf 'a\\nb\\nc\\n' > e.txt; sed -i '2{h;d};${G}' e.txt; cat e.txt; sed -i.bak '1i top' e.txt; "
    "cat e.txt e.txt.bak",
    "printf 'a' | sed G | od -c | head -1; printf 'a' | sed 'h;G' | od -c | head -1; "
    "printf '1\\n2\\n3' | sed '$!N;P;D' | od -c | head -1",
    # a stage cut off by its reader is 141 only past a pipe's buffer (pipebuffer.py); heredocs ended by `;`
    # on their line and `time` of a compound (continued.py)
    "seq 3 | head -1; echo ${PIPESTATUS[@]}; (exit 3) | true; echo ${PIPESTATUS[@]}; "
    "yes | head -1; echo ${PIPESTATUS[@]}",
    "set -euo pipefail; printf 'a\\nb\\n' > p.txt; cat p.txt | head -1; seq 100000 | head -1 || echo failed=$?",
    "seq 100000 | head -2; echo ${PIPESTATUS[@]}",  # (`(echo x; exit 4) | true` is 4 or 141 in bash, by timing)
    "cat <<EOF > hf.txt; cat hf.txt\nhello\nEOF\ncat <<A; cat <<B\na\nA\nb\nB\necho end",
    "cat <<-A; echo 'q;' \"r\"\n\ta\n\tA\nwc -l <<E; echo two\n1\n2\nE",
    "time (echo hi; exit 3) 2>/dev/null; echo $?; time { x=5; echo in; } 2>/dev/null; echo $x",
    "time -p (echo p) 2>/dev/null | tr a-z A-Z",
    # sed's replacement: case conversions and escapes (`s/.*/\U&/` printed `U` and the line)
    "echo 'foo bar' | sed 's/.*/\\U&/'; echo 'Foo BAR' | sed 's/\\(\\w*\\) \\(\\w*\\)/\\L\\1 \\u\\2/'",
    "echo 'hello world' | sed -E 's/(\\w+) (\\w+)/\\u\\1 \\U\\2\\E!/'; echo abc | sed 's/b/\\n/' | wc -l",
    "printf 'a\\nb\\n' | sed 's/$/\\r/' | od -c | head -1; echo 'x-y' | sed 's/-/\\t/' | od -c | head -1",
    "echo 'MiXeD' | sed 's/.*/\\L\\u&/'; echo 'snake_case_name' | sed -E 's/_(.)/\\U\\1/g'",
]
