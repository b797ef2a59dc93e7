"""One reader for bench_decode's table rows, shared by the tools that summarize its logs (session 77).

bench_decode prints one markdown row per anchor shape: `| format | h_q | batch | seqlen | µs | TB/s | TFLOP/s | anchor µs
| anchor µs / ours |`. Other lines (headers, notes, errors) are skipped, so a log cut short by a timeout still yields the
rows it finished.
"""


def bench_cells(path, fmt=None):
    """Every table row of one bench_decode log as its list of cell strings (format first), in the log's order.

    fmt: keep only rows of this KV format (None keeps bf16, fp16, fp8 and fp8_ds rows alike).
    """
    formats = (fmt,) if fmt else ("bf16", "fp16", "fp8", "fp8_ds")
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            cells = [c.strip() for c in line.split("|")]
            # cells[0] is the text before the first '|', so a row has at least format .. µs in cells 1-5
            if len(cells) > 6 and cells[1] in formats and cells[2].isdigit():
                rows.append(cells[1:-1] if cells[-1] == "" else cells[1:])
    return rows


def bench_rows(path, fmt=None):
    """Every table row of one bench_decode log as (format, h_q, batch, seqlen, µs), in the log's order."""
    return [(c[0], int(c[1]), int(c[2]), int(c[3]), float(c[4])) for c in bench_cells(path, fmt)]
