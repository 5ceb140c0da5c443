"""Command lines for `git` in the sandbox's shell (guest/declaw_shell/git.py), each run by bash
with the host's git and in a sandbox (tests/shell/test_git.py), in an empty folder, with the same
identities, dates and an empty $HOME: stdout, stderr and the exit status must match, commit ids
included. Each case is a script, as agents send them: a repository made and used step by step."""

from __future__ import annotations

SCRIPTS: list[str] = [
    'git init -q; echo hi > a; git add a; git commit -m first; git log; git status',
    'git init; git status; echo hi > a; mkdir d; echo x > d/f; git status; git add .; git status; '
     'git commit -m "first commit"; git status',
    "git init -q; printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\n' > f; git add f; git commit -qm one; "
     "printf 'a\\nB\\nc\\nd\\ne\\nf\\ng\\nH\\n' > f; git diff; git diff --stat; git add f; "
     'git diff --cached; git commit -m two; git log --oneline; git show --stat HEAD',
    'git init -q; echo hi > a; git add a; git commit -qm first; git commit --amend -m again; '
     "git log --format='%H %an %s'",
    'git init -q; git commit -m x; echo $?; git log; echo $?; git status -s; git status --porcelain -b',
    'git init -q; echo a > a; echo b > b; git add .; git commit -qm 1; echo c >> a; rm b; '
     'echo n > new; git status; git status -s; git status --porcelain; git add -A; git status; '
     'git status -sb',
    'git init -q; mkdir -p src/deep; echo x > src/deep/x.py; echo y > src/y.py; echo t > top; '
     'git add top; git commit -qm t; git status; git status -uall; cd src; git status; git status -s; '
     'git add deep; git status -s; cd ..; git status',
    "git init -q; printf 'line\\n' > f; git add f; git commit -qm 1; git rm f; git status; "
     'git commit -qm 2; git log --oneline; git log --stat',
    'git init -q; echo x > a; git add a; git commit -qm 1; git mv a b; git status; git commit -m mv; '
     'git show; git log --name-status --format=%s',
    "git init -q; echo 'node_modules/' > .gitignore; echo '*.log' >> .gitignore; mkdir node_modules; "
     'echo x > node_modules/p; echo l > x.log; echo k > keep; git status -s; git add x.log; echo $?; '
     'git add -f x.log; git status -s; git add .; git status -s',
    'git init -q; echo a > a; git add a; git commit -qm 1; git branch feature; git branch; '
     'git checkout feature; echo b > b; git add b; git commit -qm 2; git checkout master; ls; '
     'git merge feature; ls; git log --oneline; git branch -d feature; git branch -v',
    'git init -q; echo a > a; git add a; git commit -qm 1; git checkout -b dev; '
     'git branch --show-current; git switch master; git switch -c other; git branch; '
     'git branch -m renamed; git branch; git switch nope; echo $?',
    'git init -q; echo v1 > f; git add f; git commit -qm 1; echo v2 > f; git commit -qam 2; '
     'echo v3 > f; git diff; git diff HEAD~1; git diff HEAD~1 HEAD; git diff --stat HEAD~1; '
     'git diff --name-only HEAD~1; git checkout -- f; git diff; cat f',
    'git init -q; echo v1 > f; git add f; git commit -qm 1; echo v2 > f; git add f; git reset; '
     'git status -s; git add f; git reset --hard; cat f; git status',
    'git init -q; for i in 1 2 3; do echo $i >> f; git add f; git commit -qm "c$i"; done; '
     'git log --oneline; git reset --soft HEAD~1; git status -s; git log --oneline -n 1; '
     'git reset --hard HEAD~1; git log --oneline; cat f',
    'git init -q; echo a > a; git add a; git commit -qm 1; git tag v1; echo b > a; git commit -qam 2; '
     'git tag -a v2 -m "release 2"; git tag; git log --oneline --decorate; git show v1 --stat; '
     'git tag -d v1; git tag',
    'git init -q; echo a > a; git add a; git commit -qm 1; git rev-parse HEAD; '
     'git rev-parse --short HEAD; git rev-parse --abbrev-ref HEAD; git rev-parse --show-toplevel; '
     'git rev-parse --is-inside-work-tree; mkdir sub; cd sub; git rev-parse --show-prefix --show-cdup; '
     'git rev-parse HEAD~5; echo $?',
    'git init -q; echo a > a; mkdir d; echo b > d/b; git add .; git commit -qm 1; git ls-files; '
     'git ls-files -s; cd d; git ls-files; echo u > u; git ls-files -o; '
     'git ls-files --others --exclude-standard',
    'git init -q; git config user.name "Someone"; git config user.name; git config --get user.email; '
     'echo $?; git config core.bare; git config --list | grep -v filemode; '
     'git config --global user.email me@x; cat ../home/.gitconfig',
    'git init -q; '
     "printf 'def f():\\n    return 1\\n\\n\\ndef g():\\n    x = 1\\n    y = 2\\n    z = 3\\n "
     "   return x + y + z\\n' > m.py; "
     'git add m.py; git commit -qm 1; '
     "printf 'def f():\\n    return 1\\n\\n\\ndef g():\\n    x = 1\\n    y = 20\\n    z = 3\\n"
     "    return x + y + z\\n\\n\\ndef h():\\n    pass\\n' > m.py; "
     'git diff; git diff -U1; git diff --numstat; git diff --shortstat',
    "git init -q; printf 'a\\nb\\n' > f; git add f; git commit -qm 1; printf 'a\\nb' > f; git diff; "
     "printf '\\0bin' > bin; git add bin; git diff --cached; git diff --cached --stat",
    'git init -q; echo a > a; git add a; git commit -qm 1; git checkout -b x; echo b > a; '
     'git commit -qam 2; git checkout master; echo c > a; git checkout x; echo $?; git status -s',
    'git init -q; git commit --allow-empty -m "empty"; '
     "git log --format='%s|%b|%an|%ae|%cn|%ce|%ad|%cd|%ai|%ci|%at|%h|%t|%T|%p'",
    'git --version | head -c 11; echo; git status; echo $?',
    'git init -q; echo x > "with space"; echo y > "ünï"; git add .; git status; git status -s; '
     'git commit -qm 1; git ls-files; git log --stat --format=%s',
    'git init -q; echo a > a; git add a; git commit -qm 1; echo b >> a; git stash; echo $?',
    'git init -q; echo a > a; git add a; git commit -qm "one"; echo b > a; git commit -qam "two"; '
     'git show HEAD~1:a; git show HEAD:a; git cat-file -t HEAD; git cat-file -p HEAD; '
     'git cat-file -s HEAD:a; git show HEAD~1',
    'git init -q; echo a > a; echo b > b; git add .; git commit -qm one; echo a2 > a; echo n > new; '
     'git add new; git stash; git stash list; git status -s; echo b2 > b; git stash push -m "my msg"; '
     'git stash list; git stash show; git stash show -p; git stash pop; echo "rc=$?"; git stash list; '
     'git stash apply; echo rc=$?; git stash drop; git stash drop; echo rc=$?; git log --all --oneline',
    'git init -q; echo a > a; git add a; git commit -qm 1; git stash; echo u > u; git stash -u; ls; '
     'git stash list; git stash pop; ls; git status -s',
    'git init -q; for i in 1 2 3; do echo $i > f$i; git add f$i; git commit -qm "c$i"; done; '
     'git log --graph; git log --graph --oneline; git log --graph --stat -2; '
     "git log --graph --format='%h %s'",
    'git init -q; echo a > a; git add a; git commit -qm 1; echo n > new; git diff; git add nope; '
     'echo $?; git commit -am "x"; echo $?; rm a; git commit -am "del"; git log --oneline -p',
    'git init -q; mkdir -p d/e; echo 1 > d/e/x; echo 2 > d/y; echo 3 > z; git add .; git commit -qm 1; '
     'echo m >> d/y; echo n > d/e/new; cd d; git status; git status -s; git diff; git add .; '
     'git status -s; git reset HEAD y; git status -s; cd ..; git rm -r d -q; git status -s; '
     'git rm --cached z; git status',
    "git init -q; printf 'build/\\n*.pyc\\n!keep.pyc\\n' > .gitignore; mkdir build sub; "
     "echo x > build/o; echo y > a.pyc; echo z > keep.pyc; printf '*.tmp\\n' > sub/.gitignore; "
     'echo t > sub/x.tmp; echo u > sub/u; git status -s; git status -s --ignored 2>&1 | head -3; '
     'git add .; git status -s',
    'mkdir proj; git init -q proj; echo a > proj/a; git -C proj add a; git -C proj commit -qm first; '
     'git -C proj log --oneline; cd proj && git rev-parse --show-toplevel',
    'git init -q; git diff --cached; echo a > a; git add a; git diff --cached; '
     'git diff --cached --stat; git status --porcelain',
    'git init -q; echo base > f; git add f; git commit -qm base; git checkout -q -b side; '
     'echo side > f; git commit -qam side; git checkout -q master; git branch -d side; echo $?; '
     'git branch -D side; git log --oneline --all',
    'git init -q; '
     'for n in a_really_long_file_name_that_goes_on_and_on_and_on.txt short b/also/a/d'
     'eeply/nested/path/to/some/file_with_a_long_name.py; '
     'do mkdir -p $(dirname $n); seq 1 200 > $n; done; git add .; git commit -qm 1; '
     'for n in short b/also/a/deeply/nested/path/to/some/file_with_a_long_name.py; do seq 50 300 > $n; '
     'done; git diff --stat; git diff --numstat; git diff --shortstat; git commit -qam 2; '
     'git show --stat --format=%s',
    'git init -q; echo a > a; git add a; git commit -qm 1; echo b > b; git add b; git commit -qm 2; '
     'git log --oneline -- a; git log --format=%s -1 -- b; git log --author=Thor --oneline; '
     "git log --grep=2 --oneline; git log --reverse --oneline; git log -n1 --format='%an <%ae> %cn'",
    'git init -q; echo a > a; git add a; git commit -qm 1; git checkout -q -b dev; echo b >> a; '
     'git commit -qam 2; git checkout -q master; git diff master dev; git diff master..dev --stat; '
     'git log master..dev --oneline; git diff dev master -- a',
    "git init -q; printf 'x\\n' > a; git add a; git commit -qm 1; printf 'y\\n' > a; "
     'git diff --exit-code; echo rc=$?; git diff --quiet; echo rc=$?; git add a; git diff --quiet; '
     'echo rc=$?; git diff --cached --quiet; echo rc=$?',
    'git init -q -b main; git status; git branch --show-current; echo a > a; git add a; '
     'git commit -qm 1; git branch; git checkout -b "bad name"; echo $?; git branch feature/x; '
     'git branch',
    'git init -q; echo hello > a; git add a; git commit -qm 1; git show HEAD:a; git show HEAD:nope; '
     'echo $?; git show nope; echo $?; git rev-parse --verify HEAD >/dev/null; echo $?; '
     'git rev-parse --verify nope; echo $?',
    'git init -q; echo a > a; git add a; git commit -q -m "first line" -m "second para"; git log -1; '
     'git log -1 --format=%B; echo x >> a; '
     "git commit -qa -F - <<'M'\nsubject from stdin\n\nbody\nM\ngit log -1 --format='%s|%b'",
    "git init -q; printf 'a\\r\\nb\\r\\n' > crlf; "
     'git add -A; git commit -qm 1; '
     "git status -s; git ls-files; printf 'a\\r\\nc\\r\\n' > crlf; git diff",
    'git init -q; echo x > p; git add p; git commit -qm 1; git rm -q p; mkdir p; echo y > p/q; '
     'git add p; git commit -qm 2; git checkout -q HEAD~1; ls; cat p; git checkout -q master; ls p',
    'git init -q; seq 1 3000 > big; git add big; git commit -qm 1; '
     "seq 1 3000 | sed 's/^1\\(.\\)5$/X/' > big; git diff --stat; git diff | head -20; "
     'git diff --numstat',
    'git init -q; git add .; echo $?; git commit -m "nothing"; echo $?; git log --oneline; echo $?; '
     'git diff HEAD; echo $?; git reset --hard; echo $?; git branch; git stash; echo $?',
    'git init -q; echo a > a; git add a; git commit -qm 1; ln -s a link; git add link; '
     'git commit -qm link; git show --stat --format=%s; git ls-files -s; rm link; ln -s nowhere link; '
     'git status -s; git diff',
    'git init -q; echo a > a; git add a; git commit -qm 1; '
     "git log --format='%H%n%h%n%an%n%ae%n%s%n%d%n%D' --decorate; git log -1 --pretty=oneline; "
     'git log -1 --pretty=short; git log -1 --pretty=full',
    'git init -q; mkdir empty; touch empty/.keep; echo a > a; git add .; git commit -qm 1; '
     'git rm -q -r empty; ls; git status -s; git rm a nonexistent; echo $?; git status -s',
    'git init -q; mkdir s; echo a > s/a; echo b > b; git add -A; git commit -qm 1; echo x >> s/a; '
     'echo y >> b; git checkout -- .; git status -s; echo x >> s/a; cd s; git restore .; git status -s; '
     'echo z > new; git add -A; cd ..; git status -s',
    'git init -q; echo a > a; echo b > b; git add .; git commit -qm 1; rm a; echo c >> b; git diff; '
     'git diff --stat; git commit -m "only b" b; git status -s; git log --stat --format=%s -1',
    'git init -q; echo a > a; git add .; git commit -qm 1; git mv a b; git commit -qm mv; '
     'git log -p --format=%s; git diff HEAD~1 --name-status; git show --format=%s HEAD~1',
    'git init -q; echo a > a; git add .; git commit -qm 1; echo b >> a; git commit -qam 2; '
     'echo u > untracked; git reset --hard HEAD~1; ls; git log --oneline; git reset --hard nope; echo $?',
    'git init -q; echo hi > a; git add a; git commit -qm 1; git config user.name; echo $?; '
     'git config --list; git config alias.st status; git config --get alias.st; '
     'git config --unset alias.st; git config --get alias.st; echo $?',
    'git init -q; '
     "printf '1\\n2\\n3\\n4\\n5\\n6\\n7\\n8\\n9\\n10\\n11\\n12\\n13\\n14\\n15\\n16\\n17\\n18\\n19\\n20\\n'"
     ' > n; '
     "git add n; git commit -qm 1; sed -i 's/^3$/three/; s/^17$/seventeen/' n; git diff; git diff -U1; "
     'git diff -U0; git diff --unified=10',
]
