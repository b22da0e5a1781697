# SPDX-License-Identifier: Apache-2.0
"""What a user typed or set, fit to echo in a message: the C tool's
convention (tools/ls.c visible()), so that the Python commands' messages
read like the C tool's and an argument's escape sequence cannot rewrite
the terminal that shows the message."""

# Characters that reorder or break the line a terminal shows (tools/ls.c bidi_control()).
_REORDERING = frozenset([0x061c, 0x200e, 0x200f, *range(0x2028, 0x202f), *range(0x2066, 0x206a)])


def visible(text: str) -> str:
    """text with each control (C0, DEL, C1: every byte of it) and each byte
    that is not UTF-8 as \\xNN, a character that reorders the line as
    \\uNNNN and a backslash as \\\\. text is a str from sys.argv or
    os.environ, whose bytes that are not UTF-8 Python holds as lone
    surrogates (U+DC80..U+DCFF, os.fsdecode's surrogateescape)."""
    shown = []
    for ch in text:
        cp = ord(ch)
        if 0xdc80 <= cp <= 0xdcff:
            shown.append(f"\\x{cp - 0xdc00:02x}")
        elif cp < 0x20 or 0x7f <= cp < 0xa0:
            shown.append("".join(f"\\x{b:02x}" for b in ch.encode()))
        elif cp in _REORDERING or 0xd800 <= cp <= 0xdfff:
            shown.append(f"\\u{cp:04x}")
        elif ch == "\\":
            shown.append("\\\\")
        else:
            shown.append(ch)
    return "".join(shown)


def quoted(text: str) -> str:
    """visible(text) in single quotes, as the C tool quotes a value ('%s')."""
    return f"'{visible(text)}'"
