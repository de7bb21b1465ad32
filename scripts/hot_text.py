#!/usr/bin/env python3
"""Writes a program's hot-text list: the input sections of its code that run, placed together at the start of
its code. Two programs have one:

  plugin  ascend-device-plugin      device-plugin/plugin/hot-text.ld
  shim    ascend-docker-runtime     runtime-hook/hot-text.ld

Why: the kernel maps a file's pages around each page fault (fault-around, 64 KB), so a program whose running
code is spread over its megabytes of text faults on many pages and keeps most of them mapped, though it runs a
fraction of it (docs/performance.md: "The device plugin", the plugin's resident memory; "Container start:
the shim and the hook", the shim's start-up, where each fault is time every container pays). The linker script puts the sections that ran
into one output section before .text (INSERT BEFORE .text: the default script stays), so their pages are few
and contiguous. A section the script names that no longer exists is ignored; one that is new lands in .text
as before: a stale list costs memory and time, never correctness (tests/common/hot_text_test.py says when
too much of it is stale). Regenerate after changes to what the program runs:

  scripts/hot_text.py plugin|shim [BUILD_DIR]     (default build-release, GCC's Release build; needs valgrind;
                                                   the shim's needs root, as the shim does)

It links the program with an empty list first (valgrind names only the code of an executable's .text, so the
profile is of that layout, read through its link map), profiles it, writes the list and links again; $CMAKE
is the command that builds (default "cmake"; e.g. "flock /tmp/build.lock cmake" on a shared machine).

The plugin's profile is the union of its runs under callgrind, each with both device backends (the emulator,
and DCMI through the emulated libdcmi.so): plugin_bench's 10 000 Allocate calls and fault detection (the
kubelet's gRPC calls, ListAndWatch, health), and --metrics-only with /metrics scraped, plain and gzip (the
NPU Exporter metrics). The scheduler client and the API server publisher are not in it: they are used by the
code in the list, and their own code lands in .text.

The shim's profile is its runs up to the exec of its runtime (/bin/true here) on an emulated Atlas 800T A2:
first what passes through (start, delete, state, and a create that asks for nothing: the early pass-through,
shim.h), placed first; then a create that asks for chips 0-7, with the spec and the hook injection, on the
emulator and on DCMI, and for chips by name (DCMI's helper path).
"""
import bisect
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

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


def profile_plugin(build, work, valgrind):
    """The plugin's runs: {callgrind file: (kind, backend)}."""
    for backend in ("emulator", "dcmi"):
        profile_bench(build, work, backend, valgrind)
        profile_metrics(build, work, backend, valgrind)
    return {os.path.join(work, f): tuple(f.split(".")[1:3]) for f in os.listdir(work) if f.startswith("cg.")}


def group_plugin(runs):
    """Each run's sections contiguous where they can be: the emulator's own, what both backends run, what only
    a scrape reaches (the emulator's, both backends'), DCMI's own, DCMI's scrape."""
    backends = {b for _, b in runs}
    bench = any(kind == "bench" for kind, _ in runs)
    shared = "emulator" in backends and "dcmi" in backends
    if not bench:
        return 2 if backends == {"emulator"} else 3 if shared else 5
    return 0 if backends == {"emulator"} else 1 if shared else 4


def oci_spec(env):
    return json.dumps({
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["/bin/true"],
                    "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"]
                    + env, "cwd": "/", "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"],
                                                        "permitted": ["CAP_KILL"]}},
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "hot-text",
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
        "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]},
                  "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")]},
    }, indent="\t")


