"""Aimed lines (tools/engine_oracle/aimed.py, issue 31 item 1): the data files' format is checked without the oracle;
with it, every entry of ``tools/engine_oracle/aimed/*.yaml`` must still run the raise site it names on each of its
releases (a release or a seed line that moved makes this fail, naming the entry)."""
from __future__ import annotations

import pytest

from tools.engine_oracle import aimed as A


def _write(tmp_path, text: str):
    p = tmp_path / "x.yaml"
    p.write_text(text)
    return [p]


def test_entries_filter_by_release_and_give_the_site_of_each(tmp_path):
    files = _write(tmp_path, """
- target: vllm/config/model.py:1580
  releases: [vllm-0.34.0]
  seed: shape/gqa-dense
- targets: {vllm-0.33.0: vllm/config/model.py:1570, vllm-0.34.0: vllm/config/model.py:1580}
  argv: [/models/shape-gqa-dense, -tp, "3"]
""")
    assert [e["where"] for e in A.entries("vllm-0.34.0", files)] == ["vllm/config/model.py:1580"] * 2
    assert [e["where"] for e in A.entries("vllm-0.33.0", files)] == ["vllm/config/model.py:1570"]
    assert [e["source"] for e in A.entries("vllm-0.33.0", files)] == ["x.yaml:1"]
    assert A.entries("sglang-0.5.23", files) == []


@pytest.mark.parametrize("text, says", [
    ("- {target: a.py:1, releases: [vllm-0.34.0], seed: s, bogus: 1}", "unknown key(s) ['bogus']"),
    ("- {target: a.py:1, releases: [vllm-9.9.9], seed: s}", "vllm-9.9.9"),
    ("- {target: a.py:1, releases: [vllm-0.34.0]}", "exactly one of seed"),
    ("- {target: a.py:1, releases: [vllm-0.34.0], seed: s, argv: [x]}", "exactly one of seed"),
    ("- {releases: [vllm-0.34.0], seed: s}", "no target site"),
    ("- {target: nowhere, releases: [vllm-0.34.0], seed: s}", "no target site"),
    ("{a: 1}", "a list of entries"),
    ("- 3", "an entry is a mapping"),
])
def test_a_bad_entry_is_named_with_the_way_out(tmp_path, text, says):
    with pytest.raises(A.AimedError, match=None) as e:
        A.entries("vllm-0.34.0", _write(tmp_path, text))
    assert says in str(e.value)


def test_the_repository_files_are_well_formed():
    for release in A.RELEASES:
        for e in A.entries(release):
            assert e["where"].split(":")[0].startswith(A.RELEASES[release][0]), e["source"]


def _releases_with_entries() -> list[str]:
    return [r for r in sorted(A.RELEASES) if A.entries(r)]


@pytest.mark.engine_oracle
@pytest.mark.parametrize("release", _releases_with_entries())
def test_every_aimed_line_runs_its_site(oracles, release):
    # the line mode: a tracer on each entry's own site, on the session's worker of the release (no coverage.py over
    # every validation file, no worker of its own); test_the_line_mode_answers_as_coverage_does holds it to the
    # coverage mode's answer
    doc = A.run(release, mode="line", oracle=oracles(release))
    missed = [(r["source"], r["target"], r["verdict"], r["where"], r["message"][:120]) for r in doc["aimed"]
              if not r["hit"]]
    assert not missed, missed
    assert len(doc["aimed"]) == len(A.entries(release))


COMPARED = "vllm-0.34.0"


@pytest.mark.engine_oracle
@pytest.mark.parametrize("release", [COMPARED])
def test_the_line_mode_answers_as_coverage_does(oracles, release):
    """The line tracer (worker.py ``_LineWatch``) against coverage.py in branch mode (the report's mode) on a few
    entries: each line judged both ways, every raise site of its target's file watched, so the comparison covers the
    sites the line ran and those it did not, in the file; the same verdict, place, and sites run."""
    es = A.entries(release)
    es = es[:: max(1, len(es) // 4)][:4]
    line = A.run(release, es=es, mode="line", oracle=oracles(release), watch="file")["aimed"]
    full = A.run(release, es=es)["aimed"]
    assert len(line) == len(full) == len(es)
    for a, b in zip(line, full):
        path = b["target"].rpartition(":")[0]
        in_file = [w for w in b["sites_run"] if w.rpartition(":")[0] == path]
        assert (a["hit"], a["verdict"], a["where"], a["sites_run"]) == (b["hit"], b["verdict"], b["where"], in_file), \
            (a["source"], a, b)
    assert any(a["sites_run"] for a in line)   # the comparison compared something


PORTED = """# a comment the edit keeps
- targets: {vllm-0.33.0: vllm/config/a.py:10, vllm-0.34.0: vllm/config/a.py:12}
  why: "one"
  seed: shape/gqa-dense
  set: {--x: "1"}
- target: vllm/config/b.py:5
  releases: [vllm-0.33.0]
  why: "two"
  seed: shape/gqa-dense
- target: vllm/config/c.py:7
  releases: [vllm-0.33.0, vllm-0.34.0]
  # inside an entry
  seed: shape/gqa-dense
"""


@pytest.mark.parametrize("index, where, line", [
    (0, "vllm/config/a.py:9",
     "- targets: {vllm-0.33.0: vllm/config/a.py:10, vllm-0.34.0: vllm/config/a.py:12, vllm-0.29.0: vllm/config/a.py:9}"),
    (1, "vllm/config/b.py:5", "  releases: [vllm-0.33.0, vllm-0.29.0]"),
    (2, "vllm/config/c.py:3",
     "- targets: {vllm-0.33.0: vllm/config/c.py:7, vllm-0.34.0: vllm/config/c.py:7, vllm-0.29.0: vllm/config/c.py:3}"),
])
def test_a_ported_site_is_added_to_the_entry_text_and_nothing_else(tmp_path, index, where, line):
    p = _write(tmp_path, PORTED)[0]
    A._add_target(p, index, "vllm-0.29.0", where)
    text = p.read_text()
    assert line in text.splitlines()
    assert text.startswith("# a comment the edit keeps") and "  # inside an entry" in text
    got = {e["source"]: e["where"] for e in A.entries("vllm-0.29.0", [p])}
    assert got == {f"x.yaml:{index}": where}
    assert len(A.entries("vllm-0.33.0", [p])) == 3
    assert {e["where"] for e in A.entries("vllm-0.34.0", [p])} == (
        {"vllm/config/a.py:12", "vllm/config/c.py:7"})


@pytest.mark.engine_oracle
def test_site_map_follows_a_moved_site_and_keeps_unchanged_ones():
    m = A.site_map("vllm-0.33.0", "vllm-0.34.0")
    # config/attention.py's backend_per_kind check moved 256 -> 316 (the aimed entry's own two targets)
    assert m["vllm/config/attention.py:256"] == "vllm/config/attention.py:316"
    assert m["vllm/config/cache.py:472"] == "vllm/config/cache.py:507"
    assert len(set(m.values())) == len(m)
