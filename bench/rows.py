# SPDX-License-Identifier: Apache-2.0
"""Looking rows up: what the report, the plots and the smoke test share."""

REQUIRED = {"schema": int, "bench": str, "mechanism": str, "ranks": int, "size": int,
            "pages_requested": str, "pages_obtained": str, "unit": str, "min": (int, float),
            "median": (int, float), "max": (int, float), "reps": int}
UNITS = {"GB/s", "s", "ms", "factor", "bytes"}
HUGE = ("hugetlb-2M", "hugetlb-1G", "thp")
GIB, MIB = 1 << 30, 1 << 20


def problems(row):
    """Why a row is not well-formed ([] when it is)."""
    out = [f"{k}: missing or not {t}" for k, t in REQUIRED.items()
           if not isinstance(row.get(k), t) or isinstance(row.get(k), bool)]
    if out:
        return out
    if row["schema"] != 1:
        out.append(f"schema {row['schema']}, expected 1")
    if row["unit"] not in UNITS:
        out.append(f"unit {row['unit']!r} is not one of {sorted(UNITS)}")
    if not row["min"] <= row["median"] <= row["max"]:
        out.append(f"min {row['min']} <= median {row['median']} <= max {row['max']} fails")
    if row["reps"] < 1 or row["ranks"] < 1 or row["size"] < 1:
        out.append("reps, ranks and size must be positive")
    return out


def select(rows, **want):
    """Rows whose keys equal every value given (a tuple: any of them)."""
    def ok(row):
        for k, v in want.items():
            if isinstance(v, tuple):
                if row.get(k) not in v:
                    return False
            elif row.get(k) != v:
                return False
        return True
    return [r for r in rows if ok(r)]


def one(rows, **want):
    found = select(rows, **want)
    return found[0] if found else None


def size_text(n):
    if n >= GIB and n % GIB == 0:
        return f"{n // GIB} GiB"
    if n >= MIB:
        return f"{n / MIB:g} MiB"
    return f"{n / 1024:g} KiB"


def value_text(row, key="median"):
    v = row[key]
    unit = row["unit"]
    if unit == "s":
        return f"{v * 1e3:.1f} ms" if v < 10 else f"{v:.1f} s"
    if unit == "ms":
        return f"{v:.2f} ms"
    if unit == "GB/s":
        return f"{v:.2f} GB/s"
    if unit == "factor":
        return f"{v:.3f}"
    if unit == "bytes":
        return size_text(int(v)) if v >= 1024 else f"{v:.0f} B"
    return f"{v:g}"


def spread_text(row):
    """"median (min-max)" in the row's unit"""
    return f"{value_text(row)} ({value_text(row, 'min')}-{value_text(row, 'max')})"


def kind_text(row):
    """what was asked and what was obtained, when they differ"""
    req, got = row["pages_requested"], row["pages_obtained"]
    return got if req == got else f"{got} (asked {req})"


KINDS_ORDER = ["hugetlb-1G", "hugetlb-2M", "thp", "base", "default"]


def table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def kind_key(row):
    """The order of a row's asked page kind among KINDS_ORDER."""
    k = row["pages_requested"]
    return KINDS_ORDER.index(k) if k in KINDS_ORDER else len(KINDS_ORDER)


def mechanism_lines(got, section, benches):
    """A line a (size, ranks, mechanism, page kind) of a Python section:
    size, ranks, mechanism, pages, then the value of each of benches' rows
    ("" where a bench has no row)."""
    lines = []
    for r in sorted(select(got, bench="memory_factor"),
                    key=lambda r: (r["size"], r["ranks"], r["mechanism"], kind_key(r))):
        key = dict(mechanism=r["mechanism"], size=r["size"], ranks=r["ranks"],
                   pages_requested=r["pages_requested"], section=section)
        cells = [one(got, bench=b, **key) for b in benches]
        lines.append((size_text(r["size"]), r["ranks"], r["mechanism"], kind_text(r))
                     + tuple(value_text(c) if c else "" for c in cells))
    return lines
