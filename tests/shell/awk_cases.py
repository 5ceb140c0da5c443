"""awk command lines for the shell conformance table (see cases.py for the fixture files).

Each line's stdout and exit status must match a real POSIX awk run under bash. The lines
avoid implementation-specific output: ``for (k in a)`` order is sorted, no rand(), no
``substr`` with a start below 1, no integers beyond 2^31 and no regex intervals.
"""

from __future__ import annotations

AWK_CASES: list[str] = [
    # fields, records, patterns
    "printf 'a b\\nc d\\n' | awk '{print $2}'",
    "seq 10 | awk '$1 % 3 == 0'",
    "awk '{print NR\": \"$0}' a.txt",
    "awk 'END {print NR}' notes.txt",
    "awk '/TODO/' notes.txt",
    "awk 'tolower($0) ~ /todo/ {print FNR, $1}' notes.txt",
    "awk 'NF == 0 {print \"blank at\", NR}' notes.txt",
    "awk '{print NF}' notes.txt",
    "awk '{print $NF}' notes.txt",
    "awk '{ print $(NF-1) }' c.log",
    "awk 'length > 9' notes.txt",
    "awk '/a/ && /e/' words.txt",
    "awk '!/a/' words.txt",
    "awk 'NR==2, NR==4' notes.txt",
    "awk '/alpha/,/beta/ {print NR\": \"$0}' notes.txt",
    "awk 'NR==2 {next} {print}' a.txt",
    "awk 'END { print $0, NF }' c.log",
    "echo '  lead  trail  ' | awk '{ print NF, \"[\" $1 \"]\" }'",
    "echo 'a,b,,d' | awk -F, '{ print NF; for (i = 1; i <= NF; i++) print i, \"[\" $i \"]\" }'",
    "echo 'a:b c:d' | awk -F'[: ]' '{ print $2, $4, NF }'",
    "awk '{ print (NR % 2 == 0 ? \"even\" : \"odd\"), $0 }' a.txt",
    "awk 'BEGIN { regex = \"^t\" } $0 ~ regex' a.txt",
    "awk '$0 ~ \"^[[:alpha:]]+ [[:alpha:]]+$\"' notes.txt",
    "awk '{ if ($1 ~ /^[[:upper:]]+$/) print \"upper:\", $1; else if ($1 ~ /^[[:digit:]]/) "
    "print \"digit:\", $1; else print \"other:\", $1 }' notes.txt",
    # field separators and rebuilding $0
    "awk -F, 'NR>1 {s+=$3} END {print s}' data.csv",
    "awk -F'\\t' '{print $2 \"-\" $1}' table.tsv",
    "awk -F'\\t' -v OFS=, '{$1=$1; print}' table.tsv",
    "awk 'BEGIN{OFS=\"|\"} {$2=\"X\"; print}' table.tsv",
    "awk 'BEGIN { FS = \",\" } NR > 1 { print $1 }' data.csv",
    "awk '$2 ~ /^(EU|US)$/' FS=, data.csv",
    "awk -F, '$3 >= 50 { print $1 }' data.csv",
    "awk 'BEGIN { OFS = \"-\" } { $1 = $1 } 1' c.log",
    "awk '{ $1 = \"\"; sub(/^ /, \"\"); print }' c.log",
    "awk '{ $NF = \"<\" $NF \">\"; print }' c.log",
    "awk '{ $3 = \"\"; print NF \":\" $0 }' a.txt",
    "echo 'a b c d' | awk '{ NF = 2; print; print NF }'",
    "awk 'BEGIN{ORS=\";\"} {print} END{printf \"\\n\"}' a.txt",
    "awk 'BEGIN{RS=\"\"} {print NR\": \"$1\" (\"NF\" fields)\"}' notes.txt",
    "printf 'x;y;z' | awk 'BEGIN { RS = \";\" } { print NR, $0 }'",
    # arithmetic, numbers, strings and comparisons
    "awk '{sum+=$1} END {print sum, sum/NR}' nums.txt",
    "awk 'NR==1{min=max=$1} {if($1<min)min=$1; if($1>max)max=$1} END{print min, max}' nums.txt",
    "sort -n nums.txt | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'",
    "awk '$1 > 5' nums.txt",
    "awk '$1 == \"2\"' nums.txt",
    "awk 'BEGIN { print 1e6, 0.1+0.2, 100/3, -7%3, 2^10, 2^0.5, int(-3.9), int(\"42abc\") }'",
    "awk 'BEGIN { x = 5; x += 2; x -= 1; x *= 3; x /= 2; x %= 5; x ^= 2; print x }'",
    "awk 'BEGIN { a = 1; b = a++ + ++a; print a, b }'",
    "awk 'BEGIN { print 1 == 1, 2 < 1, \"a\" != \"b\", !0, !\"\", !\"a\", -\"3\", +\"4x\" }'",
    "awk 'BEGIN { x = \"10\"; y = 9; print (x < y), (\"10\" < \"9\"), (10 < 9) }'",
    "echo '10 9' | awk '{ print ($1 < $2), ($1 < \"9\") }'",
    "awk 'BEGIN { x; if (x == 0 && x == \"\") print \"uninit both\"; if (!x) print \"falsy\" }'",
    "awk 'BEGIN { if (u < 1) print \"lt\"; if (u \"\" == \"\") print \"empty\"; print u + 0 }'",
    "awk 'BEGIN { CONVFMT=\"%.2f\"; a = 3.14159; b = a \"\"; print b; OFMT=\"%.1f\"; print a, 17 "
    "}'",
    "awk 'BEGIN { print -1 \" \" -2 }'",
    "echo '3 4' | awk '{ print $1 * $2, $1 / $2, $1 - $2, $1 ^ $2 }'",
    "awk 'BEGIN { print 100000 * 2, 3.0, 1e-5, 123456789, 17 / 4 }'",
    "awk 'BEGIN { a = \"A\"; b = a a a; print b; c = 1 \" \" 2; print c }'",
    "awk 'BEGIN { print length(\"abc\") length \"x\" }'",
    "awk 'BEGIN { print toupper(\"abc\") tolower(\"DEF\"), sqrt(16), exp(0), log(1), atan2(0, -1) "
    "}'",
    # built-in string functions
    "awk '{print length($0), length}' a.txt",
    "awk '{print substr($0, 2, 3)}' words.txt",
    "awk '{print toupper(substr($0,1,1)) substr($0,2)}' words.txt",
    "awk 'BEGIN { print substr(\"hello\", 2), substr(\"hello\", 2, 3), substr(\"hello\", 10) "
    "\"|\" }'",
    "awk 'BEGIN{n=split(\"a:b:c\", p, \":\"); print n, p[1], p[3]}'",
    "awk 'BEGIN{n=split(\"a1b22c333d\", p, /[0-9]+/); for(i=1;i<=n;i++) printf \"%s \", p[i]; "
    "print \"\"}'",
    "awk 'BEGIN { n = split(\"\", arr); print n }'",
    "awk 'BEGIN{s=\"hello world\"; gsub(/o/, \"[&]\", s); print s}'",
    "awk 'BEGIN{s=\"a.b.c\"; n=gsub(/\\./, \"\\\\&\", s); print n, s}'",
    "awk 'BEGIN{s=\"foo bar\"; sub(/o+/, \"0\", s); print s}'",
    "awk 'BEGIN { str = \"a-b_c\"; gsub(/[-_]/, \" \", str); print str }'",
    "awk '{ gsub(/[aeiou]/, \"\"); print }' words.txt",
    "awk '{ sub(/line/, \"LINE\") } 1' notes.txt",
    "awk 'BEGIN{if (match(\"xxabcabc\", /(abc)+/)) print RSTART, RLENGTH}'",
    "awk 'BEGIN { s = \"The Quick Fox\"; while (match(s, /[A-Z]/)) { printf \"%s@%d \", "
    "substr(s, RSTART, RLENGTH), RSTART; s = substr(s, RSTART + 1) }; print \"\" }'",
    "awk 'BEGIN{print index(\"hello\", \"ll\"), index(\"hello\", \"z\")}'",
    "awk 'BEGIN { s = \"abcd\"; gsub(/ab|abc/, \"<&>\", s); print s, match(\"xyz\", /x|xy|xyz/), "
    "RLENGTH }'",
    "awk 'BEGIN { s = sprintf(\"%s=%d\", \"x\", 42); print s, length(s) }'",
    # printf
    "awk 'BEGIN { printf \"%5.2f|%-4s|%03d\\n\", 3.14159, \"ab\", 7 }'",
    "awk 'BEGIN { printf \"%*d|%-*s|%.*f\\n\", 5, 42, 4, \"ab\", 2, 3.14159 }'",
    "awk 'BEGIN { printf \"%c%c%c\\n\", 72, 105, \"!!\" }'",
    "awk 'BEGIN { printf \"%x %X %o %e %E %g %G %i %%\\n\", 255, 255, 8, 1234.5, 0.000123, "
    "0.0001, 1e10, 42.9 }'",
    "awk 'BEGIN { printf \"%+d % d %05d %-5d| %#o %#x\\n\", 5, 5, 42, 42, 8, 255 }'",
    "awk 'BEGIN { printf \"%d %d\\n\", \"3abc\", -2.7 }'",
    "awk 'BEGIN { printf \"[%10.3s][%5s][%-5s]\\n\", \"abcdef\", \"abc\", \"abc\" }'",
    "awk '{ printf \"%-6s|%6s|\\n\", $1, $2 }' table.tsv",
    "awk -F, 'NR > 1 { printf \"%-5s %5.1f%%\\n\", $1, $3 / 237 * 100 }' data.csv",
    "awk 'NR % 2 { printf \"%s,\", $0; next } { print $0 }' words.txt",
    "awk '{ printf \"%s%s\", sep, $0; sep = \",\" } END { print \"\" }' a.txt",
    # arrays
    "awk -F, 'NR>1 {t[$2]+=$3} END {for (r in t) print r, t[r]}' data.csv | sort",
    "awk '!seen[$0]++' words.txt",
    "awk '{c[$0]++} END {for (w in c) print c[w], w}' words.txt | sort -rn",
    "awk '{ lines[NR] = $0 } END { for (i = NR; i >= 1; i--) print lines[i] }' a.txt",
    "awk 'BEGIN { a[\"x\"]=1; a[\"y\"]=2; delete a[\"x\"]; for (k in a) print k; print (\"x\" in "
    "a), (\"y\" in a) }'",
    "awk 'BEGIN { a[1,2]=3; for (k in a) { split(k, p, SUBSEP); print p[1], p[2], a[k] }; "
    "if ((1,2) in a) print \"yes\" }'",
    "awk 'BEGIN { a[\"k\"]; delete a; for (k in a) n++; print n + 0 }'",
    "awk '{ a[NR] = $1 } END { for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) "
    "if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; for (i = 1; i <= NR; i++) "
    "printf \"%s \", a[i]; print \"\" }' nums.txt",
    "printf 'apple\\nkiwi\\n' > keep.txt; awk 'NR==FNR {keep[$1]; next} $1 in keep' keep.txt "
    "words.txt",
    # control flow and functions
    "awk 'BEGIN { i = 0; do { i++ } while (i < 5); print i; for (;;) { if (++j > 3) break }; "
    "print j; while (k < 10) { k++; if (k % 2) continue; s = s k }; print s }'",
    "awk 'function fact(n) { return n <= 1 ? 1 : n * fact(n-1) } BEGIN { print fact(10) }'",
    "awk 'function fib(n) { return n < 2 ? n : fib(n-1) + fib(n-2) } BEGIN { print fib(18) }'",
    "awk 'function fill(arr, n,   i) { for (i=1;i<=n;i++) arr[i]=i*i } "
    "BEGIN { fill(sq, 5); for (k in sq) n++; print n, sq[3] }'",
    "awk 'function f(a) { a[1] = \"set\" } BEGIN { f(arr); print arr[1] }'",
    "awk 'function g(x) { x = 5 } BEGIN { y = 1; g(y); print y }'",
    "awk 'function max(a, b) { return a > b ? a : b }\n{ m = max(m, $1) }\nEND { print m }' "
    "nums.txt",
    "awk 'BEGIN { exit 3 } END { print \"end ran\" }'; echo \"status $?\"",
    "awk '{ print; if (NR == 2) exit 5 }' a.txt; echo \"status $?\"",
    "seq 100 | awk 'NR==3{exit} {print NR}'",
    # getline, files, ARGV, -v, -f
    "awk 'BEGIN { while ((getline line < \"a.txt\") > 0) n++; print n, line }'",
    "awk 'BEGIN { while ((getline line < \"data.csv\") > 0) { split(line, f, \",\"); "
    "if (f[3] + 0 > 40) print f[1] } }'",
    "awk 'BEGIN { r = getline line < \"missing.txt\"; print \"r=\" r }'",
    "awk 'NR == 1 { getline nextline; print $0 \" + \" nextline, NR }' a.txt",
    "awk '{ getline; print }' words.txt",
    "awk '{ print > ($1 \".out\") } END { close(\"ERROR.out\"); while ((getline l < "
    "\"ERROR.out\") > 0) "
    "print \"got\", l }' c.log",
    "awk 'BEGIN { print \"x\" > \"o.txt\"; print \"y\" >> \"o.txt\"; close(\"o.txt\"); "
    "while ((getline l < \"o.txt\") > 0) print l }'",
    "awk 'BEGIN { printf \"%s %s\\n\", \"to\", \"stderr\" > \"/dev/stderr\" }' 2>&1",
    "awk 'FNR==1 {print FILENAME} END {print NR}' a.txt words.txt",
    "awk '{ n++ } END { print n \" lines\" }' a.txt words.txt",
    "awk '{ print v, $0 }' v=1 a.txt v=2 words.txt | head -5",
    "awk 'BEGIN { print ARGC, ARGV[1], ARGV[2] }' foo bar",
    "FOO=bar awk 'BEGIN { print ENVIRON[\"FOO\"] }'",
    "awk -v 'msg=a\\tb' 'BEGIN { print msg }'",
    "awk -v n=3 'NR <= n' words.txt",
    "printf '{ print \"f:\" $0 }\\n' > prog.awk; awk -f prog.awk a.txt",
    "awk '{print $1}' c.log | sort | uniq -c | awk '{print $2, $1}'",
    "awk 'BEGIN { print length() }' < /dev/null",
    "awk 'END { print NR }' /dev/null; awk 'BEGIN { print \"x\" > \"/dev/null\"; print \"ok\" }'",
    "printf 'a\\r\\nb\\r\\n' > crlf.txt; awk '{ print length($0) }' crlf.txt",
    # errors: status 2 and nothing (or only earlier output) on stdout
    "awk 'BEGIN { print ( }'; echo \"status $?\"",
    "awk '{ print $1 ' a.txt; echo \"status $?\"",
    "awk '{ print }' missing.txt; echo \"status $?\"",
]
