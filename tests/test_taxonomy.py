"""The tool taxonomy: harness profiles and the shell classifier.

The shell classifier has twins (``impl.shell``: compiled and pure); every test of it runs on
both, and tests/test_shell_twins.py checks they agree on random and real commands. The
lexer tests look inside the pure twin, the reference.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore import _native_flag
from loopcore.taxonomy import (
    PROFILES,
    Profile,
    classify,
    classify_shell,
    get_profile,
    parse_patch_targets,
)

pure = _native_flag.load_twin("shell", "py")

SHELL_CASES = [
    # readers, with their targets
    ("cat a.py", "observe", "a.py"),
    ("cat a.py b.py", "observe", ("a.py", "b.py")),
    ("head -n 50 a.py", "observe", "a.py"),
    ("tail -20 logs/app.log", "observe", "logs/app.log"),
    ("nl -ba src/x.py | sed -n '10,40p'", "observe", "src/x.py"),
    ("sed -n '1,20p' a.py", "observe", "a.py"),
    ("grep -rn 'def foo' src/", "observe", "src"),
    ("cat ./a.py && cat src/../a.py", "observe", "a.py"),
    ("grep -n foo a.py b.py | head", "observe", ("a.py", "b.py")),
    ("grep -e foo -e bar -- x.txt", "observe", "x.txt"),
    ("rg -n TODO src tests", "observe", ("src", "tests")),
    ("rg --files", "observe", None),
    ("ls", "observe", "."),
    ("ls -la /testbed/src 2>/dev/null", "observe", "/testbed/src"),
    ("find . -name '*.py' | xargs grep -l foo", "observe", "."),
    ("wc -l < data.csv", "observe", "data.csv"),
    ("git diff", "observe", None),
    ("git log --oneline -5", "observe", None),
    ("git status && git diff -- a.py", "observe", "a.py"),
    ("git -C repo show HEAD:a.py", "observe", None),
    ("cd /testbed && cat setup.py", "observe", "/testbed/setup.py"),
    ("cd src; cd ../lib && cat x.c", "observe", "lib/x.c"),
    ("bash -lc 'cat README.md'", "observe", "README.md"),
    ("for f in *.py; do cat $f; done", "observe", None),
    # writers, with their targets
    ("sed -i 's/a/b/' x.py", "mutate", "x.py"),
    ("sed -i.bak -e 's/a/b/' x.py y.py", "mutate", ("x.py", "y.py")),
    ("echo hi > out.txt", "mutate", "out.txt"),
    ("echo hi >> out.txt", "mutate", "out.txt"),
    ("grep foo a 2>&1 | tee log.txt", "mutate", "log.txt"),
    ("cat > f.py << 'EOF'\nimport os\nos.remove('x')\nEOF", "mutate", "f.py"),
    ("cat <<-EOF > g.py\n\tprint(1)\n\tEOF\nls", "mutate", "g.py"),
    ("mv a.py b.py", "mutate", ("a.py", "b.py")),
    ("cp a.py b.py", "mutate", "b.py"),
    ("rm -rf build dist", "mutate", ("build", "dist")),
    ("touch new.txt", "mutate", "new.txt"),
    ("mkdir -p out/x", "mutate", "out/x"),
    ("patch -p1 < fix.diff", "mutate", None),
    ("patch a.py fix.diff", "mutate", "a.py"),
    ("git apply fix.diff", "mutate", None),
    ("git checkout -- a.py", "mutate", "a.py"),
    ("git checkout main", "mutate", None),
    ("git stash", "mutate", None),
    ("git stash list", "observe", None),
    ("find . -name '*.pyc' -delete", "mutate", None),
    ("perl -pi -e 's/a/b/' x.pl", "mutate", "x.pl"),
    ("sort -o sorted.txt in.txt", "mutate", "sorted.txt"),
    ("echo x > $OUT", "mutate", None),
    ("cd /repo && sed -i 's/x/y/' a.py && cat a.py", "mutate", "/repo/a.py"),
    (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: b.py\n+1\n*** End Patch\nEOF",
        "mutate",
        ("src/a.py", "b.py"),
    ),
    # anything that runs code is exec, whatever else it does
    ("python reproduce.py", "exec", None),
    ("cd /testbed && python -m pytest -x tests/", "exec", None),
    ("make -j4", "exec", None),
    ("timeout 60 pytest -q", "exec", None),
    ("cat a.py | python -", "exec", None),
    ("cat <<EOF > t.py\nprint(1)\nEOF\npython t.py", "exec", None),
    ("./configure && make", "exec", None),
    ("some-unknown-tool --flag", "exec", None),
    ("bash run.sh", "exec", None),
    # a command substitution's commands are parts of the command that holds it
    ("x=$(rm a.py)", "mutate", "a.py"),
    ('echo "$(rm a.py)"', "mutate", "a.py"),
    ("echo `rm a.py`", "mutate", "a.py"),
    ("x=$(sed -i s/a/b/ f.py); echo $x", "mutate", "f.py"),
    ("cd /repo && x=$(rm a.py)", "mutate", "/repo/a.py"),
    ("echo $(echo $(rm b))", "mutate", "b"),
    ("x=$(( $(rm a) + 1 ))", "mutate", "a"),
    ("id=$(linctl issue create --title t)", "exec", None),
    ('echo "`python x.py`"', "exec", None),
    ("x=$(cat a.py)", "observe", "a.py"),
    ("ls $(pwd)", "observe", None),
    ('git commit -m "$(cat msg)"', "mutate", "git:repo"),
    ("rm -f .git/index.lock", "mutate", (".git/index.lock", "git:dir")),
    ("rm -rf sub/.git", "mutate", ("sub/.git", "git:dir")),
    ("rm -f .gitignore", "mutate", ".gitignore"),
    ("echo '$(rm a.py)'", "other", None),  # single quotes: text
    ('echo "\\$(rm a.py)"', "other", None),  # an escaped "$": text
    ("x=$((i+1))", "other", None),  # arithmetic
    # a process substitution's command runs as a command substitution's does
    ("diff <(cat a.py) <(cat b.py)", "observe", ("a.py", "b.py")),
    ("diff <(rm a.py) b.py", "mutate", "a.py"),
    ("cat <(python x.py)", "exec", None),
    ("tee >(rm x) < a", "mutate", None),  # the file tee writes is made by the shell
    ("echo x > >(cat)", "mutate", None),
    ("cat <(ls)", "observe", "."),
    ("echo '<(rm a.py)' \"<(rm b.py)\"", "other", None),  # quoted: text
    # neutral commands
    ("echo hello", "other", None),
    ("cd /tmp", "other", None),
    ("export A=1", "other", None),
    # command -v / -V says how a name resolves, as which does; command NAME runs NAME
    ("command -v python", "other", None),
    ("command -V git", "other", None),
    ("command -pv ls", "other", None),
    ("sudo command -v rg", "other", None),
    ("command -v python && cat a.py", "observe", "a.py"),
    ("command -p ls -la", "observe", "."),
    ("command -- -v", "exec", None),
    ("", "other", None),
]


@pytest.mark.parametrize("cmd,kind,target", SHELL_CASES)
def test_shell_classifier(impl, cmd, kind, target):
    assert impl.shell.classify_shell(cmd) == (kind, target)
    # what the command reads and writes never contradicts its kind and target
    k, t, reads, writes, no_op = impl.shell.classify_shell_access(cmd)
    assert (k, t) == (kind, target)
    if kind == "exec":
        assert (reads, writes, no_op) == (None, None, False)
    elif kind == "observe":
        assert writes == () and not no_op
    elif kind == "mutate":
        assert (
            writes is None
            if target is None
            else set(writes) == set(t if isinstance(t, tuple) else (t,))
        )


# (command, reads, writes, no_op); None = anything / everything
ACCESS_CASES = [
    ("git diff -- a.py > p.txt", ("a.py",), ("p.txt",), False),
    # a command that reads no path it names but may see any file (git diff, git status,
    # grep -r, rg) reads anything, whatever redirection or pipeline takes its output; a command
    # with named reads keeps them; one that reads only its stdin (fed by a pipe or a heredoc)
    # reads no file
    ("git diff > p.txt", None, ("p.txt",), False),
    ("git diff > /tmp/x.patch", None, ("/tmp/x.patch",), False),
    ("git status > s.txt", None, ("s.txt",), False),
    ("git log > l.txt", None, ("l.txt",), False),
    ("git diff src/a.py", None, (), False),
    ("git diff src/a.py > p", None, ("p",), False),
    ("cd sub && git diff > p", None, ("sub/p",), False),
    ("bash -c 'git diff' > p", None, ("p",), False),
    ("x=$(git status) && echo hi > f", None, ("f",), False),
    ("git status; cat a.py", None, (), False),
    ("git stash list > s", None, ("s",), False),
    ("grep -r foo > out.txt", None, ("out.txt",), False),
    ("grep -rn foo | tee out.txt", None, ("out.txt",), False),
    ("grep -R foo > o", None, ("o",), False),
    ("grep --recursive foo > o", None, ("o",), False),
    ("rg foo > o", None, ("o",), False),
    ("git grep foo > o", None, ("o",), False),
    ("ps aux > p.txt", None, ("p.txt",), False),
    ("env > e.txt", None, ("e.txt",), False),
    ("grep -rn foo . > o", (".",), ("o",), False),
    ("rg foo src > o", ("src",), ("o",), False),
    ("git log -- a.py > l", ("a.py",), ("l",), False),
    ("ls > l.txt", (".",), ("l.txt",), False),
    ("cat a.py > b.py", ("a.py",), ("b.py",), False),
    ("cat a.py | grep x > f", ("a.py",), ("f",), False),
    ("cat <<EOF > f\nhi\nEOF", (), ("f",), False),
    ("echo hi | grep x > f", (), ("f",), False),
    ("printf 'a\\n' | tee f", (), ("f",), False),
    ("echo hi | jq . > f", (), ("f",), False),
    ("grep x < a.txt > f", ("a.txt",), ("f",), False),
    ("git checkout -- a.py", (), ("a.py",), False),
    ("git checkout a.py", (), ("a.py",), False),
    ("git checkout src/x.py b.py", (), ("src/x.py", "b.py"), False),
    ("git restore a.py", (), ("a.py",), False),
    ("git checkout main", (), None, False),
    ("git checkout HEAD~1", (), None, False),
    ("git checkout -b fix", (), None, False),
    ("git checkout .", (), None, False),
    ("git checkout -- src/", (), None, False),
    ("git stash", (), None, False),
    ("git reset --hard", (), None, False),
    ("sed -i 's/return a/return a/' f.py", ("f.py",), ("f.py",), True),
    ("sed -i 's/x/x/g' f.py", ("f.py",), ("f.py",), True),
    ("sed -i -e 's|a|a|' f.py", ("f.py",), ("f.py",), True),
    ("sed -i 's/a.b/a.b/' f.py", ("f.py",), ("f.py",), False),  # a regex: "axb" becomes "a.b"
    ("sed -i 's/x/y/' f.py", ("f.py",), ("f.py",), False),
    ("sed -i 's/x/x/' f.py && cat f.py", ("f.py",), ("f.py",), False),
    ("sed -i '264a x' a.py", ("a.py",), ("a.py",), False),
    ("echo 'x' > fix.py", (), ("fix.py",), False),
    ("echo 'y' >> fix.py", ("fix.py",), ("fix.py",), False),
    ("cat a.py", ("a.py",), (), False),
    ("grep -n 'class A' f.py", ("f.py",), (), False),
    ("git status", None, (), False),
    ("cat $f", None, (), False),
    ("python3 fix.py", None, None, False),
    ("echo hi", (), (), False),
    ('git commit -m "$(cat msg)"', ("msg", "git:dir"), ("git:repo",), False),
    # A write inside a .git folder also writes git:dir, which the git commands that change the
    # repository read (a stale lock makes them fail), and reads git:repo (a git command may
    # write the same file again): no write of git:repo, removing a lock undoes no commit.
    ("git add a.py", ("git:dir",), ("git:repo",), False),
    ("rm -f .git/index.lock", ("git:repo",), (".git/index.lock", "git:dir"), False),
    ("rm ./.git/index.lock", ("git:repo",), (".git/index.lock", "git:dir"), False),
    ("cd sub && rm .git/index.lock", ("git:repo",), ("sub/.git/index.lock", "git:dir"), False),
    (
        "rm -f /r/.git/refs/heads/x.lock",
        ("git:repo",),
        ("/r/.git/refs/heads/x.lock", "git:dir"),
        False,
    ),
    ("rm -rf .git", ("git:repo",), (".git", "git:dir"), False),
    ("mv .git old", ("git:repo",), (".git", "old", "git:dir"), False),
    (
        "echo x >> .git/info/exclude",
        (".git/info/exclude", "git:repo"),
        (".git/info/exclude", "git:dir"),
        False,
    ),
    (
        "rm -f .git/index.lock && git add a.py",
        ("git:dir", "git:repo"),
        (".git/index.lock", "git:repo", "git:dir"),
        False,
    ),
    ("rm -f $d/.git/index.lock", ("git:repo",), None, False),
    ("rm .gitignore x.git .github/w.yml", (), (".gitignore", "x.git", ".github/w.yml"), False),
    ("cat .git/HEAD", (".git/HEAD",), (), False),
    # what a process substitution's file holds is known only at run time, as for "$(...)"
    ("diff <(cat a.py) b.py", None, (), False),
    ("diff <(rm a.py) b.py", None, ("a.py",), False),
    ("x=$(sed -i s/a/b/ f.py)", ("f.py",), ("f.py",), False),
    ('sed -i "s/x/x/" f.py <<< "$(rm y)"', ("f.py",), ("y", "f.py"), False),
]


@pytest.mark.parametrize("cmd,reads,writes,no_op", ACCESS_CASES)
def test_shell_reads_and_writes(impl, cmd, reads, writes, no_op):
    assert impl.shell.classify_shell_access(cmd)[2:] == (reads, writes, no_op)


def test_profiles_give_reads_and_writes():
    from loopcore.taxonomy.profiles import PROFILES

    p = PROFILES["generic"]
    assert p.access("bash", {"command": "git diff -- a.py > p.txt"}) == (
        "mutate",
        "p.txt",
        ("a.py",),
        ("p.txt",),
        False,
    )
    assert p.access("Read", {"file_path": "a.py"}) == ("observe", "a.py", None, None, False)
    assert p.access("Write", {"file_path": "a.py", "content": "x"}) == (
        "mutate",
        "a.py",
        None,
        None,
        False,
    )
    assert p.access("Bash", {"command": ["bash", "-lc", "cat a.py"]}) == (
        "observe",
        "a.py",
        ("a.py",),
        (),
        False,
    )
    assert p.access("nosuch", {}) == ("exec", None, None, None, False)


def test_the_dispatcher_caches_the_live_twin():
    live = _native_flag.load_twin("shell")
    assert classify_shell("cat a.py") == live.classify_shell("cat a.py") == ("observe", "a.py")
    hits = classify_shell.cache_info().hits  # an lru_cache (bench_ingest clears it between runs)
    assert classify_shell("cat a.py") == ("observe", "a.py")
    assert classify_shell.cache_info().hits == hits + 1
    assert parse_patch_targets is live.parse_patch_targets


def test_shell_quotes_and_escapes(impl):
    classify_shell = impl.shell.classify_shell
    assert classify_shell('cat "my file.txt"') == ("observe", "my file.txt")
    assert classify_shell("cat my\\ file.txt") == ("observe", "my file.txt")
    assert classify_shell('echo "a > b" | cat') == ("observe", None)  # '>' inside quotes is text
    assert classify_shell("cat a#b # a comment > x") == ("observe", "a#b")
    assert classify_shell("cat a \\\n b") == ("observe", ("a", "b"))
    assert classify_shell('python -c \'open("x", "w")\'') == ("exec", None)


def test_shell_never_raises_on_garbage(impl):
    classify_shell = impl.shell.classify_shell
    for cmd in [
        "'unterminated",
        '"unterminated',
        "$(unclosed",
        "`x",
        "<<",
        ">",
        "|||",
        "cat <<EOF\nno end",
        "\\",
    ]:
        kind, _ = classify_shell(cmd)
        assert kind in ("observe", "mutate", "exec", "other")
    assert classify_shell(None) == ("exec", None)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab.> <|&;'\"$()`\\\n#-=*/ic:EOF")), max_size=40))
def test_shell_total_on_any_text(impl, cmd):
    kind, target = impl.shell.classify_shell(cmd)
    assert kind in ("observe", "mutate", "exec", "other")
    assert target is None or isinstance(target, (str, tuple))
    if kind in ("exec", "other"):
        assert target is None


def _segments(segs):
    return [(s.words, s.redirs, s.heredocs) for s in segs]


# Characters that steer the lexers: quotes, escapes, operators, redirections, comments,
# substitutions, digits (file descriptors), newlines and a form feed (a blank that splits
# nothing). No "<<": a heredoc always takes the general lexer.
_LEX_ALPHABET = list("ab01 \t\\'\"$()`|&;<>#\n\x0c-=")


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(_LEX_ALPHABET), max_size=30).filter(lambda s: "<<" not in s)
)
def test_fast_and_slow_lexers_agree(text):
    # The fast lexer is only a shortcut: the dispatcher must give what the general lexer gives,
    # and so must the fast lexer itself wherever the dispatcher uses it.
    slow_segs = pure._lex_slow(text)
    slow = _segments(slow_segs)
    assert _segments(pure._lex(text)) == slow
    # and the same tokens that may hold a command substitution
    slow_subs = [s.subs for s in slow_segs]
    assert [s.subs for s in pure._lex(text)] == slow_subs
    if not pure._NEEDS_SLOW.search(text):
        fast_segs = pure._lex_fast(text)
        assert _segments(fast_segs) == slow
        assert [s.subs for s in fast_segs] == slow_subs


@pytest.mark.parametrize(
    "text,segments",
    [
        # an escaped operator right before '#' once made the fast lexer read a comment there
        ("\\;#2", [[";#2"]]),
        ("a\\;#2 b", [["a;#2", "b"]]),
        ("x\\|#y", [["x|#y"]]),
        ("a\\\\;#c", [["a\\"]]),  # an escaped backslash: ';' splits, '#c' is a comment
        ("cat a\\ #b", [["cat", "a #b"]]),
        # a line continuation or a form feed between digits and '>' keeps the digits a word
        ("echo 1\\\n>x", [["echo", "1"]]),
        ("echo 1\x0c>x", [["echo", "1"]]),
        ("a\x0c #b", [["a"]]),  # the blank after a form feed still ends the word
        ("echo 2>x", [["echo"]]),  # and bare digits before '>' are a descriptor
    ],
)
def test_lexers_agree_on_escapes_and_odd_blanks(impl, text, segments):
    assert [s.words for s in pure._lex(text)] == segments
    assert _segments(pure._lex(text)) == _segments(pure._lex_slow(text))
    assert impl.shell.lex(text) == _segments(pure._lex(text))


def test_patch_targets(impl):
    text = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n*** Delete File: c.py\n*** End Patch"
    assert impl.shell.parse_patch_targets(text) == ("a.py", "b.py", "c.py")
    assert parse_patch_targets(text) == ("a.py", "b.py", "c.py")


def test_patch_targets_trim_blanks_and_skip_blank_paths(impl):
    text = "*** Update File: my file.py \t\n*** Add File:    \n*** Move to: \tb.py\r\n"
    assert impl.shell.parse_patch_targets(text) == ("my file.py", "\tb.py")


def test_patch_targets_stay_linear_on_long_blank_runs(impl):
    # A lazy path pattern re-scanned the blanks at every step: this line took minutes with it
    # (no timing assertion here; a regression shows as a test that does not finish).
    text = "*** Update File: x" + " \t" * 50_000 + "y" + " " * 50_000 + "\n"
    assert impl.shell.parse_patch_targets(text) == ("x" + " \t" * 50_000 + "y",)


CALL_CASES = [
    ("claude-code", "Read", {"file_path": "a.ts"}, ("observe", "a.ts")),
    (
        "claude-code",
        "Edit",
        {"file_path": "a.ts", "old_string": "x", "new_string": "y"},
        ("mutate", "a.ts"),
    ),
    ("claude-code", "Write", {"file_path": "b.ts", "content": ""}, ("mutate", "b.ts")),
    ("claude-code", "Grep", {"pattern": "foo", "path": "src"}, ("observe", "src")),
    ("claude-code", "Glob", {"pattern": "**/*.ts"}, ("observe", None)),
    ("claude-code", "Bash", {"command": "rm -f x"}, ("mutate", "x")),
    ("claude-code", "AskUserQuestion", {"questions": []}, ("ask", None)),
    ("claude-code", "TodoWrite", {"todos": []}, ("other", None)),
    ("codex", "shell", {"command": ["bash", "-lc", "sed -n '1,9p' a.rs"]}, ("observe", "a.rs")),
    ("codex", "shell", {"command": ["rg", "-n", "foo", "src"]}, ("observe", "src")),
    (
        "codex",
        "apply_patch",
        {"input": "*** Begin Patch\n*** Update File: m.rs\n*** End Patch"},
        ("mutate", "m.rs"),
    ),
    (
        "openhands",
        "str_replace_editor",
        {"command": "view", "path": "/w/a.py"},
        ("observe", "/w/a.py"),
    ),
    (
        "openhands",
        "str_replace_editor",
        {"command": "str_replace", "path": "/w/a.py"},
        ("mutate", "/w/a.py"),
    ),
    ("openhands", "execute_bash", {"command": "pytest"}, ("exec", None)),
    ("openhands", "think", {"thought": "hmm"}, ("other", None)),
    ("swe-agent", "open", {"path": "a.py"}, ("observe", "a.py")),
    ("swe-agent", "edit", {"open_file": "/r/a.py"}, ("mutate", "/r/a.py")),
    ("swe-agent", "create", {"filename": "new.py"}, ("mutate", "new.py")),
    ("swe-agent", "submit", {}, ("other", None)),
    ("tau-bench", "get_reservation_details", {"reservation_id": "ABC"}, ("observe", "ABC")),
    (
        "tau-bench",
        "update_reservation_baggages",
        {"reservation_id": "ABC", "total_baggages": 2},
        ("mutate", "ABC"),
    ),
    ("tau-bench", "cancel_reservation", {"reservation_id": "ABC"}, ("mutate", "ABC")),
    ("tau-bench", "book_reservation", {"user_id": "u1", "flights": []}, ("mutate", "u1")),
    (
        "tau-bench",
        "search_direct_flight",
        {"origin": "JFK", "destination": "SEA"},
        ("observe", None),
    ),
    ("tau-bench", "think", {"thought": "x"}, ("other", None)),
    ("gemini-cli", "read_file", {"absolute_path": "/p/a.py"}, ("observe", "/p/a.py")),
    ("gemini-cli", "read_many_files", {"paths": ["a", "b"]}, ("observe", ("a", "b"))),
    ("gemini-cli", "replace", {"file_path": "/p/a.py"}, ("mutate", "/p/a.py")),
    ("gemini-cli", "run_shell_command", {"command": "ls src"}, ("observe", "src")),
    ("mini-swe-agent", "bash", {"command": "cat a.py"}, ("observe", "a.py")),
    # unknown names: the verb decides, else exec (unknown side effects)
    ("generic", "get_order_status", {"order_id": 7}, ("observe", "7")),
    ("generic", "list_files", {"path": "src"}, ("observe", "src")),
    ("generic", "delete_record", {"record_id": "r9"}, ("mutate", "r9")),
    ("generic", "sendMessage", {"channel_id": "c1"}, ("mutate", "c1")),
    ("generic", "ask_user", {"question": "?"}, ("ask", None)),
    ("generic", "mcp__github__get_issue", {"issue_id": 3}, ("observe", "3")),
    ("generic", "frobnicate", {}, ("exec", None)),
]


@pytest.mark.parametrize("profile,name,args,expected", CALL_CASES)
def test_profiles(profile, name, args, expected):
    assert classify(name, args, profile) == expected


def test_user_mappings_extend_a_profile():
    custom = PROFILES["claude-code"].extend(
        {
            "frobnicate": "observe",
            "mcp__db__query": ("observe", "table"),
            "Read": lambda args: ("other", None),
        },
        name="mine",
    )
    assert custom.name == "mine"
    assert custom.classify("frobnicate", {"path": "p"}) == ("observe", "p")
    assert custom.classify("mcp__db__query", {"table": "users"}) == ("observe", "users")
    assert custom.classify("Read", {"file_path": "a"}) == ("other", None)  # user rules win
    assert PROFILES["claude-code"].classify("Read", {"file_path": "a"}) == (
        "observe",
        "a",
    )  # untouched
    assert classify("frobnicate", {}, {"frobnicate": "ask"}) == ("ask", None)


def test_bad_rules_and_profiles_raise():
    with pytest.raises(ValueError, match="unknown kind"):
        Profile("x", {"t": "reads"})
    with pytest.raises(TypeError):
        Profile("x", {"t": 42})
    with pytest.raises(ValueError, match="known profiles"):
        get_profile("nope")
    with pytest.raises(TypeError):
        get_profile(3.5)


def test_generic_profile_knows_every_harness():
    g = PROFILES["generic"]
    for name in (
        "Read",
        "apply_patch",
        "str_replace_editor",
        "get_user_details",
        "read_file",
        "execute_bash",
    ):
        assert name in g.rules


def test_a_server_s_ask_tool_queries_the_server_not_the_person():
    """DeepWiki's MCP tool `ask_question` (Codex 0.142 rollouts, `mcp__deepwiki__ask_question`)
    asks the server: an observation, so three such queries in a row are no question loop. An
    MCP tool whose name says it asks a person, and a harness's own ask tool, still ask."""
    prof = PROFILES["generic"]
    assert prof.classify("mcp__deepwiki__ask_question", {"question": "How?"})[0] == "observe"
    assert prof.classify("mcp__docs__ask", {"question": "How?"})[0] == "observe"
    for name in (
        "mcp__h__ask_user",
        "mcp__human__ask",
        "mcp__hitl__ask_for_input",
        "mcp__x__confirm",
        "mcp__x__clarify",
        "mcp__x__request_approval",
        "ask_question",
    ):
        assert prof.classify(name, {"question": "Which one?"})[0] == "ask", name
