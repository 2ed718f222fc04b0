"""The agent skills in skills/ follow the Agent Skills standard and quote only real commands.

One copy of each skill must load in Claude Code, Codex, pi and dsh, so the front matter keeps to
the keys every one of them accepts (claude.ai and the Skills API refuse any other key), `name`
is the directory's name in kebab-case, and the description fits the standard's 1024 characters.
Every `orbit …` line in a skill's code blocks is parsed by Orbit's own argparse, so a renamed
option or a command that does not exist fails here instead of misleading an agent.
"""

from __future__ import annotations

import io
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from orbit.cli import build_parser, main
from orbit.env import Env
from orbit.errors import OrbitError

SKILLS = Path(__file__).resolve().parents[1] / "skills"

# The Agent Skills specification (agentskills.io/specification): these keys and no others.
ALLOWED_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")  # no leading, trailing or doubled hyphen
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_SKILL_LINES = 500  # the standard's advice for SKILL.md; details go to references/

# A link, not an image: docs/web.md's screenshots (`![…](screenshots/x.png)`) are for people
# reading the docs in a checkout or on the forge; a skill's copy holds the docs' text only.
LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE_RE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def split_front_matter(text: str) -> tuple[str, str] | None:
    """(front matter, body), or None when the file does not open with a `---` block."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 4)
    if end < 0:
        return None
    return text[4 : end + 1], text[end + 5 :]


def _check_name(meta: dict[str, Any], skill_dir: Path) -> list[str]:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return ["name: missing or not a string"]
    errors = []
    if len(name) > MAX_NAME:
        errors.append(f"name: {len(name)} characters, at most {MAX_NAME}")
    if not NAME_RE.match(name):
        errors.append(f"name: {name!r} is not lowercase letters, digits and single hyphens")
    if name != skill_dir.name:
        errors.append(f"name: {name!r} differs from the directory name {skill_dir.name!r}")
    return errors


def _check_optional(meta: dict[str, Any]) -> list[str]:
    errors = []
    if "license" in meta and not (isinstance(meta["license"], str) and meta["license"]):
        errors.append("license: not a non-empty string")
    if "compatibility" in meta:
        compat = meta["compatibility"]
        if not isinstance(compat, str) or not compat.strip():
            errors.append("compatibility: not a non-empty string")
        elif len(compat) > MAX_COMPATIBILITY:
            errors.append(f"compatibility: {len(compat)} characters, at most {MAX_COMPATIBILITY}")
    if "metadata" in meta:
        md = meta["metadata"]
        if not isinstance(md, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in md.items()
        ):
            errors.append("metadata: not a map of strings to strings (quote numbers)")
    if "allowed-tools" in meta:
        tools = meta["allowed-tools"]
        if not (
            isinstance(tools, str)
            or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
        ):
            errors.append("allowed-tools: neither a string nor a list of strings")
    return errors


def check_front_matter(meta: Any, skill_dir: Path) -> list[str]:
    if not isinstance(meta, dict):
        return ["front matter: not a YAML mapping"]
    errors = []
    extra = sorted(str(k) for k in meta if k not in ALLOWED_KEYS)
    if extra:
        errors.append(f"front matter: keys outside the standard: {', '.join(extra)}")
    errors += _check_name(meta, skill_dir)
    desc = meta.get("description")
    if not isinstance(desc, str) or not desc.strip():
        errors.append("description: missing or empty")
    elif len(desc) > MAX_DESCRIPTION:
        errors.append(f"description: {len(desc)} characters, at most {MAX_DESCRIPTION}")
    return errors + _check_optional(meta)


def check_one_line(front: str, meta: dict[str, Any]) -> list[str]:
    """The text keys must be plain one-line values: some skill loaders read front matter line by
    line, and take `description: >-` for the description `>-` (or keep the quotes)."""
    errors = []
    for key in ("name", "description", "license", "compatibility"):
        value = meta.get(key)
        if isinstance(value, str) and f"\n{key}: {value}\n" not in f"\n{front}":
            errors.append(f"{key}: not a plain one-line value (no quotes, no > or | block)")
    return errors


# A mention of Orbit's docs in prose or code (`docs/cli.md`, `docs/guides/x.md#part`), not a
# part of a longer path (`references/docs/…`, a URL's `/docs/`).
DOCS_RE = re.compile(r"(?<![\w/.-])docs/[\w./-]*[\w/]")


def check_links(md_file: Path, skill_dir: Path) -> list[str]:
    """Relative links must name an existing file inside the skill: a skill is installed by
    copying its directory alone into an agent's skill folder, so `../` leads nowhere there.
    (In a checkout references/docs links to docs/; the installed copy holds the files.)"""
    errors = []
    root = Path(os.path.abspath(skill_dir))
    for target in LINK_RE.findall(md_file.read_text(encoding="utf-8")):
        if target.startswith("#") or re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # an anchor in the same file, or a URL
        path = Path(os.path.normpath(md_file.parent / target.split("#", 1)[0]))
        where = f"{md_file.relative_to(skill_dir)}: link {target!r}"
        if not path.is_relative_to(root):
            errors.append(f"{where} leaves the skill directory")
        elif not path.is_file():
            errors.append(f"{where} names no file")
    return errors


def check_docs_mentions(md_file: Path, skill_dir: Path) -> list[str]:
    """Every `docs/…` a skill mentions must be in it, under references/docs/."""
    errors = []
    for mention in DOCS_RE.findall(md_file.read_text(encoding="utf-8")):
        path = skill_dir / "references" / mention.split("#", 1)[0]
        if not path.exists():
            rel = md_file.relative_to(skill_dir)
            errors.append(f"{rel}: {mention!r} is not in the skill (references/{mention})")
    return errors


def md_files(skill_dir: Path) -> list[Path]:
    """The skill's markdown files, the docs of a checkout's references/docs link included."""
    found = []
    for top, _dirs, names in os.walk(skill_dir, followlinks=True):
        found += [Path(top) / n for n in names if n.endswith(".md")]
    return sorted(found)


def validate_skill(skill_dir: Path) -> list[str]:
    """Every way `skill_dir` breaks the Agent Skills standard (empty: it is valid)."""
    skill_md = skill_dir / "SKILL.md"
    if not skill_md.is_file():
        return ["SKILL.md: missing"]
    parts = split_front_matter(skill_md.read_text(encoding="utf-8"))
    if parts is None:
        return ["SKILL.md: does not open with a front matter block between --- lines"]
    front, body = parts
    try:
        meta = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        return [f"front matter: not YAML ({exc})"]
    errors = check_front_matter(meta, skill_dir)
    if isinstance(meta, dict):
        errors += check_one_line(front, meta)
    if not body.strip():
        errors.append("SKILL.md: the body is empty")
    if body.count("\n") > MAX_SKILL_LINES:
        errors.append(f"SKILL.md: more than {MAX_SKILL_LINES} lines; move details to references/")
    for md_file in md_files(skill_dir):
        errors += check_links(md_file, skill_dir) + check_docs_mentions(md_file, skill_dir)
    return errors


def skill_dirs() -> list[Path]:
    return sorted(p for p in SKILLS.iterdir() if p.is_dir())


def test_the_skills_exist() -> None:
    names = [p.name for p in skill_dirs()]
    assert "orbit" in names and "orbit-bench" in names, names


@pytest.mark.parametrize("skill_dir", skill_dirs(), ids=lambda p: p.name)
def test_skill_follows_the_standard(skill_dir: Path) -> None:
    assert validate_skill(skill_dir) == []


GOOD = """\
---
name: {name}
description: Does one thing.
license: MIT
compatibility: Needs a shell.
metadata:
  version: "1.0"
