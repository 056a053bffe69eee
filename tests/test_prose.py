"""Prose is self-contained: every file the notebooks, the README, the docs, the ADRs, the benchmarks and
the tests name is in the repository, and none cites documents that live elsewhere (a spec, a GPU kit,
a roadmap). State the fact, not where someone else wrote it down.
"""
import json, re, subprocess
from pathlib import Path
import pytest
from conftest import ROOT

ELSEWHERE = re.compile(r"\bSPEC\b|SPEC\.md|GPU\.md|TOOLING|ROADMAP|\.\./shared|\bshared/[A-Z]")
FILE = re.compile(r"(?<![\w/.$<{*-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:md|ipynb|py|json|sh|toml|yml|yaml|glsl|comp|spv))\b")
# Files a text names that are made when it runs, by a user, or elsewhere on purpose (not the repository's).
MADE = {"setup.py", "results.json", "model.safetensors", "x.json", "out.json", "step.json", "_modidx.py",
        "mkdocs.yml", "llms.txt", "conf.py", "__main__.py", "settings.json", "pytest.ini",
        "script.py"}   # a placeholder in a command line


def repo_files() -> set:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not out: out = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    return set(out)


def texts(prose_only=False):
    "(name, text) of every piece of prose (Markdown cells and files) and, unless `prose_only`, code the check reads."
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if c["cell_type"] == "markdown" or not prose_only: yield f"{nb.name} cell {i}", "".join(c["source"])
    pats = ("README.md", "adr/*.md", "docs/*.md") if prose_only else (
        "README.md", "CHANGELOG.md", "adr/*.md", "docs/*", "bench/*.py", "bench/*.sh", "scripts/*", "tests/*.py")
    for pat in pats:
        for f in sorted(ROOT.glob(pat)):
            if f.is_file() and f.name != Path(__file__).name: yield str(f.relative_to(ROOT)), f.read_text(encoding="utf-8")


def resolves(ref: str, files: set, names: set) -> bool:
    ref = ref.lstrip("./")
    if re.fullmatch(r"(?:[\w-]+/)*[A-Z]\.\w+", ref): return True   # a placeholder: nbs/X.ipynb
    if ref.startswith("bench/results/"): return True   # where a benchmark writes what it measures (committed once run)
    return (ref.startswith("_") or ref in files or ref.split("/")[-1] in names or ref in MADE
            or any(f.endswith("/" + ref) for f in files) or (ROOT / ref).exists())


def test_no_document_from_elsewhere():
    bad = [f"{name}: {m.group(0)!r} in {text[max(0, m.start() - 50):m.end() + 30]!r}"
           for name, text in texts() if not name.startswith("CHANGELOG") for m in ELSEWHERE.finditer(text)]
    assert not bad, "prose cites documents that are not in the repository:\n" + "\n".join(bad)


def test_every_named_file_exists():
    files = repo_files()
    names = {f.split("/")[-1] for f in files}
    bad = sorted({f"{name}: {m.group(1)}" for name, text in texts(prose_only=True)
                  for m in FILE.finditer(text) if not resolves(m.group(1), files, names)})
    assert not bad, "prose names files that are not in the repository:\n" + "\n".join(bad)


def test_the_check_catches_a_missing_file():
    files = repo_files()
    names = {f.split("/")[-1] for f in files}
    assert resolves("nbs/06_cpu.ipynb", files, names) and resolves("vkml/core/graph.py", files, names)
    assert not resolves("docs/NOWHERE.md", files, names)
    assert ELSEWHERE.search("as the SPEC says") and not ELSEWHERE.search("SPECIAL values")


def test_the_contributing_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[Contributing](nbs/53_contributing.ipynb)" in readme and (ROOT / "nbs" / "53_contributing.ipynb").exists()


EXPORT = re.compile(r"#\|\s*export\b")
LONGEST_EXPORT = 100   # lines in one `#| export` cell: past this a notebook is a listing, not a lesson
# Notebooks still being split (each with a long cell); the check fails when one of them no longer has one.
SPLIT_PENDING: set = set()   # none left: every export cell is at most LONGEST_EXPORT lines


