#!/usr/bin/env python3
"""A hot-text list still places what it lists (device-plugin/plugin/hot-text.ld and runtime-hook/hot-text.ld,
written by scripts/hot_text.py; docs/performance.md, "Resident memory after 10 000 Allocate" and "Container
start: the shim and the hook").

Reads the link map the build writes (ascend-device-plugin.map, ascend-docker-runtime.map) and the binary's
section table: the binary has the .text.hot_ascend section, and most rules of the list matched an input
section. A rule that matches nothing is a function renamed or gone since the list was made: harmless one by
one (the code lands in .text), but when many are stale the running code is spread again: the plugin's resident
memory grows by up to 1.5 MB, the shim's start-up by a tenth of a millisecond. Then regenerate the list.

  hot_text_test.py LIST MAP BINARY [PROGRAM]
  hot_text_test.py --self-test LIST MAP BINARY [PROGRAM]    the list passes, and the check fails when a
                                                            quarter of the list names nothing
PROGRAM (plugin or shim) is the argument scripts/hot_text.py takes, for the message.
"""
import os
import re
import subprocess
import sys
import tempfile

MAX_STALE = 0.2  # of the rules


def main():
    if sys.argv[1] == "--self-test":
        list_path, map_path, binary = sys.argv[2:5]
        program = sys.argv[5] if len(sys.argv) > 5 else "plugin"
        if check(list_path, map_path, binary, program) != 0:
            print("hot_text_test --self-test: the list itself fails the check; nothing to test the check with")
            return 1
        with open(list_path) as f:
            text = f.read()
        n = len(re.findall(r"(?m)^\s+\*\S+\(\S+\)$", text))
        fake = "".join("    *nowhere.o(.text._Z%dgone)\n" % i for i in range(n // 3 + 1))
        with tempfile.NamedTemporaryFile("w", suffix=".ld", delete=False) as f:
            f.write(text.replace("  {\n", "  {\n" + fake, 1))
        try:
            rc = check(f.name, map_path, binary, program)
        finally:
            os.unlink(f.name)
        print("hot_text_test --self-test: a list with %d rules that name nothing %s" % (
            n // 3 + 1, "fails, as it should" if rc == 1 else "PASSED: the check is broken"))
        return 0 if rc == 1 else 1
    return check(*sys.argv[1:4], sys.argv[4] if len(sys.argv) > 4 else "plugin")


def check(list_path, map_path, binary, program):
    with open(list_path) as f:
        rules = [line.strip() for line in f if re.match(r"^\s+\*\S+\(\S+\)$", line)]
    if not rules:
        print("hot_text_test: %s lists no section (not generated?)" % list_path)
        return 1

    sections = subprocess.run(["readelf", "-SW", binary], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\.text\.hot_ascend\s+PROGBITS\s+\S+\s+\S+\s+([0-9a-f]+)", sections)
    if not m:
        print("hot_text_test: %s has no .text.hot_ascend section: the list is not linked in" % binary)
        return 1
    size = int(m.group(1), 16)

    # In the map, under .text.hot_ascend, each rule is a line " *file(section)" followed by the input sections
    # it placed (" .text..."), if any.
    with open(map_path) as f:
        lines = f.read().split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith(".text.hot_ascend")), None)
    if start is None:
        print("hot_text_test: %s has no .text.hot_ascend" % map_path)
        return 1
    matched = {}
    rule = None
    for line in lines[start + 1:]:
        if re.match(r"^\.\S", line):
            break
        if line.startswith(" *") and not line.startswith(" *fill*"):
            rule = line.strip()
            matched.setdefault(rule, False)
        elif line.startswith(" .text") and rule is not None:
            matched[rule] = True
    stale = [r for r in rules if not matched.get(r, False)]
    print("hot_text_test: %d of %d rules placed a section (.text.hot_ascend %d KB); stale: %d"
          % (len(rules) - len(stale), len(rules), size // 1024, len(stale)))
    for r in stale[:20]:
        print("  stale: " + r)
    if len(stale) > MAX_STALE * len(rules):
        print("hot_text_test: more than %d%% of the list is stale: regenerate it with "
              "scripts/hot_text.py %s" % (int(MAX_STALE * 100), program))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
