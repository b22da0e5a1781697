# SPDX-License-Identifier: Apache-2.0
"""docs/integrations.md's version tables, made from the engines' release
tables (each engine's ENGINE, sharedseg/engines/*/__init__.py): one table
per engine and adapter, between

    <!-- versions: TITLE ADAPTER -->
    ...
    <!-- end versions -->

    python version_tables.py           exit 1, naming each table that differs
    python version_tables.py --write   writes the tables into the document

python/tests/test_engine.py holds the document to this byte for byte."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
DOC = os.path.join(ROOT, "docs", "integrations.md")
sys.path.insert(0, os.path.join(ROOT, "python"))

BLOCK = re.compile(r"(<!-- versions: (\S+) (.+?) -->\n)(.*?)(<!-- end versions -->)", re.S)


def engines():
    """Every engine's ENGINE, by title."""
    from sharedseg.engines import lmcache, sglang, vllm
    return {e.title: e for e in (vllm.ENGINE, sglang.ENGINE, lmcache.ENGINE)}


def table(engine, adapter):
    """The markdown table of adapter's releases of engine."""
    rows = [f"| {engine.title} | how it is tested |", "|---|---|"]
    rows += [f"| {release} | {how} |" for release, how in engine.tested(adapter).items()]
    return "\n".join(rows) + "\n"


def pairs():
    """(title, adapter) of every column of every engine's release table."""
    return [(e.title, a) for e in engines().values()
            for a in dict.fromkeys(a for row in e.releases.values() for a in row)]


def rewrite(text):
    """text with every marked table made from its release table, and the
    pairs whose table text lacks."""
    found = engines()
    seen = set()

    def made(m):
        title, adapter = m.group(2), m.group(3)
        if title not in found or adapter not in found[title].wanted:
            raise SystemExit(f"{DOC}: no engine {title} with an adapter {adapter}")
        seen.add((title, adapter))
        return m.group(1) + table(found[title], adapter) + m.group(5)
    new = BLOCK.sub(made, text)
    return new, [p for p in pairs() if p not in seen]


def main(argv):
    text = open(DOC, encoding="utf-8").read()
    new, absent = rewrite(text)
    for title, adapter in absent:
        print(f"{DOC} has no table <!-- versions: {title} {adapter} -->", file=sys.stderr)
    if argv[1:] == ["--write"]:
        if new != text:
            with open(DOC, "w", encoding="utf-8") as f:
                f.write(new)
        return 1 if absent else 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    differ = [f"{m.group(2)} {m.group(3)}" for m, n in zip(BLOCK.finditer(text), BLOCK.finditer(new))
              if m.group(0) != n.group(0)]
    for which in differ:
        print(f"{DOC}: the table of {which} is not its release table's (run "
              f"python/tests/helpers/version_tables.py --write)", file=sys.stderr)
    return 1 if differ or absent else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