def profile_shim(build, work, valgrind):
    """The shim's runs: {callgrind file: (kind,)}, kind "pass" (it only passes through) or "request"."""
    binary = os.path.join(build, "bin", "ascend-docker-runtime")
    host = os.path.join(work, "host")
    subprocess.run([os.path.join(build, "bin", "npu-sim"), "--root", host, "load", "--profile", "atlas800t-a2"],
                   check=True, stdout=subprocess.DEVNULL)
    lists = os.path.join(work, "lists")
    os.mkdir(lists)
    shutil.copy(os.path.join(build, "bin", "base.list"), os.path.join(lists, "base.list"))
    os.chmod(os.path.join(lists, "base.list"), 0o440)

    def config(name, injection, backend):
        path = os.path.join(work, name + ".yaml")
        with open(path, "w") as f:
            f.write("host-root: %s\nmount-list-dir: %s\nhook-path: %s\nlog-file: %s/log/%s.log\nlog-level: info\n"
                    "injection: %s\nbackend: %s\nruntime-path: /bin/true\n"
                    % (host, lists, os.path.join(build, "bin", "ascend-docker-hook"), work, name, injection,
                       backend))
        os.chmod(path, 0o640)
        return path

    def bundle(name, env):
        path = os.path.join(work, name)
        os.makedirs(os.path.join(path, "rootfs"))
        with open(os.path.join(path, "config.json.orig"), "w") as f:
            f.write(oci_spec(env))
        return path

    runs = {}

    def run(kind, tag, cfg, args, bundle_dir=None):
        if bundle_dir:
            shutil.copy(os.path.join(bundle_dir, "config.json.orig"), os.path.join(bundle_dir, "config.json"))
        out = os.path.join(work, "cg.%s.%s" % (kind, tag))
        subprocess.run(valgrind + ["--dump-before=execve", "--callgrind-out-file=" + out, binary, "--config", cfg,
                                   "--root", os.path.join(work, "state")] + args,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for f in os.listdir(work):
            if f.startswith("cg.%s.%s" % (kind, tag)):
                runs[os.path.join(work, f)] = (kind,)

    spec = config("spec", "spec", "emulator")
    nothing = bundle("nothing", [])
    passing = [["start", "c"], ["delete", "--force", "c"], ["state", "c"], ["create", "--bundle", nothing, "c"]]
    with open(os.path.join(work, "pass.json"), "w") as f:
        json.dump([["--config", spec, "--root", os.path.join(work, "state")] + a for a in passing], f)
    asks = bundle("asks", ["ASCEND_VISIBLE_DEVICES=0-7"])
    named = bundle("named", ["ASCEND_VISIBLE_DEVICES=" + ",".join("Ascend910-%d" % i for i in range(8))])
    for args in passing:
        run("pass", args[0], spec, args, nothing if args[0] == "create" else None)
    for injection in ("spec", "hook"):
        for backend in ("emulator", "dcmi"):
            cfg = config("%s-%s" % (injection, backend), injection, backend)
            run("request", "%s-%s" % (injection, backend), cfg, ["create", "--bundle", asks, "c"], asks)
    run("request", "named", config("named", "spec", "dcmi"), ["create", "--bundle", named, "c"], named)
    return runs


def native_shim(build, work):
    """(("pass",), address) for every instruction of the shim that faulted in its pass-through runs, natively
    (perf's page-fault events, which carry the instruction's address)."""
    binary = os.path.join(build, "bin", "ascend-docker-runtime")
    out = []
    with open(os.path.join(work, "pass.json")) as f:
        commands = json.load(f)
    for args in commands:
        data = os.path.join(work, "native.data")
        subprocess.run(["perf", "record", "-q", "-o", data, "-e", "page-faults", "-c", "1", "-d", binary] + args,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        text = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events", "-F", "ip"], check=True,
                              capture_output=True, text=True).stdout
        base = None
        for line in text.splitlines():
            m = re.search(r"PERF_RECORD_MMAP2 .*\[0x([0-9a-f]+)\(0x[0-9a-f]+\) @ 0 .*\]: \S+ (\S+)$", line)
            if m and base is None and os.path.realpath(m.group(2)) == os.path.realpath(binary):
                base = int(m.group(1), 16)
                continue
            m = re.match(r"^\s*([0-9a-f]+)\s*$", line)
            if m and base is not None:
                out.append((("pass",), int(m.group(1), 16) - base))
        if base is None:
            raise SystemExit("hot_text: perf saw no mapping of %s" % binary)
    return out


def group_shim(runs):
    return 0 if ("pass",) in runs else 1


class Target:
    def __init__(self, name, program, out, map_path, profile, group, ngroups, native=None):
        self.name, self.program, self.out, self.map_path = name, program, out, map_path
        self.profile, self.group, self.ngroups, self.native = profile, group, ngroups, native


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = {
    "plugin": Target("plugin", "ascend-device-plugin", os.path.join(REPO, "device-plugin", "plugin", "hot-text.ld"),
                     os.path.join("device-plugin", "plugin", "ascend-device-plugin.map"), profile_plugin,
                     group_plugin, 6),
    "shim": Target("shim", "ascend-docker-runtime", os.path.join(REPO, "runtime-hook", "hot-text.ld"),
                   os.path.join("runtime-hook", "ascend-docker-runtime.map"), profile_shim, group_shim, 2,
                   native_shim),
}

EMPTY = """/* Generated by scripts/hot_text.py: none yet. */
SECTIONS
{
  .text.hot_ascend :
  {
  }
}
INSERT BEFORE .text;
"""


def link(build, target):
    cmake = shlex.split(os.environ.get("CMAKE", "cmake"))
    subprocess.run(cmake + ["--build", build, "--target", target.program], check=True, stdout=subprocess.DEVNULL)


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        raise SystemExit("usage: scripts/hot_text.py plugin|shim [BUILD_DIR]")
    target = TARGETS[sys.argv[1]]
    build = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "build-release")
    with open(target.out) as f:
        before = f.read()
    with open(target.out, "w") as f:
        f.write(EMPTY)
    try:
        generate(build, target)
    except BaseException:
        with open(target.out, "w") as f:
            f.write(before)
        raise
    finally:
        link(build, target)


