"""Aimed lines (issue 31 item 1): command lines written from a release's source for one raise site each, kept as data
(``tools/engine_oracle/aimed/*.yaml``) and judged with coverage on, beside the generated corpus.

The generator (corpus.py, synth.py) reaches what its knobs imagine; a site it never reaches gets a line written by
reading the site's code. Each entry says which site it aims at and for which releases; the run judges it on the
release with coverage on and says whether the line ran the site (``hit``), what the release answered, and, with
``--product``, gpustack-k3's verdict on it (a miss or a false refusal there is one like any other). The report has
synth.py's format (``executed_lines``, ``corpus``, ``judged``, ``model_variants``), so reachability.py unions it with
the generated corpora: ``python3 -m tools.engine_oracle.reachability --from GEN.json --with AIMED.json``.

An entry (YAML; every key but ``target``, ``releases`` and one of ``seed``/``argv`` optional)::

    - target: vllm/config/model.py:1580          # the raise site (path as in the release's wheel, line)
      releases: [vllm-0.33.0, vllm-0.34.0]        # the releases whose site that is (a site moves between releases:
                                                  #  give a ``targets: {release: where}`` map instead of ``target``)
      why: "40 heads, TP 3"                       # what the line does to reach the site
      seed: shape/gqa-dense                       # start from this seed line (corpus.seed_lines ``seed`` name) ...
      argv: [/models/shape-gqa-dense, -tp, "3"]  # ... or give the whole argv (the model token a seed line's)
      public: Qwen--Qwen3-30B-A3B                 # the line's model replaced by a public config.json (aiconfigurator-core)
      config: {num_attention_heads: 40}           # config.json fields set in a copy of the line's model directory
      set: {--tensor-parallel-size: "3", --enforce-eager: true, --enable-prefix-caching: null}
                                                  # options set (true: a bare flag; null: removed)
      env: {VLLM_X: "1", VLLM_Y: null}            # environment set (null: removed)
      gpus: 4                                     # the line's GPU count (default the seed's)
      gpu_type: gb300

  python3 -m tools.engine_oracle.aimed --release vllm-0.34.0 [--file tools/engine_oracle/aimed/x.yaml] [--product]
      [--out bench/results/raise-sites-vllm-0.34.0-aimed.json]
  python3 -m tools.engine_oracle.aimed --release vllm-0.29.0 --port-from vllm-0.33.0 [--write]
  python3 -m tools.engine_oracle.aimed --release vllm-0.34.0 --mode line   # hit or not only: a tracer on each site

Porting: an entry written for one release is tried on another at its site's counterpart there (``site_map``: the same
file, function and raised text, or the nearest); where the line runs that site, ``--write`` adds it to the entry's
targets in its file (the text edited in place, checked to parse to exactly that change).

Prints a JSON summary (per entry: target, hit, verdict, where, product) on stdout; exit 1 when an entry did not run its
target site (the release or the line moved), 0 otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from gpustack_k3.oracle.judge import RELEASES
from tools.engine_oracle.corpus import drop_flag, seed_lines, set_flag

AIMED = Path(__file__).resolve().parent / "aimed"
_KEYS = {"target", "targets", "releases", "why", "seed", "argv", "public", "config", "set", "env", "gpus", "gpu_type"}


class AimedError(ValueError):
    """An aimed-lines file that cannot be used (its path and entry named)."""


def entries(release: str, files: list[Path] | None = None) -> list[dict]:
    """The entries of ``files`` (default every ``aimed/*.yaml``) for ``release``, each with ``where`` (the site for this
    release) and ``source`` (file:index)."""
    out = []
    for f in sorted(files or AIMED.glob("*.yaml")):
        doc = yaml.safe_load(Path(f).read_text()) or []
        if not isinstance(doc, list):
            raise AimedError(f"{f}: a list of entries expected")
        for k, e in enumerate(doc):
            src = f"{Path(f).name}:{k}"
            if not isinstance(e, dict):
                raise AimedError(f"{src}: an entry is a mapping")
            bad = set(e) - _KEYS
            if bad:
                raise AimedError(f"{src}: unknown key(s) {sorted(bad)}; known: {sorted(_KEYS)}")
            rels = e.get("releases") or list((e.get("targets") or {}))
            unknown = [r for r in rels if r not in RELEASES]
            if unknown or not rels:
                raise AimedError(f"{src}: releases {unknown or rels} not among {sorted(RELEASES)}")
            if ("seed" in e) == ("argv" in e):
                raise AimedError(f"{src}: give exactly one of seed (a seed line's name) and argv")
            if release not in rels:
                continue
            where = (e.get("targets") or {}).get(release) or e.get("target")
            if not where or ":" not in str(where):
                raise AimedError(f"{src}: no target site (path:line) for {release}")
            out.append(dict(e, where=str(where), source=src))
    return out


def _option_flags(sy, flag: str) -> tuple[str, ...]:
    """Every spelling of the option ``flag`` names in the release's parser (so a seed's ``-tp`` is replaced by
    ``--tensor-parallel-size``), or the flag alone."""
    for o in sy.dests.values():
        spellings = list(o.get("flags") or []) + list(o.get("negative") or [])
        if flag in spellings:   # the given spelling first (set_flag appends flags[0]): a --no-X stays --no-X
            return (flag, *[f for f in spellings if f != flag])
    return (flag,)


def line_of(sy, e: dict, seeds: dict[str, dict]) -> dict:
    """The judged line of entry ``e`` (synth.py's line format), its config.json copy written by ``sy``."""
    if "seed" in e:
        if e["seed"] not in seeds:
            raise AimedError(f"{e['source']}: seed {e['seed']!r} is not a seed line of {sy.release}; "
                             f"known: {sorted(seeds)}")
        base = seeds[e["seed"]]
        line = {"argv": list(base["argv"]), "env": dict(base["env"]), "model": base.get("model"),
                "model_config": base.get("model_config"), "gpu_type": base["gpu_type"], "gpus": base.get("gpus")}
    else:
        argv = [str(t) for t in e["argv"]]
        tok = next((t for t in argv if t.startswith("/models/")), None)
        from_seed = next((s for s in seeds.values() if tok and tok in s["argv"]), None)
        line = {"argv": argv, "env": {}, "model": (from_seed or {}).get("model"),
                "model_config": (from_seed or {}).get("model_config"), "gpu_type": "b300",
                "gpus": (from_seed or {}).get("gpus", 8)}
    if e.get("public"):
        if e["public"] not in sy.public:
            raise AimedError(f"{e['source']}: public config {e['public']!r} is not one of aiconfigurator-core's")
        pub = sy.public_line(e["public"], line)
        if pub is None:
            raise AimedError(f"{e['source']}: the line names no model directory to replace")
        line = pub
    for field, value in (e.get("config") or {}).items():
        new = sy._hf(line, field, value)
        if new is line:
            raise AimedError(f"{e['source']}: config {field}: the line's model has no config.json to copy")
        line = new
    for flag, value in (e.get("set") or {}).items():
        flags = _option_flags(sy, str(flag))
        if value is None:
            line["argv"] = drop_flag(line["argv"], flags)
        elif value is True:
            line["argv"] = set_flag(line["argv"], flags, None)
        else:
            line["argv"] = set_flag(line["argv"], flags,
                                    json.dumps(value) if isinstance(value, (dict, list)) else str(value))
    for k, v in (e.get("env") or {}).items():
        if v is None:
            line["env"].pop(k, None)
        else:
            line["env"][k] = str(v)
    if "gpus" in e:
        line["gpus"] = int(e["gpus"])
    if "gpu_type" in e:
        line["gpu_type"] = e["gpu_type"]
    line["target"] = e["where"]
    line["mutations"] = [f"aimed:{e['source']}"]
    line["seed"] = f"aimed/{e['source']}"
    return line


def run(release: str, files: list[Path] | None = None, product: bool = False, log=None,
        es: list[dict] | None = None, mode: str = "coverage", oracle=None, watch: str = "target") -> dict:
    """Judge the release's aimed lines (or the entries ``es``, each with its ``where`` on this release): per entry
    (``aimed``) whether the line ran the site (``hit``), the verdict, where the release raised, the raise sites it ran
    (``sites_run``, of those measured) and, with ``product``, gpustack-k3's verdict.

    ``mode="coverage"`` (the report: ``--out``, ``--product``, ``--port-from``, reachability.py): coverage.py in branch
    mode over every validation file in each line's child, on a worker of its own, and synth.py's whole report around
    ``aimed``. ``mode="line"`` (the test, tests/engine_oracle/test_aimed.py; ``--mode line``): only whether each line
    ran its own site, from a line tracer on that site in the line's child (worker.py ``_LineWatch``: the answer's
    ``ran``), on ``oracle`` (any running worker of the release: the test session's) or on one started here without
    coverage; no data files, no reachability classes (the report holds ``aimed``, and ``product`` when asked).
    ``watch="file"`` (line mode): every raise site of the target's file watched, not the target alone (what the test
    compares with coverage.py's answer)."""
    from tools.engine_oracle.synth import Synth, product_verdicts, report

    if mode not in ("coverage", "line"):
        raise AimedError(f"mode {mode!r}: coverage or line")
    t0 = time.monotonic()
    es = entries(release, files) if es is None else es
    with tempfile.TemporaryDirectory(prefix="oracle-aimed-") as d:
        if mode == "line":
            return _run_lines(release, es, Path(d), product, log, oracle, watch, t0)
        with Synth(release, 0, Path(d), product) as sy:
            lines = aimed_lines(sy, release, es)
            recs = sy.judge(lines, 0) if lines else []
            doc = report(sy, [{"round": 0, "lines": len(lines), "reached": len(sy.reached())}], t0)
            rows = []
            for e, rec in zip(es, recs):
                rows.append({"source": e["source"], "target": e["where"], "why": e.get("why"),
                             "hit": sy.site_at[e["where"]] in rec["sites"], "verdict": rec["verdict"],
                             "where": rec.get("where"), "message": rec["message"][:200],
                             "sites_run": sorted(_where(sy, i) for i in rec["sites"])})
                if log:
                    log(rows[-1])
            doc["aimed"] = rows
            if product:
                doc["product"] = product_verdicts(release, doc["judged"], doc.get("model_variants"),
                                                  doc.get("serve_configs"))
                _mark_product(rows, recs, doc["product"])
            doc["seconds"] = round(time.monotonic() - t0, 1)
            return doc


def _mark_product(rows: list[dict], recs: list[dict], product: dict) -> None:
    """Each aimed row's product class (miss / false_refusal / agree), found by the entry's own mark (a line on a
    config.json copy is judged under a restored path, so its argv is not the key)."""
    bad = {tuple(m.get("mutations") or ()): k for k in ("misses", "false_refusals") for m in product[k]}
    for row, rec in zip(rows, recs):
        key = tuple(rec["line"]["mutations"])
        row["product"] = {"misses": "miss", "false_refusals": "false_refusal"}.get(bad.get(key), "agree")


def aimed_lines(sy, release: str, es: list[dict]) -> list[dict]:
    """The lines of entries ``es`` on ``sy``'s release (their seed lines filled in); every entry must name a raise
    site of the release's validation code."""
    seeds = {s["seed"]: s for s in seed_lines(release) if "argv" in s}
    lines = [line_of(sy, e, seeds) for e in es]
    unknown = [e["source"] + " " + e["where"] for e in es if e["where"] not in sy.site_at]
    if unknown:
        raise AimedError(f"not a raise site of {release}'s validation code: {unknown}")
    return lines


def _where(sy, i: int) -> str:
    """``path:line`` (the wheel's path) of raise site ``i`` of ``sy``."""
    import os

    return f"{os.path.relpath(sy.sites[i]['file'], sy.root)}:{sy.sites[i]['line']}"


def _run_lines(release: str, es: list[dict], d: Path, product: bool, log, oracle, watch: str, t0: float) -> dict:
    """``run(mode="line")``: each entry's line judged with a line tracer on its site (``watch="target"``) or on
    every raise site of its site's file (``watch="file"``)."""
    from gpustack_k3.oracle.judge import Oracle
    from tools.engine_oracle.synth import Synth, compact_variant, judged_record, product_verdicts

    if watch not in ("target", "file"):
        raise AimedError(f"watch {watch!r}: target or file")
    sy = Synth(release, 0, d, product)   # the parser's options, the raise sites, the config.json copies; not its oracle
    own = None
    if oracle is None:
        oracle = own = Oracle(release)
    try:
        sy.aliases = dict(oracle.aliases)
        lines = aimed_lines(sy, release, es)
        rows, recs = [], []
        for e, line in zip(es, lines):
            target = sy.site_at[e["where"]]
            mine = [i for i, s in enumerate(sy.sites) if s["file"] == sy.sites[target]["file"]] \
                if watch == "file" else [target]
            want: dict[str, list[int]] = {}
            for i in mine:
                want.setdefault(sy.sites[i]["file"], []).append(sy.sites[i]["line"])
            hw = line["gpu_type"] if line["gpu_type"] != "cpu" else "b300"
            ans = oracle.judge_line(line["argv"], line["env"], hw, line.get("gpus"), watch=want)
            ran = {(f, n) for f, ns in (ans.get("ran") or {}).items() for n in ns}
            sites = {i for i in mine if (sy.sites[i]["file"], sy.sites[i]["line"]) in ran}
            recs.append({"line": line, "verdict": ans.get("verdict"), "reason": ans.get("reason"),
                         "message": (ans.get("message") or ans.get("detail") or "")[:300], "where": ans.get("where"),
                         "round": 0, "sites": sites})
            rows.append({"source": e["source"], "target": e["where"], "why": e.get("why"), "hit": target in sites,
                         "verdict": ans.get("verdict"), "where": ans.get("where"),
                         "message": (ans.get("message") or ans.get("detail") or "")[:200],
                         "sites_run": sorted(_where(sy, i) for i in sites)})
            if log:
                log(rows[-1])
        doc = {"release": release, "mode": "line", "watch": watch, "aimed": rows}
        if product:   # as run()'s coverage mode: the judged records, the config.json copies, the --config files
            judged = [judged_record(sy, r) for r in recs]
            variants = {str(p): compact_variant(json.loads(p.read_text()), sy.public)
                        for p in sorted(sy.variants.glob("*/config.json"))} if sy.variants.is_dir() else {}
            doc["product"] = product_verdicts(release, judged, variants, dict(sorted(sy.serve_configs.items())))
            _mark_product(rows, recs, doc["product"])
        doc["seconds"] = round(time.monotonic() - t0, 1)
        return doc
    finally:
        if own is not None:
            own.close()


# ------------------------------------------------------------------------------------------------ porting

def site_map(src: str, dst: str) -> dict[str, str]:
    """``path:line`` of each raise site of release ``src``'s validation code -> the same site in ``dst``'s: the same
    file, function and raised text (in order, for repeats), else the same function and text in another file (a check
    moved), else the most similar raised text in the same function (difflib ratio >= 0.6; >= 0.8 in another file)."""
    import difflib
    import os

    from tools.engine_oracle.raise_sites import _root, raise_sites, validation_files

    def sites(rel):
        root = _root(rel)
        return [dict(x, rel=os.path.relpath(x["file"], root)) for x in raise_sites(validation_files(rel, root))]

    old, new = sites(src), sites(dst)
    pool: dict[tuple, list[dict]] = {}
    for x in new:
        pool.setdefault((x["rel"], x["function"], x["raises"]), []).append(x)
    out, left = {}, []
    for x in old:
        c = pool.get((x["rel"], x["function"], x["raises"]))
        if c:
            y = c.pop(0)
            out[f"{x['rel']}:{x['line']}"] = f"{y['rel']}:{y['line']}"
        else:
            left.append(x)
    free = [y for c in pool.values() for y in c]
    for x in left:
        moved = [y for y in free if y["function"] == x["function"] and y["raises"] == x["raises"]]
        near = [(difflib.SequenceMatcher(None, x["raises"], y["raises"]).ratio() - (0.2 if y["rel"] != x["rel"] else 0),
                 -k, y) for k, y in enumerate(free) if y["function"] == x["function"]]
        best = max(near, key=lambda t: t[:2]) if near else None
        y = moved[0] if moved else (best[2] if best and best[0] >= 0.6 else None)
        if y is not None:
            free.remove(y)
            out[f"{x['rel']}:{x['line']}"] = f"{y['rel']}:{y['line']}"
    return out


def _add_target(path: Path, index: int, release: str, where: str) -> None:
    """Give entry ``index`` of the aimed-lines file ``path`` the site ``where`` on ``release``, editing its text (the
    file's comments and layout stay) and checking that the file then parses to exactly that change."""
    text = path.read_text()
    before = yaml.safe_load(text)
    lines = text.splitlines(keepends=True)
    starts = [k for k, ln in enumerate(lines) if ln.startswith("- ")]
    a = starts[index]
    b = starts[index + 1] if index + 1 < len(starts) else len(lines)
    e = before[index]
    if "targets" in e:
        k = next(k for k in range(a, b) if lines[k].lstrip("- ").startswith("targets: {"))
        head, _, tail = lines[k].rstrip("\n").rpartition("}")
        lines[k] = f"{head}, {release}: {where}}}{tail}\n"
    else:
        k = next(k for k in range(a, b) if lines[k].lstrip("- ").startswith("target: "))
        r = next(k for k in range(a, b) if lines[k].lstrip("- ").startswith("releases: ["))
        pre = lines[k][: len(lines[k]) - len(lines[k].lstrip("- "))]
        if str(e["target"]) == where:
            head, _, tail = lines[r].rstrip("\n").rpartition("]")
            lines[r] = f"{head}, {release}]{tail}\n"
        else:
            both = ", ".join(f"{rel}: {e['target']}" for rel in e["releases"])
            lines[k] = f"{pre}targets: {{{both}, {release}: {where}}}\n"
            del lines[r]
    after = yaml.safe_load("".join(lines))

    def sites_of(x):
        return dict(x.get("targets") or {r: x["target"] for r in x["releases"]})

    want = dict(sites_of(e), **{release: where})
    rest = {k: v for k, v in e.items() if k not in ("target", "targets", "releases")}
    same = [x for k, x in enumerate(after) if k != index] == [x for k, x in enumerate(before) if k != index]
    if not same or sites_of(after[index]) != want or {k: v for k, v in after[index].items()
                                                        if k not in ("target", "targets", "releases")} != rest:
        raise AimedError(f"{path.name}:{index}: could not add {release}: {where} to its text")
    path.write_text("".join(lines))


def port(src: str, release: str, files: list[Path] | None = None, write: bool = False, log=None,
         mode: str = "coverage") -> dict:
    """Try ``src``'s entries that do not name ``release`` on ``release``: each at the site ``site_map`` gives (its
    seed line must exist there); an entry that runs that site gets it as its target for ``release`` (with ``write``,
    in its file). Returns the run's report with ``ported`` (entries that hit) and ``not_ported`` (why each did not).
    ``mode``: run()'s (``line``: the hits alone, from a tracer on each site)."""
    seeds = {s["seed"] for s in seed_lines(release) if "argv" in s}
    smap = site_map(src, release)
    mine = {e["source"] for e in entries(release, files)}
    cand, skipped = [], []
    for e in entries(src, files):
        if e["source"] in mine:
            continue
        if e["where"] not in smap:
            skipped.append({"source": e["source"], "why": f"{e['where']}@{src} has no counterpart in {release}"})
        elif "seed" in e and e["seed"] not in seeds:
            skipped.append({"source": e["source"], "why": f"seed {e['seed']} is not a seed line of {release}"})
        else:
            cand.append(dict(e, where=smap[e["where"]]))
    doc = run(release, files, log=log, es=cand, mode=mode) if cand else {"aimed": []}
    hit = [r for r in doc["aimed"] if r["hit"]]
    if write:
        for r in hit:
            name, _, idx = r["source"].rpartition(":")
            _add_target(AIMED / name if files is None else next(f for f in files if Path(f).name == name),
                        int(idx), release, r["target"])
    doc["ported"] = [{"source": r["source"], "target": r["target"]} for r in hit]
    doc["not_ported"] = skipped + [{"source": r["source"], "why": f"did not run {r['target']} "
                                    f"({r['verdict']} at {r['where']})"} for r in doc["aimed"] if not r["hit"]]
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tools.engine_oracle.aimed",
                                 description="judge the aimed lines (tools/engine_oracle/aimed/*.yaml) of a release")
    ap.add_argument("--release", required=True, choices=sorted(RELEASES))
    ap.add_argument("--file", type=Path, nargs="+", help="these aimed-lines files only (default: every one)")
    ap.add_argument("--product", action="store_true", help="also gpustack-k3's verdict on each line")
    ap.add_argument("--out", type=Path, help="write the whole report (synth.py's format) here")
    ap.add_argument("--port-from", metavar="RELEASE", choices=sorted(RELEASES),
                    help="try RELEASE's entries that do not name --release on it (each at its site's counterpart); "
                         "with --write, an entry that runs it gets that site as its --release target in its file")
    ap.add_argument("--write", action="store_true", help="with --port-from: edit the files")
    ap.add_argument("--mode", choices=("coverage", "line"), default="coverage",
                    help="coverage (default; --out, --product, --port-from): coverage.py over every validation file, "
                         "synth.py's report; line: a line tracer on each entry's own site only (hit or not, fast)")
    a = ap.parse_args(argv)
    if a.port_from:
        try:
            doc = port(a.port_from, a.release, a.file, a.write,
                       log=lambda r: print(json.dumps(r), file=sys.stderr), mode=a.mode)
        except (AimedError, yaml.YAMLError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps({"release": a.release, "from": a.port_from, "ported": len(doc["ported"]),
                          "not_ported": doc["not_ported"], "written": a.write}, indent=1))
        return 0
    try:
        doc = run(a.release, a.file, a.product, log=lambda r: print(json.dumps(r), file=sys.stderr), mode=a.mode)
    except (AimedError, yaml.YAMLError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.out:
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
    rows = doc["aimed"]
    summary = {"release": a.release, "entries": len(rows), "hit": sum(r["hit"] for r in rows),
               "reachability": doc.get("reachability"), "seconds": doc["seconds"],
               "not_hit": [r for r in rows if not r["hit"]]}
    if a.product:
        summary["product"] = doc["product"]["counts"]
        summary["disagree"] = [r for r in rows if r.get("product") not in (None, "agree")]
    print(json.dumps(summary, indent=1))
    return 1 if summary["not_hit"] else 0


if __name__ == "__main__":
    sys.exit(main())
