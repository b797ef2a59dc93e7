#!/usr/bin/env python3
"""The build's own compile command of CUDA translation units, from compile_commands.json, with the object written to
OBJ instead and the dependency-file flags dropped (so a rebuild elsewhere leaves BUILD as it is). One line per TU:
"FILE<TAB>COMMAND". Shared by mkvariant.sh (one TU by its path's suffix) and ptxas_report.sh (every .cu a regex finds).

usage: tu_command.py COMPILE_COMMANDS_JSON (--suffix SUFFIX | --match REGEX) --obj OBJ
--suffix: exactly one entry whose file ends in /SUFFIX, else an error; --match: every .cu whose path matches REGEX
(none is an error).
"""
import argparse
import json
import re
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("compile_commands")
    pick = ap.add_mutually_exclusive_group(required=True)
    pick.add_argument("--suffix")
    pick.add_argument("--match")
    ap.add_argument("--obj", required=True)
    a = ap.parse_args()
    entries = json.load(open(a.compile_commands))
    if a.suffix is not None:
        hits = [e for e in entries if e["file"].endswith("/" + a.suffix)]
        if len(hits) != 1:
            sys.exit(f"tu_command: {len(hits)} compile commands end in {a.suffix}")
    else:
        hits = [e for e in entries if e["file"].endswith(".cu") and re.search(a.match, e["file"])]
        if not hits:
            sys.exit(f"tu_command: no .cu file in {a.compile_commands} matches '{a.match}'")
    for e in hits:
        cmd = re.sub(r" -o \S+\.o", " -o " + a.obj, e["command"])
        cmd = re.sub(r" -MD -MT \S+ -MF \S+", "", cmd)
        print(e["file"] + "\t" + cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
