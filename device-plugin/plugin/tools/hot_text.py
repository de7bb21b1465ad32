#!/usr/bin/env python3
"""Writes device-plugin/plugin/hot-text.ld: the input sections of ascend-device-plugin that run, placed
together at the start of its code.

Why: the kernel maps a file's pages around each page fault (fault-around, 64 KB), so a daemon whose running
code is spread over its 3 MB of text has most of it resident, though it runs about 0.7 MB of it
(docs/performance.md, "The device plugin"). The linker script puts the sections that ran into one output
section before .text (INSERT BEFORE .text: the default script stays), so their pages are few and contiguous.
A section the script names that no longer exists is ignored; one that is new lands in .text as before: a
stale list costs memory, never correctness. Regenerate after changes to what the plugin runs:

  device-plugin/plugin/tools/hot_text.py [BUILD_DIR]     (default build-release; needs valgrind)

It links the plugin with an empty list first (valgrind names only the code of an executable's .text, so the
profile is of that layout, read through its link map), profiles it, writes the list and links again; $CMAKE
is the command that builds (default "cmake"; e.g. "flock /tmp/build.lock cmake" on a shared machine).

The profile is the union of the plugin's runs under callgrind, each with both device backends (the
emulator, and DCMI through the emulated libdcmi.so): plugin_bench's 10 000 Allocate calls and fault
detection (the kubelet's gRPC calls, ListAndWatch, health), and --metrics-only with /metrics scraped, plain
and gzip (the NPU Exporter metrics). The scheduler client and the API server publisher are not in it: they
are used by the code in the list, and their own code lands in .text.
"""
import bisect
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "hot-text.ld")


