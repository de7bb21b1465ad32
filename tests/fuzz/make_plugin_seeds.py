#!/usr/bin/env python3
"""Writes the plugin_fuzz seeds: byte 0 = (configuration << 1) | call (0 Allocate, 1 GetPreferredAllocation;
configurations 0 runtime, 1 device-spec, 2 cdi, 3 static vNPUs, 4 dynamic vNPUs), byte 1 = the resource
index, then the request in protobuf wire format (kubelet deviceplugin v1beta1, api.proto), encoded by hand
here so that the seeds do not depend on the code under test."""
import os

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def field(num, wire, payload):
    if wire == 0:
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload

def s(num, text):
    return field(num, 2, text.encode())

def allocate(*containers):  # AllocateRequest{container_requests: [ContainerAllocateRequest{devices_ids}]}
    return b"".join(field(1, 2, b"".join(s(1, i) for i in ids)) for ids in containers)

def preferred(*containers):  # PreferredAllocationRequest{container_requests: [{available, must_include, size}]}
    body = b""
    for avail, must, size in containers:
        c = b"".join(s(1, i) for i in avail) + b"".join(s(2, i) for i in must) + field(3, 0, size)
        body += field(1, 2, c)
    return body

chips = [f"Ascend910-{i}" for i in range(8)]
seeds = {
    "allocate-runtime-two": (0, 0, allocate(["Ascend910-0", "Ascend910-1"])),
    "allocate-devspec-two-containers": (1, 0, allocate(["Ascend910-2"], ["Ascend910-3", "Ascend910-4"])),
    "allocate-cdi": (2, 0, allocate(["Ascend910-5"])),
    "allocate-static-vnpu": (3, 1, allocate(["Ascend910-10c.3cpu.32g-196-6"])),
    "allocate-dynamic-cores": (4, 1, allocate([f"npu-core-1-{k}" for k in range(3)])),
    "allocate-unknown": (0, 0, allocate(["Ascend910-9", "Ascend910-0", "Ascend910-0"])),
    "preferred-four-of-eight": (0, 0, preferred((chips, [], 4))),
    "preferred-must-include": (1, 0, preferred((chips[:6], ["Ascend910-5"], 2), (chips, [], 1))),
    "preferred-static-vnpu": (3, 1, preferred((["Ascend910-10c.3cpu.32g-196-6", "Ascend910-10c.3cpu.32g-197-6"], [], 1))),
    "preferred-cores": (4, 1, preferred(([f"npu-core-{p}-{k}" for p in (0, 1) for k in range(4)], [], 3))),
}
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "plugin_fuzz")
for name, (config, resource, body) in seeds.items():
    call = 1 if name.startswith("preferred") else 0
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes([config << 1 | call, resource]) + body)