allowed-tools: Bash Read
---

# Body

See [the reference](references/more.md).
"""


def _write_skill(root: Path, name: str, text: str) -> Path:
    skill = root / name
    (skill / "references").mkdir(parents=True)
    (skill / "references" / "more.md").write_text("# More\n")
    (skill / "SKILL.md").write_text(text)
    return skill


def test_a_good_skill_passes(tmp_path: Path) -> None:
    assert validate_skill(_write_skill(tmp_path, "good-one", GOOD.format(name="good-one"))) == []


def _edit(old: str, new: str) -> str:
    """The good skill (named x) with one change."""
    text = GOOD.format(name="x")
    assert old in text
    return text.replace(old, new)


# id: (directory name, SKILL.md text, a part of the expected error)
BAD = {
    "name differs from the directory": ("bad", GOOD.format(name="other"), "differs"),
    "uppercase name": ("Bad", GOOD.format(name="Bad"), "lowercase"),
    "doubled hyphen": ("a--b", GOOD.format(name="a--b"), "single hyphens"),
    "leading hyphen": ("-a", GOOD.format(name="-a"), "single hyphens"),
    "name too long": ("a" * 65, GOOD.format(name="a" * 65), "at most 64"),
    "a Claude-only key": ("x", _edit("license:", "when_to_use: y\nlicense:"), "outside the"),
    "no description": ("x", _edit("description: Does", "descr: Does"), "description: missing"),
    "description too long": ("x", _edit("Does one thing.", "d" * 1025), "at most 1024"),
    "compatibility too long": ("x", _edit("Needs a shell.", "c" * 501), "at most 500"),
    "metadata value not a string": ("x", _edit('"1.0"', "1.0"), "strings to strings"),
    "allowed-tools a mapping": ("x", _edit("Bash Read", "{a: 1}"), "allowed-tools"),
    "a folded description": ("x", _edit("description: Does", "description: >-\n  Does"), "plain"),
    "a quoted description": ("x", _edit("Does one thing.", "'Does one thing.'"), "plain"),
    "empty body": ("x", GOOD.format(name="x").split("# Body")[0], "body is empty"),
    "no front matter": ("x", "# Just markdown\n", "front matter"),
    "front matter not YAML": ("x", "---\nname: [x\n---\nbody\n", "not YAML"),
    "broken link": ("x", _edit("more.md", "gone.md"), "names no file"),
    "link out of the skill": ("x", _edit("references/more.md", "../outside.md"), "leaves the"),
    "docs not shipped": ("x", _edit("# Body", "# Body\n\nSee docs/cli.md."), "not in the skill"),
}


@pytest.mark.parametrize(("dirname", "text", "expected"), BAD.values(), ids=BAD.keys())
def test_a_bad_skill_fails(tmp_path: Path, dirname: str, text: str, expected: str) -> None:
    (tmp_path / "outside.md").write_text("# outside\n")
    errors = validate_skill(_write_skill(tmp_path, dirname, text))
    assert any(expected in e for e in errors), errors


# ---------------------------------------------------------------- commands quoted in the skills

# Placeholders a skill may write in place of a value, and a value argparse accepts for each.
PLACEHOLDERS = {"ID": "7", "GROUP": "lr", "G": "lr", "N": "2", "TEXT": "a note", "NAME": "x"}
SEPARATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "(", ")", "2>", "$("}


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def _orbit_calls(words: list[str]) -> list[list[str]]:
    """The argument lists of each `orbit …` (or `python3 orbit.py …`) among shell words."""
    calls: list[list[str]] = []
    current: list[str] | None = None
    for word in [*words, ";"]:
        if "$(" in word and ")" in word:  # a command substitution inside a quoted word
            calls += _orbit_calls(_words(word[word.index("$(") + 2 : word.rindex(")")]))
        if word in SEPARATORS or word.startswith(("|", "&", ";", ">", "<")):
            if current is not None:
                calls.append(current)
            current = None
        elif current is not None:
            current.append(PLACEHOLDERS.get(word, word))
        elif word == "orbit" or word.endswith("/orbit.py") or word == "orbit.py":
            current = []
    return calls


def orbit_commands(text: str) -> list[list[str]]:
    """Every `orbit` call in the markdown's code blocks, as argument lists."""
    calls = []
    for _lang, block in FENCE_RE.findall(text):
        buffer = ""
        for line in block.splitlines():
            buffer += line + "\n"
            if buffer.endswith("\\\n"):
                buffer = buffer[:-2] + " "
                continue
            try:
                words = _words(buffer)
            except ValueError:  # a quote that closes on a later line
                continue
            calls += _orbit_calls(words)
            buffer = ""
        assert not buffer.strip(), f"unclosed quote in a code block: {buffer!r}"
    return calls