def long_export_cells(limit: int = LONGEST_EXPORT) -> dict:
    "notebook name -> ['cell i: n lines', ...] of the export cells longer than `limit` lines."
    out = {}
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            s = "".join(c["source"])
            if c["cell_type"] == "code" and EXPORT.match(s) and (n := len(s.splitlines())) > limit:
                out.setdefault(nb.name, []).append(f"cell {i}: {n} lines")
    return out


def test_no_export_cell_over_100_lines():
    long = long_export_cells()
    bad = [f"{nb} {c}" for nb, cells in long.items() if nb not in SPLIT_PENDING for c in cells]
    assert not bad, (f"export cells over {LONGEST_EXPORT} lines (split them into pieces, each introduced by a "
                     "sentence saying what it does):\n" + "\n".join(bad))
    done = sorted(SPLIT_PENDING - set(long))
    assert not done, f"these notebooks have no long export cell any more: remove them from SPLIT_PENDING: {done}"


def test_the_long_cell_check_counts_lines():
    assert EXPORT.match("#| export\nx = 1") and EXPORT.match("#|export") and not EXPORT.match("#| exporti_not")
    assert all(n in long_export_cells(0) for n in ("12_tensor.ipynb", "27c_backend.ipynb"))


# The runtime notebooks teach before they list: a lesson (a Markdown cell headed "Lesson: ...", the idea in
# prose), then the smallest code that shows it with an assert, then the implementation. So the lesson and a
# cell that asserts come before the first export cell longer than LESSON_BEFORE lines.
LESSONS_FIRST = ("05_schedule.ipynb", "12_tensor.ipynb", "24_codegen.ipynb", "27a_pipelines.ipynb", "27b_recorder.ipynb",
                 "27c_backend.ipynb")
LESSON_BEFORE = 20
LESSON = re.compile(r"^#+\s*Lesson\b", re.M)
ASSERTS = re.compile(r"^\s*assert\b|\btest_(?:eq|ne|close|fail|is)\(|\bnp\.testing\.assert_\w+\(", re.M)


def lesson_first(cells) -> str | None:
    "None when a lesson and then a cell that asserts come before the first long export cell; else what is wrong."
    lesson = asserted = False
    for i, c in enumerate(cells):
        s = "".join(c["source"])
        if c["cell_type"] == "markdown":
            lesson = lesson or bool(LESSON.search(s))
        elif EXPORT.match(s):
            if (n := len(s.splitlines())) > LESSON_BEFORE and not (lesson and asserted):
                return (f"cell {i} ({n} lines of export) comes before "
                        + ("a cell that asserts the lesson" if lesson else 'a Markdown cell headed "Lesson: ..."'))
        elif lesson and ASSERTS.search(s):
            asserted = True
    return None if lesson and asserted else "no lesson with an assert"


def test_runtime_notebooks_teach_first():
    bad = []
    for name in LESSONS_FIRST:
        why = lesson_first(json.loads((ROOT / "nbs" / name).read_text(encoding="utf-8"))["cells"])
        if why: bad.append(f"{name}: {why}")
    assert not bad, ("a runtime notebook lists code before its lesson (put the idea in prose under a '## Lesson: ...' "
                     "heading, the smallest code with an assert, then the implementation):\n" + "\n".join(bad))


def test_the_lesson_check_can_fail():
    md_ = lambda s: {"cell_type": "markdown", "source": [s]}
    code = lambda s: {"cell_type": "code", "source": [s]}
    long = code("#| export\n" + "x = 1\n" * (LESSON_BEFORE + 1))
    lesson, check = md_("## Lesson: the idea\nIn prose."), code("y = 2\ntest_eq(y, 2)")
    assert lesson_first([lesson, check, long]) is None
    assert "before a Markdown cell" in lesson_first([long, lesson, check])
    assert "asserts" in lesson_first([lesson, code("print(2)"), long])
    assert "asserts" in lesson_first([code("#| hide\nfrom fastcore.test import test_eq"), lesson, long, check])
    assert lesson_first([lesson, code("#| export\nx = 1"), check]) is None       # a short export cell may come first

