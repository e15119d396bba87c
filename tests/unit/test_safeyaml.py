"""Safe YAML: alias bombs, cycles, depth and size are refused fast, with the document named."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from lahar.api import safeyaml
from lahar.api.files import FileError, load_file
from lahar.api.safeyaml import YamlError


def billion_laughs(levels: int = 9) -> str:
    """The classic: each level is nine aliases of the previous one (9**levels strings)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_fast_naming_the_document() -> None:
    text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n" + billion_laughs()
    started = time.monotonic()
    with pytest.raises(YamlError) as info:
        safeyaml.load_all(text, "bomb.yaml")
    assert time.monotonic() - started < 1.0
    assert str(info.value).startswith("bomb.yaml: document 2: too many aliases")
    assert info.value.document == 2


def test_linear_alias_amplification_is_refused() -> None:
    big = "[" + ",".join(["1"] * 20_000) + "]"
    text = f"a: &big {big}\nb: [*big, *big, *big, *big, *big, *big]\n"
    with pytest.raises(YamlError, match="too many aliases: they expand to more than"):
        safeyaml.load_all(text, "f")


def test_alias_count_is_capped() -> None:
    text = "a: &x 1\nb: [" + ",".join(["*x"] * (safeyaml.MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(YamlError, match=r"f: document 1: too many aliases \(more than 1000\)"):
        safeyaml.load_all(text, "f")


def test_ordinary_anchors_and_merge_keys_still_load() -> None:
    text = "defaults: &d {cpu: 1, memory: 1Gi}\nsmall: {<<: *d, cpu: 2}\nsame: *d\n"
    doc = safeyaml.load(text, "f")
    assert doc["small"] == {"cpu": 2, "memory": "1Gi"} and doc["same"] == {"cpu": 1, "memory": "1Gi"}


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(YamlError, match="alias \\*x is inside the node it refers to"):
        safeyaml.load("a: &x [1, *x]\n", "f")


def test_depth_size_and_bad_values_are_yaml_errors() -> None:
    deep = "[" * (safeyaml.MAX_DEPTH + 1) + "]" * (safeyaml.MAX_DEPTH + 1)
    with pytest.raises(YamlError, match="f: document 1: nested deeper than"):
        safeyaml.load(deep, "f")
    with pytest.raises(YamlError, match="f: too large"):
        safeyaml.load("#" * (safeyaml.MAX_CHARS + 1), "f")
    with pytest.raises(YamlError, match="f: too large"):
        safeyaml.read(io.StringIO("#" * (safeyaml.MAX_CHARS + 1)), "f")
    # The constructor's own ValueErrors (a 5000-digit int, a 13th month) are YAML errors too.
    with pytest.raises(YamlError, match="f: document 2: not valid YAML"):
        safeyaml.load_all("a: 1\n---\nb: " + "1" * 5000 + "\n", "f")
    with pytest.raises(YamlError, match="f: document 1: not valid YAML"):
        safeyaml.load("d: 2001-13-45\n", "f")
    with pytest.raises(YamlError, match="f: document 1: not valid YAML: found undefined alias"):
        safeyaml.load("a: *nope\n", "f")


def test_document_numbers_count_empty_documents() -> None:
    docs = safeyaml.load_all("---\n---\na: 1\n", "f")
    assert safeyaml.documents(docs) == [(2, {"a": 1})]
    assert safeyaml.load("", "f") is None
    with pytest.raises(YamlError, match="expected a single document"):
        safeyaml.load("a: 1\n---\nb: 2\n", "f")


def test_load_file_refuses_a_bomb_with_the_file_and_document(tmp_path: Path) -> None:
    f = tmp_path / "bomb.yaml"
    f.write_text(billion_laughs())
    with pytest.raises(FileError, match=f"^{f}: document 1: too many aliases"):
        load_file(f)