def parse_error(args: list[str]) -> str | None:
    """Why Orbit's own argparse refuses `orbit ARGS`, or None when it accepts them."""
    parser = build_parser()
    try:
        parsed = parser.parse_args(args)
    except OrbitError as exc:
        return str(exc)
    except SystemExit as exc:  # --help, --version
        return None if exc.code == 0 else f"exit {exc.code}"
    if not getattr(parsed, "func", None):
        return "no command"
    return None


def all_skill_commands() -> list[tuple[str, list[str]]]:
    found = []
    for md_file in sorted(SKILLS.rglob("*.md")):
        for args in orbit_commands(md_file.read_text(encoding="utf-8")):
            found.append((str(md_file.relative_to(SKILLS)), args))
    return found


def test_the_skills_quote_many_commands() -> None:
    """Guards the extraction itself: an extractor that finds nothing would pass everything."""
    commands = all_skill_commands()
    assert len(commands) >= 40, commands
    used = {args[0] for _, args in commands if args}
    for name in ("run", "sweep", "wait", "failures", "logs", "compare", "best", "note", "lessons"):
        assert name in used, f"no skill shows `orbit {name}`"


@pytest.mark.parametrize(
    ("where", "args"), all_skill_commands(), ids=lambda v: v if isinstance(v, str) else None
)
def test_quoted_command_parses(where: str, args: list[str]) -> None:
    assert parse_error(args) is None, f"{where}: orbit {shlex.join(args)}: {parse_error(args)}"


