"""Checks a cluster spec written by loom-calibrate: exactly the documented
keys (docs/cluster-spec.md), rates and sizes positive, offsets non-negative,
efficiencies in (0, 1].

usage: check_spec.py SPEC.json NODES DEVICES_PER_NODE
"""
import json
import sys

path, nodes, per_node = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as f:
    spec = json.load(f)

expected = {"name", "nodes", "devices_per_node", "device", "intra_node"}
if nodes > 1:
    expected.add("inter_node")
assert set(spec) == expected, sorted(spec)
assert spec["nodes"] == nodes and spec["devices_per_node"] == per_node, spec

device = spec["device"]
assert set(device) == {"name", "peak_flops", "memory_bytes", "memory_bandwidth",
                       "memory_efficiency", "launch_overhead_s",
                       "gemm_efficiency", "gemm_half_work_flops",
                       "attention_efficiency"}, sorted(device)
assert set(device["peak_flops"]) == {"fp32", "tf32", "bf16", "fp16"}
positive = [device["memory_bytes"], device["memory_bandwidth"],
            spec["intra_node"]["bandwidth"], *device["peak_flops"].values()]
offsets = [device["launch_overhead_s"], device["gemm_half_work_flops"],
           spec["intra_node"]["latency_s"]]
if nodes > 1:
    inter = spec["inter_node"]
    assert set(inter) == {"name", "nics_per_node", "nic_bandwidth", "latency_s"}
    positive += [inter["nics_per_node"], inter["nic_bandwidth"]]
    offsets.append(inter["latency_s"])
assert all(x > 0 for x in positive), positive
assert all(x >= 0 for x in offsets), offsets
for key in ("memory_efficiency", "gemm_efficiency", "attention_efficiency"):
    assert 0 < device[key] <= 1, (key, device[key])
print("spec ok:", spec["name"])
