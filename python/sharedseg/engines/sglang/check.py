# SPDX-License-Identifier: Apache-2.0
"""python -m sharedseg.sglang --check: whether SHAREDSEG_SGLANG would take
effect in this environment. SGLang's plugin loader (0.5.23,
sglang/srt/plugins/__init__.py load_plugins_by_group) passes over, without
a word a user sees, a plugin that has no entry point or that SGLANG_PLUGINS
does not list; then no code of ours runs and the switch does nothing. This
looks at what that loader looks at, and at our own switch and the SGLang
release, and says each reason in one sentence."""
import importlib.metadata
import json
import os
import sys
import warnings
from typing import Any, Dict, List, Optional

import sharedseg

from . import ENGINE
from ..base import quoted, visible

GROUP = "sglang.srt.plugins"  # SGLang's general plugins
NAME = "sharedseg"
TARGET = "sharedseg.sglang:plugin"
PLUGINS = "SGLANG_PLUGINS"

HELP = f"""usage: python -m sharedseg.sglang --check [--json]

Whether SHAREDSEG_SGLANG would put SGLang's HiCache host pools in sharedseg
segments in this environment. Run it as SGLang would be run: the same
interpreter, the same variables, e.g.
  SHAREDSEG_SGLANG=1 python -m sharedseg.sglang --check
It looks at what SGLang's plugin loader looks at, which passes over a
plugin it does not find or is not let load without a word:
  - the entry point {NAME} = {TARGET} in group {GROUP}: pip installs it
    with the package; a package only importable (a checkout on PYTHONPATH)
    has none, and SGLang finds its plugins by entry point only;
  - {PLUGINS}: unset or empty, SGLang loads every plugin; otherwise only
    those it lists (comma-separated names), so it must list {NAME};
  - SHAREDSEG_SGLANG: 1 (our defaults) or a JSON object of our settings;
  - the SGLang release, against the one sharedseg.sglang supports.

  --check      report; exit 0 when the switch would take effect, else 1 with
               one sentence per reason on stderr
  --json       with --check: the report as one JSON document on stdout
  -h, --help   this help

Exit status: 0 it would take effect, 1 it would not, 2 a bad argument."""


def _entry_point() -> Dict[str, Any]:
    every = importlib.metadata.entry_points()
    # Python 3.8 and 3.9 answer a dict of groups; SGLang itself needs 3.10.
    group = every.select(group=GROUP) if hasattr(every, "select") else every.get(GROUP, ())
    found = [ep for ep in group if ep.name == NAME]
    if not found:
        return dict(registered=False, value=None, distribution=None)
    ep = found[0]
    dist = getattr(ep, "dist", None)
    return dict(registered=True, value=ep.value,
                distribution=f"{dist.name} {dist.version}" if dist is not None else None)


def _plugins_let_load() -> Dict[str, Any]:
    """SGLANG_PLUGINS as SGLang 0.5.23 reads it: unset or empty lets every
    plugin load; otherwise the set of its comma-separated names, stripped,
    empty ones dropped, and a plugin loads when its name is in that set."""
    value = os.environ.get(PLUGINS)
    if not value:
        return dict(value=value, loads=True)
    return dict(value=value, loads=NAME in {n.strip() for n in value.split(",") if n.strip()})


def _switch(adapter: Any) -> Dict[str, Any]:
    value = os.environ.get(adapter.SWITCH)
    try:
        request = adapter.switch_request(value or "")
    except ValueError as e:
        return dict(value=value, on=False, understood=False, settings=None, problem=str(e))
    if request is None:
        said = "is not set" if value is None else f"is {quoted(value)}"
        return dict(value=value, on=False, understood=True, settings=None,
                    problem=f"{adapter.SWITCH} {said}, so the plugin does nothing: set "
                            f"{adapter.SWITCH}=1 (or a JSON object of settings) in SGLang's "
                            f"environment")
    return dict(value=value, on=True, understood=True, settings=request.settings(), problem=None)