def text_sections(map_path):
    """(start, size, section, object) of every input section of the link map's code output sections."""
    secs, pending, in_text = [], None, False
    with open(map_path) as f:
        for line in f:
            if re.match(r"^\.text(\.hot_ascend)?\s", line) or re.match(r"^\.text(\.hot_ascend)?$", line.rstrip()):
                in_text = True
                continue
            if in_text and re.match(r"^\.\S", line):
                in_text = False
            if not in_text:
                continue
            m = re.match(r"^ (\.text\S*)\s*$", line)
            if m:
                pending = m.group(1)
                continue
            m = re.match(r"^ (\.text\S*)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", line)
            if m:
                secs.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1), m.group(4).strip()))
                pending = None
                continue
            m = re.match(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", line)
            if m and pending:
                secs.append((int(m.group(1), 16), int(m.group(2), 16), pending, m.group(3).strip()))
                pending = None
    secs.sort()
    return secs


def executed(callgrind_files, binary_name):
    """The instruction addresses callgrind saw executed in the object named binary_name."""
    out = set()
    for path in callgrind_files:
        names, ob, last = {}, None, 0
        with open(path) as f:
            for line in f:
                if line.startswith(("ob=", "cob=")):
                    m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    if line.startswith("ob="):
                        ob = names.get(m.group(1))
                    continue
                if line[:1] not in "0123456789+-*" or line[:1] == "":
                    continue
                tok = line.split()[0]
                if tok.startswith("0x"):
                    a = int(tok, 16)
                elif tok[0] == "+":
                    a = last + int(tok[1:], 0)
                elif tok[0] == "-":
                    a = last - int(tok[1:], 0)
                elif tok == "*":
                    a = last
                else:
                    a = int(tok)
                last = a
                if ob is not None and os.path.basename(ob) == binary_name:
                    out.add(a)
    return out


def pattern(obj):
    """The linker script's file pattern for a map's object: "lib.a(member.o)" -> "*lib.a:member.o"."""
    m = re.match(r"(.*)\((.*)\)$", obj)
    if m:
        return "*%s:%s" % (os.path.basename(m.group(1)), m.group(2))
    return "*" + os.path.basename(obj)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def profile_bench(build, work, backend, valgrind):
    env = dict(os.environ, TMPDIR=work, ASCEND_BENCH_BACKEND=backend,
               ASCEND_BENCH_WRAP=" ".join(valgrind + ["--callgrind-out-file=%s/cg.bench.%s.%%p" % (work, backend)]))
    subprocess.run([os.path.join(build, "bench", "plugin_bench"),
                    "--benchmark_filter=BM_RssAfter10kAllocate|BM_FaultToUnhealthy"],
                   env=env, check=True, stdout=subprocess.DEVNULL)


def profile_metrics(build, work, backend, valgrind):
    root = os.path.join(work, "metrics-root-" + backend)
    subprocess.run([os.path.join(build, "bin", "npu-sim"), "--root", root, "load", "--profile", "atlas800t-a2"],
                   check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    cmd = valgrind + ["--callgrind-out-file=%s/cg.metrics.%s.%%p" % (work, backend),
                      os.path.join(build, "bin", "ascend-device-plugin"), "--metrics-only", "--metrics-addr",
                      "127.0.0.1:%d" % port, "--host-root", root, "--backend", backend, "--log-file",
                      os.path.join(work, "metrics-%s.log" % backend)]
    plugin = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = "http://127.0.0.1:%d/metrics" % port
        for i in range(600):
            try:
                urllib.request.urlopen(url, timeout=30).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("hot_text: --metrics-only did not answer on %s" % url)
        for encoding in ("identity", "gzip", "identity"):
            req = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
            urllib.request.urlopen(req, timeout=30).read()
        time.sleep(2)  # a few health checks
    finally:
        plugin.send_signal(signal.SIGTERM)
        plugin.wait(timeout=120)


EMPTY = """/* Generated by device-plugin/plugin/tools/hot_text.py: none yet. */
SECTIONS
{
  .text.hot_ascend :
  {
  }
}
INSERT BEFORE .text;
"""


def link(build):
    cmake = shlex.split(os.environ.get("CMAKE", "cmake"))
    subprocess.run(cmake + ["--build", build, "--target", "ascend-device-plugin"], check=True,
                   stdout=subprocess.DEVNULL)


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build-release")
    with open(OUT) as f:
        before = f.read()
    with open(OUT, "w") as f:
        f.write(EMPTY)
    try:
        generate(build)
    except BaseException:
        with open(OUT, "w") as f:
            f.write(before)
        raise
    finally:
        link(build)


def generate(build):
    link(build)
    map_path = os.path.join(build, "device-plugin", "plugin", "ascend-device-plugin.map")
    valgrind = ["valgrind", "--tool=callgrind", "--dump-instr=yes"]
    with tempfile.TemporaryDirectory(prefix="hot-text-") as work:
        for backend in ("emulator", "dcmi"):
            profile_bench(build, work, backend, valgrind)
            profile_metrics(build, work, backend, valgrind)
        files = sorted(os.path.join(work, f) for f in os.listdir(work) if f.startswith("cg."))
        # Which runs reached each address: "cg.<bench|metrics>.<backend>.<pid>".
        tags = {}
        for path in files:
            tag = tuple(os.path.basename(path).split(".")[1:3])
            for a in executed([path], "ascend-device-plugin"):
                tags.setdefault(a, set()).add(tag)
    secs = text_sections(map_path)
    starts = [s[0] for s in secs]
    hot = {}  # section index -> the runs that reached it
    for a, t in tags.items():
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and secs[i][0] <= a < secs[i][0] + secs[i][1]:
            hot.setdefault(i, set()).update(t)
    size = sum(secs[i][1] for i in hot)
    if not hot:
        raise SystemExit("hot_text: none of %d executed addresses of %d profiles is in the %d sections of %s"
                         % (len(tags), len(files), len(secs), map_path))

    # Each run's sections contiguous where they can be: the emulator's own, what both backends run, what only a
    # scrape reaches (the emulator's, both backends'), DCMI's own, DCMI's scrape.
    def group(runs):
        backends = {b for _, b in runs}
        bench = any(kind == "bench" for kind, _ in runs)
        shared = "emulator" in backends and "dcmi" in backends
        if not bench:
            return 2 if backends == {"emulator"} else 3 if shared else 5
        return 0 if backends == {"emulator"} else 1 if shared else 4

    lines = ["/* Generated by device-plugin/plugin/tools/hot_text.py from %d profiles: the %d input sections of"
             % (len(files), len(hot)),
             "   ascend-device-plugin that ran (%d KB), together before .text. See that script. */" % (size // 1024),
             "SECTIONS", "{", "  .text.hot_ascend :", "  {"]
    seen = set()
    for i in sorted(hot, key=lambda i: (group(hot[i]), pattern(secs[i][3]), secs[i][2])):
        rule = "    %s(%s)" % (pattern(secs[i][3]), secs[i][2])
        if rule not in seen:
            seen.add(rule)
            lines.append(rule)
    lines += ["  }", "}", "INSERT BEFORE .text;"]
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    sizes = {}
    for i in hot:
        sizes[group(hot[i])] = sizes.get(group(hot[i]), 0) + secs[i][1]
    print("hot_text: %d sections, %d KB (by group, in order: %s KB) -> %s" % (
        len(hot), size // 1024, " ".join(str(sizes.get(g, 0) // 1024) for g in range(6)), OUT))


if __name__ == "__main__":
    main()
