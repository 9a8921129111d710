"""Plain-text and markdown tables for the command-line tools (`python -m fastpad check|bench`)."""
from typing import Sequence


def _cells(rows: Sequence[Sequence[object]]) -> list:
    return [[str(cell) for cell in row] for row in rows]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell; text left-aligned, everything else right-aligned."""
    body = _cells(rows)
    widths = [max([len(h)] + [len(row[c]) for row in body]) for c, h in enumerate(headers)]
    numeric = [all(_looks_numeric(row[c]) for row in body) for c in range(len(headers))]

    def line(cells):
        return "  ".join(cell.rjust(w) if right else cell.ljust(w) for cell, w, right in zip(cells, widths, numeric))

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(row) for row in body])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in _cells(rows)]
    return "\n".join(lines)


def _looks_numeric(text: str) -> bool:
    try:
        float(text.rstrip("x%"))
        return True
    except ValueError:
        return text in ("-", "")