def test_the_command_check_can_fail() -> None:
    text = "```bash\norbit bench race tbs -m oracle\norbit ps --no-such-option\n```\n"
    calls = orbit_commands(text)
    assert calls == [["bench", "race", "tbs", "-m", "oracle"], ["ps", "--no-such-option"]]
    assert all(parse_error(args) for args in calls)


def test_the_extractor_follows_shell_syntax() -> None:
    text = (
        "```bash\n"
        "export ORBIT_AUTHOR=me\n"
        "orbit sweep -g lr -p lr=1,2 \\\n    -- python3 t.py --lr {lr}   # nine runs\n"
        "orbit compare -g lr --json | python3 -c '\nimport json\n'\n"
        'cd "$(orbit show 12 --json)"\n'
        "```\n"
    )
    assert orbit_commands(text) == [
        ["sweep", "-g", "lr", "-p", "lr=1,2", "--", "python3", "t.py", "--lr", "{lr}"],
        ["compare", "-g", "lr", "--json"],
        ["show", "12", "--json"],
    ]


@pytest.mark.parametrize("skill_dir", skill_dirs(), ids=lambda p: p.name)
def test_description_says_when_to_use_it(skill_dir: Path) -> None:
    parts = split_front_matter((skill_dir / "SKILL.md").read_text(encoding="utf-8"))
    assert parts is not None
    assert "Use when" in yaml.safe_load(parts[0])["description"]


def test_the_skills_ship_with_the_package() -> None:
    """orbit/skills links to skills/ and orbit/docs to docs/, and package-data names every file
    the skills are installed from, so an installed Orbit carries the same copy (a later
    `orbit plugin install` copies it into agents)."""
    import tomllib
    from pathlib import PurePosixPath

    repo = SKILLS.parent
    assert (repo / "orbit" / "skills").resolve() == SKILLS.resolve()
    assert (repo / "orbit" / "docs").resolve() == (repo / "docs").resolve()
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["orbit"]
    files = [PurePosixPath("skills", *p.relative_to(SKILLS).parts) for p in SKILLS.rglob("*")]
    docs = repo / "docs"
    files += [PurePosixPath("docs", *p.relative_to(docs).parts) for p in docs.rglob("*.md")]
    assert files
    for path in files:
        if (repo / path).is_file():
            shipped = [pat for pat in patterns if len(PurePosixPath(pat).parts) == len(path.parts)]
            assert any(path.match(pat) for pat in shipped), f"{path} is not in package-data"


# ---------------------------------------------------------------- the skills as installed


def installed_skills(tmp_path: Path) -> list[Path]:
    """Every skill directory `orbit plugin install` writes for Claude Code and Codex (HOME and
    ORBIT_HOME in `tmp_path`)."""
    environ = {"HOME": str(tmp_path / "user"), "ORBIT_HOME": str(tmp_path / "orbit-home")}
    for agent in ("claude", "codex"):
        err = io.StringIO()
        env = Env(environ=environ, stdout=io.StringIO(), stderr=err, cwd=tmp_path)
        assert main(["plugin", "install", agent], env) == 0, err.getvalue()
    roots = [tmp_path / "user" / ".claude" / "skills", tmp_path / "user" / ".agents" / "skills"]
    return sorted(p for root in roots for p in root.iterdir() if not p.name.startswith("."))


def test_installed_skills_stand_alone(tmp_path: Path) -> None:
    """An installed skill is a real directory holding everything it names: each relative link
    and each `docs/…` mention, in SKILL.md, its references and the docs shipped with it,
    resolves inside it; no link leads out (to ORBIT_HOME or the checkout)."""
    skills = installed_skills(tmp_path)
    assert [p.name for p in skills] == ["orbit", "orbit-bench"] * 2
    for skill in skills:
        assert not [p for p in [skill, *skill.rglob("*")] if p.is_symlink()], skill
        assert (skill / "references" / "docs" / "cli.md").is_file()
        assert len(md_files(skill)) > 10
        assert validate_skill(skill) == [], skill


def test_the_shipped_docs_are_the_packages(tmp_path: Path) -> None:
    """The docs in an installed skill are copies of docs/, made at install: they cannot drift."""
    docs = SKILLS.parent / "docs"
    for skill in installed_skills(tmp_path):
        shipped = skill / "references" / "docs"
        names = sorted(p.relative_to(shipped) for p in shipped.rglob("*.md"))
        assert names == sorted(p.relative_to(docs) for p in docs.rglob("*.md"))
        for name in names:
            assert (shipped / name).read_bytes() == (docs / name).read_bytes()