def _sglang(adapter: Any) -> Dict[str, Any]:
    version = ENGINE.version()
    served = ENGINE.served(adapter.PLUGIN)
    facts: Dict[str, Any] = dict(version=None if version == "not installed" else version,
                                 supported=served, problem=None)
    if facts["version"] is None:
        facts["problem"] = (f"SGLang is not installed for this interpreter "
                            f"({quoted(sys.executable)}): run this check with SGLang's "
                            f"interpreter, or install SGLang {', '.join(served)}")
        return facts
    try:
        adapter.check_version()
    except RuntimeError as e:
        facts["problem"] = str(e)
    return facts


def report() -> Dict[str, Any]:
    """Every fact the verdict rests on, and one sentence per problem."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SGLang's import-time notes (AWQ, GGUF on CPU)
        from . import plugin as adapter
    entry, plugins = _entry_point(), _plugins_let_load()
    switch, sglang = _switch(adapter), _sglang(adapter)
    problems: List[str] = []
    if not entry["registered"]:
        problems.append(
            f"no entry point {NAME} in group {GROUP}: sharedseg is importable here "
            f"({quoted(os.path.dirname(os.path.dirname(os.path.abspath(sharedseg.__file__))))}) "
            f"but not installed as a package, and SGLang finds its plugins by entry point "
            f"only: install the sharedseg wheel into this environment with pip")
    elif entry["value"] != TARGET:
        problems.append(f"the entry point {NAME} in group {GROUP} names "
                        f"{quoted(entry['value'])}, not {TARGET}: reinstall sharedseg")
    if not plugins["loads"]:
        problems.append(f"{PLUGINS}={quoted(plugins['value'])} does not list {NAME}, and "
                        f"SGLang loads only the plugins it lists: add {NAME} to it "
                        f"(comma-separated) or unset it")
    problems += [p for p in (switch.pop("problem"), sglang.pop("problem")) if p]
    return dict(schema=1, takes_effect=not problems, python=sys.executable,
                entry_point=dict(group=GROUP, name=NAME, **entry),
                sglang_plugins=plugins, switch=dict(name=adapter.SWITCH, **switch),
                sglang=sglang, problems=problems)


def _shown(value: Optional[str], unset: str) -> str:
    return unset if value is None else quoted(value)


def _text(doc: Dict[str, Any]) -> str:
    entry, plugins, switch, sglang = (doc["entry_point"], doc["sglang_plugins"], doc["switch"],
                                      doc["sglang"])
    supported = f"sharedseg.sglang supports {', '.join(sglang['supported'])}"
    lines = [
        f"python:            {quoted(doc['python'])}",
        f"SGLang:            {sglang['version'] or 'not installed'} ({supported})",
        "entry point:       " + (f"{NAME} = {visible(entry['value'])} in group {GROUP}, "
                                  f"of {visible(entry['distribution'] or 'no distribution')}"
                                  if entry["registered"] else f"none in group {GROUP}"),
        f"{PLUGINS}:    {_shown(plugins['value'], 'unset')}: "
        + ("lets it load" if plugins["loads"] else f"does not list {NAME}"),
        f"{switch['name']}:  {_shown(switch['value'], 'unset')}: "
        + ("on" if switch["on"] else "off" if switch["understood"]
           else "not understood: the plugin would stop SGLang's start-up"),
    ]
    if doc["takes_effect"]:
        lines.append("the switch takes effect: SGLang's plugin loader runs sharedseg's "
                     "plugin, which puts the HiCache host pools in sharedseg segments")
    else:
        lines.append(f"the switch does not take effect here: {len(doc['problems'])} "
                     f"problem{'s' if len(doc['problems']) > 1 else ''} (stderr)")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return 0
    for a in argv:
        if a not in ("--check", "--json"):
            print(f"sharedseg.sglang: unknown argument {quoted(a)} (see python -m "
                  f"sharedseg.sglang --help)", file=sys.stderr)
            return 2
    if "--check" not in argv:
        print("sharedseg.sglang: say --check (see python -m sharedseg.sglang --help)",
              file=sys.stderr)
        return 2
    doc = report()
    if "--json" in argv:
        print(json.dumps(doc, indent=2))
    else:
        print(_text(doc))
        for problem in doc["problems"]:
            print(f"sharedseg.sglang: {problem}", file=sys.stderr)
    return 0 if doc["takes_effect"] else 1