def section_at(secs, starts, a):
    """The index of the input section holding address a, or None."""
    i = bisect.bisect_right(starts, a) - 1
    return i if i >= 0 and secs[i][0] <= a < secs[i][0] + secs[i][1] else None


def add_variants(hot, secs):
    """Each C library function chosen at run time by the CPU (an IFUNC: memmove-avx512-unaligned-erms.o,
    strlen-evex.o, ...) with all its variants: the profile saw the one valgrind's CPU chose, and another CPU
    chooses another. Static programs only (a dynamic one has none of libc's objects)."""
    member = re.compile(r".*/libc\.a\(([a-z0-9_]+)-(?:sse|ssse|avx|evex|erms)[a-z0-9_-]*\.o\)$")
    bases = {}
    for key, tags in hot.items():
        m = member.match(key[1])
        if m:
            bases.setdefault(m.group(1), set()).update(tags)
    for start, size, sec, obj in secs:
        m = member.match(obj)
        if m and m.group(1) in bases:
            hot.setdefault((sec, obj), set()).update(bases[m.group(1)])


def write_list(target, hot, secs, nprofiles):
    sizes, size = {}, 0
    for start, sz, sec, obj in secs:
        if (sec, obj) in hot:
            g = target.group(hot[(sec, obj)])
            sizes[g] = sizes.get(g, 0) + sz
            size += sz
    lines = ["/* Generated by scripts/hot_text.py %s from %d profiles: the %d input sections of"
             % (target.name, nprofiles, len(hot)),
             "   %s that ran (%d KB), together before .text. See that script. */" % (target.program, size // 1024),
             "SECTIONS", "{", "  .text.hot_ascend :", "  {"]
    seen = set()
    for key in sorted(hot, key=lambda k: (target.group(hot[k]), pattern(k[1]), k[0])):
        rule = "    %s(%s)" % (pattern(key[1]), key[0])
        if rule not in seen:
            seen.add(rule)
            lines.append(rule)
    lines += ["  }", "}", "INSERT BEFORE .text;"]
    with open(target.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("hot_text: %d sections, %d KB (by group, in order: %s KB) -> %s" % (
        len(hot), size // 1024, " ".join(str(sizes.get(g, 0) // 1024) for g in range(target.ngroups)),
        target.out))


def generate(build, target):
    link(build, target)
    map_path = os.path.join(build, target.map_path)
    valgrind = ["valgrind", "--tool=callgrind", "--dump-instr=yes"]
    with tempfile.TemporaryDirectory(prefix="hot-text-") as work:
        runs = target.profile(build, work, valgrind)
        tags = {}  # address -> the runs that reached it
        for path, tag in runs.items():
            for a in executed([path], target.program):
                tags.setdefault(a, set()).add(tag)
        secs = text_sections(map_path)
        starts = [s[0] for s in secs]
        hot = {}  # (section, object) -> the runs that reached it
        for a, t in tags.items():
            i = section_at(secs, starts, a)
            if i is not None:
                hot.setdefault((secs[i][2], secs[i][3]), set()).update(t)
        if not hot:
            raise SystemExit("hot_text: none of %d executed addresses of %d profiles is in the %d sections of %s"
                             % (len(tags), len(runs), len(secs), map_path))
        add_variants(hot, secs)
        write_list(target, hot, secs, len(runs))
        if target.native is None:
            return
        if shutil.which("perf") is None:
            print("hot_text: no perf here: the list holds only what ran under valgrind")
            return
        # What runs natively but not under valgrind (which gives a program no vDSO, so the C library's start-up
        # that sets it up never ran there): the code sections the native runs fault on outside the list, added
        # to the group of those runs, until there are none.
        for _ in range(4):
            link(build, target)
            secs = text_sections(map_path)
            starts = [s[0] for s in secs]
            added = 0
            for tag, a in target.native(build, work):
                i = section_at(secs, starts, a)
                if i is not None and tag not in hot.get((secs[i][2], secs[i][3]), set()):
                    hot.setdefault((secs[i][2], secs[i][3]), set()).add(tag)
                    added += 1
            if not added:
                break
            print("hot_text: %d sections ran natively but not in their group (or not at all) under valgrind" % added)
            add_variants(hot, secs)
            write_list(target, hot, secs, len(runs))


if __name__ == "__main__":
    main()
