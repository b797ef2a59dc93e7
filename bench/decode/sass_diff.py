#!/usr/bin/env python3
"""Lists the kernels whose SASS differs between two binaries, per function, so an A/B's variant can be checked to
change the kernels its timed rows launch (session 67: an fp8_ds A/B had rebuilt a TU those rows never ran).

  bench/decode/sass_diff.py BASE_BINARY VARIANT_BINARY [--filter REGEX]

Instructions are compared with addresses, encodings' comments and spacing stripped, and anonymous-namespace names
normalized (they differ between builds). cuobjdump: $CUOBJDUMP, else on PATH, else /tmp/cuobj/nvidia/cu13/bin
(no GPU needed; `pip download --no-deps --only-binary=:all: -d /tmp/cuobjwhl nvidia-cuda-cuobjdump`, unzip into
/tmp/cuobj). Exit status: 0 equal, 1 some function differs or exists in one binary only, 2 usage / tool error.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

# An anonymous namespace mangles as <len>_GLOBAL__N__<hash>_<n>_<file>_cu_<hash>_<digits>, where the hashes and
# digits differ between builds; the trailing \d+ also takes the next name's length prefix, the same in both builds.
ANON = re.compile(r"\d+_GLOBAL__N__\w+?_cu_[0-9a-f]{8}_\d+")


def cuobjdump() -> str:
    for cand in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/tmp/cuobj/nvidia/cu13/bin/cuobjdump"):
        if cand and os.path.exists(cand):
            return cand
    sys.exit("sass_diff: no cuobjdump (set CUOBJDUMP; see this script's header)")


def functions(binary: str) -> dict:
    out = subprocess.run([cuobjdump(), "-sass", binary], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"sass_diff: cuobjdump -sass {binary} failed: {out.stderr.strip()}")
    funcs, name = {}, None
    for line in out.stdout.splitlines():
        if "Function :" in line:
            name = ANON.sub("ANON", line.split("Function :", 1)[1].strip())
            funcs[name] = []
            continue
        # Instruction addresses (/*0a10*/) and encodings (/* 0x000fe2... */, a line each of their own). Before session
        # 86 the encodings' spaced form was kept, so counts quoted earlier are twice the instructions (and equal
        # functions were equal to the bit).
        text = re.sub(r"/\*\s*[0-9a-fx]*\s*\*/", "", line)
        text = re.sub(r"\s+", " ", text).strip()
        if name and text:
            funcs[name].append(text)
    return funcs


def fold_predicates(instrs: list) -> list:
    """The instructions with predicate register names folded to one: a source edit that leaves the same instructions
    in the same order can still swap P0 / P1 in the allocator (session 86), which cannot change a timing."""
    return [re.sub(r"\bU?P[0-6]\b", "P", t) for t in instrs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("variant")
    ap.add_argument("--filter", default="", help="only function names matching this regex")
    ap.add_argument("--rename", action="append", default=[], metavar="REGEX=>REPL",
                    help="rewrite the variant's function names (re.sub) before matching, e.g. a template argument "
                         "the variant added with its default value; repeatable")
    a = ap.parse_args()
    base, var = functions(a.base), functions(a.variant)
    for r in a.rename:
        pat, sep, repl = r.partition("=>")
        if not sep:
            sys.exit(f"sass_diff: --rename wants REGEX=>REPL, got '{r}'")
        var = {re.sub(pat, repl, n): f for n, f in var.items()}
    keep = re.compile(a.filter)
    names = sorted(n for n in set(base) | set(var) if keep.search(n))
    differ = [n for n in names if n in base and n in var and base[n] != var[n]]
    only = [(n, "base" if n in base else "variant") for n in names if (n in base) != (n in var)]
    renamed = [n for n in differ if fold_predicates(base[n]) == fold_predicates(var[n])]
    for n in differ:
        tag = " [predicate register names only]" if n in renamed else ""
        print(f"differs ({len(base[n])} -> {len(var[n])} instructions){tag}: {n}")
    for n, where in only:
        print(f"only in {where}: {n}")
    print(f"{len(names)} functions compared, {len(differ)} differ ({len(renamed)} in predicate register names only), "
          f"{len(only)} in one binary only")
    return 1 if differ or only else 0


if __name__ == "__main__":
    sys.exit(main())
